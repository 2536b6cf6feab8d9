"""The credentials resolved for one call: values reachable by name and key, never shown by repr() or str().

    creds["winrm"]["password"]      # or creds.winrm.password
    creds.values()                  # every value, for Redactor.with_values
    creds.env()                     # {"TOOL_CRED_WINRM_PASSWORD": ..., ...} for process and script tools

Attribute access is a convenience for keys that are not also names of the class's own members (`name`,
`source`, `keys`, `get`); item access works for every key.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType

from .names import process_env_name


class Credential:
    """One credential: its name, the source it came from, and its keys with their values."""

    __slots__ = ("_values", "name", "source")

    def __init__(self, name: str, source: str, values: Mapping[str, str]) -> None:
        self.name = name
        self.source = source
        self._values: Mapping[str, str] = MappingProxyType(dict(sorted(values.items())))

    def __getitem__(self, key: str) -> str:
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(f"credential {self.name!r} has no key {key!r}; it has: {', '.join(self._values)}") \
                from None

    def __getattr__(self, key: str) -> str:
        # Only called for what is not a slot or method; a private name is never a key.
        if key.startswith("_"):
            raise AttributeError(key)
        try:
            return self[key]
        except KeyError as exc:
            raise AttributeError(exc.args[0]) from None

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self._values.get(key, default)

    def keys(self) -> tuple[str, ...]:
        return tuple(self._values)

    def secret_values(self) -> tuple[str, ...]:
        return tuple(self._values.values())

    def __repr__(self) -> str:
        return f"Credential({self.name!r} from {self.source}, keys: {', '.join(self._values)})"

    __str__ = __repr__


class ResolvedCredentials:
    """Every credential a tool declared, resolved for one call."""

    __slots__ = ("_credentials",)

    def __init__(self, credentials: Mapping[str, Credential] | None = None) -> None:
        self._credentials: Mapping[str, Credential] = MappingProxyType(dict(credentials or {}))

    def __getitem__(self, name: str) -> Credential:
        try:
            return self._credentials[name]
        except KeyError:
            declared = ", ".join(self._credentials) or "none"
            raise KeyError(f"no credential {name!r} was resolved for this call (declared: {declared}); a tool "
                           "gets the credentials it lists in `credentials:`") from None

    def __getattr__(self, name: str) -> Credential:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(exc.args[0]) from None

    def __contains__(self, name: object) -> bool:
        return name in self._credentials

    def __iter__(self) -> Iterator[str]:
        return iter(self._credentials)

    def __len__(self) -> int:
        return len(self._credentials)

    def __bool__(self) -> bool:
        return bool(self._credentials)

    def names(self) -> tuple[str, ...]:
        return tuple(self._credentials)

    def values(self) -> tuple[str, ...]:
        """Every value of every credential, once each: what the call's redactor must hide."""
        return tuple(dict.fromkeys(v for credential in self._credentials.values() for v in credential.secret_values()))

    def env(self) -> dict[str, str]:
        """TOOL_CRED_<NAME>_<KEY> variables for a process or script tool."""
        return {process_env_name(credential.name, key): credential[key]
                for credential in self._credentials.values() for key in credential}

    def __repr__(self) -> str:
        listed = "; ".join(repr(credential) for credential in self._credentials.values())
        return f"ResolvedCredentials({listed})"

    __str__ = __repr__


NO_CREDENTIALS = ResolvedCredentials()
