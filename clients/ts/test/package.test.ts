/** What `npm pack` ships: the compiled library and its types, which package.json's exports point into. */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { test } from "node:test";

// dist/test/ -> the package directory.
const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

interface PackageJson {
  name: string;
  exports: Record<string, Record<string, string> | string>;
  files: string[];
  scripts: Record<string, string>;
  engines: Record<string, string>;
  publishConfig: Record<string, unknown>;
  repository: { type: string; url: string; directory: string };
}

/** The files `npm pack` would put in the tarball, as it lists them. */
async function packedFiles(): Promise<string[]> {
  // Under `npm test`, npm_execpath is the npm that runs us; elsewhere the one on PATH.
  const npm = process.env["npm_execpath"];
  const [program, args] = npm?.endsWith(".js")
    ? [process.execPath, [npm]]
    : ["npm", []];
  // --ignore-scripts: the tests' own build made dist/src, and prepack rebuilding it now would change the files
  // the other test files are importing.
  const { stdout } = await promisify(execFile)(program, [...args, "pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: PACKAGE_DIR, timeout: 60_000,
  });
  const [report] = JSON.parse(stdout) as Array<{ files: Array<{ path: string }> }>;
  assert.ok(report !== undefined, stdout);
  return report.files.map((file) => file.path).sort();
}

/** The TypeScript sources of the library, relative to src/, without their extension. */
function librarySources(directory = join(PACKAGE_DIR, "src")): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) {
      return librarySources(path);
    }
    return entry.name.endsWith(".ts") ? [relative(join(PACKAGE_DIR, "src"), path).replace(/\.ts$/, "")] : [];
  });
}

const manifest = JSON.parse(readFileSync(join(PACKAGE_DIR, "package.json"), "utf8")) as PackageJson;

test("npm pack ships each module's .js and .d.ts, the README and package.json, and nothing else", async () => {
  const files = await packedFiles();
  const expected = [
    "README.md",
    "package.json",
    ...librarySources().flatMap((module) => [`dist/src/${module}.js`, `dist/src/${module}.d.ts`]),
  ];
  // LICENSE goes in whenever the package directory has one; npm adds it on its own.
  assert.deepEqual(files.filter((file) => !/^LICEN[CS]E/i.test(file)), expected.sort());
  assert.ok(files.includes("dist/src/gen/toolhost/v1/log_service_pb.js"));
});

test("package.json: the unscoped name, exports with types first, prepack, provenance and the repository", () => {
  assert.equal(manifest.name, "toolhost-client");
  const root = manifest.exports["."];
  assert.ok(typeof root === "object");
  assert.deepEqual(Object.keys(root), ["types", "import", "default"], "types first, as TypeScript requires");
  assert.deepEqual(root, {
    types: "./dist/src/index.d.ts", import: "./dist/src/index.js", default: "./dist/src/index.js",
  });
  assert.match(manifest.scripts["prepack"] ?? "", /\btsc\b/, "npm pack and npm publish build dist/ first");
  assert.deepEqual(manifest.publishConfig, { access: "public", provenance: true });
  assert.deepEqual(manifest.repository, {
    type: "git", url: "git+https://github.com/toolhost/toolhost.git", directory: "clients/ts",
  });
  assert.equal(manifest.engines["node"], ">=20");
});

test("the package imports by its name, as a project that installed it does", async () => {
  // Node resolves a package's own name through its exports: the same entry point an installed copy has.
  const library = (await import("toolhost-client")) as Record<string, unknown>;
  for (const name of ["createClient", "ToolhostClient", "ToolhostError", "InternalError", "v1"]) {
    assert.ok(name in library, `toolhost-client exports ${name}`);
  }
});
