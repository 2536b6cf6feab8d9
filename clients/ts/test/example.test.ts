/** The README's example (examples/quickstart.mjs) runs against a server with the bundled catalog. */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, test } from "node:test";

import { ServerProcess } from "./server.js";

// dist/test/ -> the package directory.
const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

const server = new ServerProcess({ bundledCatalog: true });
before(() => server.start());
after(() => server.stop());

test("examples/quickstart.mjs runs and prints what the README says", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [join(PACKAGE_DIR, "examples", "quickstart.mjs")], {
    cwd: PACKAGE_DIR, env: { ...process.env, TOOLHOST_TARGET: server.target }, timeout: 30_000,
  });
  assert.match(stdout, /^disk_free +system +/m);
  assert.match(stdout, /^echo +/m);
  assert.match(stdout, /\[ 'text' \]/);
  assert.match(stdout, /^true hello$/m);
  assert.match(stdout, /^Hello, Ada! \(\d+\.\d ms, call /m);
  assert.match(stdout, /^INVALID_ARGUMENTS$/m);
  assert.match(stdout, /^\/text /m);
  assert.match(stdout, /^Filesystem/m);
  assert.match(stdout, /^exit code 0$/m);
});
