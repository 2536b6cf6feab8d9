package toolhost_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	toolhost "github.com/toolhost/toolhost/clients/go"
	toolhostv1 "github.com/toolhost/toolhost/clients/go/gen/toolhost/v1"
)

func whoSchema(t *testing.T) *structpb.Struct {
	t.Helper()
	schema, err := structpb.NewStruct(map[string]any{"type": "object",
		"properties": map[string]any{"who": map[string]any{"type": "string"}}, "required": []any{"who"}})
	if err != nil {
		t.Fatal(err)
	}
	return schema
}

func wantCode(t *testing.T, err error, code codes.Code, reason string) *toolhost.Error {
	t.Helper()
	toolErr, ok := toolhost.AsError(err)
	if !ok || toolErr.Code != code || toolErr.Reason != reason {
		t.Fatalf("want %v / %s, got %v", code, reason, err)
	}
	return toolErr
}

func TestAUserToolFromCreationToARestoredVersion(t *testing.T) {
	client, ctx := dial(t), context10s(t)
	created, err := client.CreateUserTool(ctx, &toolhostv1.UserTool{Slug: "go_greeter", Description: "Greets.",
		Script: `echo "hi $TOOL_ARG_WHO"`, InputSchema: whoSchema(t), Tags: []string{"go"}})
	if err != nil || created.GetVersion() != 1 || !created.GetEnabled() || created.GetCategory() != "custom" {
		t.Fatalf("create: %v %v", created, err)
	}
	t.Cleanup(func() { _, _ = client.DeleteUserTool(context10s(t), "go_greeter") })
	result, err := client.CallTool(ctx, "go_greeter", map[string]any{"who": "gopher"})
	if err != nil || result.GetOutput() != "hi gopher\n" {
		t.Fatalf("call: %v %v", result, err)
	}
	_, err = client.CreateUserTool(ctx, &toolhostv1.UserTool{Slug: "echo", Description: "x", Script: "true"})
	wantCode(t, err, codes.AlreadyExists, "ALREADY_EXISTS")

	updated, err := client.UpdateUserTool(ctx, &toolhostv1.UserTool{Slug: "go_greeter",
		Script: `echo "bye $TOOL_ARG_WHO"`, Description: "not in the mask"}, "script")
	if err != nil || updated.GetVersion() != 2 || updated.GetDescription() != "Greets." {
		t.Fatalf("update: %v %v", updated, err)
	}
	if result, _ := client.CallTool(ctx, "go_greeter", map[string]any{"who": "gopher"}); result.GetOutput() != "bye gopher\n" {
		t.Errorf("the next call ran %q", result.GetOutput())
	}
	var changes []string
	for version, err := range client.ListUserToolVersions(ctx, "go_greeter", 1) {
		if err != nil {
			t.Fatal(err)
		}
		changes = append(changes, version.GetChange())
	}
	if strings.Join(changes, ",") != "update,create" {
		t.Errorf("versions: %v", changes)
	}
	restored, err := client.RestoreUserToolVersion(ctx, "go_greeter", 1)
	if err != nil || restored.GetVersion() != 3 || restored.GetScript() != created.GetScript() {
		t.Fatalf("restore: %v %v", restored, err)
	}
	_, err = client.RestoreUserToolVersion(ctx, "go_greeter", 42)
	wantCode(t, err, codes.NotFound, "RESOURCE_NOT_FOUND")

	got, err := client.GetUserTool(ctx, "go_greeter")
	if err != nil || got.GetVersion() != 3 {
		t.Fatalf("get: %v %v", got, err)
	}
	var slugs []string
	for tool, err := range client.ListUserTools(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		slugs = append(slugs, tool.GetSlug())
	}
	if !strings.Contains(strings.Join(slugs, ","), "go_greeter") {
		t.Errorf("list: %v", slugs)
	}
	deleted, err := client.DeleteUserTool(ctx, "go_greeter")
	if err != nil || deleted.GetVersion() != 3 {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	_, err = client.GetUserTool(ctx, "go_greeter")
	wantCode(t, err, codes.NotFound, "RESOURCE_NOT_FOUND")
}

func TestConflictsRefuseEnablingAnIncompatibleTool(t *testing.T) {
	client, ctx := dial(t), context10s(t)
	for _, slug := range []string{"go_left", "go_right"} {
		if _, err := client.CreateUserTool(ctx, &toolhostv1.UserTool{Slug: slug, Description: "x", Script: "echo x"}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = client.DeleteUserTool(context10s(t), slug) })
	}
	stored, err := client.SetToolConflict(ctx, &toolhostv1.ToolConflict{ToolA: "go_right", ToolB: "go_left",
		Type: toolhostv1.ConflictType_CONFLICT_TYPE_INCOMPATIBLE, ResolutionHint: "keep one"})
	if err != nil || stored.GetToolA() != "go_left" {
		t.Fatalf("set: %v %v", stored, err)
	}
	if _, err := client.SetUserToolEnabled(ctx, "go_right", false); err != nil {
		t.Fatal(err)
	}
	_, err = client.SetUserToolEnabled(ctx, "go_right", true)
	if toolErr := wantCode(t, err, codes.FailedPrecondition, "FAILED_PRECONDITION"); !strings.Contains(toolErr.Message, "keep one") {
		t.Errorf("no hint in %q", toolErr.Message)
	}
	found := false
	for conflict, err := range client.ListToolConflicts(ctx, 2) {
		if err != nil {
			t.Fatal(err)
		}
		found = found || conflict.GetToolA() == "go_left" && conflict.GetToolB() == "go_right"
	}
	if !found {
		t.Error("the new conflict is not listed")
	}
	if _, err := client.DeleteToolConflict(ctx, "go_right", "go_left"); err != nil {
		t.Fatal(err)
	}
	_, err = client.DeleteToolConflict(ctx, "go_right", "go_left")
	wantCode(t, err, codes.NotFound, "RESOURCE_NOT_FOUND")
	if response, err := client.SetUserToolEnabled(ctx, "go_right", true); err != nil || !response.GetUserTool().GetEnabled() {
		t.Fatalf("enable: %v %v", response, err)
	}
}
