/** The client's AssetService methods against a real server (a child process, see server.ts). */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  AlreadyExistsError,
  createClient,
  InvalidArgumentError,
  NotFoundError,
  WinrmAuthentication,
  type AssetImportFormatName,
  type ToolhostClient,
} from "../src/index.js";
import { collect, rejection } from "./helpers.js";
import { ServerProcess } from "./server.js";

describe("assets against a real server", () => {
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

  test("an asset from creation to deletion", async () => {
    const created = await client.createAsset({
      name: "ts-ws-042", hostname: "ws-042.corp.example.com", addresses: ["192.0.2.42"],
      os: "Microsoft Windows 10 Pro", platform: "windows", site: "berlin", tags: ["finance"],
      winrm: { ssl: true, credential: "winrmberlin", authentication: WinrmAuthentication.BASIC },
    });
    assert.ok(created.createTime !== undefined);
    assert.equal(created.winrm?.authentication, WinrmAuthentication.BASIC);

    const taken = await rejection(client.createAsset({ name: "TS-WS-042" }));
    assert.ok(taken instanceof AlreadyExistsError, String(taken));
    assert.equal(taken.reason, "ALREADY_EXISTS");

    const got = await client.getAsset("Ts-Ws-042");
    assert.deepEqual([got.hostname, got.addresses, got.tags], ["ws-042.corp.example.com", ["192.0.2.42"], ["finance"]]);

    const port = await client.updateAsset({ name: "ts-ws-042", site: "not in the mask", winrm: { port: 5987 } },
      ["winrm.port"]);
    assert.deepEqual([port.winrm?.port, port.winrm?.ssl, port.site], [5987, true, "berlin"]);
    const populated = await client.updateAsset({ name: "ts-ws-042", os: "Microsoft Windows 11 Pro" }, []);
    assert.deepEqual([populated.os, populated.site, populated.winrm?.port],
      ["Microsoft Windows 11 Pro", "berlin", 5987]);
    assert.deepEqual((await client.updateAsset({ name: "ts-ws-042" }, ["tags"])).tags, []);
    await assert.rejects(client.updateAsset({ name: "ts-ws-042" }, "tags" as unknown as ["tags"]), TypeError);
    const unknown = await rejection(client.updateAsset({ name: "ts-nowhere", os: "x" }, []));
    assert.ok(unknown instanceof NotFoundError, String(unknown));

    assert.equal((await client.deleteAsset("ts-ws-042")).os, "Microsoft Windows 11 Pro");
    const gone = await rejection(client.getAsset("ts-ws-042"));
    assert.ok(gone instanceof NotFoundError, String(gone));
    assert.equal(gone.reason, "RESOURCE_NOT_FOUND");
  });

  test("an unsafe WinRM profile is refused naming the field, and nothing is stored", async () => {
    // Basic authentication over plain HTTP would send the password in clear.
    const refused = await rejection(client.createAsset({
      name: "ts-clear", winrm: { authentication: WinrmAuthentication.BASIC },
    }));
    assert.ok(refused instanceof InvalidArgumentError, String(refused));
    assert.ok(refused.fieldViolations.some((v) => v.field.includes("winrm")), JSON.stringify(refused.fieldViolations));
    assert.ok(await rejection(client.getAsset("ts-clear")) instanceof NotFoundError);
  });

  test("listAssets filters regardless of case and follows every page", async () => {
    for (const asset of [
      { name: "ts-list-c", os: "Microsoft Windows 10 Pro", platform: "windows", site: "berlin", tags: ["Kiosk"] },
      { name: "ts-list-a", os: "Microsoft Windows 10 Enterprise", platform: "windows", site: "paris" },
      { name: "ts-list-b", os: "Microsoft Windows 10 Pro", platform: "windows", site: "berlin" },
      { name: "ts-list-d", os: "Ubuntu 24.04", platform: "linux", site: "berlin", tags: ["kiosk"] },
    ]) {
      await client.createAsset(asset);
    }
    const names = async (options: Parameters<ToolhostClient["listAssets"]>[0]) =>
      (await collect(client.listAssets(options))).map((asset) => asset.name);
    assert.deepEqual(await names({ name: "ts-list-*", pageSize: 1 }),
      ["ts-list-a", "ts-list-b", "ts-list-c", "ts-list-d"]);
    assert.deepEqual(await names({ name: "ts-list-*", os: "WINDOWS 10", pageSize: 2 }),
      ["ts-list-a", "ts-list-b", "ts-list-c"]);
    assert.deepEqual(await names({ name: "TS-LIST-?", site: "Berlin", platform: "windows" }),
      ["ts-list-b", "ts-list-c"]);
    assert.deepEqual(await names({ name: "ts-list-*", tag: "KIOSK" }), ["ts-list-c", "ts-list-d"]);
    assert.deepEqual(await names({ site: "tokyo" }), []);

    const first = await client.listAssetsPage({ name: "ts-list-*", site: "berlin", pageSize: 2 });
    assert.deepEqual([first.assets.length, first.totalSize], [2, 3n]);
    assert.ok(first.nextPageToken);
    const last = await client.listAssetsPage({ name: "ts-list-*", site: "berlin", pageSize: 2,
      pageToken: first.nextPageToken });
    assert.deepEqual([last.assets.map((a) => a.name), last.nextPageToken], [["ts-list-d"], ""]);
    // A token continues the list it came from, not one with other filters.
    const other = await rejection(client.listAssetsPage({ name: "ts-list-*", site: "paris", pageSize: 2,
      pageToken: first.nextPageToken }));
    assert.ok(other instanceof InvalidArgumentError, String(other));
    assert.ok(await rejection(collect(client.listAssets({ pageSize: -1 }))) instanceof InvalidArgumentError);
    await assert.rejects(collect(client.listAssets({ os: 10 as unknown as string })), TypeError);
  });

  test("an import is all or nothing, and validateOnly stores nothing", async () => {
    await client.createAsset({ name: "ts-imp-old", site: "before" });
    const document = "name,os,site,tags,winrm_port\n" +
      "ts-imp-new,Microsoft Windows 10 Pro,berlin,a;b,5986\n" +
      "TS-IMP-OLD,Ubuntu 24.04,after,,\n";

    const checked = await client.importAssets("csv", document, { validateOnly: true });
    assert.deepEqual([checked.created, checked.replaced], [1, 1]);
    assert.ok(await rejection(client.getAsset("ts-imp-new")) instanceof NotFoundError);

    const bad = `${document}ts imp bad,x,y,,\nts-imp-port,x,y,,70000\n`;
    const refused = await rejection(client.importAssets("csv", bad));
    assert.ok(refused instanceof InvalidArgumentError, String(refused));
    const problems = refused.fieldViolations.map((v) => `${v.field} ${v.description}`);
    assert.equal(problems.length, 2, problems.join("\n"));
    assert.match(problems[0] ?? "", /4/);
    assert.match(problems[1] ?? "", /5/);
    assert.equal((await client.getAsset("ts-imp-old")).site, "before");

    const imported = await client.importAssets("csv", document);
    assert.deepEqual([imported.created, imported.replaced], [1, 1]);
    const fresh = await client.getAsset("ts-imp-new");
    assert.deepEqual([fresh.winrm?.port, fresh.tags], [5986, ["a", "b"]]);
    assert.equal((await client.getAsset("ts-imp-old")).site, "after");

    const yaml = "- name: ts-imp-yaml\n  os: Microsoft Windows Server 2022\n" +
      "  winrm: {ssl: true, authentication: basic}\n";
    const fromYaml = await client.importAssets("yaml", yaml);
    assert.deepEqual([fromYaml.created, fromYaml.replaced], [1, 0]);
    assert.equal((await client.getAsset("ts-imp-yaml")).winrm?.authentication, WinrmAuthentication.BASIC);
    await assert.rejects(client.importAssets("xml" as AssetImportFormatName, "<assets/>"), TypeError);
  });
});
