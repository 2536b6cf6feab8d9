// Package toolhost is a Go client for toolhost, the gRPC server that hosts tools for AI agents.
//
//	client, err := toolhost.Dial("127.0.0.1:50051")
//	if err != nil { ... }
//	defer client.Close()
//	for tool, err := range client.ListTools(ctx, toolhost.Filter{Category: "network"}) { ... }
//	result, err := client.CallTool(ctx, "echo", map[string]any{"text": "hello"}, toolhost.WithCallID("job-42"))
//	for entry, err := range client.QueryLogs(ctx, toolhost.LogQuery{Text: "job-42"}) { ... }
//
// The generated messages and stubs are in the gen/toolhost/v1 package (toolhostv1). Errors from the server are
// *Error values carrying the gRPC code, the google.rpc.ErrorInfo reason and any field violations; a tool that
// ran and failed is a normal result with Success false.
//
// # JSON values
//
// The proto carries a tool's JSON values (structured output, parameter defaults and enums, log record fields)
// as google.protobuf.Value messages, which a program would have to walk case by case.
// StructuredOutput, DecodeStructuredOutput, ParameterDefault, ParameterEnum and LogEntry.Fields give them as
// JSON text instead. A Value carries every number as a double: a whole number up to 2^53 comes out with exactly
// its integer digits (9007199254740992, never 9.007199254740992e+15), a larger one as the double nearest to it,
// since that is all the server sent. NaN and the infinities, which JSON cannot hold, come out as the strings
// "NaN", "Infinity" and "-Infinity", as protojson writes them. Object keys come out sorted.
package toolhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"

	"google.golang.org/grpc"

	toolhostv1 "github.com/toolhost/toolhost/clients/go/gen/toolhost/v1"
)

// DefaultMaxReceiveBytes is the largest response the client accepts: a full ListTools page of 1000 tools with
// schemas and examples exceeds gRPC's 4 MiB default.
const DefaultMaxReceiveBytes = 64 << 20

// Client talks to one toolhost server. It is safe for concurrent use; Close it when done.
type Client struct {
	conn      *grpc.ClientConn
	tools     toolhostv1.ToolServiceClient
	logs      toolhostv1.LogServiceClient
	userTools toolhostv1.UserToolServiceClient
	assets    toolhostv1.AssetServiceClient
}

// Dial connects to target ("host:port", "dns:///host:port" or "unix:///path"). The connection is made lazily;
// options choose TLS, a bearer token and any extra gRPC dial options.
func Dial(target string, opts ...Option) (*Client, error) {
	settings := options{maxReceiveBytes: DefaultMaxReceiveBytes}
	for _, opt := range opts {
		opt(&settings)
	}
	dialOptions, err := settings.dialOptions(target)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target, dialOptions...)
	if err != nil {
		return nil, fmt.Errorf("toolhost: dial %s: %w", target, err)
	}
	return &Client{
		conn:      conn,
		tools:     toolhostv1.NewToolServiceClient(conn),
		logs:      toolhostv1.NewLogServiceClient(conn),
		userTools: toolhostv1.NewUserToolServiceClient(conn),
		assets:    toolhostv1.NewAssetServiceClient(conn),
	}, nil
}

// Close releases the connection; calls in flight fail with codes.Canceled.
func (c *Client) Close() error { return c.conn.Close() }

// Raw returns the generated ToolService stub, for RPCs or options the wrapper does not cover.
func (c *Client) Raw() toolhostv1.ToolServiceClient { return c.tools }

// RawLogs returns the generated LogService stub on the same connection, as Raw does for ToolService.
func (c *Client) RawLogs() toolhostv1.LogServiceClient { return c.logs }

// Filter selects tools for ListTools; every field that is set must match. PageSize 0 lets the server choose
// (100); View defaults to BASIC (no parameters, schemas or examples).
type Filter struct {
	Platform string
	Category string
	Tags     []string
	Provider string
	View     toolhostv1.ToolView
	PageSize int32
}

// ListTools yields every tool that matches filter, sorted by name, fetching pages as the loop needs them.
// An error ends the iteration: it is yielded once with a nil tool.
func (c *Client) ListTools(ctx context.Context, filter Filter) iter.Seq2[*toolhostv1.Tool, error] {
	return func(yield func(*toolhostv1.Tool, error) bool) {
		request := &toolhostv1.ListToolsRequest{
			Platform: filter.Platform, Category: filter.Category, Tags: filter.Tags, Provider: filter.Provider,
			View: filter.View, PageSize: filter.PageSize,
		}
		for {
			page, err := c.tools.ListTools(ctx, request)
			if err != nil {
				yield(nil, asError(err))
				return
			}
			for _, tool := range page.GetTools() {
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

// GetTool returns one tool in the FULL view; an unknown name is an *Error with codes.NotFound.
func (c *Client) GetTool(ctx context.Context, name string) (*toolhostv1.Tool, error) {
	response, err := c.tools.GetTool(ctx, &toolhostv1.GetToolRequest{Name: name})
	if err != nil {
		return nil, asError(err)
	}
	return response.GetTool(), nil
}

// CallTool runs a tool and waits for its result. The context's deadline is the call's deadline. Arguments
// travel as JSON text, so integers of any size arrive exactly. A tool that ran and failed is a result with
// Success false and Error set, not an error. StructuredOutput gives the result's structured output as JSON;
// opts such as WithCallID, WithOutputFormat and WithFilterEmptyFields apply to this call only.
func (c *Client) CallTool(ctx context.Context, name string, arguments map[string]any, opts ...CallOption) (*toolhostv1.CallToolResponse, error) {
	text, err := argumentsJSON(arguments)
	if err != nil {
		return nil, err
	}
	call := callSettings(opts)
	response, err := c.tools.CallTool(ctx, &toolhostv1.CallToolRequest{
		Name: name, Args: &toolhostv1.CallToolRequest_ArgumentsJson{ArgumentsJson: text}, CallId: call.callID,
		OutputFormat: call.outputFormat, FilterEmptyFields: call.filterEmptyFields,
	})
	if err != nil {
		return nil, asError(err)
	}
	return response, nil
}

// StreamCallTool runs a tool and yields its events as they happen: progress, output chunks, and last the
// result (the same CallToolResponse CallTool returns). Cancelling ctx, or leaving the loop early, stops the
// tool on the server. An error ends the iteration: it is yielded once with a nil event. opts are CallTool's.
func (c *Client) StreamCallTool(ctx context.Context, name string, arguments map[string]any, opts ...CallOption) iter.Seq2[*toolhostv1.StreamCallToolResponse, error] {
	call := callSettings(opts)
	return func(yield func(*toolhostv1.StreamCallToolResponse, error) bool) {
		text, err := argumentsJSON(arguments)
		if err != nil {
			yield(nil, err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // leaving the loop early cancels the stream, which stops the tool
		stream, err := c.tools.StreamCallTool(ctx, &toolhostv1.StreamCallToolRequest{
			Name: name, Args: &toolhostv1.StreamCallToolRequest_ArgumentsJson{ArgumentsJson: text},
			CallId: call.callID, OutputFormat: call.outputFormat, FilterEmptyFields: call.filterEmptyFields,
		})
		if err != nil {
			yield(nil, asError(err))
			return
		}
		receiveAll(stream, yield)
	}
}

// Reload asks the server to read its catalog directories again and swap in the result.
func (c *Client) Reload(ctx context.Context) (*toolhostv1.ReloadResponse, error) {
	response, err := c.tools.Reload(ctx, &toolhostv1.ReloadRequest{})
	if err != nil {
		return nil, asError(err)
	}
	return response, nil
}

// WatchTools yields the registry's generations: the current one first (every tool in Added), then one per
// reload that changed something. It runs until ctx is cancelled (which ends the iteration without an error)
// or the server shuts down.
func (c *Client) WatchTools(ctx context.Context) iter.Seq2[*toolhostv1.WatchToolsResponse, error] {
	return func(yield func(*toolhostv1.WatchToolsResponse, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := c.tools.WatchTools(ctx, &toolhostv1.WatchToolsRequest{})
		if err != nil {
			yield(nil, asError(err))
			return
		}
		receiveAll(stream, func(event *toolhostv1.WatchToolsResponse, err error) bool {
			if err != nil && ctx.Err() != nil {
				return false // the caller's own cancellation is the end it asked for
			}
			return yield(event, err)
		})
	}
}

func receiveAll[T any](stream grpc.ServerStreamingClient[T], yield func(*T, error) bool) {
	for {
		event, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			yield(nil, asError(err))
			return
		}
		if !yield(event, nil) {
			return
		}
	}
}

func argumentsJSON(arguments map[string]any) (string, error) {
	if arguments == nil {
		return "{}", nil
	}
	text, err := json.Marshal(arguments)
	if err != nil {
		return "", fmt.Errorf("toolhost: arguments are not JSON: %w", err)
	}
	return string(text), nil
}
