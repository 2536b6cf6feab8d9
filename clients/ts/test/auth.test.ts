/** TLS, client certificates and bearer tokens against real servers that require them. */

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import {
  Code,
  createClient,
  PermissionDeniedError,
  ToolhostError,
  UnauthenticatedError,
  type ClientOptions,
  type ToolhostClient,
} from "../src/index.js";
import { CertificateAuthority } from "./certificates.js";
import { collect, rejection } from "./helpers.js";
import { ServerProcess } from "./server.js";

const ADMIN_TOKEN = randomBytes(32).toString("base64url");
const VIEWER_TOKEN = randomBytes(32).toString("base64url");

function authFile(): string {
  const sha256 = (token: string): string => createHash("sha256").update(token, "utf8").digest("hex");
  return [
    "roles:",
    "  viewer:",
    '    list: {tools: ["*"]}',
    "  admin:",
    "    admin: true",
    '    call: {tools: ["*"]}',
    "tokens:",
    `  - {name: admin, sha256: ${sha256(ADMIN_TOKEN)}, roles: [admin]}`,
    `  - {name: viewer, sha256: ${sha256(VIEWER_TOKEN)}, roles: [viewer]}`,
    "",
  ].join("\n");
}

/** Run `use` with a client of `target`, closing it after. */
async function withClient<T>(
  target: string, options: ClientOptions, use: (client: ToolhostClient) => Promise<T>,
): Promise<T> {
  const client = createClient(target, { timeoutMs: 10_000, ...options });
  try {
    return await use(client);
  } finally {
    client.close();
  }
}

describe("TLS and tokens", () => {
  const pki = new CertificateAuthority();
  const serverPair = pki.issueServer("server");
  const clientPair = pki.issueClient("agent-1");
  const authPath = join(pki.directory, "auth.yaml");
  writeFileSync(authPath, authFile());
  // TLS with tokens; plaintext on loopback with tokens; mutual TLS without an auth file.
  const tls = ["--tls-cert-file", serverPair.certificate, "--tls-key-file", serverPair.key];
  const tlsServer = new ServerProcess({ args: [...tls, "--auth-file", authPath] });
  const plainServer = new ServerProcess({ args: ["--auth-file", authPath] });
  const mtlsServer = new ServerProcess({ args: [...tls, "--tls-client-ca-file", pki.certificate] });

  before(async () => {
    await Promise.all([tlsServer.start(), plainServer.start(), mtlsServer.start()]);
  });

  after(async () => {
    await Promise.all([tlsServer.stop(), plainServer.stop(), mtlsServer.stop()]);
    pki.remove();
  });

  test("a token over TLS authenticates the caller, with its roles", async () => {
    await withClient(tlsServer.target, { ca: pki.pem, token: ADMIN_TOKEN }, async (admin) => {
      assert.equal((await admin.callTool("echo", { text: "secure" })).output, "secure");
      assert.equal((await admin.reload()).success, true);
    });
    await withClient(tlsServer.target, { ca: pki.pem, token: VIEWER_TOKEN }, async (viewer) => {
      assert.equal((await viewer.getTool("echo")).name, "echo");
      const call = await rejection(viewer.callTool("echo", { text: "no" }));
      assert.ok(call instanceof PermissionDeniedError, String(call));
      assert.equal(call.reason, "PERMISSION_DENIED");
      const reload = await rejection(viewer.reload());
      assert.ok(reload instanceof PermissionDeniedError, String(reload));
    });
  });

  test("the log service answers the admin role only", async () => {
    await withClient(tlsServer.target, { ca: pki.pem, token: ADMIN_TOKEN }, async (admin) => {
      const page = await admin.queryLogsPage({ text: "serving gRPC" });
      assert.ok(page.records.length >= 1, "the server logged where it listens");
    });
    await withClient(tlsServer.target, { ca: pki.pem, token: VIEWER_TOKEN }, async (viewer) => {
      const query = await rejection(viewer.queryLogsPage());
      assert.ok(query instanceof PermissionDeniedError, String(query));
      const tail = await rejection(collect(viewer.tailLogs()));
      assert.ok(tail instanceof PermissionDeniedError, String(tail));
    });
  });

  test("no token, or a wrong one, is UNAUTHENTICATED", async () => {
    for (const options of [{ ca: pki.pem }, { ca: pki.pem, token: randomBytes(32).toString("base64url") }]) {
      await withClient(tlsServer.target, options, async (client) => {
        const error = await rejection(client.listToolsPage());
        assert.ok(error instanceof UnauthenticatedError, String(error));
        assert.equal(error.code, Code.Unauthenticated);
        assert.equal(error.reason, "UNAUTHENTICATED");
      });
    }
  });

  test("the server's certificate is verified, against its name too", async () => {
    // Node's own CAs do not know the test CA.
    await withClient(tlsServer.target, { tls: true, token: ADMIN_TOKEN }, async (client) => {
      const error = await rejection(client.listToolsPage());
      assert.ok(error instanceof ToolhostError, String(error));
      assert.equal(error.reason, undefined);
    });
    await withClient(tlsServer.target, { ca: pki.pem, serverName: "elsewhere.example", token: ADMIN_TOKEN },
      async (client) => {
        const error = await rejection(client.listToolsPage());
        assert.ok(error instanceof ToolhostError, String(error));
        assert.match(String(error.cause), /elsewhere\.example/);
      });
    await withClient(tlsServer.target, { ca: pki.pem, serverName: "localhost", token: ADMIN_TOKEN },
      async (client) => assert.equal((await client.listToolsPage()).tools.length > 0, true));
  });

  test("with the opt-in, a token goes over plaintext to loopback and to the unix socket", async () => {
    for (const target of [plainServer.target, `unix:${plainServer.unixSocket}`]) {
      await withClient(target, { token: ADMIN_TOKEN, allowInsecureToken: true }, async (admin) => {
        assert.equal((await admin.callTool("echo", { text: target })).output, target);
      });
      await withClient(target, {}, async (anonymous) => {
        assert.ok((await rejection(anonymous.listToolsPage())) instanceof UnauthenticatedError);
      });
    }
  });

  test("a client certificate passes mutual TLS; no certificate does not", async () => {
    const cert = readFileSync(clientPair.certificate);
    const key = readFileSync(clientPair.key);
    await withClient(mtlsServer.target, { ca: pki.pem, cert, key }, async (client) => {
      assert.equal((await client.callTool("echo", { text: "mtls" })).output, "mtls");
    });
    await withClient(mtlsServer.target, { ca: pki.pem }, async (client) => {
      const error = await rejection(client.listToolsPage());
      assert.ok(error instanceof ToolhostError, String(error));
      assert.equal(error.reason, undefined, "refused in the handshake, before any RPC");
    });
  });
});
