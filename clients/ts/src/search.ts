/**
 * searchTools: its options, its request, and the results as plain views (each tool a ToolInfo), with the
 * response as `raw`.
 */

import { create, type JsonObject } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";

import { ToolhostError } from "./errors.js";
import {
  SearchToolsRequestSchema,
  type SearchToolsRequest,
  type SearchToolsResponse,
  type SearchToolsResult,
} from "./gen/toolhost/v1/tool_service_pb.js";
import { toolInfo, type ToolInfo } from "./results.js";

/** Which tools a search may return: at most `limit`, every filter that is given matching. */
export interface SearchFilter {
  /** How many results at most: 0 or unset means the server's 10, the maximum is 50. */
  limit?: number;
  /** Only tools for this platform, for example "linux". */
  platform?: string;
  /** Only tools in this category, for example "network". */
  category?: string;
  /** Only tools that carry every one of these tags. */
  tags?: readonly string[];
  /** The AI provider the results are for, with listTools' rules. */
  provider?: string;
}

/**
 * One tool a search found, in the "basic" view (getTool has its parameters and schemas). For a match of one of
 * the tool's intents, `matchedIntent` is its pattern and `arguments` the arguments to call the tool with
 * (`client.callTool(hit.tool.name, hit.arguments)`); a ranked result has "" and undefined. `score` orders the
 * results of one search, higher first.
 */
export interface SearchResult {
  tool: ToolInfo;
  score: number;
  matchedIntent: string;
  arguments: JsonObject | undefined;
  /** The result as the server sent it. */
  raw: SearchToolsResult;
}

/** What searchTools resolves to: the results, best first, and the generation that served them. */
export interface SearchResults {
  results: SearchResult[];
  generation: bigint;
  /** The response as the server sent it. */
  raw: SearchToolsResponse;
}

export function searchRequest(query: string, filter: SearchFilter): SearchToolsRequest {
  if (typeof filter.tags === "string") {
    throw new TypeError("tags must be an array of tags, not one string");
  }
  return create(SearchToolsRequestSchema, {
    query,
    pageSize: filter.limit ?? 0,
    platform: filter.platform ?? "",
    category: filter.category ?? "",
    tags: [...(filter.tags ?? [])],
    provider: filter.provider ?? "",
  });
}

export function searchResults(message: SearchToolsResponse): SearchResults {
  return {
    results: message.results.map((result) => {
      if (result.tool === undefined) {
        throw new ToolhostError(Code.Unknown, "the server answered SearchTools with a result without a tool");
      }
      return {
        tool: toolInfo(result.tool), score: result.score, matchedIntent: result.matchedIntent,
        arguments: result.arguments, raw: result,
      };
    }),
    generation: message.generation,
    raw: message,
  };
}
