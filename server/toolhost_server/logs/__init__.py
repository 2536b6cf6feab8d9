"""Logs: the server's log format, and reading logs back from wherever they are (seed 000's log inspector).

    record.py        LogRecord (what every reader returns), levels, conversion from stdlib records
    trace_context.py the trace and span ids of a record
    formatting.py    the JSON-lines formatter and the human text format
    query.py         LogFilter (what a caller asks), LogQuery (what one reader is asked), ReadResult
    reader.py        the LogReader contract
    memory.py        the process's ring of recent records and its reader
    reverse_lines.py reading a file's lines from its end, in blocks
    line_parser.py   JSON lines and regex-matched text lines into records
    file_reader.py   FileLogReader: globs, rotation, bounded memory
    database.py      the logs table as a batched handler and as a reader
    page_tokens.py   AIP-158 keyset page tokens
    inspector.py     LogInspector: every reader merged, filtered, paged, summarised, followed
    server_logs.py   all of it assembled from the server's Config
    active.py        the process's inspector, for the log_inspector tool

Import the module you need: this package re-exports nothing, so that reading the configuration (which checks a
log line pattern) does not pull in the rest.
"""
