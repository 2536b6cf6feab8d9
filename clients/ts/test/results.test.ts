/**
 * Structured output, parameter defaults and enums reach the caller as plain JSON values, not as
 * google.protobuf.Value messages, against a real server.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";

import {
  createClient,
  InternalError,
  type JsonValue,
  type StreamEvent,
  type ToolhostClient,
  type ToolInfo,
  type ToolParameterInfo,
} from "../src/index.js";
import { jsonValue } from "../src/results.js";
import { collect } from "./helpers.js";
import { ServerProcess } from "./server.js";

// A JSON text with every kind of JSON value, nested; json.loads returns it, so the tool's structured output.
const EVERY_KIND = '{"text": "x", "int": 42, "negative": -3, "fraction": 2.5, "yes": true, "no": false, ' +
  '"nothing": null, "list": [1, "two", [3], {"four": 4}], "object": {"inner": {"deep": [null]}}}';

/** The parameters of the `defaults` tool below, as JSON: what a caller should see. */
const DEFAULTS: Array<Pick<ToolParameterInfo, "name" | "default" | "enum">> = [
  { name: "count", default: 3, enum: [] },
  { name: "ratio", default: 0.5, enum: [0.5, 1.5] },
  { name: "mode", default: "fast", enum: ["fast", "slow"] },
  { name: "flag", default: false, enum: [] },
  { name: "zero", default: 0, enum: [0, 1] },
  { name: "options", default: { depth: 2, names: ["a", "b"], none: null }, enum: [] },
  { name: "items", default: [1, "two", true], enum: [] },
  { name: "plain", default: undefined, enum: [] },
];

function parameters(tool: ToolInfo): Array<Pick<ToolParameterInfo, "name" | "default" | "enum">> {
  return tool.parameters.map(({ name, default: fallback, enum: allowed }) => ({ name, default: fallback, enum: allowed }));
}

describe("JSON values", () => {
  const server = new ServerProcess();
  let client: ToolhostClient;

  before(async () => {
    server.writeTool("parse_json", "name: parse_json\ndescription: Returns the JSON value of a text.\n" +
      "category: json\nrunner: {type: python, entrypoint: 'toolhost_server.tools.samples:parse_json'}\n" +
      "parameters: [{name: s, type: string, required: true}]\n");
    // return_arguments returns its keyword arguments, so a call shows the defaults the server filled in.
    server.writeTool("defaults", [
      "name: defaults",
      "description: Returns its arguments; its parameters have defaults and enums of every JSON kind.",
      "category: json",
      "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:return_arguments'}",
      "parameters:",
      "  - {name: count, type: integer, default: 3}",
      "  - {name: ratio, type: number, default: 0.5, enum: [0.5, 1.5]}",
      "  - {name: mode, type: string, default: fast, enum: [fast, slow]}",
      "  - {name: flag, type: boolean, default: false}",
      "  - {name: zero, type: integer, default: 0, enum: [0, 1]}",
      "  - {name: options, type: object, default: {depth: 2, names: [a, b], none: null}}",
      "  - {name: items, type: array, default: [1, two, true]}",
      "  - {name: plain, type: string}",
      "",
    ].join("\n"));
    await server.start();
    client = createClient(server.target, { timeoutMs: 20_000 });
  });

  after(async () => {
    client?.close();
    await server.stop();
  });

  test("callTool gives structured output as the JSON value the tool returned, and the response as raw", async () => {
    const result = await client.callTool("parse_json", { s: EVERY_KIND });
    assert.equal(result.success, true, result.error?.message);
    assert.deepEqual(result.structuredOutput, JSON.parse(EVERY_KIND));
    assert.equal(result.raw.$typeName, "toolhost.v1.CallToolResponse");
    assert.equal(result.raw.structuredOutput?.$typeName, "google.protobuf.Value");
    assert.equal("$typeName" in result, false, "the view is not the message: protobuf-es must not take it for one");
    assert.deepEqual(JSON.parse(result.output), JSON.parse(EVERY_KIND), "the other fields are the response's");
    assert.equal(result.tool, "parse_json");
  });

  test("falsy and scalar structured outputs are kept; a text-only tool has none", async () => {
    const cases: Array<[string, JsonValue]> = [["false", false], ["0", 0], ["[]", []], ["{}", {}], ["-1.5", -1.5]];
    for (const [text, expected] of cases) {
      const result = await client.callTool("parse_json", { s: text });
      assert.deepEqual(result.structuredOutput, expected, `structured output of ${text}`);
    }
    const echo = await client.callTool("echo", { text: "plain" });
    assert.equal(echo.output, "plain");
    assert.equal(echo.structuredOutput, undefined);
  });

  test("a built-in tool's structured output is plain JSON too (log_inspector)", async () => {
    await client.callTool("echo", { text: "for the inspector" }, { callId: "ts-inspected-call" });
    const result = await client.callTool("log_inspector", { text: "ts-inspected-call" });
    assert.equal(result.success, true, result.error?.message);
    const output = result.structuredOutput as { records: Array<{ fields: { audit: { call_id: string } } }> };
    assert.equal(output.records.length, 1);
    assert.equal(output.records[0]?.fields.audit.call_id, "ts-inspected-call");
  });

  test("streamCallTool's result carries plain structured output", async () => {
    const events: StreamEvent[] = await collect(client.streamCallTool("parse_json", { s: EVERY_KIND }));
    const last = events.at(-1);
    assert.equal(last?.case, "result");
    assert.deepEqual(last.value.structuredOutput, JSON.parse(EVERY_KIND));
    assert.equal(last.value.raw.$typeName, "toolhost.v1.CallToolResponse");
  });

  test("outputFormat and filterEmptyFields shape the result of callTool and streamCallTool", async () => {
    const source = { s: '{"a": [1, 2.5, "x"], "b": null, "c": {"d": true, "e": ""}}' };
    const pretty = await client.callTool("parse_json", source, { outputFormat: "pretty", filterEmptyFields: true });
    assert.equal(pretty.success, true, pretty.error?.message);
    assert.equal(pretty.output, '{\n  "a": [\n    1,\n    2.5,\n    "x"\n  ],\n  "c": {\n    "d": true\n  }\n}');
    assert.deepEqual(pretty.structuredOutput, { a: [1, 2.5, "x"], c: { d: true } });
    const own = await client.callTool("parse_json", source, { outputFormat: "text" });
    assert.equal(own.output, source.s, "the tool's own text, every field kept");

    const streamed = client.streamCallTool("parse_json", source, { outputFormat: "json" });
    const events: StreamEvent[] = await collect(streamed);
    const last = events.at(-1);
    assert.equal(last?.case, "result");
    assert.equal(last.value.output, '{"a":[1,2.5,"x"],"b":null,"c":{"d":true,"e":""}}');

    assert.throws(() => client.streamCallTool("parse_json", source, { outputFormat: "yaml" as "json" }),
      /outputFormat must be "json", "pretty" or "text", not "yaml"/);
  });

  test("getTool, listTools and listToolsPage give parameter defaults and enums as JSON values", async () => {
    const tool = await client.getTool("defaults");
    assert.deepEqual(parameters(tool), DEFAULTS);
    assert.equal(tool.raw.$typeName, "toolhost.v1.Tool");
    assert.equal(tool.raw.parameters[0]?.default?.$typeName, "google.protobuf.Value");
    assert.equal("$typeName" in tool, false);
    assert.equal("$typeName" in (tool.parameters[0] ?? {}), false);

    const [listed] = await collect(client.listTools({ category: "json", view: "full", pageSize: 1 }));
    assert.equal(listed?.name, "defaults");
    assert.deepEqual(parameters(listed), DEFAULTS);

    const page = await client.listToolsPage({ category: "json", view: "full" });
    assert.deepEqual(page.tools.map((item) => item.name), ["defaults", "parse_json"]);
    assert.deepEqual(page.tools[0] && parameters(page.tools[0]), DEFAULTS);
    assert.equal(page.totalSize, 2);
    assert.equal(page.raw.$typeName, "toolhost.v1.ListToolsResponse");
  });

  test("the defaults the tool declares are the ones the server fills in", async () => {
    const result = await client.callTool("defaults", {});
    const declared = Object.fromEntries(DEFAULTS.filter((p) => p.default !== undefined).map((p) => [p.name, p.default]));
    assert.deepEqual(result.structuredOutput, declared);
  });

  test("a built-in tool's defaults and enums are JSON values too (log_inspector)", async () => {
    const inspector = await client.getTool("log_inspector");
    const byName = new Map(inspector.parameters.map((parameter) => [parameter.name, parameter]));
    assert.equal(byName.get("limit")?.default, 50);
    assert.deepEqual(byName.get("level")?.enum, ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]);
    assert.deepEqual(byName.get("source")?.enum, ["memory", "file", "database"]);
    assert.equal(byName.get("text")?.default, undefined);
  });
});

describe("jsonValue", () => {
  test("a Value JSON cannot hold is an InternalError naming the field, not a bare Error", () => {
    for (const value of [
      create(ValueSchema, { kind: { case: "numberValue", value: Number.NaN } }),
      create(ValueSchema, {}),
    ]) {
      assert.throws(() => jsonValue(value, "a structured output of x"), (error: unknown) => {
        assert.ok(error instanceof InternalError, String(error));
        assert.match(error.message, /a structured output of x/);
        return true;
      });
    }
  });
});
