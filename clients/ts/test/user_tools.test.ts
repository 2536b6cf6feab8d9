/** The client's UserToolService methods against a real server (a child process, see server.ts). */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  AlreadyExistsError,
  ConflictType,
  createClient,
  FailedPreconditionError,
  NotFoundError,
  type ToolhostClient,
} from "../src/index.js";
import { collect, rejection } from "./helpers.js";
import { ServerProcess } from "./server.js";

const SCHEMA = { type: "object", properties: { who: { type: "string" } }, required: ["who"] };

describe("user tools against a real server", () => {
  const server = new ServerProcess();
  let client: ToolhostClient;

  before(async () => {
    await server.start();
    client = createClient(server.target, { timeoutMs: 20_000 });
  });

  after(async () => {
    client?.close();
    await server.stop();
  });

  test("a user tool from creation to a restored version", async () => {
    const created = await client.createUserTool({
      slug: "ts_greeter", description: "Greets.", script: 'echo "hi $TOOL_ARG_WHO"', inputSchema: SCHEMA,
      tags: ["ts"],
    });
    assert.equal(created.version, 1n);
    assert.equal(created.enabled, true);
    assert.equal(created.category, "custom");
    assert.deepEqual(created.inputSchema, SCHEMA);
    assert.equal((await client.callTool("ts_greeter", { who: "node" })).output, "hi node\n");

    const taken = await rejection(client.createUserTool({ slug: "echo", description: "x", script: "true" }));
    assert.ok(taken instanceof AlreadyExistsError, String(taken));
    assert.equal(taken.reason, "ALREADY_EXISTS");

    const updated = await client.updateUserTool(
      { slug: "ts_greeter", script: 'echo "bye $TOOL_ARG_WHO"', description: "not in the mask" }, ["script"]);
    assert.equal(updated.version, 2n);
    assert.equal(updated.description, "Greets.");
    assert.equal((await client.callTool("ts_greeter", { who: "node" })).output, "bye node\n");

    const versions = await collect(client.listUserToolVersions("ts_greeter", { pageSize: 1 }));
    assert.deepEqual(versions.map((version) => [version.version, version.change]), [[2n, "update"], [1n, "create"]]);

    const restored = await client.restoreUserToolVersion("ts_greeter", 1);
    assert.equal(restored.version, 3n);
    assert.equal(restored.script, created.script);
    const missing = await rejection(client.restoreUserToolVersion("ts_greeter", 42n));
    assert.ok(missing instanceof NotFoundError, String(missing));
    assert.equal(missing.reason, "RESOURCE_NOT_FOUND");

    assert.equal((await client.getUserTool("ts_greeter")).version, 3n);
    const slugs = (await collect(client.listUserTools())).map((tool) => tool.slug);
    assert.ok(slugs.includes("ts_greeter"), String(slugs));
    assert.equal((await client.deleteUserTool("ts_greeter")).version, 3n);
    assert.ok(await rejection(client.getUserTool("ts_greeter")) instanceof NotFoundError);
  });

  test("an incompatible conflict refuses enabling; an equivalent one is reported", async () => {
    for (const slug of ["ts_left", "ts_right"]) {
      await client.createUserTool({ slug, description: "x", script: "echo x" });
    }
    const stored = await client.setToolConflict("ts_right", "ts_left", "incompatible", "keep one");
    assert.deepEqual([stored.toolA, stored.toolB, stored.type], ["ts_left", "ts_right", ConflictType.INCOMPATIBLE]);
    await client.setUserToolEnabled("ts_right", false);
    const refused = await rejection(client.setUserToolEnabled("ts_right", true));
    assert.ok(refused instanceof FailedPreconditionError, String(refused));
    assert.match(refused.rawMessage, /keep one/);

    await client.setToolConflict("ts_left", "ts_right", "equivalent", "same");
    const enabled = await client.setUserToolEnabled("ts_right", true);
    assert.deepEqual(enabled.conflicts.map((c) => [c.toolA, c.toolB, c.type]),
      [["ts_left", "ts_right", ConflictType.EQUIVALENT]]);
    const pairs = (await collect(client.listToolConflicts({ pageSize: 2 }))).map((c) => `${c.toolA}|${c.toolB}`);
    assert.ok(pairs.includes("ts_left|ts_right") && pairs.includes("bash|native:Bash"), String(pairs));
    await client.deleteToolConflict("ts_right", "ts_left");
    assert.ok(await rejection(client.deleteToolConflict("ts_right", "ts_left")) instanceof NotFoundError);
    await assert.rejects(client.setToolConflict("a", "b", "same" as "equivalent"), TypeError);
  });
});
