"""How credentials are named and which values they may hold.

A credential is a named bundle of key -> value strings, e.g. `winrm` with `username`, `password`, `domain`.

    name   [a-z][a-z0-9]*, at most 32    winrm, vcenter2    no '_' or '-': see below
    key    [a-z][a-z0-9_]*, at most 64   username, api_key
    value  8 characters to 64 KiB        every resolved value is redacted from outputs; a shorter one would
                                         also hide ordinary words (MIN_KNOWN_VALUE_LENGTH)

In TOOLHOST_CRED_<NAME>_<KEY> (and TOOL_CRED_<NAME>_<KEY> for process tools) the name is everything up to the
first '_' after the prefix and the key is the rest, so a name cannot hold a '_'; allowing '-' and writing it
as '_' would make TOOLHOST_CRED_AWS_PROD_SECRET both `aws`/`prod_secret` and `aws-prod`/`secret`, and hand one
credential's value to a tool that declared the other.
"""

from __future__ import annotations

import re

from ..sanitize.known_values import check_known_value

NAME_PATTERN = re.compile(r"[a-z][a-z0-9]{0,31}")
KEY_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
MAX_VALUE_BYTES = 64 * 1024
PROCESS_ENV_PREFIX = "TOOL_CRED_"


class InvalidCredentialError(ValueError):
    """A credential name, key or value cannot be used; the message names it and never holds a value."""


def is_credential_name(name: str) -> bool:
    return NAME_PATTERN.fullmatch(name) is not None


def is_credential_key(key: str) -> bool:
    return KEY_PATTERN.fullmatch(key) is not None


def check_credential_name(name: str) -> None:
    if not is_credential_name(name):
        raise InvalidCredentialError(
            f"{name!r} is not a credential name: use lowercase letters and digits, starting with a letter, at most "
            "32 (no '_' or '-', which would make TOOLHOST_CRED_<NAME>_<KEY> ambiguous)")


def check_credential_key(key: str) -> None:
    if not is_credential_key(key):
        raise InvalidCredentialError(
            f"{key!r} is not a credential key: use lowercase letters, digits and '_', starting with a letter, "
            "at most 64")


def check_credential_value(name: str, key: str, value: str, where: str) -> None:
    """Refuse a value that cannot be redacted safely or is unreasonably large. `where` says where it is from."""
    try:
        check_known_value(value)
    except ValueError as exc:
        raise InvalidCredentialError(f"credential {name!r} key {key!r} ({where}): {exc}") from None
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_VALUE_BYTES:
        raise InvalidCredentialError(
            f"credential {name!r} key {key!r} ({where}): {size} bytes is more than a credential value may hold "
            f"({MAX_VALUE_BYTES})")


def process_env_name(name: str, key: str) -> str:
    """The environment variable that carries a credential's key to a process or script tool."""
    return f"{PROCESS_ENV_PREFIX}{name.upper()}_{key.upper()}"
