package toolhost_test

import (
	"bufio"
	"context"
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
		"nap.yaml": "name: nap\ndescription: Sleeps.\nrunner: {type: python, entrypoint: 'asyncio:sleep'}\n" +
			"parameters: [{name: delay, type: number, required: true}]\n",
		"two_lines.yaml": "name: two_lines\ndescription: Prints two lines.\n" +
			"runner: {type: script, script: \"#!/bin/sh\\necho one\\nsleep 0.2\\necho two\\n\"}\n",
		"fails.yaml": "name: fails\ndescription: Exits 3.\nrunner: {type: script, script: \"#!/bin/sh\\necho bad >&2\\nexit 3\\n\"}\n",
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
