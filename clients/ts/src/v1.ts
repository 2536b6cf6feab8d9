/**
 * The generated toolhost.v1 messages, enums and the ToolService, LogService, UserToolService and AssetService
 * descriptors, for anything the client does not wrap.
 */

export * from "./gen/toolhost/v1/asset_service_pb.js";

export * from "./gen/toolhost/v1/error_reason_pb.js";
export * from "./gen/toolhost/v1/log_service_pb.js";
export * from "./gen/toolhost/v1/tool_pb.js";
export * from "./gen/toolhost/v1/tool_service_pb.js";
export * from "./gen/toolhost/v1/user_tool_service_pb.js";
