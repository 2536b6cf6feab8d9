"""What config_access answers: each effective setting with where its value came from, secrets hidden.

A key is a setting's name, or a dotted path into its value (`workspaces.0.path`, `databases.analytics`).
`store_key` stands for TOOLHOST_STORE_KEY, which is no setting of the table but a secret worth knowing is set.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..config import DEFAULT_SOURCE, SETTINGS, STORE_KEY_SOURCE_KEY, Config, ConfigSources
from .names import NameNotFound
from .redaction import REDACTED, redacted_url

# A password in a URL's userinfo, in any setting's text: hidden even where no setting should hold one.
_USERINFO_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)[^\s@]*@")
_SOURCE_KINDS = ("config file", "environment", "flag", "program", "default")


def effective_settings(config: Config, sources: ConfigSources) -> list[dict[str, Any]]:
    """Every setting, in the table's order, then store_key: {key, value, source, sensitive}."""
    rows = [_row(setting.name, *_shown(setting.name, getattr(config, setting.name), setting.secret),
                 sources.of(setting.name)) for setting in SETTINGS]
    store_key_source = sources.of(STORE_KEY_SOURCE_KEY)
    is_set = store_key_source != DEFAULT_SOURCE
    rows.append(_row(STORE_KEY_SOURCE_KEY, REDACTED if is_set else None, is_set, store_key_source))
    return rows


def setting_at(config: Config, sources: ConfigSources, key: str) -> dict[str, Any]:
    """The row of one setting or of a part of its value; NameNotFound naming the keys that exist there."""
    rows = {row["key"]: row for row in effective_settings(config, sources)}
    name, *path = key.split(".")
    row = rows.get(name)
    if row is None:
        raise NameNotFound("setting", name, list(rows))
    value: Any = row["value"]
    walked = name
    for part in path:
        value = _child(value, part, walked)
        walked = f"{walked}.{part}"
    source = sources.of(key) if name == "databases" and len(path) == 1 else row["source"]
    sensitive = row["sensitive"] if name != "databases" or not path else REDACTED in str(value)
    return _row(key, value, sensitive, source)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of the rows by the kind of their source, and of those with a hidden part."""
    kinds = Counter(source_kind(row["source"]) for row in rows)
    return {"settings": len(rows), "by_source": {kind: kinds[kind] for kind in _SOURCE_KINDS if kinds[kind]},
            "sensitive": sum(1 for row in rows if row["sensitive"])}


def source_kind(source: str) -> str:
    """"environment TOOLHOST_X" -> "environment"; a databases row of several sources counts as its first."""
    return next((kind for kind in _SOURCE_KINDS if source.startswith(kind)), source)


def _row(key: str, value: Any, sensitive: bool, source: str) -> dict[str, Any]:
    # "sensitive", not "secret": the server's redactor hides the value of any field named like a secret.
    return {"key": key, "value": value, "source": source, "sensitive": sensitive}


def _shown(name: str, value: Any, secret: bool) -> tuple[Any, bool]:
    """The value as JSON, its secret parts hidden, and whether anything was hidden."""
    if name == "databases":
        shown = {database: redacted_url(url) for database, url in value}
        return shown, any(shown[database] != url for database, url in value)
    if secret:
        text = redacted_url(value) if isinstance(value, str) else (REDACTED if value else value)
        return text, text != value
    plain = _as_json(value)
    hidden = _hide_userinfo(plain)
    return hidden, hidden != plain


def _as_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _as_json(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_as_json(item) for item in value]
    return value


def _hide_userinfo(value: Any) -> Any:
    if isinstance(value, str):
        return _USERINFO_PASSWORD.sub(lambda found: f"{found['head']}{REDACTED}@", value)
    if isinstance(value, list):
        return [_hide_userinfo(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _hide_userinfo(item) for key, item in value.items()}
    return value


def _child(value: Any, part: str, walked: str) -> Any:
    if isinstance(value, Mapping):
        if part not in value:
            raise NameNotFound(f"key of {walked}", part, [str(key) for key in value])
        return value[part]
    if isinstance(value, list):
        indexes = [str(index) for index in range(len(value))]
        if part not in indexes:
            raise NameNotFound(f"entry of {walked}", part, indexes)
        return value[int(part)]
    raise NameNotFound(f"part of {walked} (a single value: ask for {walked})", part, [])
