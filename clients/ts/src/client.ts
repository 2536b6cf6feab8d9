/**
 * The client: the RPCs of ToolService, LogService, UserToolService and AssetService as promises and async
 * iterables, over
 * connect-node's gRPC transport (HTTP/2).
 *
 *     const client = createClient("127.0.0.1:50051", { timeoutMs: 30_000 });
 *     for await (const tool of client.listTools({ category: "network" })) console.log(tool.name);
 *     const result = await client.callTool("echo", { text: "hello" });
 *     console.log(result.success ? result.output : result.error);
 *     client.close();
 */

import { create } from "@bufbuild/protobuf";
import { Code, createClient as createConnectClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";

import { argumentsJson, type Arguments } from "./arguments.js";
import {
  importAssetsRequest,
  listAssetsRequest,
  updateAssetRequest,
  type AssetField,
  type AssetImportFormatName,
  type AssetInit,
  type ImportAssetsOptions,
  type ListAssetsOptions,
  type ListAssetsPageOptions,
} from "./assets.js";
import { connection, type SecurityOptions } from "./connection.js";
import { DeadlineExceededError, toToolhostError, ToolhostError } from "./errors.js";
import {
  AssetService,
  type Asset,
  type ImportAssetsResponse,
  type ListAssetsResponse,
} from "./gen/toolhost/v1/asset_service_pb.js";
import { LogService } from "./gen/toolhost/v1/log_service_pb.js";
import { ToolView } from "./gen/toolhost/v1/tool_pb.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  OutputFormat,
  StreamCallToolRequestSchema,
  ToolService,
  type ReloadResponse,
  type WatchToolsResponse,
} from "./gen/toolhost/v1/tool_service_pb.js";
import {
  UserToolService,
  type ListToolConflictsResponse,
  type ListUserToolsResponse,
  type ListUserToolVersionsResponse,
  type SetUserToolEnabledResponse,
  type ToolConflict,
  type UserTool,
  type UserToolVersion,
} from "./gen/toolhost/v1/user_tool_service_pb.js";
import {
  logEntry,
  logPage,
  queryLogsRequest,
  tailLogsRequest,
  type LogEntry,
  type LogFilter,
  type LogPage,
} from "./logs.js";
import {
  streamEvent,
  toolInfo,
  toolPage,
  toolResult,
  type StreamEvent,
  type ToolInfo,
  type ToolPage,
  type ToolResult,
} from "./results.js";
import { searchRequest, searchResults, type SearchFilter, type SearchResults } from "./search.js";
import {
  present,
  toolConflict,
  updateUserToolRequest,
  type ConflictTypeName,
  type UserToolField,
  type UserToolInit,
} from "./user_tools.js";

/** The server `toolhost serve` listens on by default. */
export const DEFAULT_TARGET = "127.0.0.1:50051";

/**
 * The largest message the client accepts. A full ListTools page is 1000 tools in the FULL view; with schemas
 * and examples that passes gRPC's usual 4 MiB, so the client takes far more.
 */
export const DEFAULT_MAX_RECEIVE_MESSAGE_BYTES = 64 * 1024 * 1024;

/** How much of each tool to return: "basic" leaves out parameters, schemas and examples. */
export type ToolViewName = "basic" | "full";

/**
 * How a call's `output` is written: "json" (the structured output as compact JSON, keys sorted), "pretty"
 * (indented JSON, keys sorted) or "text" (the tool's own text). Unset, the tool chooses.
 */
export type OutputFormatName = "json" | "pretty" | "text";

/** Options of createClient. */
export interface ClientOptions extends SecurityOptions {
  /** The default deadline of each call in milliseconds (none when unset); watchTools never has one unless asked. */
  timeoutMs?: number;
  /** Headers sent with every call (lower-case names). */
  headers?: Record<string, string>;
  /** The largest response message accepted, in bytes; the default takes a full page of 1000 tools with schemas. */
  maxReceiveMessageBytes?: number;
  /** connect interceptors, run on every call (logging, tracing, metrics). */
  interceptors?: Interceptor[];
}

/** Per-call options. */
export interface CallOptions {
  /** This call's deadline in milliseconds, instead of the client's timeoutMs. */
  timeoutMs?: number;
  /** Aborting it cancels the call: the promise or iteration throws a ToolhostError with code Canceled. */
  signal?: AbortSignal;
  /** Headers for this call, added to the client's. */
  headers?: Record<string, string>;
}

/** Which tools to list. Every filter that is given must match. */
export interface ToolFilter {
  /** Only tools for this platform, for example "linux". */
  platform?: string;
  /** Only tools in this category, for example "network". */
  category?: string;
  /** Only tools that carry every one of these tags. */
  tags?: readonly string[];
  /** The AI provider the list is for; CLI providers with their own file tools do not get "file_ops". */
  provider?: string;
  /** "basic" (the default) or "full" (parameters, schemas and examples too). */
  view?: ToolViewName;
  /** Tools per page: 0 or unset means the server's 100, the maximum is 1000. */
  pageSize?: number;
}

/** Options of listTools: a filter, and the options of each page's call. */
export interface ListToolsOptions extends ToolFilter, CallOptions {}

/** Options of listToolsPage: listTools' and the page to fetch. */
export interface ListToolsPageOptions extends ListToolsOptions {
  /** The nextPageToken of the previous page; empty or unset for the first. */
  pageToken?: string;
}

/** Options of searchTools: how many results, the filter, and the call's options. */
export interface SearchToolsOptions extends SearchFilter, CallOptions {}

/** Options of getTool. */
export interface GetToolOptions extends CallOptions {
  /** "full" (the default) or "basic". */
  view?: ToolViewName;
}

/** Options of callTool and streamCallTool. */
export interface CallToolOptions extends CallOptions {
  /** An identifier for the call, echoed in the result and in the server's logs. Generated when unset. */
  callId?: string;
  /**
   * How the result's `output` is written (see OutputFormatName); a tool without structured output keeps its
   * text in every format. `structuredOutput` stays the data itself. In streamCallTool the format applies to the
   * result; the output chunks are the tool's text as it writes it.
   */
  outputFormat?: OutputFormatName;
  /** Drop null and empty ("", [], {}) object fields, at every depth, from the structured output and its rendering. */
  filterEmptyFields?: boolean;
}

/** Options of the streams that follow the server until stopped: watchTools and tailLogs. */
export interface StreamOptions {
  /** Aborting it ends the stream: the iteration throws a ToolhostError with code Canceled. */
  signal?: AbortSignal;
  /** A deadline for the whole stream, in milliseconds; none by default. */
  timeoutMs?: number;
  /** Headers for this call, added to the client's. */
  headers?: Record<string, string>;
}

/** Options of watchTools. */
export type WatchToolsOptions = StreamOptions;

/** Options of queryLogs: a filter, the page size, and the options of each page's call. */
export interface QueryLogsOptions extends LogFilter, CallOptions {
  /** Records per page: 0 or unset means the server's 100, the maximum is 1000. */
  pageSize?: number;
}

/** Options of queryLogsPage: queryLogs' and the page to fetch. */
export interface QueryLogsPageOptions extends QueryLogsOptions {
  /** The nextPageToken of the previous page; empty or unset for the first. */
  pageToken?: string;
}

/** Options of tailLogs: a filter (`until` would end a follow, so there is none) and the backlog. */
export interface TailLogsOptions extends Omit<LogFilter, "until">, StreamOptions {
  /** How many of the newest matching records to send first, oldest first: 0 (the default) sends only new ones. */
  backlog?: number;
}

/** Options of the user-tool and conflict pages: the page to fetch and the call's options. */
export interface PageOptions extends CallOptions {
  /** Items per page: 0 or unset means the server's 100, the maximum is 1000. */
  pageSize?: number;
  /** The nextPageToken of the previous page; empty or unset for the first. */
  pageToken?: string;
}

/** What each generated client method takes besides its request. */
interface RpcOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
  headers: Record<string, string>;
}

/** A client of one toolhost server. Make one and reuse it; close() it when done. */
export class ToolhostClient {
  /** The target it was created for. */
  readonly target: string;
  private readonly rpc: Client<typeof ToolService>;
  private readonly logs: Client<typeof LogService>;
  private readonly userTools: Client<typeof UserToolService>;
  private readonly assets: Client<typeof AssetService>;
  private readonly sessions: Http2SessionManager;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number | undefined;
  private readonly open = new Set<AbortController>();

  constructor(target: string = DEFAULT_TARGET, options: ClientOptions = {}) {
    const reach = connection(target, options);
    if (reach.headers["authorization"] !== undefined &&
        Object.keys(options.headers ?? {}).some((name) => name.toLowerCase() === "authorization")) {
      throw new TypeError("give token or an authorization header, not both");
    }
    this.target = target;
    this.timeoutMs = options.timeoutMs;
    this.headers = { ...lowerCaseKeys(options.headers ?? {}), ...reach.headers };
    // Our own session manager, so that close() can end the connection.
    this.sessions = new Http2SessionManager(reach.baseUrl, {}, reach.nodeOptions);
    const transport = createGrpcTransport({
      baseUrl: reach.baseUrl,
      sessionManager: this.sessions,
      readMaxBytes: options.maxReceiveMessageBytes ?? DEFAULT_MAX_RECEIVE_MESSAGE_BYTES,
      interceptors: options.interceptors ?? [],
    });
    this.rpc = createConnectClient(ToolService, transport);
    this.logs = createConnectClient(LogService, transport);
    this.userTools = createConnectClient(UserToolService, transport);
    this.assets = createConnectClient(AssetService, transport);
  }

  /** One page of the tools matching the filter, sorted by name; its nextPageToken is "" on the last page. */
  async listToolsPage(options: ListToolsPageOptions = {}): Promise<ToolPage> {
    const request = create(ListToolsRequestSchema, { ...listFilter(options), pageToken: options.pageToken ?? "" });
    return this.unary(async (call) => toolPage(await this.rpc.listTools(request, call)), options);
  }

  /**
   * Every tool matching the filter, sorted by name: `for await (const tool of client.listTools()) ...`.
   * Pages are fetched as the iteration reaches them.
   */
  async *listTools(options: ListToolsOptions = {}): AsyncGenerator<ToolInfo, void, undefined> {
    let pageToken = "";
    do {
      const page = await this.listToolsPage({ ...options, pageToken });
      yield* page.tools;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** One tool by name, in the FULL view unless asked otherwise; NotFoundError when there is none. */
  async getTool(name: string, options: GetToolOptions = {}): Promise<ToolInfo> {
    const response = await this.unary(
      (call) => this.rpc.getTool({ name, view: viewValue(options.view ?? "full") }, call), options);
    if (response.tool === undefined) {
      throw new ToolhostError(Code.Unknown, `the server answered GetTool(${name}) without a tool`);
    }
    return toolInfo(response.tool);
  }

  /**
   * The tools for a need written in words, best first: a ranked top list, not paged. When one of a tool's
   * intents matches the whole query ("check port 5432 on db.example.com"), that tool comes first with the
   * `arguments` to call it with. Only tools the caller may see; InvalidArgumentError for a query over 1,000
   * characters.
   */
  async searchTools(query: string, options: SearchToolsOptions = {}): Promise<SearchResults> {
    const request = searchRequest(query, options);
    return this.unary(async (call) => searchResults(await this.rpc.searchTools(request, call)), options);
  }

  /**
   * Run a tool and wait for its result. A tool that ran and failed resolves with `success: false` and `error`
   * (code TIMEOUT, NON_ZERO_EXIT, ...); the caller's mistakes (unknown tool, bad arguments) and the deadline
   * reject with a ToolhostError. Arguments travel as JSON text, so bigint values arrive exactly.
   * `structuredOutput` is a plain JSON value; the response as sent is `raw`.
   */
  async callTool(name: string, args?: Arguments, options: CallToolOptions = {}): Promise<ToolResult> {
    const request = create(CallToolRequestSchema, {
      name, args: { case: "argumentsJson", value: argumentsJson(args) }, callId: options.callId ?? "",
      outputFormat: outputFormatValue(options.outputFormat), filterEmptyFields: options.filterEmptyFields ?? false,
    });
    return this.unary(async (call) => toolResult(await this.rpc.callTool(request, call)), options);
  }

  /**
   * Run a tool and follow it: `for await (const event of client.streamCallTool(...))` gives progress and
   * output events as they happen, then one result (the ToolResult callTool returns). The call starts
   * when the iteration does. Leaving the loop early, aborting `signal` or the deadline stops the tool on the
   * server; errors before the tool starts (unknown tool, invalid arguments) are thrown by the iteration.
   */
  streamCallTool(
    name: string, args?: Arguments, options: CallToolOptions = {},
  ): AsyncGenerator<StreamEvent, void, undefined> {
    const request = create(StreamCallToolRequestSchema, {
      name, args: { case: "argumentsJson", value: argumentsJson(args) }, callId: options.callId ?? "",
      outputFormat: outputFormatValue(options.outputFormat), filterEmptyFields: options.filterEmptyFields ?? false,
    });
    return this.serverStream((call) => this.rpc.streamCallTool(request, call), options, this.timeoutMs, streamEvent);
  }

  /** Ask the server to read its catalog directories again and swap in the result. */
  async reload(options: CallOptions = {}): Promise<ReloadResponse> {
    return this.unary((call) => this.rpc.reload({}, call), options);
  }

  /**
   * The registry's generations as they happen: first the current one, every tool in `added`, then one event
   * per change. The stream starts when the iteration does and runs until the loop is left, `signal` aborts
   * (the iteration then throws Canceled), the client is closed or the server shuts down.
   */
  watchTools(options: WatchToolsOptions = {}): AsyncGenerator<WatchToolsResponse, void, undefined> {
    return this.serverStream((call) => this.rpc.watchTools({}, call), options, undefined, (message) => message);
  }

  /**
   * One page of the server's log records matching the filter, newest first, with its summary; its
   * nextPageToken is "" on the last page. When the server authenticates callers, this needs the admin role.
   */
  async queryLogsPage(options: QueryLogsPageOptions = {}): Promise<LogPage> {
    const request = queryLogsRequest(options, options.pageSize ?? 0, options.pageToken ?? "");
    return this.unary(async (call) => logPage(await this.logs.queryLogs(request, call)), options);
  }

  /**
   * Every log record matching the filter, newest first: `for await (const entry of client.queryLogs()) ...`.
   * Pages are fetched as the iteration reaches them; a page token stays valid however many records arrive.
   */
  async *queryLogs(options: QueryLogsOptions = {}): AsyncGenerator<LogEntry, void, undefined> {
    let pageToken = "";
    do {
      const page = await this.queryLogsPage({ ...options, pageToken });
      yield* page.records;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /**
   * Follow the server's logs: the newest `backlog` matching records (oldest first), then each new matching
   * record as the server finds it (within about a second). Like watchTools, it starts when the iteration does
   * and runs until the loop is left, `signal` aborts (the iteration then throws Canceled), the client is
   * closed (the loop just ends) or the server shuts down; there is no deadline unless `timeoutMs` asks.
   */
  tailLogs(options: TailLogsOptions = {}): AsyncGenerator<LogEntry, void, undefined> {
    // Build the request now, so that a bad level or date throws here rather than from the first next().
    const request = tailLogsRequest(options, options.backlog ?? 0);
    return this.serverStream((call) => this.logs.tailLogs(request, call), options, undefined,
      (message) => logEntry(message.record ?? missingRecord()));
  }

  // --- UserToolService: every method needs the admin role or `manage_tools` when the server authenticates ----

  /**
   * Store and serve a new user tool at version 1 (see user_tools.ts for an example). AlreadyExistsError when any
   * tool has the slug; InvalidArgumentError for a bad slug or schema, or a credential the caller may not grant.
   */
  async createUserTool(tool: UserToolInit, options: CallOptions = {}): Promise<UserTool> {
    const response = await this.unary((call) => this.userTools.createUserTool({ userTool: tool }, call), options);
    return present(response.userTool, "CreateUserTool");
  }

  /** One user tool with its script; NotFoundError (reason RESOURCE_NOT_FOUND) when there is none. */
  async getUserTool(slug: string, options: CallOptions = {}): Promise<UserTool> {
    const response = await this.unary((call) => this.userTools.getUserTool({ slug }, call), options);
    return present(response.userTool, "GetUserTool");
  }

  /** One page of user tools, sorted by slug; its nextPageToken is "" on the last page. */
  async listUserToolsPage(options: PageOptions = {}): Promise<ListUserToolsResponse> {
    const request = { pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" };
    return this.unary((call) => this.userTools.listUserTools(request, call), options);
  }

  /** Every user tool, sorted by slug: `for await (const tool of client.listUserTools()) ...`. */
  async *listUserTools(options: PageOptions = {}): AsyncGenerator<UserTool, void, undefined> {
    let pageToken = options.pageToken ?? "";
    do {
      const page = await this.listUserToolsPage({ ...options, pageToken });
      yield* page.userTools;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /**
   * Change `fields` of the user tool `tool.slug` to the values in `tool` (when `fields` is empty: those `tool`
   * sets to other than their default), as a new version; the next call of the tool runs it.
   */
  async updateUserTool(
    tool: UserToolInit, fields: readonly UserToolField[], options: CallOptions = {},
  ): Promise<UserTool> {
    const request = updateUserToolRequest(tool, fields);
    const response = await this.unary((call) => this.userTools.updateUserTool(request, call), options);
    return present(response.userTool, "UpdateUserTool");
  }

  /** Remove a user tool and its versions and stop serving it; the tool as it was. */
  async deleteUserTool(slug: string, options: CallOptions = {}): Promise<UserTool> {
    const response = await this.unary((call) => this.userTools.deleteUserTool({ slug }, call), options);
    return present(response.userTool, "DeleteUserTool");
  }

  /** One page of a user tool's versions, newest first. */
  async listUserToolVersionsPage(slug: string, options: PageOptions = {}): Promise<ListUserToolVersionsResponse> {
    const request = { slug, pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" };
    return this.unary((call) => this.userTools.listUserToolVersions(request, call), options);
  }

  /** Every version of a user tool, newest first. */
  async *listUserToolVersions(
    slug: string, options: PageOptions = {},
  ): AsyncGenerator<UserToolVersion, void, undefined> {
    let pageToken = options.pageToken ?? "";
    do {
      const page = await this.listUserToolVersionsPage(slug, { ...options, pageToken });
      yield* page.versions;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** Make a new version equal to `version` (its script, system prompt and schema) and serve it. */
  async restoreUserToolVersion(slug: string, version: bigint | number, options: CallOptions = {}): Promise<UserTool> {
    const request = { slug, version: BigInt(version) };
    const response = await this.unary((call) => this.userTools.restoreUserToolVersion(request, call), options);
    return present(response.userTool, "RestoreUserToolVersion");
  }

  /**
   * Serve or stop serving a user tool. Enabling one that is `incompatible` with an enabled tool throws
   * FailedPreconditionError naming it and the hint; the `equivalent` served tools come back in `conflicts`.
   */
  async setUserToolEnabled(
    slug: string, enabled: boolean, options: CallOptions = {},
  ): Promise<SetUserToolEnabledResponse> {
    return this.unary((call) => this.userTools.setUserToolEnabled({ slug, enabled }, call), options);
  }

  /** One page of the conflicts table, sorted by the pair's names. */
  async listToolConflictsPage(options: PageOptions = {}): Promise<ListToolConflictsResponse> {
    const request = { pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" };
    return this.unary((call) => this.userTools.listToolConflicts(request, call), options);
  }

  /** Every conflict of the table. */
  async *listToolConflicts(options: PageOptions = {}): AsyncGenerator<ToolConflict, void, undefined> {
    let pageToken = options.pageToken ?? "";
    do {
      const page = await this.listToolConflictsPage({ ...options, pageToken });
      yield* page.conflicts;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** Add the conflict of a pair of tools, or replace the one it has (in either order); the stored conflict. */
  async setToolConflict(
    toolA: string, toolB: string, type: ConflictTypeName, resolutionHint = "", options: CallOptions = {},
  ): Promise<ToolConflict> {
    const conflict = toolConflict(toolA, toolB, type, resolutionHint);
    const response = await this.unary((call) => this.userTools.setToolConflict({ conflict }, call), options);
    return present(response.conflict, "SetToolConflict");
  }

  /** Remove the conflict of a pair (in either order); NotFoundError when it has none. */
  async deleteToolConflict(toolA: string, toolB: string, options: CallOptions = {}): Promise<ToolConflict> {
    const response = await this.unary((call) => this.userTools.deleteToolConflict({ toolA, toolB }, call), options);
    return present(response.conflict, "DeleteToolConflict");
  }

  // --- AssetService (see assets.ts): every method needs the admin role or `manage_assets` when the server
  // authenticates ---

  /**
   * Store a new asset; the asset as stored. AlreadyExistsError when the name is taken (regardless of case);
   * InvalidArgumentError naming the field for a bad name, hostname or address, or an unsafe WinRM profile.
   */
  async createAsset(asset: AssetInit, options: CallOptions = {}): Promise<Asset> {
    const response = await this.unary((call) => this.assets.createAsset({ asset }, call), options);
    return present(response.asset, "CreateAsset");
  }

  /** One asset by name, regardless of case; NotFoundError when there is none. */
  async getAsset(name: string, options: CallOptions = {}): Promise<Asset> {
    const response = await this.unary((call) => this.assets.getAsset({ name }, call), options);
    return present(response.asset, "GetAsset");
  }

  /** One page of the assets matching the filter, sorted by name; `totalSize` counts them over every page. */
  async listAssetsPage(options: ListAssetsPageOptions = {}): Promise<ListAssetsResponse> {
    const request = listAssetsRequest(options);
    return this.unary((call) => this.assets.listAssets(request, call), options);
  }

  /** Every asset matching the filter, sorted by name: `for await (const a of client.listAssets({ site })) ...`. */
  async *listAssets(options: ListAssetsOptions = {}): AsyncGenerator<Asset, void, undefined> {
    let pageToken = "";
    do {
      const page = await this.listAssetsPage({ ...options, pageToken });
      yield* page.assets;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /**
   * Change `fields` of the asset `asset.name` to the values in `asset` (when `fields` is empty: those `asset`
   * sets to other than their default); the asset as stored now. NotFoundError when there is none.
   */
  async updateAsset(asset: AssetInit, fields: readonly AssetField[], options: CallOptions = {}): Promise<Asset> {
    const request = updateAssetRequest(asset, fields);
    const response = await this.unary((call) => this.assets.updateAsset(request, call), options);
    return present(response.asset, "UpdateAsset");
  }

  /** Remove an asset; the asset as it was. NotFoundError when there is none. */
  async deleteAsset(name: string, options: CallOptions = {}): Promise<Asset> {
    const response = await this.unary((call) => this.assets.deleteAsset({ name }, call), options);
    return present(response.asset, "DeleteAsset");
  }

  /**
   * Create or replace (by name) every asset of a YAML or CSV document, all or nothing: one bad record stores
   * nothing and throws InvalidArgumentError with a field violation per problem (at most 100), each naming its
   * line. With `validateOnly`, nothing is stored either way.
   */
  async importAssets(
    format: AssetImportFormatName, content: string, options: ImportAssetsOptions = {},
  ): Promise<ImportAssetsResponse> {
    const request = importAssetsRequest(format, content, options.validateOnly ?? false);
    return this.unary((call) => this.assets.importAssets(request, call), options);
  }

  /**
   * End every open stream (their loops simply finish) and close the connection. Calls made afterwards open a
   * new one.
   */
  close(): void {
    for (const controller of this.open) {
      controller.abort(CLOSED);
    }
    this.sessions.abort();
  }

  private async unary<T>(
    invoke: (call: RpcOptions) => Promise<T>,
    options: CallOptions,
  ): Promise<T> {
    try {
      return await invoke(this.callOptions(options, options.signal, this.timeoutMs));
    } catch (error) {
      throw options.signal?.aborted ? cancelled(options.signal.reason) : toToolhostError(error);
    }
  }

  private async *serverStream<M, E>(
    open: (call: RpcOptions) => AsyncIterable<M>,
    options: CallOptions,
    defaultTimeoutMs: number | undefined,
    convert: (message: M) => E,
  ): AsyncGenerator<E, void, undefined> {
    // Our own controller, so that leaving the loop early (or close()) cancels the call on the server too.
    const controller = new AbortController();
    const abort = (): void => controller.abort(options.signal?.reason);
    if (options.signal?.aborted) {
      abort();
    }
    options.signal?.addEventListener("abort", abort, { once: true });
    // The deadline is ours too: connect only clears its deadline timer when a stream is read to its end, so a
    // loop left early would keep the process alive until the deadline.
    const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
    const deadline = timeoutMs !== undefined && timeoutMs > 0
      ? setTimeout(() => controller.abort(DEADLINE), timeoutMs)
      : undefined;
    const call = this.callOptions({ ...options, timeoutMs: 0 }, controller.signal, undefined);
    if (deadline !== undefined && timeoutMs !== undefined) {
      call.headers["grpc-timeout"] = grpcTimeout(timeoutMs);
    }
    this.open.add(controller);
    try {
      for await (const message of open(call)) {
        yield convert(message);
      }
    } catch (error) {
      const reason: unknown = controller.signal.reason;
      if (!controller.signal.aborted) {
        throw toToolhostError(error);
      }
      if (reason === DEADLINE) {
        throw new DeadlineExceededError(Code.DeadlineExceeded, `the call's deadline of ${timeoutMs} ms passed`,
          { cause: error });
      }
      if (reason !== CLOSED) {
        throw cancelled(reason);
      }
    } finally {
      clearTimeout(deadline);
      options.signal?.removeEventListener("abort", abort);
      this.open.delete(controller);
      controller.abort();
    }
  }

  private callOptions(
    options: CallOptions, signal: AbortSignal | undefined, defaultTimeoutMs: number | undefined,
  ): RpcOptions {
    const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
    return {
      headers: { ...this.headers, ...lowerCaseKeys(options.headers ?? {}) },
      ...(signal === undefined ? {} : { signal }),
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
    };
  }
}

/** A client of the toolhost at `target` ("host:port" or "unix:/path"); see ClientOptions and README.md. */
export function createClient(target: string = DEFAULT_TARGET, options: ClientOptions = {}): ToolhostClient {
  return new ToolhostClient(target, options);
}

// The abort reason of streams that close() ends: their iteration finishes quietly.
const CLOSED = Symbol("toolhost client closed");
// The abort reason of a stream whose deadline passed.
const DEADLINE = Symbol("toolhost deadline exceeded");

/** A gRPC timeout header value: at most 8 digits, so milliseconds up to a day, then seconds. */
function grpcTimeout(timeoutMs: number): string {
  const milliseconds = Math.ceil(timeoutMs);
  return milliseconds < 1e8 ? `${milliseconds}m` : `${Math.min(Math.ceil(milliseconds / 1000), 99_999_999)}S`;
}

/** The error of a call whose AbortSignal fired, whatever connect made of the abort reason. */
function cancelled(reason: unknown): ToolhostError {
  const why = reason instanceof Error ? reason.message : "the call was aborted";
  return new ToolhostError(Code.Canceled, why, { cause: reason });
}

function listFilter(filter: ToolFilter) {
  if (typeof filter.tags === "string") {
    throw new TypeError("tags must be an array of tags, not one string");
  }
  return {
    platform: filter.platform ?? "",
    category: filter.category ?? "",
    tags: [...(filter.tags ?? [])],
    provider: filter.provider ?? "",
    view: viewValue(filter.view ?? "basic"),
    pageSize: filter.pageSize ?? 0,
  };
}

function viewValue(view: ToolViewName): ToolView {
  switch (view) {
    case "basic":
      return ToolView.BASIC;
    case "full":
      return ToolView.FULL;
    default:
      throw new TypeError(`view must be "basic" or "full", not ${JSON.stringify(view)}`);
  }
}

function outputFormatValue(format: OutputFormatName | undefined): OutputFormat {
  switch (format) {
    case undefined:
      return OutputFormat.UNSPECIFIED;
    case "json":
      return OutputFormat.JSON;
    case "pretty":
      return OutputFormat.PRETTY;
    case "text":
      return OutputFormat.TEXT;
    default:
      throw new TypeError(`outputFormat must be "json", "pretty" or "text", not ${JSON.stringify(format)}`);
  }
}

function missingRecord(): never {
  throw new ToolhostError(Code.Unknown, "the server sent a TailLogs message without a record");
}

function lowerCaseKeys(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
}
