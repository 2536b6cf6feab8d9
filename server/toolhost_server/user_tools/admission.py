"""Whether a user tool may be enabled (or created, which enables it) beside the tools already enabled: the tool
conflicts' `incompatible` pairs refuse it, the `equivalent` ones are reported.

The check runs inside the transaction that stores the enabled tool, under the lock every such transaction takes
(table.ADMISSION_LOCK_ID), and reads the stored enabled flags of the other user tools: two enables of an
incompatible pair, on one server or on two sharing a database, cannot both pass. A built-in or catalog tool counts
as enabled when this server serves it.

What the caller learns is limited to what it may see: a conflict with a tool hidden from it is still enforced,
but named "a tool you cannot see", without its hint (which may name it), and hidden equivalents are not returned.
User tools are never hidden from a caller who manages them (ListUserTools shows them all).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from sqlalchemy import Connection, or_, select

from ..errors import FailedPreconditionError
from ..store.schema import tool_conflicts, user_tools
from .records import ConflictRecord, UserToolRecord


class ConflictAdmission:
    """One admission check (table.Admission), made for one request: `served_elsewhere` are the names of the
    built-in and catalog tools this server serves, `may_see` tells whether the caller sees a tool of those.
    After it passed, `equivalents` holds the visible enabled tools equivalent to the admitted one."""

    def __init__(self, served_elsewhere: Collection[str], may_see: Callable[[str], bool], verb: str) -> None:
        self._served_elsewhere = frozenset(served_elsewhere)
        self._may_see = may_see
        self._verb = verb  # "enable" or "create", for the refusal
        self.equivalents: list[ConflictRecord] = []

    def __call__(self, connection: Connection, tool: UserToolRecord) -> None:
        slug = tool.slug
        conflicts = [_record(row) for row in connection.execute(select(tool_conflicts).where(
            or_(tool_conflicts.c.tool_a == slug, tool_conflicts.c.tool_b == slug)))]
        others = {_other(conflict, slug) for conflict in conflicts}
        stored: dict[str, bool] = {}
        if others:
            rows = connection.execute(select(user_tools.c.slug, user_tools.c.enabled).where(
                user_tools.c.slug.in_(sorted(others))))
            stored = {slug: bool(flag) for slug, flag in rows}

        def enabled(name: str) -> bool:
            return name in self._served_elsewhere or stored.get(name, False)

        def visible(name: str) -> bool:
            return name in stored or self._may_see(name)

        enabled_conflicts = sorted((c for c in conflicts if enabled(_other(c, slug))), key=_pair)
        for conflict in enabled_conflicts:
            if conflict.type == "incompatible":
                raise _refusal(self._verb, slug, conflict, visible(_other(conflict, slug)))
        self.equivalents = [c for c in enabled_conflicts if c.type == "equivalent" and visible(_other(c, slug))]


def _refusal(verb: str, slug: str, conflict: ConflictRecord, visible: bool) -> FailedPreconditionError:
    if not visible:
        return FailedPreconditionError(
            f"cannot {verb} user tool {slug!r}: it is incompatible with a tool you cannot see, which is enabled; "
            "ask an administrator to disable that tool or to delete the conflict")
    other = _other(conflict, slug)
    hint = f": {conflict.resolution_hint}" if conflict.resolution_hint else ""
    return FailedPreconditionError(
        f"cannot {verb} user tool {slug!r}: it is incompatible with {other!r}, which is enabled{hint}; disable "
        f"{other!r} first, or delete the conflict (DeleteToolConflict)")


def _record(row: Any) -> ConflictRecord:
    first, second = sorted((row.tool_a, row.tool_b))
    return ConflictRecord(first, second, row.type, row.resolution_hint)


def _other(conflict: ConflictRecord, slug: str) -> str:
    return conflict.tool_b if conflict.tool_a == slug else conflict.tool_a


def _pair(conflict: ConflictRecord) -> tuple[str, str]:
    return (conflict.tool_a, conflict.tool_b)
