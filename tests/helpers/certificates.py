"""Throwaway certificates for TLS tests, made with the `openssl` program: a CA, server and client certificates.

Real files in a temporary directory, so the server reads and reloads them exactly as it would in production.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

OPENSSL = "/usr/bin/openssl"


@dataclass(frozen=True)
class KeyPair:
    """A certificate (PEM file) and its private key (PEM file)."""

    certificate: Path
    key: Path


class CertificateAuthority:
    """A CA in `directory` that issues server and client certificates, each with a fresh EC P-256 key."""

    def __init__(self, directory: Path, name: str = "toolhost-test-ca") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.name = name
        self.certificate = directory / f"{name}.pem"
        self.key = directory / f"{name}.key"
        _openssl("req", "-x509", *_new_key(self.key), "-out", str(self.certificate), "-days", "2",
                 "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def issue_server(self, name: str, common_name: str = "localhost",
                     san: str = "IP:127.0.0.1,DNS:localhost") -> KeyPair:
        """A server certificate valid for `san` (127.0.0.1 and localhost unless told)."""
        return self._issue(name, common_name, "serverAuth", san)

    def issue_client(self, name: str, common_name: str, san: str = "") -> KeyPair:
        """A client certificate for `common_name`, with `san` (such as "URI:spiffe://x/y") when given."""
        return self._issue(name, common_name, "clientAuth", san)

    def _issue(self, name: str, common_name: str, usage: str, san: str) -> KeyPair:
        pair = KeyPair(self.directory / f"{name}.pem", self.directory / f"{name}.key")
        request = self.directory / f"{name}.csr"
        extensions = self.directory / f"{name}.ext"
        lines = [f"extendedKeyUsage={usage}", "basicConstraints=CA:FALSE"]
        if san:
            lines.append(f"subjectAltName={san}")
        extensions.write_text("\n".join(lines) + "\n")
        _openssl("req", *_new_key(pair.key), "-out", str(request), "-subj", f"/CN={common_name}")
        _openssl("x509", "-req", "-in", str(request), "-CA", str(self.certificate), "-CAkey", str(self.key),
                 "-CAcreateserial", "-out", str(pair.certificate), "-days", "2", "-extfile", str(extensions))
        return pair


def _new_key(path: Path) -> tuple[str, ...]:
    return ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(path))


def _openssl(*args: str) -> None:
    result = subprocess.run([OPENSSL, *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {result.stderr}")
