/** The client against a real toolhost server (a child process, see server.ts) with a catalog of its own. */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, test } from "node:test";

import type { Interceptor } from "@connectrpc/connect";

import {
  Code,
  createClient,
  DeadlineExceededError,
  InvalidArgumentError,
  NotFoundError,
  OutputStream,
  ToolhostError,
  UnavailableError,
  type StreamEvent,
  type ToolhostClient,
  type WatchToolsResponse,
} from "../src/index.js";
import { collect, rejection } from "./helpers.js";
import { ServerProcess } from "./server.js";

const PAGE_TOOLS = ["page_a", "page_b", "page_c", "page_d", "page_e"];

function writeCatalog(server: ServerProcess): void {
  for (const name of PAGE_TOOLS) {
    server.writeTool(name, `name: ${name}\ndescription: Greets, for paging.\ncategory: paging\n` +
      "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n" +
      "parameters:\n  - {name: name, type: string, required: true}\n");
  }
  server.writeTool("nap", "name: nap\ndescription: Sleeps for `delay` seconds.\n" +
    "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:nap'}\n" +
    "parameters: [{name: delay, type: number, required: true}]\n");
  server.writeTool("to_text", "name: to_text\ndescription: Writes an integer as text.\n" +
    "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:to_text'}\n" +
    "parameters: [{name: object, type: integer, required: true}]\n");
  server.writeTool("lines", "name: lines\ndescription: Prints two lines, a moment apart.\n" +
    'runner: {type: script, script: "#!/bin/sh\\necho one\\nsleep 0.2\\necho two\\n"}\n');
  server.writeTool("fails", "name: fails\ndescription: Exits with status 3.\n" +
    'runner: {type: script, script: "#!/bin/sh\\necho broken >&2\\nexit 3\\n"}\n');
  // Writes its marker file a second after it starts, unless it was stopped first. It runs as the server's
  // user so that it may write in the test's scratch directory even when the server runs as root.
  server.writeTool("slow", "name: slow\ndescription: Starts, waits, then touches a file.\n" +
    "runner: {type: script, run_as_server_user: true, " +
    'script: "#!/bin/sh\\necho started\\nsleep 1\\ntouch \\"$TOOL_ARG_MARKER\\"\\necho done\\n"}\n' +
    "parameters: [{name: marker, type: string, required: true}]\n");
}

const decoder = new TextDecoder();

describe("ToolhostClient against a real server", () => {
  const server = new ServerProcess();
  let client: ToolhostClient;
  const listRequests: number[] = [];
  const countLists: Interceptor = (next) => async (request) => {
    if (request.method.name === "ListTools") {
      listRequests.push(Date.now());
    }
    return next(request);
  };

  before(async () => {
    writeCatalog(server);
    await server.start();
    client = createClient(server.target, { timeoutMs: 20_000, interceptors: [countLists] });
  });

  after(async () => {
    client?.close();
    await server.stop();
  });

  test("listTools walks every page and yields each tool once, sorted", async () => {
    const everything = await client.listToolsPage({ pageSize: 1000 });
    const expected = everything.tools.map((tool) => tool.name);
    assert.ok(expected.length >= PAGE_TOOLS.length + 5, `too few tools to page through: ${expected}`);
    for (const name of [...PAGE_TOOLS, "echo", "nap", "lines"]) {
      assert.ok(expected.includes(name), `${name} is not served: ${expected}`);
    }

    const first = await client.listToolsPage({ pageSize: 2 });
    assert.equal(first.tools.length, 2);
    assert.notEqual(first.nextPageToken, "");
    assert.equal(first.totalSize, expected.length);

    listRequests.length = 0;
    const names = [];
    for await (const tool of client.listTools({ pageSize: 2 })) {
      names.push(tool.name);
    }
    assert.deepEqual(names, expected);
    assert.deepEqual([...names].sort(), names);
    assert.equal(new Set(names).size, names.length);
    assert.equal(listRequests.length, Math.ceil(expected.length / 2), "one ListTools request per page");
  });

  test("listTools filters, and the views differ", async () => {
    const paging = await collect(client.listTools({ category: "paging", pageSize: 2 }));
    assert.deepEqual(paging.map((tool) => tool.name), PAGE_TOOLS);
    assert.equal(paging[0]?.inputSchema, undefined, "the basic view has no schemas");

    const full = await collect(client.listTools({ category: "paging", view: "full" }));
    assert.deepEqual(full[0]?.inputSchema?.["required"], ["name"]);
  });

  test("getTool returns the full view; an unknown name is NOT_FOUND", async () => {
    const echo = await client.getTool("echo");
    assert.equal(echo.name, "echo");
    assert.deepEqual(echo.inputSchema?.["required"], ["text"]);
    assert.deepEqual(echo.parameters.map((parameter) => parameter.name).includes("text"), true);

    const error = await rejection(client.getTool("ecko"));
    assert.ok(error instanceof NotFoundError, String(error));
    assert.equal(error.reason, "TOOL_NOT_FOUND");
    assert.match(error.rawMessage, /echo/, "the message suggests the close name");
  });

  test("callTool returns the tool's result", async () => {
    const result = await client.callTool("echo", { text: "hello" }, { callId: "ts-call-1" });
    assert.equal(result.success, true);
    assert.equal(result.output, "hello");
    assert.equal(result.tool, "echo");
    assert.equal(result.callId, "ts-call-1");
    assert.equal(result.error, undefined);
    assert.ok(result.generation >= 1n);
  });

  test("callTool sends integers beyond 2**53 exactly", async () => {
    const big = 2n ** 64n + 1n;
    const result = await client.callTool("to_text", { object: big });
    assert.equal(result.success, true, result.error?.message);
    assert.equal(result.output, big.toString());
  });

  test("a tool that ran and failed is a result with success false, not an error", async () => {
    const result = await client.callTool("fails");
    assert.equal(result.success, false);
    assert.equal(result.error?.code, "NON_ZERO_EXIT");
    assert.equal(result.exitCode, 3);
    assert.equal(result.stderr, "broken\n");
  });

  test("invalid arguments are INVALID_ARGUMENT with field violations", async () => {
    const error = await rejection(client.callTool("echo", {}));
    assert.ok(error instanceof InvalidArgumentError, String(error));
    assert.equal(error.code, Code.InvalidArgument);
    assert.equal(error.codeName, "INVALID_ARGUMENT");
    assert.equal(error.reason, "INVALID_ARGUMENTS");
    assert.equal(error.metadata !== undefined, true);
    assert.deepEqual(error.fieldViolations.map((violation) => violation.field), ["/text"]);
    assert.ok(error.fieldViolations[0]?.description, "each violation says what is wrong");
  });

  test("an unknown tool is NOT_FOUND with reason TOOL_NOT_FOUND", async () => {
    const error = await rejection(client.callTool("no_such_tool", { text: "hi" }));
    assert.ok(error instanceof NotFoundError, String(error));
    assert.ok(error instanceof ToolhostError);
    assert.equal(error.code, Code.NotFound);
    assert.equal(error.reason, "TOOL_NOT_FOUND");
    assert.match(error.message, /^NOT_FOUND: /);
  });

  test("a call past its timeoutMs is DEADLINE_EXCEEDED", async () => {
    const started = Date.now();
    const error = await rejection(client.callTool("nap", { delay: 5 }, { timeoutMs: 300 }));
    assert.ok(error instanceof DeadlineExceededError, String(error));
    assert.equal(error.code, Code.DeadlineExceeded);
    assert.ok(Date.now() - started < 4000, "the deadline ended the call, not the tool");
  });

  test("aborting a call's signal rejects it with CANCELLED", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const started = Date.now();
    const error = await rejection(client.callTool("nap", { delay: 5 }, { signal: controller.signal }));
    assert.ok(error instanceof ToolhostError, String(error));
    assert.equal(error.code, Code.Canceled);
    assert.equal(error.reason, undefined);
    assert.ok(Date.now() - started < 4000);
  });

  test("streamCallTool yields the output chunks in order, then the result", async () => {
    const events: StreamEvent[] = await collect(client.streamCallTool("lines", {}, { callId: "ts-stream-1" }));
    const last = events.at(-1);
    assert.equal(last?.case, "result");
    assert.equal(last.value.success, true);
    assert.equal(last.value.output, "one\ntwo\n");
    assert.equal(last.value.callId, "ts-stream-1");
    const chunks = events.slice(0, -1);
    assert.ok(chunks.length >= 2, "the two lines, a moment apart, come as separate chunks");
    let stdout = "";
    for (const event of chunks) {
      assert.equal(event.case, "output", `only output before the result, got ${event.case}`);
      if (event.case === "output") {
        assert.equal(event.value.stream, OutputStream.STDOUT);
        stdout += decoder.decode(event.value.data);
      }
    }
    assert.equal(stdout, "one\ntwo\n");
  });

  test("streamCallTool of an unknown tool throws from the iteration", async () => {
    const error = await rejection(collect(client.streamCallTool("no_such_tool")));
    assert.ok(error instanceof NotFoundError, String(error));
    assert.equal(error.reason, "TOOL_NOT_FOUND");
  });

  test("aborting a stream's signal, leaving its loop or its deadline stops the tool on the server", async () => {
    const abortedMarker = join(server.scratchDir, "aborted-marker");
    const brokenMarker = join(server.scratchDir, "broken-marker");
    const deadlineMarker = join(server.scratchDir, "deadline-marker");

    const aborting = (async () => {
      const controller = new AbortController();
      const events: StreamEvent[] = [];
      const error = await rejection((async () => {
        for await (const event of client.streamCallTool("slow", { marker: abortedMarker },
          { signal: controller.signal })) {
          events.push(event);
          controller.abort();
        }
      })());
      assert.ok(error instanceof ToolhostError, String(error));
      assert.equal(error.code, Code.Canceled);
      assert.equal(events[0]?.case, "output");
    })();

    const breaking = (async () => {
      let first: StreamEvent | undefined;
      for await (const event of client.streamCallTool("slow", { marker: brokenMarker })) {
        first = event;
        break;
      }
      assert.equal(first?.case, "output");
    })();

    const timingOut = (async () => {
      const events: StreamEvent[] = [];
      const error = await rejection((async () => {
        for await (const event of client.streamCallTool("slow", { marker: deadlineMarker }, { timeoutMs: 400 })) {
          events.push(event);
        }
      })());
      assert.ok(error instanceof DeadlineExceededError, String(error));
      assert.equal(events[0]?.case, "output");
    })();

    await Promise.all([aborting, breaking, timingOut]);
    // The script touches its marker a second after it starts; give it twice that.
    await sleep(2000);
    assert.equal(existsSync(abortedMarker), false, "the aborted tool kept running");
    assert.equal(existsSync(brokenMarker), false, "the tool of the loop left early kept running");
    assert.equal(existsSync(deadlineMarker), false, "the tool past its deadline kept running");

    // And a stream left alone does write it: the test above can fail.
    const events = await collect(client.streamCallTool("slow", { marker: abortedMarker }));
    assert.equal(events.at(-1)?.case, "result");
    assert.equal(existsSync(abortedMarker), true);
  });

  test("reload picks up a new catalog file", async () => {
    server.writeTool("added_by_reload", "name: added_by_reload\ndescription: Appears after a reload.\n" +
      "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n" +
      "parameters:\n  - {name: name, type: string, required: true}\n");
    assert.equal((await rejection(client.getTool("added_by_reload"))) instanceof NotFoundError, true);
    const reloaded = await client.reload();
    assert.equal(reloaded.success, true);
    assert.deepEqual(reloaded.added, ["added_by_reload"]);
    assert.ok(reloaded.tools.includes("added_by_reload"));
    assert.deepEqual(reloaded.errors, []);
    assert.equal((await client.getTool("added_by_reload")).name, "added_by_reload");
  });

  test("watchTools lists the tools first, then reports what a reload added", async () => {
    const controller = new AbortController();
    const watch = client.watchTools({ signal: controller.signal });
    const first = await watch.next();
    assert.equal(first.done, false);
    const current = first.value as WatchToolsResponse;
    assert.ok(current.added.includes("echo"));
    assert.equal(current.count, current.added.length);

    server.writeTool("added_for_watch", "name: added_for_watch\ndescription: Appears in a watch event.\n" +
      "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n" +
      "parameters:\n  - {name: name, type: string, required: true}\n");
    const reloaded = await client.reload();
    const second = await watch.next();
    assert.equal(second.done, false);
    const change = second.value as WatchToolsResponse;
    assert.deepEqual(change.added, ["added_for_watch"]);
    assert.equal(change.generation, reloaded.generation);
    assert.ok(change.generation > current.generation);

    controller.abort();
    const error = await rejection(watch.next());
    assert.ok(error instanceof ToolhostError && error.code === Code.Canceled, String(error));
  });

  test("close() ends a watch quietly", async () => {
    const own = createClient(server.target);
    const events: WatchToolsResponse[] = [];
    const watching = (async () => {
      for await (const event of own.watchTools()) {
        events.push(event);
      }
    })();
    while (events.length === 0) {
      await sleep(20);
    }
    own.close();
    await watching;
    assert.equal(events.length, 1);
  });

  test("the unix socket serves the same tools", async () => {
    const local = createClient(`unix:${server.unixSocket}`, { timeoutMs: 10_000 });
    try {
      const result = await local.callTool("echo", { text: "over a socket" });
      assert.equal(result.output, "over a socket");
    } finally {
      local.close();
    }
  });

  test("a server that cannot be reached is UNAVAILABLE, without a reason", async () => {
    const stopped = createClient("127.0.0.1:1", { timeoutMs: 5000 });
    try {
      const error = await rejection(stopped.reload());
      assert.ok(error instanceof UnavailableError, String(error));
      assert.equal(error.reason, undefined);
    } finally {
      stopped.close();
    }
  });
});
