"""Python entrypoints of the catalogs tests/test_check_command.py writes: a tool that leaves a mark where it is
told (to prove whether a check called it), and two whose examples depend on each other's order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# What `make` was asked to make, in this server process: `need` fails until its name is here.
_made: set[str] = set()


def mark(path: str) -> str:
    Path(path).write_text("called", encoding="utf-8")
    return f"marked {path}"


def make(name: str) -> str:
    _made.add(name)
    return f"made {name}"


def need(name: str) -> dict[str, Any]:
    if name not in _made:
        raise LookupError(f"nothing named {name} was made")
    return {"found": name}
