/** What createClient accepts and refuses before connecting (no server needed), and how arguments are encoded. */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { argumentsJson } from "../src/arguments.js";
import { createClient, isLocalTarget } from "../src/index.js";

const TOKEN = "t0k3n-".repeat(8);

describe("bearer tokens", () => {
  test("are refused over plaintext to a target off this machine, even with the opt-in", () => {
    assert.throws(() => createClient("10.0.0.7:50051", { token: TOKEN }), /refusing to send the token.*TLS/);
    assert.throws(() => createClient("toolhost.example:50051", { token: TOKEN, allowInsecureToken: true }),
      /refusing to send the token to toolhost\.example:50051 in plaintext/);
  });

  test("need the explicit opt-in over plaintext to loopback or a unix socket", () => {
    assert.throws(() => createClient("127.0.0.1:50051", { token: TOKEN }), /allowInsecureToken/);
    assert.throws(() => createClient("unix:/run/toolhost.sock", { token: TOKEN }), /allowInsecureToken/);
    for (const target of ["127.0.0.1:50051", "localhost:50051", "[::1]:50051", "unix:/run/toolhost.sock"]) {
      createClient(target, { token: TOKEN, allowInsecureToken: true }).close();
    }
  });

  test("go over TLS to any target", () => {
    createClient("toolhost.example:50051", { token: TOKEN, tls: true }).close();
  });

  test("must be one word, and not doubled by an authorization header", () => {
    assert.throws(() => createClient("toolhost.example:443", { token: `${TOKEN}\n`, tls: true }), /no spaces/);
    assert.throws(() => createClient("toolhost.example:443", { token: "", tls: true }), /non-empty/);
    assert.throws(() => createClient("toolhost.example:443",
      { token: TOKEN, tls: true, headers: { Authorization: "Bearer x" } }), /not both/);
  });
});

describe("targets and TLS options", () => {
  test("a URL or a target without a port is refused with the forms that work", () => {
    assert.throws(() => createClient("https://toolhost.example"), /host:port.*unix:/);
    assert.throws(() => createClient("toolhost.example"), /host:port/);
    assert.throws(() => createClient("unix:"), /no socket path/);
  });

  test("cert and key go together; serverName needs TLS; a unix socket has no TLS", () => {
    assert.throws(() => createClient("toolhost.example:443", { cert: "PEM" }), /cert and key/);
    assert.throws(() => createClient("toolhost.example:443", { serverName: "other" }), /serverName/);
    assert.throws(() => createClient("unix:/run/toolhost.sock", { tls: true }), /plaintext/);
  });

  test("isLocalTarget knows loopback addresses and unix sockets", () => {
    for (const target of ["127.0.0.1:1", "127.1.2.3:1", "localhost:1", "LOCALHOST:1", "[::1]:1",
      "[0:0:0:0:0:0:0:1]:1", "[::ffff:127.0.0.1]:1", "dns:///localhost:1", "unix:/tmp/s", "unix:///tmp/s"]) {
      assert.equal(isLocalTarget(target), true, target);
    }
    for (const target of ["10.0.0.1:1", "0.0.0.0:1", "[::]:1", "[::2]:1", "example.com:1", "localhost.example:1",
      "128.0.0.1:1", "nonsense"]) {
      assert.equal(isLocalTarget(target), false, target);
    }
  });
});

describe("arguments", () => {
  test("travel as exact JSON, bigint included", () => {
    assert.equal(argumentsJson(undefined), "{}");
    assert.equal(argumentsJson({ n: 18446744073709551617n, s: "é\"", list: [1, null, true], skip: undefined }),
      '{"n":18446744073709551617,"s":"é\\"","list":[1,null,true]}');
    assert.deepEqual(JSON.parse(argumentsJson({ nested: { "a/b": [0.5, { c: "d" }] } })),
      { nested: { "a/b": [0.5, { c: "d" }] } });
  });

  test("values JSON cannot hold are refused, naming where they are", () => {
    assert.throws(() => argumentsJson({ x: { y: [NaN] } }), /\/x\/y\/0 is NaN/);
    assert.throws(() => argumentsJson({ f: (() => 1) as never }), /function/);
    const cycle: Record<string, unknown> = {};
    cycle["self"] = cycle;
    assert.throws(() => argumentsJson(cycle as never), /refers to itself/);
    assert.throws(() => argumentsJson([] as never), /object/);
  });
});
