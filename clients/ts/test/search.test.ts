/** searchTools against a real server (a child process, see server.ts) with a catalog of its own. */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { createClient, InvalidArgumentError, type ToolhostClient } from "../src/index.js";
import { rejection } from "./helpers.js";
import { ServerProcess } from "./server.js";

describe("searchTools against a real server", () => {
  const server = new ServerProcess();
  let client: ToolhostClient;

  before(async () => {
    for (const name of ["kettle_boil", "kettle_descale", "kettle_pour"]) {
      server.writeTool(name, `name: ${name}\ndescription: Works the office kettle.\ncategory: kitchen\n` +
        "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n" +
        "parameters: [{name: name, type: string, required: true}]\n");
    }
    await server.start();
    client = createClient(server.target, { timeoutMs: 20_000 });
  });

  after(async () => {
    client?.close();
    await server.stop();
  });

  test("an intent's match comes first, with arguments that call the tool", async () => {
    const found = await client.searchTools("please echo this back exactly: Hello from TypeScript");
    const first = found.results[0];
    assert.ok(first !== undefined, "no results");
    assert.equal(first.tool.name, "echo");
    assert.notEqual(first.matchedIntent, "");
    assert.deepEqual(first.arguments, { text: "Hello from TypeScript" });
    assert.equal((await client.callTool(first.tool.name, first.arguments)).output, "Hello from TypeScript");
    assert.ok(found.generation >= 1n);
  });

  test("a captured port is a number, as the tool's schema types it", async () => {
    const found = await client.searchTools("check port 5432 on db.example.com", { limit: 1 });
    assert.equal(found.results.length, 1);
    assert.equal(found.results[0]?.tool.name, "tcp_port_check");
    assert.deepEqual(found.results[0]?.arguments, { host: "db.example.com", port: 5432 });
  });

  test("ranked results keep to the limit and the filter, best first, without arguments", async () => {
    const found = await client.searchTools("office kettle", { limit: 2, category: "kitchen" });
    assert.equal(found.results.length, 2);
    for (const result of found.results) {
      assert.match(result.tool.name, /^kettle_/);
      assert.equal(result.matchedIntent, "");
      assert.equal(result.arguments, undefined);
    }
    assert.ok(found.results[0]!.score >= found.results[1]!.score);
    const elsewhere = await client.searchTools("office kettle", { category: "network" });
    assert.deepEqual(elsewhere.results.map((result) => result.tool.name).filter((n) => n.startsWith("kettle_")), []);
  });

  test("a query over 1,000 characters is InvalidArgumentError", async () => {
    const refused = await rejection(client.searchTools("a".repeat(1001)));
    assert.ok(refused instanceof InvalidArgumentError, String(refused));
    await assert.rejects(client.searchTools("x", { tags: "one" as unknown as string[] }), TypeError);
  });
});
