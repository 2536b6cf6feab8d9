/**
 * TypeScript client for toolhost, the gRPC server that hosts tools for AI agents.
 *
 *     import { createClient } from "toolhost-client";
 *
 *     const client = createClient("127.0.0.1:50051", { timeoutMs: 30_000 });
 *     const result = await client.callTool("echo", { text: "hello" });
 *
 * Results are the generated messages with JSON fields as plain JSON values (results.ts, logs.ts), each with
 * the message itself as `raw`. Errors are ToolhostError subclasses (see errors.ts for the tree). The generated
 * messages are in `v1`.
 */

export {
  createClient,
  DEFAULT_MAX_RECEIVE_MESSAGE_BYTES,
  DEFAULT_TARGET,
  ToolhostClient,
  type CallOptions,
  type CallToolOptions,
  type ClientOptions,
  type GetToolOptions,
  type ListToolsOptions,
  type ListToolsPageOptions,
  type OutputFormatName,
  type PageOptions,
  type QueryLogsOptions,
  type QueryLogsPageOptions,
  type SearchToolsOptions,
  type StreamOptions,
  type TailLogsOptions,
  type ToolFilter,
  type ToolViewName,
  type WatchToolsOptions,
} from "./client.js";
export type { StreamEvent, ToolInfo, ToolPage, ToolParameterInfo, ToolResult } from "./results.js";
export type { SearchFilter, SearchResult, SearchResults } from "./search.js";
export type { LogEntry, LogFilter, LogLevelName, LogPage, LogSummary } from "./logs.js";
export type { JsonObject, JsonValue } from "@bufbuild/protobuf";
export { type ArgumentValue, type Arguments } from "./arguments.js";
export type { ConflictTypeName, UserToolField, UserToolInit } from "./user_tools.js";
export type {
  AssetField,
  AssetFilter,
  AssetImportFormatName,
  AssetInit,
  ImportAssetsOptions,
  ListAssetsOptions,
  ListAssetsPageOptions,
} from "./assets.js";
export { isLocalTarget, type Pem, type SecurityOptions } from "./connection.js";
export {
  AlreadyExistsError,
  Code,
  codeName,
  DeadlineExceededError,
  ERROR_DOMAIN,
  FailedPreconditionError,
  InternalError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  ResourceExhaustedError,
  ToolhostError,
  UnauthenticatedError,
  UnavailableError,
  toToolhostError,
  type CodeName,
  type ErrorReason,
  type FieldViolation,
  type ToolhostErrorDetails,
} from "./errors.js";
// The generated messages the results are made of, and the `raw` of each.
export type {
  CallProgress,
  CallToolResponse,
  CatalogError,
  ListToolsResponse,
  OutputChunk,
  ReloadResponse,
  SearchToolsResponse,
  SearchToolsResult,
  ToolError,
  WatchToolsResponse,
} from "./gen/toolhost/v1/tool_service_pb.js";
export type {
  ExampleExpectation,
  Tool,
  ToolAnnotations,
  ToolExample,
  ToolParameter,
} from "./gen/toolhost/v1/tool_pb.js";
export type { LogRecord, QueryLogsResponse } from "./gen/toolhost/v1/log_service_pb.js";
export { OutputFormat, OutputStream } from "./gen/toolhost/v1/tool_service_pb.js";
export { ToolSource } from "./gen/toolhost/v1/tool_pb.js";
export type {
  ListToolConflictsResponse,
  ListUserToolsResponse,
  ListUserToolVersionsResponse,
  SetUserToolEnabledResponse,
  ToolConflict,
  UserTool,
  UserToolVersion,
} from "./gen/toolhost/v1/user_tool_service_pb.js";
export { ConflictType } from "./gen/toolhost/v1/user_tool_service_pb.js";
export type {
  Asset,
  ImportAssetsResponse,
  ListAssetsResponse,
  WinrmProfile,
} from "./gen/toolhost/v1/asset_service_pb.js";
export { AssetImportFormat, WinrmAuthentication } from "./gen/toolhost/v1/asset_service_pb.js";
export * as v1 from "./v1.js";
