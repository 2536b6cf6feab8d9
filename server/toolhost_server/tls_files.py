"""The server's TLS files (certificate chain, private key, optional client CA), shared by the gRPC and HTTP
listeners: read and checked at start, and built again for the next connection when one of them changes.

Each listener turns the files into what its TLS library takes (a gRPC certificate configuration, an
ssl.SSLContext) and asks for the newest one at every handshake; the files' stat stamps keep that cheap, and a
renewed certificate (cert-manager, a Kubernetes Secret update) is served without a restart. Connections already
open keep the certificate they were made with.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from .auth.file_changes import FileChanges
from .config import Config

logger = logging.getLogger("toolhost.tls")

T = TypeVar("T")


@dataclass(frozen=True)
class PemContents:
    """The bytes of the TLS files, each checked to hold PEM."""

    certificate_chain: bytes
    private_key: bytes
    client_ca: bytes | None


@dataclass(frozen=True)
class TlsFiles:
    """Where the server's TLS identity (and the CA its clients' certificates must come from) is read."""

    certificate_chain: Path
    private_key: Path
    client_ca: Path | None = None

    @classmethod
    def from_config(cls, config: Config) -> TlsFiles | None:
        """The files of tls_cert_file, tls_key_file and tls_client_ca_file, or None when TLS is off."""
        if not config.tls_cert_file:
            return None
        return cls(Path(config.tls_cert_file), Path(config.tls_key_file),
                   Path(config.tls_client_ca_file) if config.tls_client_ca_file else None)

    @property
    def paths(self) -> tuple[Path, ...]:
        return (self.certificate_chain, self.private_key) + ((self.client_ca,) if self.client_ca else ())

    def read(self) -> PemContents:
        """The files' bytes; OSError when one cannot be read, ValueError naming the file that holds no PEM."""
        contents = []
        for path in self.paths:
            data = path.read_bytes()
            if b"-----BEGIN " not in data or b"-----END " not in data:
                raise ValueError(f"{path} holds no PEM block (-----BEGIN ...); it must be PEM, not DER")
            contents.append(data)
        return PemContents(contents[0], contents[1], contents[2] if len(contents) > 2 else None)


class ReloadingTls(Generic[T]):
    """What `build` makes of the TLS files (`current`), made again by `refresh()` once a file changed.

    `build` raises OSError or ValueError when the files cannot be used: at start that stops the server (it
    cannot serve without its certificate); later the last good result stays in use.
    """

    def __init__(self, files: TlsFiles, build: Callable[[TlsFiles], T], listener: str) -> None:
        self.files = files
        self._build = build
        self._listener = listener
        self._changes = FileChanges(files.paths)
        self.current = build(files)

    def refresh(self) -> T | None:
        """The newly built value when a file changed since the last look, else None (keep the current one).

        Called for every new connection; it must not raise. A file that cannot be used (half-written, or
        missing while being replaced) leaves the current certificate in use, and is tried again once it
        changes again.
        """
        if not self._changes.changed():
            return None
        self._changes.mark_seen()
        try:
            built = self._build(self.files)
        except (OSError, ValueError) as exc:
            logger.error("TLS files changed but cannot be used by the %s listener, keeping the current "
                         "certificate: %s", self._listener, exc)
            return None
        self.current = built
        logger.info("TLS certificate of the %s listener reloaded from %s", self._listener,
                    self.files.certificate_chain)
        return built


def load_tls(config: Config, build: Callable[[TlsFiles], T], listener: str) -> ReloadingTls[T] | None:
    """The listener's reloading TLS, or None to serve plaintext; OSError naming the settings when the files
    cannot be used."""
    files = TlsFiles.from_config(config)
    if files is None:
        return None
    try:
        return ReloadingTls(files, build, listener)
    except OSError as exc:
        if exc.filename is None:  # ssl.SSLError: readable files that do not make a certificate and key
            raise OSError(f"cannot use the TLS files (tls_cert_file, tls_key_file, tls_client_ca_file): "
                          f"{exc}") from None
        raise OSError(f"cannot read the TLS files (tls_cert_file, tls_key_file, tls_client_ca_file): "
                      f"{exc.filename}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise OSError(f"cannot use the TLS files: {exc}") from None
