/**
 * How a client reaches the server: the target (host:port or a unix socket), TLS, client certificates and the
 * bearer token.
 *
 * A bearer token is as good as a password to whoever reads it, so it is only sent over TLS; over plaintext
 * only to this machine (a loopback address or a unix socket), and only when the caller says so with
 * `allowInsecureToken`.
 */

import * as net from "node:net";
import type * as http2 from "node:http2";

/** PEM text or bytes, as node:tls takes them. */
export type Pem = string | Uint8Array;

/** How to secure the connection; part of ClientOptions. */
export interface SecurityOptions {
  /** Connect with TLS, verifying the server with Node's CAs (or `ca`). Implied by `ca`, `cert` and `key`. */
  tls?: boolean;
  /** PEM CA certificates to verify the server with, instead of Node's bundled CAs. */
  ca?: Pem | Pem[];
  /** A PEM client certificate chain for mTLS; goes with `key`. */
  cert?: Pem;
  /** The PEM private key of `cert`. */
  key?: Pem;
  /** Check the server's certificate for this name (and send it as SNI) instead of the target's host. */
  serverName?: string;
  /** A bearer token sent as `authorization: Bearer <token>` with every call; see allowInsecureToken. */
  token?: string;
  /** Send `token` over plaintext too, which is allowed only to a loopback or unix socket target. */
  allowInsecureToken?: boolean;
}

/** What createGrpcTransport needs to reach the server, and the headers every call carries. */
export interface Connection {
  baseUrl: string;
  nodeOptions: http2.ClientSessionOptions | http2.SecureClientSessionOptions;
  headers: Record<string, string>;
}

/** A parsed target: a TCP host and port, or a unix socket path. */
type Endpoint = { kind: "tcp"; host: string; port: number } | { kind: "unix"; path: string };

/** Where `target` leads and how to get there securely; throws TypeError when the options do not fit together. */
export function connection(target: string, options: SecurityOptions): Connection {
  const endpoint = parseTarget(target);
  const secure = Boolean(options.tls) || options.ca !== undefined || options.cert !== undefined ||
    options.key !== undefined;
  if ((options.cert === undefined) !== (options.key === undefined)) {
    throw new TypeError("cert and key go together: give both or neither");
  }
  if (options.serverName !== undefined && !secure) {
    throw new TypeError("serverName only applies to TLS: also pass tls: true or ca");
  }
  if (secure && endpoint.kind === "unix") {
    throw new TypeError(`${target} is a unix socket, which toolhost serves in plaintext: leave out the TLS options`);
  }
  const headers: Record<string, string> = {};
  if (options.token !== undefined) {
    checkTokenTransport(target, options.token, secure, Boolean(options.allowInsecureToken));
    headers["authorization"] = `Bearer ${options.token}`;
  }
  if (endpoint.kind === "unix") {
    const path = endpoint.path;
    return {
      // The authority of every request; the bytes go to the socket that createConnection opens.
      baseUrl: "http://localhost",
      nodeOptions: { createConnection: () => net.connect({ path }) },
      headers,
    };
  }
  const host = net.isIPv6(endpoint.host) ? `[${endpoint.host}]` : endpoint.host;
  const nodeOptions: http2.SecureClientSessionOptions = {};
  if (secure) {
    if (options.ca !== undefined) nodeOptions.ca = pemList(options.ca);
    if (options.cert !== undefined) nodeOptions.cert = pem(options.cert);
    if (options.key !== undefined) nodeOptions.key = pem(options.key);
    if (options.serverName !== undefined) nodeOptions.servername = options.serverName;
  }
  return { baseUrl: `${secure ? "https" : "http"}://${host}:${endpoint.port}`, nodeOptions, headers };
}

/** Whether a target only reaches this machine: a unix socket, "localhost" or a loopback address. */
export function isLocalTarget(target: string): boolean {
  let endpoint: Endpoint;
  try {
    endpoint = parseTarget(target);
  } catch {
    return false;
  }
  if (endpoint.kind === "unix") {
    return true;
  }
  const host = endpoint.host.toLowerCase();
  if (host === "localhost") {
    return true;
  }
  const family = net.isIPv4(host) ? "ipv4" : net.isIPv6(host) ? "ipv6" : undefined;
  return family !== undefined && LOOPBACK.check(host, family);
}

// 127.0.0.0/8 (IPv4-mapped IPv6 addresses included) and ::1, however written.
const LOOPBACK = new net.BlockList();
LOOPBACK.addSubnet("127.0.0.0", 8, "ipv4");
LOOPBACK.addAddress("::1", "ipv6");

/**
 * "host:port", "[v6]:port", "dns:///host:port", or "unix:/path" / "unix:///path" (gRPC's target names);
 * TypeError for anything else, such as a URL.
 */
function parseTarget(target: string): Endpoint {
  if (target.startsWith("unix:")) {
    const path = target.startsWith("unix://") ? target.slice("unix://".length) : target.slice("unix:".length);
    if (!path) {
      throw new TypeError(`target ${target} names no socket path`);
    }
    return { kind: "unix", path };
  }
  const address = target.startsWith("dns:///") ? target.slice("dns:///".length) : target;
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:/[\]\s]+)):(\d{1,5})$/.exec(address);
  const port = match ? Number(match[3]) : NaN;
  if (!match || port < 1 || port > 65535) {
    throw new TypeError(`target must be host:port, [ipv6]:port or unix:/path/to/socket, not ${JSON.stringify(target)}` +
      " (for TLS, pass tls: true rather than an https:// URL)");
  }
  return { kind: "tcp", host: match[1] ?? match[2] ?? "", port };
}

function checkTokenTransport(target: string, token: string, secure: boolean, allowInsecureToken: boolean): void {
  if (!token || /\s/.test(token)) {
    throw new TypeError("token must be non-empty and hold no spaces or newlines (trim a token read from a file)");
  }
  if (secure) {
    return;
  }
  if (!isLocalTarget(target)) {
    throw new TypeError(`refusing to send the token to ${target} in plaintext, where anyone on the path can read ` +
      "and reuse it: connect with TLS (tls: true, or ca)");
  }
  if (!allowInsecureToken) {
    throw new TypeError(`${target} is on this machine, but the connection is plaintext: pass ` +
      "allowInsecureToken: true to send the token over it anyway, or connect with TLS");
  }
}

function pem(source: Pem): string | Buffer {
  return typeof source === "string" ? source : Buffer.from(source);
}

function pemList(source: Pem | Pem[]): (string | Buffer)[] {
  return (Array.isArray(source) ? source : [source]).map(pem);
}
