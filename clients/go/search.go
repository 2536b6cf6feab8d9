package toolhost

import (
	"context"

	toolhostv1 "github.com/toolhost/toolhost/clients/go/gen/toolhost/v1"
)

// SearchOptions narrows SearchTools; every field that is set must match. Limit 0 lets the server choose (10);
// at most 50.
type SearchOptions struct {
	Limit    int32
	Platform string
	Category string
	Tags     []string
	Provider string
}

// SearchTools returns the tools for a need written in words, best first, in the BASIC view: a ranked top list,
// not paged. When one of a tool's intents matches the whole query ("check port 5432 on db.example.com"), that
// tool comes first, with MatchedIntent set and the arguments to call it with (see IntentArguments). Only tools
// the caller may see appear; a query over 1,000 characters is an *Error with codes.InvalidArgument.
func (c *Client) SearchTools(ctx context.Context, query string, opts SearchOptions) (*toolhostv1.SearchToolsResponse, error) {
	response, err := c.tools.SearchTools(ctx, &toolhostv1.SearchToolsRequest{
		Query: query, PageSize: opts.Limit, Platform: opts.Platform, Category: opts.Category, Tags: opts.Tags,
		Provider: opts.Provider,
	})
	if err != nil {
		return nil, asError(err)
	}
	return response, nil
}

// IntentArguments returns the arguments an intent's match found, ready for CallTool, and false for a ranked
// result (which has none). Numbers are float64, as a Struct carries them; CallTool sends a whole one with its
// integer digits, so a tool's integer parameter accepts it.
func IntentArguments(result *toolhostv1.SearchToolsResult) (map[string]any, bool) {
	if result.GetArguments() == nil {
		return nil, false
	}
	return result.GetArguments().AsMap(), true
}
