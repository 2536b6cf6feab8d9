"""The file search index: the search roots walked, their files' names, kinds, times and (redacted) text kept in
SQLite FTS5, kept current, and the questions the file search tools ask of it.

Modules: `kinds` (kind and MIME type of a file), `exclusion` (search_exclude), `tree` (the fd-only walk),
`extraction` (a file's record, text redacted), `words` (query tokens, FTS5 escaping, the fallback matcher),
`index_store` (the SQLite file), `watching` (inotify per root), `service` (SearchService), `metrics`.
"""
