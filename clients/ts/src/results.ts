/**
 * What the client returns for tools and calls: the generated messages with every google.protobuf.Value field
 * (structured output, parameter defaults and enums) as a plain JSON value, and the message itself as `raw`.
 *
 * protobuf-es already gives google.protobuf.Struct fields (schemas, example arguments) as plain objects, but
 * leaves Value fields as messages; these views close that gap so that every JSON the server sends reads alike.
 */

import { Code } from "@connectrpc/connect";
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";

import { InternalError, ToolhostError } from "./errors.js";
import type { Tool, ToolParameter } from "./gen/toolhost/v1/tool_pb.js";
import type {
  CallProgress,
  CallToolResponse,
  ListToolsResponse,
  OutputChunk,
  StreamCallToolResponse,
} from "./gen/toolhost/v1/tool_service_pb.js";

/** The protobuf-es bookkeeping of a message, which a plain view must not carry (it would pass for the message). */
type MessageKeys = "$typeName" | "$unknown";

/**
 * The result of callTool, and the last event of streamCallTool: the CallToolResponse's fields (see the proto
 * for each), with `structuredOutput` as a JSON value.
 */
export interface ToolResult extends Omit<CallToolResponse, MessageKeys | "structuredOutput"> {
  /**
   * The tool's structured result as a JSON value, or undefined when it returned none. Numbers travel as
   * doubles, so an integer beyond Number.MAX_SAFE_INTEGER is rounded (a tool's JSON text in `output` is exact).
   */
  structuredOutput: JsonValue | undefined;
  /** The response as the server sent it. */
  raw: CallToolResponse;
}

/** One declared argument of a tool, with `default` and `enum` as JSON values. */
export interface ToolParameterInfo extends Omit<ToolParameter, MessageKeys | "default" | "enum"> {
  /** The value used when a call leaves the argument out; undefined when there is none (null is a default). */
  default: JsonValue | undefined;
  /** The only values allowed, when the parameter is an enumeration; empty otherwise. */
  enum: JsonValue[];
}

/**
 * A tool as listTools and getTool return it: the Tool's fields (see the proto), with each parameter's
 * `default` and `enum` as JSON values. `inputSchema`, `outputSchema` and example arguments are JSON objects.
 */
export interface ToolInfo extends Omit<Tool, MessageKeys | "parameters"> {
  /** The declared parameters, in the order they were declared. Empty in the "basic" view. */
  parameters: ToolParameterInfo[];
  /** The tool as the server sent it. */
  raw: Tool;
}

/** One page of listToolsPage: `tools` sorted by name, `nextPageToken` "" on the last page. */
export interface ToolPage extends Omit<ListToolsResponse, MessageKeys | "tools"> {
  /** The tools on this page, sorted by name. */
  tools: ToolInfo[];
  /** The page as the server sent it. */
  raw: ListToolsResponse;
}

/** One event of a streamed call: progress, an output chunk, and last the result. */
export type StreamEvent =
  | { case: "progress"; value: CallProgress }
  | { case: "output"; value: OutputChunk }
  | { case: "result"; value: ToolResult };

/**
 * A google.protobuf.Value as JSON. toJson refuses what JSON cannot hold (NaN, Infinity, a Value without a
 * kind); that is the server's fault, so it becomes an InternalError naming the field rather than a bare Error.
 */
export function jsonValue(value: Value, field: string): JsonValue {
  try {
    return toJson(ValueSchema, value);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new InternalError(Code.Internal, `the server sent ${field} that is not JSON: ${why}`, { cause: error });
  }
}

export function toolResult(message: CallToolResponse): ToolResult {
  const { $typeName: _type, $unknown: _unknown, structuredOutput, ...fields } = message;
  return {
    ...fields,
    structuredOutput: structuredOutput === undefined
      ? undefined
      : jsonValue(structuredOutput, `a structured output of ${message.tool}`),
    raw: message,
  };
}

export function toolInfo(message: Tool): ToolInfo {
  const { $typeName: _type, $unknown: _unknown, parameters, ...fields } = message;
  return { ...fields, parameters: parameters.map((parameter) => parameterInfo(parameter, message.name)), raw: message };
}

export function toolPage(message: ListToolsResponse): ToolPage {
  const { $typeName: _type, $unknown: _unknown, tools, ...fields } = message;
  return { ...fields, tools: tools.map(toolInfo), raw: message };
}

export function streamEvent(message: StreamCallToolResponse): StreamEvent {
  const event = message.event;
  switch (event.case) {
    case "progress":
    case "output":
      return event;
    case "result":
      return { case: "result", value: toolResult(event.value) };
    default:
      throw new ToolhostError(Code.Unknown,
        "the server sent a stream event this client does not know; upgrade the client");
  }
}

function parameterInfo(message: ToolParameter, tool: string): ToolParameterInfo {
  const { $typeName: _type, $unknown: _unknown, default: fallback, enum: allowed, ...fields } = message;
  const field = `parameter ${message.name} of ${tool}`;
  return {
    ...fields,
    default: fallback === undefined ? undefined : jsonValue(fallback, `a default for ${field}`),
    enum: allowed.map((value) => jsonValue(value, `an enum value for ${field}`)),
  };
}
