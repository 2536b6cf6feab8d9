/**
 * What the UserToolService methods of ToolhostClient take: a user tool to create and the changes of an update.
 * They return the generated messages (UserTool, UserToolVersion, ToolConflict), whose `inputSchema` is already a
 * plain JSON object; `version` is a bigint, as every int64.
 *
 *     await client.createUserTool({ slug: "disk_usage", description: "Disk usage of a path.",
 *       script: 'du -sh -- "$TOOL_ARG_PATH"',
 *       inputSchema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] } });
 *     await client.updateUserTool({ slug: "disk_usage", script: 'du -sh --apparent-size -- "$TOOL_ARG_PATH"' },
 *       ["script"]);
 *     await client.restoreUserToolVersion("disk_usage", 1n);
 */

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";

import { ToolhostError } from "./errors.js";
import {
  ConflictType,
  ToolConflictSchema,
  UpdateUserToolRequestSchema,
  type UpdateUserToolRequest,
  type UserToolSchema,
} from "./gen/toolhost/v1/user_tool_service_pb.js";

/** A user tool to create: slug, description, script and inputSchema; the server ignores its own fields. */
export type UserToolInit = MessageInitShape<typeof UserToolSchema> & { slug: string };

/** How two tools relate in the conflicts table. */
export type ConflictTypeName = "equivalent" | "incompatible";

/**
 * The fields UpdateUserTool may change. An empty list changes those the tool sets to other than their default
 * (AIP-134), so a field is cleared only by naming it.
 */
export type UserToolField =
  | "name" | "description" | "category" | "system_prompt" | "input_schema" | "script" | "timeout_seconds" | "tags"
  | "credentials";

/** The UpdateUserTool request changing `fields` of `tool` (found by its slug) to the values `tool` has. */
export function updateUserToolRequest(tool: UserToolInit, fields: readonly UserToolField[]): UpdateUserToolRequest {
  if (typeof fields === "string") {
    throw new TypeError("fields must be an array of field names, not one string");
  }
  return create(UpdateUserToolRequestSchema, { userTool: tool, updateMask: { paths: [...fields] } });
}

/** The ToolConflict message of a setToolConflict call. */
export function toolConflict(toolA: string, toolB: string, type: ConflictTypeName, resolutionHint: string) {
  const kinds: Record<ConflictTypeName, ConflictType> = {
    equivalent: ConflictType.EQUIVALENT, incompatible: ConflictType.INCOMPATIBLE,
  };
  const kind = kinds[type];
  if (kind === undefined) {
    throw new TypeError(`type must be "equivalent" or "incompatible", not ${JSON.stringify(type)}`);
  }
  return create(ToolConflictSchema, { toolA, toolB, type: kind, resolutionHint });
}

/** The message a response must carry, or an error naming the RPC that left it out. */
export function present<T>(message: T | undefined, rpc: string): T {
  if (message === undefined) {
    throw new ToolhostError(Code.Unknown, `the server answered ${rpc} without its message`);
  }
  return message;
}
