"""Credentials from the server's environment: TOOLHOST_CRED_<NAME>_<KEY>=value.

`TOOLHOST_CRED_WINRM_PASSWORD` is key `password` of credential `winrm`. Names and keys are written in upper
case; the name ends at the first '_' after the prefix (names hold none, see names.py). Variables that do not
fit (lower-case letters, an empty key) are not credentials and are ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from .base import Availability, CredentialSource, CredentialSourceError
from .names import InvalidCredentialError, check_credential_value, is_credential_key, is_credential_name

ENV_PREFIX = "TOOLHOST_CRED_"


def environment_variable(name: str, key: str) -> str:
    return f"{ENV_PREFIX}{name.upper()}_{key.upper()}"


class EnvironmentCredentialSource(CredentialSource):
    """Reads TOOLHOST_CRED_* variables of `environ` (the process environment by default) at each lookup."""

    source = "environment"
    blocking = False

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ

    def is_available(self) -> Availability:
        return Availability(True, f"reads {ENV_PREFIX}<NAME>_<KEY> variables")

    def describe(self) -> str:
        return f"environment ({ENV_PREFIX}<NAME>_<KEY>)"

    def names(self) -> Sequence[str]:
        found = set()
        for variable in self._environ:
            if not variable.startswith(ENV_PREFIX):
                continue
            written_name, _, written_key = variable[len(ENV_PREFIX):].partition("_")
            name, key = written_name.lower(), written_key.lower()
            # As lookup reads them: upper case only, a valid name and key.
            if (written_name, written_key) == (name.upper(), key.upper()) and is_credential_name(name) \
                    and is_credential_key(key):
                found.add(name)
        return sorted(found)

    def lookup(self, name: str) -> Mapping[str, str] | None:
        prefix = f"{ENV_PREFIX}{name.upper()}_"
        values = {}
        for variable, value in self._environ.items():
            if not variable.startswith(prefix):
                continue
            written_key = variable[len(prefix):]
            key = written_key.lower()
            if written_key != key.upper() or not is_credential_key(key):
                continue
            try:
                check_credential_value(name, key, value, f"environment variable {variable}")
            except InvalidCredentialError as exc:
                raise CredentialSourceError(str(exc)) from None
            values[key] = value
        return values or None
