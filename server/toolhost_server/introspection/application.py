"""What application_info answers: the server's version, runtime, process, addresses, catalog and tool counts."""

from __future__ import annotations

import os
import platform
import pwd
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from typing import Any

from .. import __version__
from .parts import ServerParts

DISTRIBUTION = "toolhost-server"
# When the server runs from a tree that is not installed (no metadata to read its requirements from).
_FALLBACK_LIBRARIES = ("grpcio", "protobuf", "pyyaml", "sqlalchemy", "psycopg", "opentelemetry-sdk", "starlette",
                       "uvicorn", "watchfiles", "cryptography", "httpx", "dnspython", "prometheus-client")
_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class StartTime:
    """When the server was built: a wall-clock time to show, a monotonic one to measure uptime by."""

    wall: datetime = field(default_factory=lambda: datetime.now(UTC))
    monotonic: float = field(default_factory=time.monotonic)

    def uptime_seconds(self) -> float:
        return round(time.monotonic() - self.monotonic, 3)


def application_info(parts: ServerParts, started: StartTime) -> dict[str, Any]:
    """The application_info tool's structured output (its summary's notes are filled by the caller)."""
    notes: list[str] = []
    snapshot = parts.registry.snapshot
    specs = [tool.spec for tool in snapshot.tools().values()]
    return {
        "version": __version__,
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "libraries": libraries(),
        "platform": {"system": platform.system(), "release": platform.release(), "machine": platform.machine(),
                     "description": platform.platform()},
        "process": {"pid": os.getpid(), "user": _user_name(os.geteuid()), "uid": os.geteuid(),
                    "started_at": started.wall.isoformat(), "uptime_seconds": started.uptime_seconds()},
        "addresses": _addresses(parts, notes),
        "catalog_dirs": [{"path": str(path), "exists": path.is_dir()} for path in parts.catalog_dirs],
        "tools": {
            "generation": snapshot.generation,
            "count": len(specs),
            "by_source": dict(sorted(Counter(spec.source.value for spec in specs).items())),
            "by_category": dict(sorted(Counter(spec.category for spec in specs).items())),
        },
        "summary": {"tools": len(specs), "generation": snapshot.generation, "notes": notes},
    }


@cache
def libraries() -> dict[str, str | None]:
    """The version of each library the server requires (its distribution's own list), None when missing."""
    try:
        requirements = metadata.requires(DISTRIBUTION) or []
        names = [found.group(0) for requirement in requirements if "extra ==" not in requirement
                 and (found := _REQUIREMENT_NAME.match(requirement))]
    except metadata.PackageNotFoundError:
        names = list(_FALLBACK_LIBRARIES)
    versions: dict[str, str | None] = {}
    for name in sorted(set(names), key=str.lower):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _addresses(parts: ServerParts, notes: list[str]) -> list[dict[str, Any]]:
    if parts.surface is None:
        notes.append("this server does not record what it serves, so the addresses are the configured ones")
        return _configured_addresses(parts)
    served = [{"kind": a.kind, "address": a.address, "tls": a.tls} for a in parts.surface.addresses()]
    if not served:
        notes.append("no listener has been bound yet (the addresses are recorded as the server binds them); "
                     "these are the configured ones")
        return _configured_addresses(parts)
    return served


def _configured_addresses(parts: ServerParts) -> list[dict[str, Any]]:
    config = parts.config
    tls = bool(config.tls_cert_file)
    found = [{"kind": "grpc", "address": config.grpc_address, "tls": tls, "configured_only": True}]
    if config.unix_socket:
        found.append({"kind": "unix", "address": f"unix:{config.unix_socket}", "tls": False,
                      "configured_only": True})
    if config.http_address:
        found.append({"kind": "http", "address": config.http_address, "tls": tls, "configured_only": True})
    return found


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
