package toolhost_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	toolhost "github.com/toolhost/toolhost/clients/go"
)

func TestSearchToolsRoutesAnIntentWhoseArgumentsCallTheTool(t *testing.T) {
	client := dial(t)
	found, err := client.SearchTools(context10s(t), "please echo this back exactly: Hello from a search", toolhost.SearchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	results := found.GetResults()
	if len(results) == 0 || results[0].GetTool().GetName() != "echo" || results[0].GetMatchedIntent() == "" {
		t.Fatalf("want echo's intent first, got %v", results)
	}
	arguments, ok := toolhost.IntentArguments(results[0])
	if !ok || arguments["text"] != "Hello from a search" {
		t.Fatalf("intent arguments: %v %v", arguments, ok)
	}
	called, err := client.CallTool(context10s(t), results[0].GetTool().GetName(), arguments)
	if err != nil || called.GetOutput() != "Hello from a search" {
		t.Fatalf("calling the match: %v %v", called, err)
	}
	if found.GetGeneration() < 1 {
		t.Errorf("generation %d", found.GetGeneration())
	}
}

func TestSearchToolsTypesACapturedNumberByTheSchema(t *testing.T) {
	client := dial(t)
	found, err := client.SearchTools(context10s(t), "check port 5432 on db.example.com", toolhost.SearchOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(found.GetResults()) != 1 || found.GetResults()[0].GetTool().GetName() != "tcp_port_check" {
		t.Fatalf("want only tcp_port_check, got %v", found.GetResults())
	}
	arguments, _ := toolhost.IntentArguments(found.GetResults()[0])
	if port, isNumber := arguments["port"].(float64); !isNumber || port != 5432 || arguments["host"] != "db.example.com" {
		t.Errorf("want port the number 5432 and the host, got %#v", arguments)
	}
}

func TestSearchToolsRanksWithinTheLimitAndTheFilter(t *testing.T) {
	client := dial(t)
	found, err := client.SearchTools(context10s(t), "greets", toolhost.SearchOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	results := found.GetResults()
	if len(results) != 2 {
		t.Fatalf("want 2 results (the limit), got %v", results)
	}
	for i, result := range results {
		if !strings.HasPrefix(result.GetTool().GetName(), "greet_") || result.GetMatchedIntent() != "" {
			t.Errorf("result %d: %v", i, result)
		}
		if _, ok := toolhost.IntentArguments(result); ok {
			t.Errorf("a ranked result has no arguments: %v", result)
		}
		if i > 0 && result.GetScore() > results[i-1].GetScore() {
			t.Errorf("scores not descending: %v", results)
		}
	}
	filtered, err := client.SearchTools(context10s(t), "greets", toolhost.SearchOptions{Category: "no-such-category"})
	if err != nil || len(filtered.GetResults()) != 0 {
		t.Errorf("a category no tool has finds nothing: %v %v", filtered, err)
	}
}

func TestSearchToolsRefusesAQueryOverAThousandCharacters(t *testing.T) {
	client := dial(t)
	_, err := client.SearchTools(context10s(t), strings.Repeat("a", 1001), toolhost.SearchOptions{})
	if toolErr, ok := toolhost.AsError(err); !ok || toolErr.Code != codes.InvalidArgument {
		t.Fatalf("want INVALID_ARGUMENT, got %v", err)
	}
}
