/**
 * Throwaway certificates for the TLS tests, made with the `openssl` program like tests/helpers/certificates.py: a CA,
 * a server certificate for 127.0.0.1 and localhost, and client certificates.
 */

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A certificate and its key, as files. */
export interface KeyPair {
  certificate: string;
  key: string;
}

/** A CA in a temporary directory that issues certificates, each with a fresh EC P-256 key. */
export class CertificateAuthority {
  readonly directory = mkdtempSync(join(tmpdir(), "toolhost-ts-pki-"));
  readonly certificate = join(this.directory, "ca.pem");
  private readonly key = join(this.directory, "ca.key");

  constructor() {
    openssl("req", "-x509", ...newKey(this.key), "-out", this.certificate, "-days", "2",
      "-subj", "/CN=toolhost-ts-test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
      "-addext", "keyUsage=critical,keyCertSign,cRLSign");
  }

  /** The CA certificate's PEM text. */
  get pem(): string {
    return readFileSync(this.certificate, "utf8");
  }

  issueServer(name: string): KeyPair {
    return this.issue(name, "localhost", "serverAuth", "IP:127.0.0.1,DNS:localhost");
  }

  issueClient(name: string): KeyPair {
    return this.issue(name, name, "clientAuth", "");
  }

  remove(): void {
    rmSync(this.directory, { recursive: true, force: true });
  }

  private issue(name: string, commonName: string, usage: string, san: string): KeyPair {
    const pair = { certificate: join(this.directory, `${name}.pem`), key: join(this.directory, `${name}.key`) };
    const request = join(this.directory, `${name}.csr`);
    const extensions = join(this.directory, `${name}.ext`);
    writeFileSync(extensions, [`extendedKeyUsage=${usage}`, "basicConstraints=CA:FALSE",
      ...(san ? [`subjectAltName=${san}`] : [])].join("\n") + "\n");
    openssl("req", ...newKey(pair.key), "-out", request, "-subj", `/CN=${commonName}`);
    openssl("x509", "-req", "-in", request, "-CA", this.certificate, "-CAkey", this.key, "-CAcreateserial",
      "-out", pair.certificate, "-days", "2", "-extfile", extensions);
    return pair;
  }
}

function newKey(path: string): string[] {
  return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path];
}

function openssl(...args: string[]): void {
  execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
}
