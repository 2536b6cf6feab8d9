// The official MCP TypeScript SDK's client, driven one JSON line at a time by a Python test
// (tests/helpers/mcp_typescript.py); it reports what the SDK returned or threw, and the test decides.
//
//   node --import ./sdk_from_tools.mjs driver.mjs http URL          (MCP_BEARER_TOKEN: the Authorization bearer)
//   node --import ./sdk_from_tools.mjs driver.mjs stdio COMMAND ARG...   (the client starts COMMAND itself)
//
// Requests on stdin, each handled as soon as it arrives, so calls may overlap:
//   {"id": 1, "op": "connect"}
//   {"id": 2, "op": "list", "cursor": "..."}                       one page of tools/list
//   {"id": 3, "op": "call", "name": "echo", "arguments": {...}, "progress": true}
//   {"id": 4, "op": "abort", "call": 3, "reason": "..."}          aborts call 3 through its AbortSignal
//   {"id": 5, "op": "close"}                                       closes the client (and a stdio child)
// Lines on stdout: one reply per request, {"id", "ok": true, "result"} or {"id", "ok": false, "error"}, and
// events as they happen: {"event": "progress", "call": 3, "progress": {...}}, {"event": "tools_list_changed"},
// {"event": "transport_error", "message"}. A stdio child's stderr goes to this process's stderr.
import { createInterface } from "node:readline";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, ...target] = process.argv.slice(2);

function emit(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

// What the Python test needs to tell errors apart: the class, the JSON-RPC or HTTP code, the message, the data.
function describe(error) {
  return {
    name: error?.name ?? typeof error,
    type: error?.constructor?.name ?? typeof error,
    code: error?.code ?? null,
    message: error?.message ?? String(error),
    data: error?.data ?? null,
  };
}

let negotiatedVersion = null;
let transport;
if (mode === "http") {
  const token = process.env.MCP_BEARER_TOKEN;
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target[0]), { requestInit: { headers } });
} else if (mode === "stdio") {
  // The SDK passes a child only a few variables (HOME, PATH, ...) unless told otherwise: the test decides.
  transport = new StdioClientTransport({ command: target[0], args: target.slice(1), env: { ...process.env },
                                         stderr: "pipe" });
  // Passed on as a host logs it: the test shows it with any failure.
  transport.stderr?.on("data", (chunk) => process.stderr.write(chunk));
  // Only HTTP transports are told the protocol version the handshake settled on; note it for stdio too.
  transport.setProtocolVersion = (version) => { negotiatedVersion = version; };
} else {
  process.stderr.write("usage: driver.mjs http URL | driver.mjs stdio COMMAND [ARG...]\n");
  process.exit(2);
}
transport.onerror = (error) => emit({ event: "transport_error", message: error?.message ?? String(error) });

// A host's way to hear of list changes: it applies only when the server advertises tools.listChanged.
const client = new Client({ name: "toolhost-ts-test", version: "1.0.0" }, {
  listChanged: { tools: { autoRefresh: false, onChanged: () => emit({ event: "tools_list_changed" }) } },
});

const aborts = new Map(); // call request id -> its AbortController

const operations = {
  async connect() {
    await client.connect(transport);
    return {
      protocolVersion: transport.protocolVersion ?? negotiatedVersion,
      sessionId: transport.sessionId ?? null,
      serverInfo: client.getServerVersion() ?? null,
      capabilities: client.getServerCapabilities() ?? null,
    };
  },
  async list(request) {
    return client.listTools(request.cursor ? { cursor: request.cursor } : {});
  },
  async call(request) {
    const controller = new AbortController();
    aborts.set(request.id, controller);
    const options = { signal: controller.signal };
    if (request.progress) {
      options.onprogress = (progress) => emit({ event: "progress", call: request.id, progress });
    }
    try {
      return await client.callTool({ name: request.name, arguments: request.arguments }, undefined, options);
    } finally {
      aborts.delete(request.id);
    }
  },
  async abort(request) {
    const controller = aborts.get(request.call);
    if (controller === undefined) {
      throw new Error(`no call ${request.call} in flight to abort`);
    }
    controller.abort(request.reason ?? "aborted by the test");
    return {};
  },
  async close() {
    await client.close();
    return {};
  },
};

async function handle(line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch (error) {
    emit({ id: null, ok: false, error: describe(error) });
    return;
  }
  const operation = operations[request.op];
  if (operation === undefined) {
    emit({ id: request.id, ok: false, error: describe(new Error(`unknown op ${JSON.stringify(request.op)}`)) });
    return;
  }
  try {
    emit({ id: request.id, ok: true, result: await operation(request) });
  } catch (error) {
    emit({ id: request.id, ok: false, error: describe(error) });
  }
}

const pending = new Set();
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line.trim() === "") continue;
  const handled = handle(line);
  pending.add(handled);
  handled.finally(() => pending.delete(handled));
}
// stdin closed: finish what was asked, then let the client go (a stdio child is stopped with it).
await Promise.allSettled(pending);
await client.close();
