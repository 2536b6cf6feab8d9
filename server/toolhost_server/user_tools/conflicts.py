"""The tool conflicts table (PocketDev's tool_conflicts): pairs of tools that do the same thing (`equivalent`) or
must not be enabled together (`incompatible`), and the in-memory map of the tools equivalent to a provider's own.

A pair is unordered and stored once, the smaller name (in code-point order) as tool_a; rows written in the other
order (by hand, or by an older seed) are read as the same pair. `native:Name` is a CLI provider's own tool. The
table holds at most MAX_CONFLICTS pairs, and is listed a page at a time by the database (keyset on the pair).
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextvars
import json
import logging
import re
import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from opentelemetry import trace
from sqlalchemy import Connection, and_, delete, func, insert, or_, select
from sqlalchemy import text as sql_text

from ..audit import AuditRecord, AuditTrail
from ..auth import Caller, require_right
from ..auth.rights import Right
from ..catalog.definition import NAME_PATTERN
from ..errors import (
    FailedPreconditionError,
    InvalidPageTokenError,
    InvalidRequestError,
    ResourceNotFoundError,
    ToolhostError,
)
from ..pipeline import new_call_id
from ..providers import NATIVE_PREFIX
from ..registry import Snapshot
from ..store.database import Store
from ..store.errors import StoreError
from ..store.schema import SEED_ROWS, tool_conflicts
from ..telemetry import trace_id_of
from .records import ConflictRecord
from .table import ADMISSION_LOCK_ID

logger = logging.getLogger("toolhost.conflicts")

CONFLICT_TYPES = ("equivalent", "incompatible")
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
MAX_HINT_LENGTH = 1000
# Enough for every pair of a thousand tools' neighbours; a bound, so that the table cannot fill the store.
MAX_CONFLICTS = 10_000
# A provider's own tool: `native:` and a name as the provider spells it ("native:Bash"); the column holds 128.
_NATIVE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,120}")
# How old the cached map may get before a ListTools asks for a fresh read: another replica's change reaches
# this one at its next registry swap, or after this long at the latest.
REFRESH_SECONDS = 5.0

Pair = tuple[str, str]


class ToolConflicts:
    """Reads and changes the conflicts table; keeps the map of the tools equivalent to providers' own tools.

        conflicts = ToolConflicts(store)
        await conflicts.set(admin, ConflictRecord("bash", "native:Bash", "equivalent", "use Bash"))
        conflicts.natives_equivalent()           # {"bash": frozenset({"native:Bash"}), ...}
        await conflicts.incompatible_with("my_tool", served_names)
        await conflicts.delete(admin, "native:Bash", "bash")

    Reading and changing the table needs the admin role or the manage_tools right; each change, and each refused
    one, is audited (tool "tool_a~tool_b", outcome CONFLICT_SET, CONFLICT_DELETED or *_REFUSED:REASON). Until
    the first read of the table succeeds, the map holds the pairs a new database is seeded with, so that CLI
    providers are not offered toolhost's shell and file tools while the database is out of reach.
    """

    def __init__(self, store: Store, audit: AuditTrail | None = None) -> None:
        self.store = store
        self._audit = audit
        self._natives: Mapping[str, frozenset[str]] = _natives_of(_seed_rows())
        # When the last read was tried (monotonic): a store that is down is tried again at most this often.
        self._tried_at = -REFRESH_SECONDS
        self._loop: asyncio.AbstractEventLoop | None = None
        self._refreshing: asyncio.Task[None] | None = None
        # One read at a time, so that an older read never replaces the map a newer one left.
        self._reading = asyncio.Lock()

    # --- the cached map ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Read the table now (a failure is logged: the seeded pairs serve until a read succeeds), and from
        now on refresh on this event loop."""
        self._loop = asyncio.get_running_loop()
        await self.refresh()

    def natives_equivalent(self) -> Mapping[str, frozenset[str]]:
        """Tool name -> the provider tools ("native:Bash") it is equivalent to. From memory; a map older than
        REFRESH_SECONDS starts a fresh read in the background (the next caller gets it)."""
        if time.monotonic() - self._tried_at > REFRESH_SECONDS:
            self._schedule_refresh()
        return self._natives

    def on_snapshot(self, snapshot: Snapshot) -> None:
        """A registry listener: each new generation, perhaps another replica's change, reads the table again.
        Called from whichever thread prepares the swap, so the read is handed to the event loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._schedule_refresh)

    async def refresh(self) -> None:
        """Read the table into the map; a store that fails is logged and the map kept."""
        async with self._reading:
            self._tried_at = time.monotonic()
            try:
                rows = await asyncio.to_thread(self._read_all)
            except StoreError as exc:
                logger.warning("cannot read the tool conflicts (the previous ones still apply): %s", exc)
                return
            self._natives = _natives_of(rows)

    def _schedule_refresh(self) -> None:
        if self._loop is None or (self._refreshing is not None and not self._refreshing.done()):
            return
        # A context of its own: created from a call, the task would keep that call's context (its span among
        # them) alive for as long as the finished task stays here.
        self._refreshing = self._loop.create_task(self.refresh(), name="tool-conflicts-refresh",
                                                  context=contextvars.Context())

    # --- the table ------------------------------------------------------------------------------------------

    async def list(self, caller: Caller, page_size: int, page_token: str) -> tuple[builtins.list[ConflictRecord], str]:
        """One page of the conflicts sorted by (tool_a, tool_b), and the next page's token ("" on the last)."""
        require_right(caller, Right.MANAGE_TOOLS, "ListToolConflicts")
        if page_size < 0:
            raise InvalidRequestError(f"page_size must not be negative (got {page_size}); use 0 for the default "
                                      f"of {DEFAULT_PAGE_SIZE}")
        size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        after = _decode_token(page_token) if page_token else None
        records = await asyncio.to_thread(self._read_page, after, size + 1)
        more = len(records) > size
        page = records[:size]
        return page, _encode_token(_pair_of(page[-1])) if more else ""

    async def set(self, caller: Caller, conflict: ConflictRecord) -> ConflictRecord:
        """Add the conflict, or replace the one its pair has (in either order); the stored record."""
        with self._audited(caller, "CONFLICT_SET", conflict.tool_a, conflict.tool_b):
            require_right(caller, Right.MANAGE_TOOLS, "SetToolConflict")
            record = _checked(conflict)
            await asyncio.to_thread(self._write, record)
        logger.info("tool conflict set by %s: %s %s %s", caller.name, record.tool_a, record.type, record.tool_b)
        await self.refresh()
        return record

    async def delete(self, caller: Caller, tool_a: str, tool_b: str) -> ConflictRecord:
        """Remove the pair's conflict (in either order); ResourceNotFoundError when it has none."""
        with self._audited(caller, "CONFLICT_DELETED", tool_a, tool_b):
            require_right(caller, Right.MANAGE_TOOLS, "DeleteToolConflict")
            pair = _canonical(_checked_name(tool_a, "tool_a"), _checked_name(tool_b, "tool_b"))
            removed = await asyncio.to_thread(self._remove, pair)
            if removed is None:
                raise ResourceNotFoundError(
                    f"no conflict between {pair[0]!r} and {pair[1]!r}; ListToolConflicts shows the pairs there are")
        logger.info("tool conflict deleted by %s: %s %s %s", caller.name, removed.tool_a, removed.type,
                    removed.tool_b)
        await self.refresh()
        return removed

    async def incompatible_with(self, name: str, served: Collection[str]) -> builtins.list[ConflictRecord]:
        """The `incompatible` conflicts of `name` with a tool in `served`, sorted by pair."""
        return await self._conflicts_of(name, served, "incompatible")

    async def equivalent_to(self, name: str, served: Collection[str]) -> builtins.list[ConflictRecord]:
        """The `equivalent` conflicts of `name` with a tool in `served`, sorted by pair."""
        return await self._conflicts_of(name, served, "equivalent")

    async def _conflicts_of(self, name: str, served: Collection[str], kind: str) -> builtins.list[ConflictRecord]:
        served_names = frozenset(served)
        records = await asyncio.to_thread(self._read_of, name, kind)
        return sorted((r for r in records if _other(r, name) in served_names), key=_pair_of)

    @contextmanager
    def _audited(self, caller: Caller, done: str, tool_a: str, tool_b: str) -> Iterator[None]:
        started = time.perf_counter()
        outcome = f"{done}_REFUSED:INTERNAL"
        try:
            yield
            outcome = done
        except ToolhostError as exc:
            outcome = f"{done}_REFUSED:{exc.reason}"
            raise
        finally:
            if self._audit is not None:
                # Printable: a refused name may hold a NUL, which PostgreSQL would refuse in the audit row.
                pair = "".join(c if c.isprintable() else "?" for c in "~".join(sorted((tool_a[:127], tool_b[:127]))))
                self._audit.record(AuditRecord(
                    time=datetime.now(UTC), caller=caller.name, auth_method=caller.method.value, tool=pair,
                    call_id=new_call_id(), trace_id=trace_id_of(trace.get_current_span()),
                    duration_ms=(time.perf_counter() - started) * 1000, outcome=outcome,
                    argument_keys=("tool_a", "tool_b"), argument_key_count=2))

    # --- blocking, in a thread ------------------------------------------------------------------------------

    def _read_all(self) -> builtins.list[ConflictRecord]:
        """The pairs the natives map is made of: `equivalent` ones with a provider's own tool."""
        c = tool_conflicts.c
        with self.store.begin() as connection:
            return [_record(row) for row in connection.execute(select(tool_conflicts).where(
                c.type == "equivalent", or_(c.tool_a.startswith(NATIVE_PREFIX, autoescape=True),
                                            c.tool_b.startswith(NATIVE_PREFIX, autoescape=True))))]

    def _read_page(self, after: Pair | None, limit: int) -> builtins.list[ConflictRecord]:
        """Up to `limit` pairs after `after` in code-point order of (smaller name, larger name)."""
        with self.store.begin() as connection:
            first, second = _ordered_pair(connection)
            query = select(tool_conflicts)
            if after is not None:
                query = query.where(or_(first > after[0], and_(first == after[0], second > after[1])))
            rows = connection.execute(query.order_by(first, second).limit(limit))
            return [_record(row) for row in rows]

    def _read_of(self, name: str, kind: str) -> builtins.list[ConflictRecord]:
        with self.store.begin() as connection:
            rows = connection.execute(select(tool_conflicts).where(
                tool_conflicts.c.type == kind, or_(tool_conflicts.c.tool_a == name, tool_conflicts.c.tool_b == name)))
            return [_record(row) for row in rows]

    def _write(self, record: ConflictRecord) -> None:
        now = datetime.now(UTC)
        with self.store.begin() as connection:
            if connection.dialect.name == "postgresql":
                # The lock the admission of enabled user tools takes: the count below, and those checks, see every
                # pair set before them (SQLite's write transactions take turns already).
                connection.execute(sql_text("SELECT pg_advisory_xact_lock(:id)"), {"id": ADMISSION_LOCK_ID})
            existing = _rows_of(connection, (record.tool_a, record.tool_b))
            if not existing:
                count = connection.execute(select(func.count()).select_from(tool_conflicts)).scalar_one()
                if count >= MAX_CONFLICTS:
                    raise FailedPreconditionError(
                        f"the conflicts table holds {count} pairs, the most it keeps ({MAX_CONFLICTS}); delete the "
                        "pairs no longer needed (DeleteToolConflict) first")
            # The first time the pair was set survives a replacement, whichever order it was stored in.
            created_at = min((row.created_at for row in existing), default=now)
            if existing:
                connection.execute(delete(tool_conflicts).where(_pair_clause((record.tool_a, record.tool_b))))
            connection.execute(insert(tool_conflicts).values(
                tool_a=record.tool_a, tool_b=record.tool_b, type=record.type,
                resolution_hint=record.resolution_hint, created_at=created_at, updated_at=now))

    def _remove(self, pair: Pair) -> ConflictRecord | None:
        with self.store.begin() as connection:
            existing = _rows_of(connection, pair)
            if not existing:
                return None
            connection.execute(delete(tool_conflicts).where(_pair_clause(pair)))
            return _record(existing[0])


def _checked(conflict: ConflictRecord) -> ConflictRecord:
    """The conflict in canonical order, or InvalidRequestError saying what to fix."""
    tool_a = _checked_name(conflict.tool_a, "tool_a")
    tool_b = _checked_name(conflict.tool_b, "tool_b")
    if tool_a == tool_b:
        raise InvalidRequestError(f"a conflict is between two different tools; both are {tool_a!r}")
    if tool_a.startswith(NATIVE_PREFIX) and tool_b.startswith(NATIVE_PREFIX):
        raise InvalidRequestError("a conflict needs at least one toolhost tool: both names are a provider's own "
                                  f"({tool_a!r}, {tool_b!r})")
    if conflict.type not in CONFLICT_TYPES:
        raise InvalidRequestError(f"type must be one of {', '.join(CONFLICT_TYPES)} (got {conflict.type[:32]!r})")
    hint = conflict.resolution_hint
    if len(hint) > MAX_HINT_LENGTH or "\x00" in hint:
        raise InvalidRequestError(f"resolution_hint must be at most {MAX_HINT_LENGTH} characters of text without "
                                  "NUL, one sentence saying what to do")
    first, second = _canonical(tool_a, tool_b)
    return ConflictRecord(first, second, conflict.type, hint)


def _checked_name(name: str, field_name: str) -> str:
    if name.startswith(NATIVE_PREFIX):
        if _NATIVE_NAME.fullmatch(name.removeprefix(NATIVE_PREFIX)):
            return name
    elif NAME_PATTERN.fullmatch(name):
        return name
    shown = f"{name[:64]!r}" if name else "empty"
    raise InvalidRequestError(
        f"{field_name} {shown} is not a tool name: give a tool's name (letters, digits, '_', '.' or '-', starting "
        f"with a letter, at most 128) or {NATIVE_PREFIX}Name for a provider's own tool, e.g. {NATIVE_PREFIX}Bash")


def _canonical(tool_a: str, tool_b: str) -> Pair:
    return (tool_a, tool_b) if tool_a <= tool_b else (tool_b, tool_a)


def _pair_of(record: ConflictRecord) -> Pair:
    return (record.tool_a, record.tool_b)


def _other(record: ConflictRecord, name: str) -> str:
    return record.tool_b if record.tool_a == name else record.tool_a


def _pair_clause(pair: Pair) -> Any:
    """The pair's row in either order."""
    first, second = pair
    c = tool_conflicts.c
    return or_(and_(c.tool_a == first, c.tool_b == second), and_(c.tool_a == second, c.tool_b == first))


def _ordered_pair(connection: Connection) -> tuple[Any, Any]:
    """The row's pair in canonical order as SQL expressions, compared in code-point order on both databases
    (SQLite's default collation is; PostgreSQL's "C" collation is, whatever the database's own)."""
    c = tool_conflicts.c
    if connection.dialect.name == "postgresql":
        tool_a, tool_b = c.tool_a.collate("C"), c.tool_b.collate("C")
        return func.least(tool_a, tool_b), func.greatest(tool_a, tool_b)
    # SQLite's min() and max() of two arguments are scalar functions, not aggregates.
    return func.min(c.tool_a, c.tool_b), func.max(c.tool_a, c.tool_b)


def _rows_of(connection: Connection, pair: Pair) -> list[Any]:
    return list(connection.execute(select(tool_conflicts).where(_pair_clause(pair))))


def _record(row: Any) -> ConflictRecord:
    first, second = _canonical(row.tool_a, row.tool_b)
    return ConflictRecord(first, second, row.type, row.resolution_hint)


def _seed_rows() -> list[ConflictRecord]:
    return [ConflictRecord(*_canonical(row["tool_a"], row["tool_b"]), row["type"], row["resolution_hint"])
            for row in SEED_ROWS.get("tool_conflicts", ())]


def _natives_of(records: Collection[ConflictRecord]) -> Mapping[str, frozenset[str]]:
    natives: dict[str, set[str]] = {}
    for record in records:
        if record.type != "equivalent":
            continue
        for tool, native in ((record.tool_a, record.tool_b), (record.tool_b, record.tool_a)):
            if native.startswith(NATIVE_PREFIX) and not tool.startswith(NATIVE_PREFIX):
                natives.setdefault(tool, set()).add(native)
    return MappingProxyType({tool: frozenset(names) for tool, names in natives.items()})


def _encode_token(after: Pair) -> str:
    raw = json.dumps({"a": list(after)}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str) -> Pair:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        first, second = data["a"]
    # RecursionError: a forged token of deeply nested JSON.
    except (ValueError, KeyError, TypeError, RecursionError):
        raise InvalidPageTokenError("page_token is not one this server issued; start again with an empty "
                                    "page_token") from None
    if not (isinstance(first, str) and isinstance(second, str)):
        raise InvalidPageTokenError("page_token is not one this server issued; start again with an empty "
                                    "page_token")
    return (first, second)
