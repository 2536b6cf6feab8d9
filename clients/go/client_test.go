package toolhost_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	toolhost "github.com/toolhost/toolhost/clients/go"
	toolhostv1 "github.com/toolhost/toolhost/clients/go/gen/toolhost/v1"
)

// The tests run against the real Python server from this repository (make venv builds it), started once on a
// free port with a catalog written for them.
var (
	target     string
	catalogDir string
)

var listening = regexp.MustCompile(`serving gRPC on 127\.0\.0\.1:(\d+)`)

func TestMain(m *testing.M) {
	os.Exit(runWithServer(m))
}

func runWithServer(m *testing.M) int {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	server := filepath.Join(root, ".venv", "bin", "toolhost")
	if _, err := os.Stat(server); err != nil {
		fmt.Fprintf(os.Stderr, "the Python server is not installed (%v): run `make venv` in %s\n", err, root)
		return 1
	}
	scratch, err := os.MkdirTemp("", "toolhost-go-test-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(scratch)
	catalogDir = filepath.Join(scratch, "catalog")
	writeCatalog(catalogDir)
	cmd := exec.Command(server, "serve", "--grpc-address", "127.0.0.1:0", "--watch-catalog", "false",
		"--catalog-dir", catalogDir)
	cmd.Env = append(os.Environ(), "TOOLHOST_DATA_DIR="+filepath.Join(scratch, "data"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		panic(err)
	}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if found := listening.FindStringSubmatch(lines.Text()); found != nil {
			target = "127.0.0.1:" + found[1]
			break
		}
	}
	if target == "" {
		fmt.Fprintln(os.Stderr, "the server exited before it listened")
		return 1
	}
	go func() { // keep draining the log so the server never blocks on a full pipe
		for lines.Scan() {
		}
	}()
	return m.Run()
}

func writeCatalog(dir string) {
	files := map[string]string{
		"nap.yaml": "name: nap\ndescription: Sleeps.\n" +
			"runner: {type: python, entrypoint: 'toolhost_server.tools.samples:nap'}\n" +
			"parameters: [{name: delay, type: number, required: true}]\n",
		"two_lines.yaml": "name: two_lines\ndescription: Prints two lines.\n" +
			"runner: {type: script, script: \"#!/bin/sh\\necho one\\nsleep 0.2\\necho two\\n\"}\n",
		"fails.yaml": "name: fails\ndescription: Exits 3.\nrunner: {type: script, script: \"#!/bin/sh\\necho bad >&2\\nexit 3\\n\"}\n",
		// return_arguments returns the arguments, defaults filled in, as the call's structured output.
		"record.yaml": "name: record\ndescription: Returns its arguments.\n" +
			"runner: {type: python, entrypoint: 'toolhost_server.tools.samples:return_arguments'}\nparameters:\n" +
			"  - {name: count, type: integer, required: true}\n" +
			"  - {name: size, type: string, enum: [small, large], default: small}\n" +
			"  - {name: limit, type: integer, default: 10}\n" +
			"  - {name: ratio, type: number, enum: [0.5, 2]}\n",
		// parse_json raises on text that is not JSON: the server logs a WARNING naming the call id.
		"parse_json.yaml": "name: parse_json\ndescription: Parses JSON.\n" +
			"runner: {type: python, entrypoint: 'toolhost_server.tools.samples:parse_json'}\n" +
			"parameters: [{name: s, type: string, required: true}]\n",
	}
	for i := range 5 {
		files[fmt.Sprintf("greet_%d.yaml", i)] = fmt.Sprintf("name: greet_%d\ndescription: Greets.\n"+
			"runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n"+
			"parameters: [{name: name, type: string, required: true}]\n", i)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			panic(err)
		}
	}
}

func dial(t *testing.T) *toolhost.Client {
	t.Helper()
	client, err := toolhost.Dial(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

func context10s(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestListToolsIteratesOverEveryPage(t *testing.T) {
	client := dial(t)
	var names []string
	for tool, err := range client.ListTools(context10s(t), toolhost.Filter{PageSize: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.GetName())
	}
	for _, want := range []string{"echo", "fails", "greet_0", "greet_4", "nap", "two_lines"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s missing from %v", want, names)
		}
	}
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("names not sorted once each: %v", names)
	}
}

func TestCallToolSucceedsAndAToolFailureIsAResult(t *testing.T) {
	client := dial(t)
	result, err := client.CallTool(context10s(t), "echo", map[string]any{"text": "hello from Go"})
	if err != nil || !result.GetSuccess() || result.GetOutput() != "hello from Go" {
		t.Fatalf("echo: %v %v", result, err)
	}
	failed, err := client.CallTool(context10s(t), "fails", nil)
	if err != nil {
		t.Fatalf("a failing tool is a result, not an error: %v", err)
	}
	if failed.GetSuccess() || failed.GetError().GetCode() != "NON_ZERO_EXIT" || failed.GetExitCode() != 3 {
		t.Errorf("fails: %v", failed)
	}
}

func TestInvalidArgumentsCarryFieldViolations(t *testing.T) {
	client := dial(t)
	_, err := client.CallTool(context10s(t), "greet_0", map[string]any{"name": 5})
	toolErr, ok := toolhost.AsError(err)
	if !ok || toolErr.Code != codes.InvalidArgument || toolErr.Reason != "INVALID_ARGUMENTS" {
		t.Fatalf("want INVALID_ARGUMENT with reason INVALID_ARGUMENTS, got %v", err)
	}
	if len(toolErr.FieldViolations) != 1 || toolErr.FieldViolations[0].Field != "/name" {
		t.Errorf("field violations: %+v", toolErr.FieldViolations)
	}
}

func TestAnUnknownToolIsNotFound(t *testing.T) {
	client := dial(t)
	_, err := client.GetTool(context10s(t), "ech")
	toolErr, ok := toolhost.AsError(err)
	if !ok || toolErr.Code != codes.NotFound || toolErr.Reason != "TOOL_NOT_FOUND" {
		t.Fatalf("want NOT_FOUND / TOOL_NOT_FOUND, got %v", err)
	}
	if !strings.Contains(toolErr.Message, "'echo'") {
		t.Errorf("no suggestion in %q", toolErr.Message)
	}
}

func TestTheContextDeadlineIsTheCallsDeadline(t *testing.T) {
	client := dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	started := time.Now()
	_, err := client.CallTool(ctx, "nap", map[string]any{"delay": 5})
	if toolErr, ok := toolhost.AsError(err); !ok || toolErr.Code != codes.DeadlineExceeded {
		t.Fatalf("want DEADLINE_EXCEEDED, got %v", err)
	}
	if time.Since(started) > 3*time.Second {
		t.Errorf("the deadline was not honoured: %v", time.Since(started))
	}
}

func TestStreamCallToolYieldsChunksInOrderThenTheResult(t *testing.T) {
	client := dial(t)
	var stdout strings.Builder
	var result *toolhostv1.CallToolResponse
	for event, err := range client.StreamCallTool(context10s(t), "two_lines", nil) {
		if err != nil {
			t.Fatal(err)
		}
		if result != nil {
			t.Fatal("an event after the result")
		}
		if chunk := event.GetOutput(); chunk != nil && chunk.GetStream() == toolhostv1.OutputStream_OUTPUT_STREAM_STDOUT {
			stdout.Write(chunk.GetData())
		}
		result = event.GetResult()
	}
	if stdout.String() != "one\ntwo\n" || result == nil || !result.GetSuccess() || result.GetOutput() != "one\ntwo\n" {
		t.Errorf("streamed %q, result %v", stdout.String(), result)
	}
}

func TestReloadAndWatchSeeANewTool(t *testing.T) {
	client := dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	events := make(chan *toolhostv1.WatchToolsResponse, 8)
	go func() {
		defer close(events)
		for event, err := range client.WatchTools(ctx) {
			if err != nil {
				return
			}
			events <- event
		}
	}()
	first := <-events
	if !slices.Contains(first.GetAdded(), "echo") {
		t.Fatalf("the first event lists every tool: %v", first)
	}
	body := "name: fresh_tool\ndescription: New.\nimplementation: echo\n"
	if err := os.WriteFile(filepath.Join(catalogDir, "fresh_tool.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.Remove(filepath.Join(catalogDir, "fresh_tool.yaml"))
		_, _ = client.Reload(context.Background())
	})
	report, err := client.Reload(ctx)
	if err != nil || !report.GetSuccess() || !slices.Contains(report.GetAdded(), "fresh_tool") {
		t.Fatalf("reload: %v %v", report, err)
	}
	select {
	case event := <-events:
		if !slices.Contains(event.GetAdded(), "fresh_tool") {
			t.Errorf("watch event without the new tool: %v", event)
		}
	case <-ctx.Done():
		t.Fatal("no watch event after the reload")
	}
}

func TestATokenIsNeverSentInPlaintextOverTheNetwork(t *testing.T) {
	if _, err := toolhost.Dial("tools.example.com:50051", toolhost.WithToken("t")); err == nil {
		t.Error("a token without TLS was accepted")
	}
	_, err := toolhost.Dial("tools.example.com:50051", toolhost.WithToken("t"), toolhost.WithInsecureToken())
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("plaintext to another machine was accepted: %v", err)
	}
	client, err := toolhost.Dial(target, toolhost.WithToken("t"), toolhost.WithInsecureToken())
	if err != nil {
		t.Fatalf("loopback with the explicit opt-in: %v", err)
	}
	_ = client.Close()
}

// uniqueID is an id that no record the server already holds contains (the server outlives one test when
// -count is above 1), so a log query by text finds this test's records only.
func uniqueID(t *testing.T) string {
	return fmt.Sprintf("go-%s-%d", strings.ToLower(t.Name()), time.Now().UnixNano())
}

// auditCallID is the call id of an audit record, "" for any other record.
func auditCallID(t *testing.T, entry *toolhost.LogEntry) string {
	t.Helper()
	if entry.Logger != "toolhost.audit" {
		return ""
	}
	var audit struct {
		CallID string `json:"call_id"`
	}
	if err := json.Unmarshal(entry.Fields["audit"], &audit); err != nil {
		t.Fatalf("audit fields of %q: %v", entry.Message, err)
	}
	return audit.CallID
}

// auditedCalls runs query and returns the call ids of the audit records it yields, in the order yielded.
func auditedCalls(t *testing.T, client *toolhost.Client, query toolhost.LogQuery) []string {
	t.Helper()
	ids := []string{}
	for entry, err := range client.QueryLogs(context10s(t), query) {
		if err != nil {
			t.Fatal(err)
		}
		if id := auditCallID(t, entry); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

func callWithID(t *testing.T, client *toolhost.Client, tool string, arguments map[string]any, id string,
) *toolhostv1.CallToolResponse {
	t.Helper()
	result, err := client.CallTool(context10s(t), tool, arguments, toolhost.WithCallID(id))
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return result
}

func TestStructuredOutputIsJSONWithWholeNumbersExact(t *testing.T) {
	client := dial(t)
	// 2^53 is the largest whole number a double (how a protobuf Value carries numbers) holds with all the ones
	// below it: it must come out as these digits, not as 9.007199254740992e+15 nor rounded.
	result := callWithID(t, client, "record", map[string]any{"count": int64(1) << 53}, uniqueID(t))
	if !result.GetSuccess() {
		t.Fatalf("record: %v", result)
	}
	text, ok := toolhost.StructuredOutput(result)
	if want := `{"count":9007199254740992,"limit":10,"size":"small"}`; !ok || string(text) != want {
		t.Errorf("structured output %s (%v), want %s", text, ok, want)
	}
	var plain map[string]any
	if err := toolhost.DecodeStructuredOutput(result, &plain); err != nil {
		t.Fatal(err)
	}
	if plain["count"] != json.Number("9007199254740992") || plain["size"] != "small" {
		t.Errorf("decoded %#v; count must be the json.Number 9007199254740992", plain)
	}
	var typed struct {
		Count int64
		Limit int
	}
	if err := toolhost.DecodeStructuredOutput(result, &typed); err != nil || typed.Count != 1<<53 || typed.Limit != 10 {
		t.Errorf("decoded %+v, %v", typed, err)
	}

	echo := callWithID(t, client, "echo", map[string]any{"text": "no structure"}, uniqueID(t))
	if text, ok := toolhost.StructuredOutput(echo); ok || text != nil {
		t.Errorf("echo returns text only, yet structured output %s", text)
	}
	if err := toolhost.DecodeStructuredOutput(echo, &plain); !errors.Is(err, toolhost.ErrNoStructuredOutput) {
		t.Errorf("decoding a missing structured output: %v", err)
	}
}

func TestParameterDefaultsAndEnumsAreJSON(t *testing.T) {
	client := dial(t)
	tool, err := client.GetTool(context10s(t), "record")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		defaultValue string // "" for none
		enum         []string
	}{
		"count": {},
		"size":  {`"small"`, []string{`"small"`, `"large"`}},
		"limit": {`10`, nil},
		"ratio": {"", []string{`0.5`, `2`}},
	}
	for _, parameter := range tool.GetParameters() {
		expected, known := want[parameter.GetName()]
		if !known {
			t.Errorf("unexpected parameter %s", parameter.GetName())
			continue
		}
		delete(want, parameter.GetName())
		text, ok := toolhost.ParameterDefault(parameter)
		if ok != (expected.defaultValue != "") || string(text) != expected.defaultValue {
			t.Errorf("%s: default %s (%v), want %q", parameter.GetName(), text, ok, expected.defaultValue)
		}
		var enum []string
		for _, value := range toolhost.ParameterEnum(parameter) {
			enum = append(enum, string(value))
		}
		if !slices.Equal(enum, expected.enum) {
			t.Errorf("%s: enum %v, want %v", parameter.GetName(), enum, expected.enum)
		}
	}
	if len(want) > 0 {
		t.Errorf("parameters missing: %v", want)
	}
}

func TestCallIDReachesTheResultAndTheAuditTrail(t *testing.T) {
	client := dial(t)
	id := uniqueID(t)
	if result := callWithID(t, client, "echo", map[string]any{"text": "hi"}, id); result.GetCallId() != id {
		t.Errorf("call id %q, want %q", result.GetCallId(), id)
	}
	audited := auditedCalls(t, client, toolhost.LogQuery{Text: id, Source: "memory"})
	if !slices.Equal(audited, []string{id}) {
		t.Errorf("audit records of %s: %v", id, audited)
	}

	streamID := uniqueID(t)
	var result *toolhostv1.CallToolResponse
	events := client.StreamCallTool(context10s(t), "echo", map[string]any{"text": "hi"}, toolhost.WithCallID(streamID))
	for event, err := range events {
		if err != nil {
			t.Fatal(err)
		}
		if event.GetResult() != nil {
			result = event.GetResult()
		}
	}
	if result.GetCallId() != streamID {
		t.Errorf("streamed call id %q, want %q", result.GetCallId(), streamID)
	}
}

func TestQueryLogsPagesNewestFirstAndFilters(t *testing.T) {
	client := dial(t)
	prefix := uniqueID(t)
	echo := map[string]any{"text": "hi"}
	callWithID(t, client, "echo", echo, prefix+"-a")
	between := time.Now() // after a's audit record was made, before b's
	callWithID(t, client, "echo", echo, prefix+"-b")
	callWithID(t, client, "echo", echo, prefix+"-c")
	after := time.Now()
	// Source "memory" keeps to the server's own ring: it is the reader that has every record at once.
	query := toolhost.LogQuery{Text: prefix, Source: "memory", PageSize: 1}

	newestFirst := []string{prefix + "-c", prefix + "-b", prefix + "-a"}
	if got := auditedCalls(t, client, query); !slices.Equal(got, newestFirst) {
		t.Errorf("every page: %v, want %v", got, newestFirst)
	}
	cases := []struct {
		name   string
		change func(*toolhost.LogQuery)
		want   []string
	}{
		{"until", func(q *toolhost.LogQuery) { q.Until = between }, []string{prefix + "-a"}},
		{"since", func(q *toolhost.LogQuery) { q.Since = between }, []string{prefix + "-c", prefix + "-b"}},
		{"since after", func(q *toolhost.LogQuery) { q.Since = after }, []string{}},
		{"level info", func(q *toolhost.LogQuery) { q.Level = "info" }, newestFirst},
		{"level error", func(q *toolhost.LogQuery) { q.Level = "ERROR" }, []string{}},
		{"other text", func(q *toolhost.LogQuery) { q.Text = prefix + "-b" }, []string{prefix + "-b"}},
		{"other source", func(q *toolhost.LogQuery) { q.Source = "file" }, []string{}},
	}
	for _, c := range cases {
		filtered := query
		c.change(&filtered)
		if got := auditedCalls(t, client, filtered); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	query.PageSize = 2
	first, err := client.QueryLogsPage(context10s(t), query, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Entries) != 2 || first.NextPageToken == "" || first.Summary.GetLevelCounts()["INFO"] != 2 ||
		first.Summary.GetSourceCounts()["memory"] != 2 {
		t.Fatalf("first page: %d entries, token %q, summary %v", len(first.Entries), first.NextPageToken, first.Summary)
	}
	last, err := client.QueryLogsPage(context10s(t), query, first.NextPageToken)
	if err != nil {
		t.Fatal(err)
	}
	if len(last.Entries) != 1 || auditCallID(t, last.Entries[0]) != prefix+"-a" || last.NextPageToken != "" {
		t.Errorf("last page: %d entries, token %q", len(last.Entries), last.NextPageToken)
	}
}

func TestLogEntriesCarryLevelAndFields(t *testing.T) {
	client := dial(t)
	id := uniqueID(t)
	result := callWithID(t, client, "parse_json", map[string]any{"s": "not json"}, id)
	if result.GetError().GetCode() != "TOOL_EXCEPTION" {
		t.Fatalf("parse_json of bad text: %v", result)
	}
	var warnings []*toolhost.LogEntry
	query := toolhost.LogQuery{Text: id, Source: "memory", Level: "warning"} // any case, as in Python
	for entry, err := range client.QueryLogs(context10s(t), query) {
		if err != nil {
			t.Fatal(err)
		}
		warnings = append(warnings, entry)
	}
	if len(warnings) != 1 {
		t.Fatalf("want the one warning of the failed call, got %d records", len(warnings))
	}
	warning := warnings[0]
	var traceback string
	err := json.Unmarshal(warning.Fields["exception"], &traceback)
	if err != nil || !strings.Contains(traceback, "JSONDecodeError") {
		t.Errorf("exception field %s: %v", warning.Fields["exception"], err)
	}
	if warning.Level != "WARNING" || !strings.Contains(warning.Message, id) || warning.Source != "memory" ||
		time.Since(warning.Time) > time.Minute || warning.Raw.GetLevel() != toolhostv1.LogLevel_LOG_LEVEL_WARNING {
		t.Errorf("warning entry %+v", warning)
	}
}

func TestTailLogsFollowsNewRecordsUntilCancelled(t *testing.T) {
	client := dial(t)
	prefix := uniqueID(t)
	echo := map[string]any{"text": "hi"}
	callWithID(t, client, "echo", echo, prefix+"-before")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	entries := make(chan *toolhost.LogEntry, 8)
	failed := make(chan error, 1)
	go func() {
		defer close(entries)
		for entry, err := range client.TailLogs(ctx, toolhost.LogTail{Text: prefix, Source: "memory", Backlog: 10}) {
			if err != nil {
				failed <- err
				return
			}
			entries <- entry
		}
	}()
	next := func() *toolhost.LogEntry {
		t.Helper()
		select {
		case entry, open := <-entries:
			if !open {
				t.Fatalf("the tail ended: %v", <-failed)
			}
			return entry
		case <-ctx.Done():
			t.Fatal("no record came")
			return nil
		}
	}
	// The backlog's record shows the tail is following: a record made after it must come as a new one.
	if id := auditCallID(t, next()); id != prefix+"-before" {
		t.Fatalf("backlog record of %q, want %s-before", id, prefix)
	}
	callWithID(t, client, "echo", echo, prefix+"-after")
	if id := auditCallID(t, next()); id != prefix+"-after" {
		t.Fatalf("followed record of %q, want %s-after", id, prefix)
	}

	cancel()
	for range entries { // the loop ends once the cancellation reaches it
	}
	select {
	case err := <-failed:
		t.Errorf("cancelling the context ended the tail with an error: %v", err)
	default:
	}
}

func TestLogQueriesRefuseBadFiltersAndRawLogsWorks(t *testing.T) {
	client := dial(t)
	_, err := client.QueryLogsPage(context10s(t), toolhost.LogQuery{Level: "LOUD"}, "")
	if _, fromServer := toolhost.AsError(err); err == nil || fromServer || !strings.Contains(err.Error(), `"LOUD"`) {
		t.Errorf("an unknown level must be refused before any call: %v", err)
	}
	for _, err := range client.TailLogs(context10s(t), toolhost.LogTail{Level: "UNSPECIFIED"}) {
		if err == nil || !strings.Contains(err.Error(), "UNSPECIFIED") {
			t.Errorf("tail with an unknown level: %v", err)
		}
	}
	for _, err := range client.QueryLogs(context10s(t), toolhost.LogQuery{PageSize: -1}) {
		if toolErr, ok := toolhost.AsError(err); !ok || toolErr.Code != codes.InvalidArgument {
			t.Errorf("a negative page size: want INVALID_ARGUMENT, got %v", err)
		}
	}
	page, err := client.RawLogs().QueryLogs(context10s(t), &toolhostv1.QueryLogsRequest{PageSize: 1})
	if err != nil || len(page.GetRecords()) != 1 {
		t.Errorf("the generated LogService stub: %v %v", page, err)
	}
}

func TestOutputFormatAndFilterEmptyFieldsShapeTheResult(t *testing.T) {
	client := dial(t)
	source := map[string]any{"s": `{"a": [1, 2.5, "x"], "b": null, "c": {"d": true, "e": ""}}`}
	pretty, err := client.CallTool(context10s(t), "parse_json", source,
		toolhost.WithOutputFormat(toolhostv1.OutputFormat_OUTPUT_FORMAT_PRETTY), toolhost.WithFilterEmptyFields())
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"a\": [\n    1,\n    2.5,\n    \"x\"\n  ],\n  \"c\": {\n    \"d\": true\n  }\n}"
	if !pretty.GetSuccess() || pretty.GetOutput() != want {
		t.Errorf("pretty output %q, want %q", pretty.GetOutput(), want)
	}
	if text, _ := toolhost.StructuredOutput(pretty); string(text) != `{"a":[1,2.5,"x"],"c":{"d":true}}` {
		t.Errorf("filtered structured output %s", text)
	}
	// Without the options the tool's own text comes back, with every field.
	own, err := client.CallTool(context10s(t), "parse_json", source)
	if err != nil || own.GetOutput() != `{"a": [1, 2.5, "x"], "b": null, "c": {"d": true, "e": ""}}` {
		t.Errorf("default output %q (%v)", own.GetOutput(), err)
	}

	var result *toolhostv1.CallToolResponse
	for event, err := range client.StreamCallTool(context10s(t), "parse_json", source,
		toolhost.WithOutputFormat(toolhostv1.OutputFormat_OUTPUT_FORMAT_JSON)) {
		if err != nil {
			t.Fatal(err)
		}
		result = event.GetResult()
	}
	if want := `{"a":[1,2.5,"x"],"b":null,"c":{"d":true,"e":""}}`; result == nil || result.GetOutput() != want {
		t.Errorf("streamed result %v, want output %s", result, want)
	}

	// A format this server does not know (a newer client's) is refused, not ignored.
	_, err = client.CallTool(context10s(t), "parse_json", source, toolhost.WithOutputFormat(toolhostv1.OutputFormat(99)))
	var refused *toolhost.Error
	if !errors.As(err, &refused) || refused.Code != codes.InvalidArgument {
		t.Errorf("an unknown output format: %v", err)
	}
}
