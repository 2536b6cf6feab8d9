package toolhost

import (
	"context"
	"iter"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	toolhostv1 "github.com/toolhost/toolhost/clients/go/gen/toolhost/v1"
)

// User tools: bash scripts made while the server runs, kept with every version and served as tools by their
// slug (UserToolService). Every method needs the admin role or a role with `manage_tools` when the server
// authenticates (codes.PermissionDenied otherwise). A schema is a *structpb.Struct:
//
//	schema, _ := structpb.NewStruct(map[string]any{"type": "object",
//		"properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}})
//	tool, err := client.CreateUserTool(ctx, &toolhostv1.UserTool{Slug: "disk_usage",
//		Description: "Disk usage of a path.", Script: `du -sh -- "$TOOL_ARG_PATH"`, InputSchema: schema})
//	tool, err = client.UpdateUserTool(ctx, &toolhostv1.UserTool{Slug: "disk_usage", Script: "..."}, "script")
//	tool, err = client.RestoreUserToolVersion(ctx, "disk_usage", 1)

// RawUserTools returns the generated UserToolService stub on the same connection, as Raw does for ToolService.
func (c *Client) RawUserTools() toolhostv1.UserToolServiceClient { return c.userTools }

// CreateUserTool stores and serves a new user tool at version 1 (Slug, Description, Script and InputSchema set;
// the server ignores Enabled, Version, the times and ShadowedBy). A taken slug is codes.AlreadyExists.
func (c *Client) CreateUserTool(ctx context.Context, tool *toolhostv1.UserTool) (*toolhostv1.UserTool, error) {
	response, err := c.userTools.CreateUserTool(ctx, &toolhostv1.CreateUserToolRequest{UserTool: tool})
	if err != nil {
		return nil, asError(err)
	}
	return response.GetUserTool(), nil
}

// GetUserTool returns one user tool with its script; an unknown slug is codes.NotFound (RESOURCE_NOT_FOUND).
func (c *Client) GetUserTool(ctx context.Context, slug string) (*toolhostv1.UserTool, error) {
	response, err := c.userTools.GetUserTool(ctx, &toolhostv1.GetUserToolRequest{Slug: slug})
	if err != nil {
		return nil, asError(err)
	}
	return response.GetUserTool(), nil
}

// ListUserTools yields every user tool, sorted by slug, fetching pages of pageSize (0: the server's 100) as the
// loop needs them. An error ends the iteration: it is yielded once with a nil tool.
func (c *Client) ListUserTools(ctx context.Context, pageSize int32) iter.Seq2[*toolhostv1.UserTool, error] {
	return func(yield func(*toolhostv1.UserTool, error) bool) {
		request := &toolhostv1.ListUserToolsRequest{PageSize: pageSize}
		for {
			page, err := c.userTools.ListUserTools(ctx, request)
			if err != nil {
				yield(nil, asError(err))
				return
			}
			for _, tool := range page.GetUserTools() {
				if !yield(tool, nil) {
					return
				}
			}
			if page.GetNextPageToken() == "" {
				return
			}
			request.PageToken = page.GetNextPageToken()
		}
	}
}

// UpdateUserTool changes the fields that paths names (name, description, category, system_prompt,
// input_schema, script, timeout_seconds, tags, credentials) to their values in tool, found by tool.Slug, as a new
// version. No paths changes the fields tool sets to other than their zero value (AIP-134), so a field is cleared
// only by naming it; "*" replaces every one of them. The next call of the tool runs the new version.
func (c *Client) UpdateUserTool(ctx context.Context, tool *toolhostv1.UserTool, paths ...string) (*toolhostv1.UserTool, error) {
	request := &toolhostv1.UpdateUserToolRequest{UserTool: tool, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}
	response, err := c.userTools.UpdateUserTool(ctx, request)
	if err != nil {
		return nil, asError(err)
	}
	return response.GetUserTool(), nil
}

// DeleteUserTool removes a user tool and its versions and stops serving it; it returns the tool as it was.
func (c *Client) DeleteUserTool(ctx context.Context, slug string) (*toolhostv1.UserTool, error) {
	response, err := c.userTools.DeleteUserTool(ctx, &toolhostv1.DeleteUserToolRequest{Slug: slug})
	if err != nil {
		return nil, asError(err)
	}
	return response.GetUserTool(), nil
}

// ListUserToolVersions yields a user tool's versions, newest first, as ListUserTools yields tools.
func (c *Client) ListUserToolVersions(ctx context.Context, slug string, pageSize int32) iter.Seq2[*toolhostv1.UserToolVersion, error] {
	return func(yield func(*toolhostv1.UserToolVersion, error) bool) {
		request := &toolhostv1.ListUserToolVersionsRequest{Slug: slug, PageSize: pageSize}
		for {
			page, err := c.userTools.ListUserToolVersions(ctx, request)
			if err != nil {
				yield(nil, asError(err))
				return
			}
			for _, version := range page.GetVersions() {
				if !yield(version, nil) {
					return
				}
			}
			if page.GetNextPageToken() == "" {
				return
			}
			request.PageToken = page.GetNextPageToken()
		}
	}
}

// RestoreUserToolVersion makes a new version equal to version (its script, system prompt and schema) and
// serves it; an unknown slug or version is codes.NotFound.
func (c *Client) RestoreUserToolVersion(ctx context.Context, slug string, version int64) (*toolhostv1.UserTool, error) {
	request := &toolhostv1.RestoreUserToolVersionRequest{Slug: slug, Version: version}
	response, err := c.userTools.RestoreUserToolVersion(ctx, request)
	if err != nil {
		return nil, asError(err)
	}
	return response.GetUserTool(), nil
}

// SetUserToolEnabled serves or stops serving a user tool. Enabling one that is incompatible with an enabled tool
// is codes.FailedPrecondition naming it and the resolution hint; the equivalent served tools are in the
// response's Conflicts.
func (c *Client) SetUserToolEnabled(ctx context.Context, slug string, enabled bool) (*toolhostv1.SetUserToolEnabledResponse, error) {
	response, err := c.userTools.SetUserToolEnabled(ctx, &toolhostv1.SetUserToolEnabledRequest{Slug: slug, Enabled: enabled})
	if err != nil {
		return nil, asError(err)
	}
	return response, nil
}

// ListToolConflicts yields the conflicts table, sorted by the pair's names, as ListUserTools yields tools.
func (c *Client) ListToolConflicts(ctx context.Context, pageSize int32) iter.Seq2[*toolhostv1.ToolConflict, error] {
	return func(yield func(*toolhostv1.ToolConflict, error) bool) {
		request := &toolhostv1.ListToolConflictsRequest{PageSize: pageSize}
		for {
			page, err := c.userTools.ListToolConflicts(ctx, request)
			if err != nil {
				yield(nil, asError(err))
				return
			}
			for _, conflict := range page.GetConflicts() {
				if !yield(conflict, nil) {
					return
				}
			}
			if page.GetNextPageToken() == "" {
				return
			}
			request.PageToken = page.GetNextPageToken()
		}
	}
}

// SetToolConflict adds the conflict of a pair of tools, or replaces the one the pair has (in either order);
// it returns the stored conflict, the smaller name first.
func (c *Client) SetToolConflict(ctx context.Context, conflict *toolhostv1.ToolConflict) (*toolhostv1.ToolConflict, error) {
	response, err := c.userTools.SetToolConflict(ctx, &toolhostv1.SetToolConflictRequest{Conflict: conflict})
	if err != nil {
		return nil, asError(err)
	}
	return response.GetConflict(), nil
}

// DeleteToolConflict removes the conflict of a pair (in either order); codes.NotFound when it has none.
func (c *Client) DeleteToolConflict(ctx context.Context, toolA, toolB string) (*toolhostv1.ToolConflict, error) {
	response, err := c.userTools.DeleteToolConflict(ctx, &toolhostv1.DeleteToolConflictRequest{ToolA: toolA, ToolB: toolB})
	if err != nil {
		return nil, asError(err)
	}
	return response.GetConflict(), nil
}
