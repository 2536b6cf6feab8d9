/**
 * Log records, pages and the QueryLogs / TailLogs requests of the log service, as the client gives and takes
 * them: level names instead of enum numbers, Dates instead of Timestamps, `fields` as a JSON object.
 *
 *     const page = await client.queryLogsPage({ level: "WARNING", since: new Date(Date.now() - 3_600_000) });
 *     for await (const entry of client.queryLogs({ text: "timeout" })) {      // every page, newest first
 *       console.log(entry.time, entry.level, entry.message);
 *     }
 */

import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";

import {
  LogFilterSchema,
  LogLevel,
  QueryLogsRequestSchema,
  TailLogsRequestSchema,
  type LogFilter as LogFilterMessage,
  type LogRecord,
  type LogSummary as LogSummaryMessage,
  type QueryLogsRequest,
  type QueryLogsResponse,
  type TailLogsRequest,
} from "./gen/toolhost/v1/log_service_pb.js";

/** The severity of a record, from least to most severe. */
export type LogLevelName = "DEBUG" | "INFO" | "WARNING" | "ERROR" | "CRITICAL";

const LEVELS: ReadonlyMap<LogLevelName, LogLevel> = new Map([
  ["DEBUG", LogLevel.DEBUG],
  ["INFO", LogLevel.INFO],
  ["WARNING", LogLevel.WARNING],
  ["ERROR", LogLevel.ERROR],
  ["CRITICAL", LogLevel.CRITICAL],
]);
const LEVEL_NAMES: ReadonlyMap<LogLevel, LogLevelName> = new Map([...LEVELS].map(([name, level]) => [level, name]));

/** Which records to return. Every filter that is given must match. */
export interface LogFilter {
  /** Only records at this level or above; "warning" is "WARNING". */
  level?: LogLevelName | Lowercase<LogLevelName>;
  /** Only records at or after this time. */
  since?: Date;
  /** Only records at or before this time. */
  until?: Date;
  /** Only records whose message contains this text, compared without regard to case. */
  text?: string;
  /** Only records of this trace (32 hex digits), for example a ToolResult's `traceId`. */
  traceId?: string;
  /** Only records from this reader: "memory", "file" or "database". */
  source?: string;
}

/** One log record, whichever reader found it. */
export interface LogEntry {
  /** When the record was made. */
  time: Date;
  /** Its severity. */
  level: LogLevelName;
  /** The logger that made it, for example "toolhost.audit". */
  logger: string;
  /** The message, redacted like every line the server logs; a traceback is part of it. */
  message: string;
  /** The W3C trace id of the span the record was made in; "" outside a trace. */
  traceId: string;
  /** The span id of that span; "" outside a trace. */
  spanId: string;
  /** The reader that found it: "memory", "file" or "database". */
  source: string;
  /** Everything else the record carried: extra fields (an audit record's "audit"), "exception", "file". */
  fields: JsonObject;
  /** The record as the server sent it. */
  raw: LogRecord;
}

/** What a page of records holds, and how complete it is. */
export interface LogSummary {
  /** How many records of the page have each level, by level name. */
  levelCounts: Record<string, number>;
  /** How many records of the page each reader found, by reader name. */
  sourceCounts: Record<string, number>;
  /** The readers asked. */
  sources: string[];
  /** The readers that could not answer: reader name -> why. */
  unavailable: Record<string, string>;
  /** Anything else worth knowing, such as a file reader that stopped before searching whole files. */
  notes: string[];
}

/** One page of queryLogsPage: records newest first; `nextPageToken` is "" on the last page. */
export interface LogPage {
  records: LogEntry[];
  nextPageToken: string;
  summary: LogSummary;
  /** The page as the server sent it. */
  raw: QueryLogsResponse;
}

export function logEntry(record: LogRecord): LogEntry {
  return {
    // A record without a time is not one the server makes; the epoch keeps `time` a Date all the same.
    time: record.time === undefined ? new Date(0) : timestampDate(record.time),
    // A level this client does not know yet (a newer server) reads as INFO, as in the Python client.
    level: LEVEL_NAMES.get(record.level) ?? "INFO",
    logger: record.logger,
    message: record.message,
    traceId: record.traceId,
    spanId: record.spanId,
    source: record.source,
    fields: record.fields ?? {},
    raw: record,
  };
}

export function logPage(message: QueryLogsResponse): LogPage {
  return {
    records: message.records.map(logEntry),
    nextPageToken: message.nextPageToken,
    summary: logSummary(message.summary),
    raw: message,
  };
}

export function queryLogsRequest(filter: LogFilter, pageSize: number, pageToken: string): QueryLogsRequest {
  return create(QueryLogsRequestSchema, { filter: filterMessage(filter), pageSize, pageToken });
}

export function tailLogsRequest(filter: Omit<LogFilter, "until">, backlog: number): TailLogsRequest {
  // A plain JavaScript caller may still pass `until`; a follow that stops matching at some time is not one.
  return create(TailLogsRequestSchema, { filter: filterMessage({ ...filter, until: undefined }), backlog });
}

function logSummary(message: LogSummaryMessage | undefined): LogSummary {
  return {
    levelCounts: { ...message?.levelCounts },
    sourceCounts: { ...message?.sourceCounts },
    sources: [...(message?.sources ?? [])],
    unavailable: Object.fromEntries((message?.unavailableReaders ?? []).map(({ source, reason }) => [source, reason])),
    notes: [...(message?.notes ?? [])],
  };
}

function filterMessage(filter: LogFilter): LogFilterMessage {
  return create(LogFilterSchema, {
    minLevel: levelValue(filter.level),
    text: filter.text ?? "",
    traceId: filter.traceId ?? "",
    source: filter.source ?? "",
    ...(filter.since === undefined ? {} : { since: timestamp(filter.since, "since") }),
    ...(filter.until === undefined ? {} : { until: timestamp(filter.until, "until") }),
  });
}

function levelValue(level: string | undefined): LogLevel {
  if (level === undefined || level === "") {
    return LogLevel.UNSPECIFIED;
  }
  // Plain JavaScript callers may pass anything; say what is allowed rather than send "any level".
  const value = typeof level === "string" ? LEVELS.get(level.toUpperCase() as LogLevelName) : undefined;
  if (value === undefined) {
    throw new TypeError(`level must be one of ${[...LEVELS.keys()].join(", ")}, not ${JSON.stringify(level)}`);
  }
  return value;
}

function timestamp(moment: Date, name: string): Timestamp {
  if (!(moment instanceof Date) || Number.isNaN(moment.getTime())) {
    throw new TypeError(`${name} must be a valid Date, not ${String(moment)}`);
  }
  return timestampFromDate(moment);
}
