/**
 * queryLogs, queryLogsPage and tailLogs against a real server. Without an auth file every caller may read the
 * logs (auth.test.ts checks that only admins may when the server authenticates).
 *
 * The records come from tool calls: each call's audit record ("call tool=echo ... call_id=<id> ...") is logged
 * before its response is sent, so it is in the server's memory reader by the time callTool resolves.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { Interceptor } from "@connectrpc/connect";

import {
  Code,
  createClient,
  ToolhostError,
  type JsonObject,
  type LogEntry,
  type ToolhostClient,
  type ToolResult,
} from "../src/index.js";
import { collect, rejection } from "./helpers.js";
import { ServerProcess } from "./server.js";

/** The call id an audit record is about. */
function auditCallId(entry: LogEntry): unknown {
  return (entry.fields["audit"] as JsonObject | undefined)?.["call_id"];
}

describe("the log service", () => {
  const server = new ServerProcess();
  let client: ToolhostClient;
  let queries = 0;
  const countQueries: Interceptor = (next) => async (request) => {
    if (request.method.name === "QueryLogs") {
      queries += 1;
    }
    return next(request);
  };

  before(async () => {
    // An unreadable catalog file: the server logs an ERROR record about it at start.
    server.writeTool("broken", "name: broken\nrunner: {type: nonsense}\n");
    await server.start();
    client = createClient(server.target, { timeoutMs: 20_000, interceptors: [countQueries] });
  });

  after(async () => {
    client?.close();
    await server.stop();
  });

  test("queryLogs walks every page, newest first; queryLogsPage gives one page with its summary", async () => {
    let last: ToolResult | undefined;
    for (let i = 0; i < 5; i++) {
      last = await client.callTool("echo", { text: "paging" }, { callId: `ts-page-check-${i}` });
    }
    assert.ok(last?.timestamp !== undefined);
    // The audit record is made as the call ends; the Date has whole milliseconds.
    const lastStarted = Math.floor(timestampMs(last.timestamp));

    const first = await client.queryLogsPage({ text: "ts-page-check", pageSize: 2 });
    assert.deepEqual(first.records.map(auditCallId), ["ts-page-check-4", "ts-page-check-3"]);
    assert.notEqual(first.nextPageToken, "");
    assert.deepEqual(first.summary.levelCounts, { INFO: 2 });
    assert.deepEqual(first.summary.sourceCounts, { memory: 2 });
    assert.ok(first.summary.sources.includes("memory"), String(first.summary.sources));
    assert.equal(first.raw.$typeName, "toolhost.v1.QueryLogsResponse");

    const second = await client.queryLogsPage({ text: "ts-page-check", pageSize: 2, pageToken: first.nextPageToken });
    assert.deepEqual(second.records.map(auditCallId), ["ts-page-check-2", "ts-page-check-1"]);

    queries = 0;
    const entries = await collect(client.queryLogs({ text: "TS-PAGE-CHECK", pageSize: 2 }));
    assert.deepEqual(entries.map(auditCallId), [4, 3, 2, 1, 0].map((i) => `ts-page-check-${i}`));
    assert.equal(queries, 3, "one QueryLogs request per page");

    const entry = entries[0];
    assert.ok(entry !== undefined);
    assert.ok(entry.time instanceof Date);
    assert.ok(entry.raw.time !== undefined);
    assert.equal(entry.time.getTime(), Math.floor(timestampMs(entry.raw.time)));
    assert.ok(entry.time.getTime() >= lastStarted && entry.time <= new Date(), entry.time.toISOString());
    for (let i = 1; i < entries.length; i++) {
      assert.ok((entries[i - 1]?.time ?? 0) >= (entries[i]?.time ?? 0), "newest first");
    }
    assert.equal(entry.level, "INFO");
    assert.equal(entry.logger, "toolhost.audit");
    assert.equal(entry.source, "memory");
    assert.match(entry.message, /call tool=echo .*call_id=ts-page-check-4/);
    // fields is plain JSON, whatever depth.
    assert.deepEqual((entry.fields["audit"] as JsonObject)["argument_keys"], ["text"]);
    assert.equal(entry.raw.$typeName, "toolhost.v1.LogRecord");
  });

  test("the filter is sent: level, since, until and source", async () => {
    await client.callTool("echo", { text: "filtering" }, { callId: "ts-filter-check" });
    const only = { text: "ts-filter-check" };
    assert.equal((await collect(client.queryLogs(only))).length, 1);
    assert.equal((await collect(client.queryLogs({ ...only, level: "INFO" }))).length, 1);
    assert.equal((await collect(client.queryLogs({ ...only, level: "WARNING" }))).length, 0);
    assert.equal((await collect(client.queryLogs({ ...only, since: new Date(Date.now() - 60_000) }))).length, 1);
    assert.equal((await collect(client.queryLogs({ ...only, since: new Date(Date.now() + 60_000) }))).length, 0);
    assert.equal((await collect(client.queryLogs({ ...only, until: new Date(Date.now() + 60_000) }))).length, 1);
    assert.equal((await collect(client.queryLogs({ ...only, until: new Date(Date.now() - 60_000) }))).length, 0);
    assert.equal((await collect(client.queryLogs({ ...only, source: "memory" }))).length, 1);

    // The broken catalog file's record: ERROR and above keeps it and leaves out every INFO record.
    const errors = await collect(client.queryLogs({ level: "error" }));
    assert.ok(errors.some((entry) => entry.level === "ERROR" && entry.message.includes("broken.yaml")),
      errors.map((entry) => entry.message).join("\n"));
    assert.ok(errors.every((entry) => entry.level === "ERROR" || entry.level === "CRITICAL"));
  });

  test("a level or date the server cannot take is a TypeError before any call", async () => {
    queries = 0;
    await assert.rejects(client.queryLogsPage({ level: "LOUD" as never }), TypeError);
    await assert.rejects(client.queryLogsPage({ since: new Date(Number.NaN) }), TypeError);
    assert.throws(() => client.tailLogs({ level: "LOUD" as never }), TypeError);
    assert.equal(queries, 0);
  });

  test("tailLogs sends the backlog, then a record made after it started", { timeout: 15_000 }, async () => {
    await client.callTool("echo", { text: "before" }, { callId: "ts-tail-check-before" });
    const controller = new AbortController();
    const tail = client.tailLogs({ text: "ts-tail-check", backlog: 5, signal: controller.signal });
    try {
      // The backlog arrives once the server has started following: from then on, new records are sent.
      const backlog = await tail.next();
      assert.equal(backlog.done, false);
      assert.equal(auditCallId(backlog.value as LogEntry), "ts-tail-check-before");

      await client.callTool("echo", { text: "after" }, { callId: "ts-tail-check-after" });
      const followed = await tail.next();
      assert.equal(followed.done, false);
      const entry = followed.value as LogEntry;
      assert.equal(auditCallId(entry), "ts-tail-check-after");
      assert.equal(entry.level, "INFO");
      assert.ok(entry.time instanceof Date && entry.time >= (backlog.value as LogEntry).time);
      assert.match(entry.message, /call_id=ts-tail-check-after/);
    } finally {
      controller.abort();
    }
  });

  test("aborting its signal ends tailLogs with CANCELLED while it waits for a record", { timeout: 15_000 },
    async () => {
      await client.callTool("echo", { text: "abort" }, { callId: "ts-tail-abort" });
      const controller = new AbortController();
      const tail = client.tailLogs({ text: "ts-tail-abort", backlog: 1, signal: controller.signal });
      assert.equal(auditCallId((await tail.next()).value as LogEntry), "ts-tail-abort", "the tail is following");
      const waiting = tail.next();
      controller.abort();
      const error = await rejection(waiting);
      assert.ok(error instanceof ToolhostError, String(error));
      assert.equal(error.code, Code.Canceled);
      assert.deepEqual(await tail.next(), { done: true, value: undefined }, "the tail stays ended");
    });

  test("close() ends a tail's loop quietly", { timeout: 15_000 }, async () => {
    await client.callTool("echo", { text: "close" }, { callId: "ts-tail-close" });
    const own = createClient(server.target);
    const received: LogEntry[] = [];
    for await (const entry of own.tailLogs({ text: "ts-tail-close", backlog: 1 })) {
      received.push(entry);
      own.close();
    }
    assert.deepEqual(received.map(auditCallId), ["ts-tail-close"]);
  });
});
