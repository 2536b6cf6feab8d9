/**
 * Runs the real toolhost server (`toolhost serve` from the repository's virtualenv) as a child process on a free
 * port, with a catalog directory of the test's own, like tests/helpers/servers.py does for the Python tests.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const LISTENING = /serving gRPC on 127\.0\.0\.1:(\d+)/;

/** The repository's root: the nearest directory above this file that holds proto/toolhost/v1. */
export function repositoryRoot(): string {
  let directory = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(directory, "proto", "toolhost", "v1"))) {
    const parent = dirname(directory);
    if (parent === directory) {
      throw new Error("cannot find the repository root (a directory with proto/toolhost/v1) above the tests");
    }
    directory = parent;
  }
  return directory;
}

/** A `toolhost serve` child; start() resolves once it listens. */
export class ServerProcess {
  readonly catalogDir: string;
  readonly unixSocket: string;
  private readonly scratch: string;
  private process: ChildProcess | undefined;
  private log = "";
  port = 0;

  private readonly args: readonly string[];
  private readonly bundledCatalog: boolean;

  /**
   * `args` go after the flags every test server gets (a free port, a unix socket, the test's catalog directory,
   * or the server's bundled example catalog with `bundledCatalog`).
   */
  constructor(options: { args?: readonly string[]; bundledCatalog?: boolean } = {}) {
    this.args = options.args ?? [];
    this.bundledCatalog = options.bundledCatalog ?? false;
    this.scratch = mkdtempSync(join(tmpdir(), "toolhost-ts-test-"));
    this.catalogDir = join(this.scratch, "catalog");
    this.unixSocket = join(this.scratch, "toolhost.sock");
    mkdirSync(this.catalogDir);
  }

  get target(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** A scratch directory that stop() removes. */
  get scratchDir(): string {
    return this.scratch;
  }

  /** Write a file into the scratch directory; its path. */
  writeFile(name: string, text: string): string {
    const path = join(this.scratch, name);
    writeFileSync(path, text);
    return path;
  }

  /** Write `<name>.yaml` into the catalog directory. */
  writeTool(name: string, yaml: string): void {
    writeFileSync(join(this.catalogDir, `${name}.yaml`), yaml);
  }

  async start(timeoutMs = 30_000): Promise<number> {
    const root = repositoryRoot();
    const program = process.env["TOOLHOST_SERVER"] ?? resolve(root, ".venv", "bin", "toolhost");
    if (!existsSync(program)) {
      throw new Error(`${program} does not exist: run \`make venv\` in ${root} first`);
    }
    const dataDir = join(this.scratch, "data");
    const child = spawn(program, [
      "serve", "--grpc-address", "127.0.0.1:0", "--unix-socket", this.unixSocket, "--watch-catalog", "false",
      ...(this.bundledCatalog ? [] : ["--catalog-dir", this.catalogDir]), ...this.args,
    ], {
      // A free HTTP port too (servers that have the /metrics listener): its default 8010 would be shared by
      // every server the tests start.
      env: { ...process.env, TOOLHOST_DATA_DIR: dataDir, TOOLHOST_HTTP_ADDRESS: "127.0.0.1:0" },
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.process = child;
    child.stderr?.setEncoding("utf8");
    this.port = await new Promise<number>((resolvePort, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the server did not listen within ${timeoutMs} ms:\n${this.log}`)), timeoutMs);
      child.stderr?.on("data", (text: string) => {
        this.log += text;
        const found = LISTENING.exec(this.log);
        if (found) {
          clearTimeout(timer);
          resolvePort(Number(found[1]));
        }
      });
      child.on("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`the server exited (${code}) before listening:\n${this.log}`));
      });
      child.on("error", (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
    return this.port;
  }

  /** Everything the server wrote to stderr so far. */
  get output(): string {
    return this.log;
  }

  async stop(): Promise<void> {
    const child = this.process;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolveExit) => child.once("exit", resolveExit));
      child.kill("SIGKILL");
      await exited;
    }
    rmSync(this.scratch, { recursive: true, force: true });
  }
}
