"""Credentials from a directory of files, such as a mounted Kubernetes Secret: `<dir>/<name>.<key>`.

The file `winrm.password` holds key `password` of credential `winrm`; one trailing newline is dropped (editors
and `echo` add one). Files whose names do not fit are ignored. Files are read at each lookup, so an updated
Secret applies without a restart. Kubernetes updates a Secret volume by writing a new hidden directory and
swapping the `..data` symlink to it; reading every file of a lookup through the directory `..data` points at
gives one consistent version, never old and new keys mixed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from .base import Availability, CredentialSource, CredentialSourceError
from .names import (
    MAX_VALUE_BYTES,
    InvalidCredentialError,
    check_credential_value,
    is_credential_key,
    is_credential_name,
)

KUBERNETES_DATA_LINK = "..data"
_ATTEMPTS = 3


class _SwappedWhileReading(Exception):
    """The version being read was replaced (and removed) by a Secret update; reading again gets the new one."""


class DirectoryCredentialSource(CredentialSource):
    """Reads `<directory>/<name>.<key>` files, following a Kubernetes `..data` symlink when there is one."""

    source = "directory"

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def is_available(self) -> Availability:
        if self.directory.is_dir():
            return Availability(True, f"reads {self.directory}/<name>.<key> files")
        if self.directory.exists():
            return Availability(False, f"credentials_dir {self.directory} is not a directory")
        return Availability(False, f"credentials_dir {self.directory} does not exist")

    def describe(self) -> str:
        return f"directory {self.directory}"

    def names(self) -> Sequence[str]:
        data_link = self.directory / KUBERNETES_DATA_LINK
        base = Path(os.path.realpath(data_link)) if data_link.is_symlink() else self.directory
        try:
            with os.scandir(base) as entries:
                files = [entry.name for entry in entries]
        except OSError as exc:
            raise CredentialSourceError(f"cannot list {self.directory}: {exc.strerror or exc}") from None
        found = set()
        for file_name in files:
            name, dot, key = file_name.partition(".")
            if dot and is_credential_name(name) and is_credential_key(key):
                found.add(name)
        return sorted(found)

    def lookup(self, name: str) -> Mapping[str, str] | None:
        for _ in range(_ATTEMPTS):
            try:
                return self._read(name)
            except _SwappedWhileReading:
                continue
        raise CredentialSourceError(
            f"credential {name!r}: {self.directory} changed {_ATTEMPTS} times while it was being read")

    def _read(self, name: str) -> Mapping[str, str] | None:
        data_link = self.directory / KUBERNETES_DATA_LINK
        versioned = data_link.is_symlink()
        # Resolved once: every file of this lookup comes from the same version of the Secret.
        base = Path(os.path.realpath(data_link)) if versioned else self.directory
        values = {}
        try:
            with os.scandir(base) as entries:
                names = sorted(entry.name for entry in entries)
            for file_name in names:
                stem, dot, key = file_name.partition(".")
                if stem != name or not dot or not is_credential_key(key):
                    continue
                path = base / file_name
                if not path.is_file():
                    continue
                values[key] = self._read_value(name, key, path)
        except FileNotFoundError:
            if versioned:
                raise _SwappedWhileReading() from None
            raise CredentialSourceError(f"credential {name!r}: {self.directory} disappeared while being read") \
                from None
        except OSError as exc:
            raise CredentialSourceError(
                f"credential {name!r}: cannot read {exc.filename or base}: {exc.strerror or exc}") from None
        return values or None

    def _read_value(self, name: str, key: str, path: Path) -> str:
        shown = self.directory / f"{name}.{key}"
        with path.open("rb") as handle:
            # Beyond the limit: room for a dropped "\r\n", and one byte more to see that a value is too long.
            data = handle.read(MAX_VALUE_BYTES + 3)
        try:
            value = data.decode("utf-8")
        except UnicodeDecodeError:
            raise CredentialSourceError(f"credential {name!r} key {key!r}: file {shown} is not UTF-8 text") \
                from None
        value = value[:-2] if value.endswith("\r\n") else value.removesuffix("\n")
        try:
            check_credential_value(name, key, value, f"file {shown}")
        except InvalidCredentialError as exc:
            raise CredentialSourceError(str(exc)) from None
        return value
