/**
 * The errors the client throws: every gRPC error from toolhost becomes a ToolhostError, in one place
 * (`toToolhostError`), with the server's google.rpc details decoded.
 *
 *     ToolhostError                    any gRPC error (.code .codeName .reason .fieldViolations .retryDelayMs)
 *      ├── InvalidArgumentError        INVALID_ARGUMENT: bad arguments (see .fieldViolations) or a bad request
 *      ├── NotFoundError               NOT_FOUND: no tool by that name; the message suggests close names
 *      ├── DeadlineExceededError       DEADLINE_EXCEEDED: the call's deadline (timeoutMs) passed
 *      ├── ResourceExhaustedError      RESOURCE_EXHAUSTED: the server is at capacity; retry after .retryDelayMs
 *      ├── UnavailableError            UNAVAILABLE: the server cannot be reached, or is shutting down
 *      ├── PermissionDeniedError       PERMISSION_DENIED
 *      ├── UnauthenticatedError        UNAUTHENTICATED
 *      ├── FailedPreconditionError     FAILED_PRECONDITION: for example a forwarding loop between toolhosts
 *      ├── AlreadyExistsError          ALREADY_EXISTS: a user tool's slug is taken
 *      └── InternalError               INTERNAL: the server's log has the detail (the message names an incident)
 *
 * Other codes (CANCELLED when an AbortSignal fires, UNIMPLEMENTED, ...) throw the base ToolhostError.
 * A tool that ran and failed is not an error: the CallToolResponse has `success: false` and an `error`.
 */

import { Code, ConnectError } from "@connectrpc/connect";
import type { Duration } from "@bufbuild/protobuf/wkt";

import {
  BadRequestSchema,
  ErrorInfoSchema,
  RetryInfoSchema,
} from "./googleapis/google/rpc/error_details_pb.js";
import type { ErrorReason as ErrorReasonEnum } from "./gen/toolhost/v1/error_reason_pb.js";

export { Code };

/** The domain of every google.rpc.ErrorInfo toolhost sends. */
export const ERROR_DOMAIN = "toolhost";

/**
 * The `reason` values toolhost puts in google.rpc.ErrorInfo: the names of toolhost.v1.ErrorReason without the
 * "ERROR_REASON_" prefix, for example "TOOL_NOT_FOUND". Derived from the generated enum, so it follows the proto.
 */
export type ErrorReason = Exclude<keyof typeof ErrorReasonEnum, "UNSPECIFIED">;

/** The gRPC status code names, as gRPC writes them (`Code.NotFound` is "NOT_FOUND"). */
export type CodeName =
  | "OK" | "CANCELLED" | "UNKNOWN" | "INVALID_ARGUMENT" | "DEADLINE_EXCEEDED" | "NOT_FOUND" | "ALREADY_EXISTS"
  | "PERMISSION_DENIED" | "RESOURCE_EXHAUSTED" | "FAILED_PRECONDITION" | "ABORTED" | "OUT_OF_RANGE"
  | "UNIMPLEMENTED" | "INTERNAL" | "UNAVAILABLE" | "DATA_LOSS" | "UNAUTHENTICATED";

// Indexed by the numeric gRPC code, which connect's Code enum shares.
const CODE_NAMES: readonly CodeName[] = [
  "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
  "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
];

/** The gRPC name of a status code: `codeName(Code.NotFound)` is "NOT_FOUND". */
export function codeName(code: Code): CodeName {
  return CODE_NAMES[code] ?? "UNKNOWN";
}

/** One problem with a request: `field` is a JSON pointer into the arguments (for example "/text"). */
export interface FieldViolation {
  readonly field: string;
  readonly description: string;
}

/** What a ToolhostError carries besides its code and message. */
export interface ToolhostErrorDetails {
  reason?: string | undefined;
  metadata?: Readonly<Record<string, string>>;
  fieldViolations?: readonly FieldViolation[];
  retryDelayMs?: number | undefined;
  cause?: unknown;
}

/** A gRPC error from toolhost (or from the connection to it), decoded. */
export class ToolhostError extends Error {
  /** The gRPC status code (connect's Code enum has the gRPC numbers: Code.NotFound is 5). */
  readonly code: Code;
  /** The server's message alone, without the code in front. */
  readonly rawMessage: string;
  /**
   * The google.rpc.ErrorInfo reason the server sent (one of ErrorReason, for example "TOOL_NOT_FOUND"), or
   * undefined when the error did not come from toolhost: a local deadline, a refused connection, an abort.
   */
  readonly reason: string | undefined;
  /** The ErrorInfo's metadata (empty without one). */
  readonly metadata: Readonly<Record<string, string>>;
  /** The google.rpc.BadRequest field violations: one per problem with the arguments, `field` a JSON pointer. */
  readonly fieldViolations: readonly FieldViolation[];
  /** How long to wait before trying again, from google.rpc.RetryInfo (RESOURCE_EXHAUSTED), in milliseconds. */
  readonly retryDelayMs: number | undefined;

  constructor(code: Code, message: string, details: ToolhostErrorDetails = {}) {
    super(`${codeName(code)}: ${message}`, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.code = code;
    this.rawMessage = message;
    this.reason = details.reason;
    this.metadata = { ...details.metadata };
    this.fieldViolations = [...(details.fieldViolations ?? [])];
    this.retryDelayMs = details.retryDelayMs;
  }

  /** The gRPC name of `code`, for example "NOT_FOUND". */
  get codeName(): CodeName {
    return codeName(this.code);
  }
}

/** INVALID_ARGUMENT: the arguments do not fit the tool's schema (see fieldViolations), or the request is malformed. */
export class InvalidArgumentError extends ToolhostError {}
/** NOT_FOUND: no tool has the requested name (or the caller may not see it). */
export class NotFoundError extends ToolhostError {}
/** DEADLINE_EXCEEDED: the call's deadline passed before the tool finished. */
export class DeadlineExceededError extends ToolhostError {}
/** RESOURCE_EXHAUSTED: the server is over capacity; retryDelayMs says when to try again. */
export class ResourceExhaustedError extends ToolhostError {}
/**
 * UNAVAILABLE: the server cannot be reached, it is shutting down (reason SHUTTING_DOWN), or its database cannot be
 * used now (STORE_UNAVAILABLE: retry later; STORE_OUTCOME_UNKNOWN: read back before retrying).
 */
export class UnavailableError extends ToolhostError {}
/** PERMISSION_DENIED: the caller may not do this. */
export class PermissionDeniedError extends ToolhostError {}
/** UNAUTHENTICATED: the caller did not prove who it is. */
export class UnauthenticatedError extends ToolhostError {}
/** FAILED_PRECONDITION: for example a call forwarded between toolhosts in a loop. */
export class FailedPreconditionError extends ToolhostError {}
/** ALREADY_EXISTS: what the request would create exists already (a user tool's slug is another tool's). */
export class AlreadyExistsError extends ToolhostError {}
/** INTERNAL: the server failed in a way the caller cannot fix. */
export class InternalError extends ToolhostError {}

type ErrorClass = new (code: Code, message: string, details?: ToolhostErrorDetails) => ToolhostError;

const ERRORS_BY_CODE: ReadonlyMap<Code, ErrorClass> = new Map<Code, ErrorClass>([
  [Code.InvalidArgument, InvalidArgumentError],
  [Code.NotFound, NotFoundError],
  [Code.DeadlineExceeded, DeadlineExceededError],
  [Code.ResourceExhausted, ResourceExhaustedError],
  [Code.Unavailable, UnavailableError],
  [Code.PermissionDenied, PermissionDeniedError],
  [Code.Unauthenticated, UnauthenticatedError],
  [Code.FailedPrecondition, FailedPreconditionError],
  [Code.AlreadyExists, AlreadyExistsError],
  [Code.Internal, InternalError],
]);

/** The typed error for anything a call threw: a ConnectError with its details decoded, or anything else. */
export function toToolhostError(error: unknown): ToolhostError {
  if (error instanceof ToolhostError) {
    return error;
  }
  const connectError = ConnectError.from(error);
  const info = connectError.findDetails(ErrorInfoSchema)[0];
  const fieldViolations = connectError
    .findDetails(BadRequestSchema)
    .flatMap((badRequest) => badRequest.fieldViolations)
    .map(({ field, description }) => ({ field, description }));
  const retry = connectError.findDetails(RetryInfoSchema)[0];
  const ErrorType = ERRORS_BY_CODE.get(connectError.code) ?? ToolhostError;
  return new ErrorType(connectError.code, connectError.rawMessage, {
    reason: info?.reason,
    metadata: info?.metadata ?? {},
    fieldViolations,
    retryDelayMs: retry?.retryDelay === undefined ? undefined : durationMs(retry.retryDelay),
    cause: error,
  });
}

function durationMs(duration: Duration): number {
  return Number(duration.seconds) * 1000 + duration.nanos / 1e6;
}
