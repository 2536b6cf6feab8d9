/** The README's example (examples/quickstart.mjs) runs against a server with the bundled catalog. */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, test } from "node:test";

import { ServerProcess } from "./server.js";

// dist/test/ -> the package directory.
const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const QUICKSTART = join(PACKAGE_DIR, "examples", "quickstart.mjs");

/** The fenced js block under the README's "## Example" heading. */
function readmeExample(): string {
  const readme = readFileSync(join(PACKAGE_DIR, "README.md"), "utf8");
  const section = readme.split(/^## /m).find((part) => part.startsWith("Example\n"));
  assert.ok(section !== undefined, "README.md has an \"## Example\" section");
  const block = /^```js\n([\s\S]*?)^```$/m.exec(section);
  assert.ok(block?.[1] !== undefined, "the Example section has a ```js block");
  return block[1];
}

const server = new ServerProcess({ bundledCatalog: true });
before(() => server.start());
after(() => server.stop());

test("the README's example is examples/quickstart.mjs, a module for a project that installed toolhost-client", () => {
  const example = readmeExample();
  const quickstart = readFileSync(QUICKSTART, "utf8").replace(/^(\/\/.*\n)+/, "");
  assert.equal(example, quickstart);
  assert.match(example, /^import \{[^}]+\} from "toolhost-client";$/m);
  assert.equal(example.split("127.0.0.1:50051").length - 1, 1, "the target appears once, for a test to replace");
});

test("examples/quickstart.mjs runs and prints what the README says", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [QUICKSTART], {
    cwd: PACKAGE_DIR, env: { ...process.env, TOOLHOST_TARGET: server.target }, timeout: 30_000,
  });
  assert.match(stdout, /^disk_free +system +/m);
  assert.match(stdout, /^echo +/m);
  assert.match(stdout, /^hello$/m);
  assert.match(stdout, /^name string undefined$/m);
  assert.match(stdout, /^excited boolean false$/m);
  assert.match(stdout, /^Hello, Ada! \(\d+\.\d ms, call /m);
  assert.match(stdout, /^INVALID_ARGUMENTS$/m);
  assert.match(stdout, /^\/text /m);
  assert.match(stdout, /^Filesystem/m);
  assert.match(stdout, /^exit code 0$/m);
  assert.match(stdout, /^OK$/m);
  assert.match(stdout, /^\d{4}-\d\d-\d\dT[\d:.]+Z INFO call tool=echo /m);
  assert.match(stdout, /^\{ INFO: 2 \}$/m);
});
