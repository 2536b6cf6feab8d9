package toolhost

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	toolhostv1 "github.com/toolhost/toolhost/clients/go/gen/toolhost/v1"
)

// LogQuery selects records for QueryLogs and QueryLogsPage; every field that is set must match.
type LogQuery struct {
	// Level keeps records at this level or above: "DEBUG", "INFO", "WARNING", "ERROR" or "CRITICAL", in any
	// case. Empty keeps every level.
	Level string
	// Since and Until bound the records' times, both inclusive; the zero time leaves that end open.
	Since, Until time.Time
	// Text keeps records whose message contains it, compared without regard to case.
	Text string
	// TraceID keeps the records of one trace, such as a CallToolResponse's TraceId.
	TraceID string
	// Source keeps the records of one reader: "memory", "file" or "database". Empty asks every reader.
	Source string
	// PageSize is how many records one request fetches: 0 lets the server choose (100), at most 1000.
	PageSize int32
}

// LogTail selects records for TailLogs; every field that is set must match, as in LogQuery.
type LogTail struct {
	Level   string
	Since   time.Time
	Text    string
	TraceID string
	Source  string
	// Backlog is how many of the newest matching records come first, before the new ones: 0 sends only
	// records made after the tail started; at most 1000.
	Backlog int32
}

// LogEntry is one log record, whichever reader found it.
type LogEntry struct {
	Time time.Time
	// Level is "DEBUG", "INFO", "WARNING", "ERROR" or "CRITICAL".
	Level string
	// Logger is the name of the logger that made the record, such as "toolhost.audit".
	Logger  string
	Message string
	// TraceID and SpanID are those of the span the record was made in; empty outside a trace.
	TraceID, SpanID string
	// Source is the reader that found the record: "memory", "file" or "database".
	Source string
	// Fields is everything else the record carried, each value as JSON text: "audit" (an audit record's call),
	// "exception" (a traceback), "file" (a record read from a file), "instance" (the server that wrote a
	// record of the database), and any extra field. Numbers are as the package documentation's JSON values
	// section says.
	Fields map[string]json.RawMessage
	// Raw is the record as the server sent it.
	Raw *toolhostv1.LogRecord
}

// LogPage is one page of QueryLogsPage.
type LogPage struct {
	// Entries are the page's records, newest first.
	Entries []*LogEntry
	// NextPageToken continues with older records when passed to QueryLogsPage with the same query (the time
	// range may change); empty on the last page.
	NextPageToken string
	// Summary counts the page's records by level and by reader, and names the readers that could not answer:
	// a page is complete only when UnavailableReaders is empty.
	Summary *toolhostv1.LogSummary
}

// QueryLogs yields every record that matches query, newest first, fetching pages as the loop needs them. An
// error ends the iteration: it is yielded once with a nil entry. Logs are sensitive: a server that
// authenticates callers answers only the admin role (an *Error with codes.PermissionDenied otherwise), here
// and in QueryLogsPage and TailLogs.
func (c *Client) QueryLogs(ctx context.Context, query LogQuery) iter.Seq2[*LogEntry, error] {
	return func(yield func(*LogEntry, error) bool) {
		pageToken := ""
		for {
			page, err := c.QueryLogsPage(ctx, query, pageToken)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, entry := range page.Entries {
				if !yield(entry, nil) {
					return
				}
			}
			if page.NextPageToken == "" {
				return
			}
			pageToken = page.NextPageToken
		}
	}
}

// QueryLogsPage returns one page of the records that match query, newest first, with its summary: the first
// page with an empty pageToken, the next with the NextPageToken of the page before.
func (c *Client) QueryLogsPage(ctx context.Context, query LogQuery, pageToken string) (*LogPage, error) {
	filter, err := logFilter(query.Level, query.Since, query.Until, query.Text, query.TraceID, query.Source)
	if err != nil {
		return nil, err
	}
	response, err := c.logs.QueryLogs(ctx, &toolhostv1.QueryLogsRequest{
		Filter: filter, PageSize: query.PageSize, PageToken: pageToken,
	})
	if err != nil {
		return nil, asError(err)
	}
	page := &LogPage{NextPageToken: response.GetNextPageToken(), Summary: response.GetSummary()}
	for _, record := range response.GetRecords() {
		page.Entries = append(page.Entries, logEntry(record))
	}
	return page, nil
}

// TailLogs yields the newest tail.Backlog matching records, oldest first, then each new matching record as the
// server finds it (within about a second). It runs until ctx is cancelled (which ends the iteration without an
// error) or the server shuts down; leaving the loop early ends the stream on the server too.
func (c *Client) TailLogs(ctx context.Context, tail LogTail) iter.Seq2[*LogEntry, error] {
	return func(yield func(*LogEntry, error) bool) {
		filter, err := logFilter(tail.Level, tail.Since, time.Time{}, tail.Text, tail.TraceID, tail.Source)
		if err != nil {
			yield(nil, err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := c.logs.TailLogs(ctx, &toolhostv1.TailLogsRequest{Filter: filter, Backlog: tail.Backlog})
		if err != nil {
			yield(nil, asError(err))
			return
		}
		receiveAll(stream, func(event *toolhostv1.TailLogsResponse, err error) bool {
			if err != nil {
				if ctx.Err() != nil {
					return false // the caller's own cancellation is the end it asked for
				}
				return yield(nil, err)
			}
			return yield(logEntry(event.GetRecord()), nil)
		})
	}
}

func logFilter(level string, since, until time.Time, text, traceID, source string) (*toolhostv1.LogFilter, error) {
	filter := &toolhostv1.LogFilter{Text: text, TraceId: traceID, Source: source}
	if level != "" {
		// The names are the enum's without its prefix, as the Python client and the CLI spell them.
		value, ok := toolhostv1.LogLevel_value[logLevelPrefix+strings.ToUpper(level)]
		if !ok || value == int32(toolhostv1.LogLevel_LOG_LEVEL_UNSPECIFIED) {
			return nil, fmt.Errorf("toolhost: log level must be DEBUG, INFO, WARNING, ERROR or CRITICAL, not %q", level)
		}
		filter.MinLevel = toolhostv1.LogLevel(value)
	}
	if !since.IsZero() {
		filter.Since = timestamppb.New(since)
	}
	if !until.IsZero() {
		filter.Until = timestamppb.New(until)
	}
	return filter, nil
}

const logLevelPrefix = "LOG_LEVEL_"

func logEntry(record *toolhostv1.LogRecord) *LogEntry {
	entry := &LogEntry{
		Level:   strings.TrimPrefix(record.GetLevel().String(), logLevelPrefix),
		Logger:  record.GetLogger(),
		Message: record.GetMessage(),
		TraceID: record.GetTraceId(),
		SpanID:  record.GetSpanId(),
		Source:  record.GetSource(),
		Raw:     record,
	}
	if record.GetTime() != nil {
		entry.Time = record.GetTime().AsTime()
	}
	if fields := record.GetFields().GetFields(); len(fields) > 0 {
		entry.Fields = make(map[string]json.RawMessage, len(fields))
		for name, value := range fields {
			entry.Fields[name], _ = valueJSON(value)
		}
	}
	return entry
}
