"""The todos table: the todo tool's lists, one per caller identity (`owner`: the caller's auth method and name,
`token:alice`, since schema version 6) and session, written at once.

Not through a batch writer like the audit trail: a change is committed before the tool answers, so a list the
caller was told about survives a crash or restart. Blocking: the tool calls it in a thread.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update
from sqlalchemy import text as sql_text

from .database import Store
from .schema import todos

# pg_advisory_xact_lock(int, int) keys: this class and a hash of the owner. The two-key form never meets the
# one-key form the schema migrations take, and two owners sharing a hash only wait for each other.
_TODO_LOCK_CLASS = 0x746F646F  # "todo"
_LOCK_OWNER = sql_text("SELECT pg_advisory_xact_lock(CAST(:lock_class AS integer), CAST(:key AS integer))")


class TodoNotFound(Exception):
    """No item with that id in the caller's list."""


class TodoLimitReached(Exception):
    """The list holds as many items as it may, or the owner as many lists; `code` says which."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class TodoItem:
    """One item of a list; `id` numbers it within its list."""

    id: int
    content: str
    status: str
    created_at: datetime
    updated_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.content, "status": self.status,
                "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat()}


@dataclass(frozen=True, slots=True)
class TodoList:
    """A list as a change left it: its items by id, the item added or updated, how many items a clear removed."""

    items: tuple[TodoItem, ...]
    changed: TodoItem | None = None
    cleared: int = 0


class TodoTable:
    """Reads and changes the lists of one owner at a time; every method is one transaction.

        table = TodoTable(store)
        table.add("token:alice", "default", "write the tests", "pending", max_items=500, max_lists=100)
        table.update("token:alice", "default", 1, status="completed")
        table.read("token:alice", "default").items
        table.clear("token:alice", "default").cleared    # 1
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def read(self, owner: str, session: str) -> TodoList:
        with self.store.begin() as connection:
            return TodoList(_items(connection, owner, session))

    def add(self, owner: str, session: str, content: str, status: str, *, max_items: int,
            max_lists: int) -> TodoList:
        """Append an item, numbered one past the list's highest id; TodoLimitReached beyond either bound."""
        now = datetime.now(UTC)
        with self.store.begin() as connection:
            # The owner's adds take turns, so that the count and the next id are read by one add at a time
            # (SQLite's BEGIN IMMEDIATE already serialises every writer).
            _lock_owner(connection, owner)
            count, highest = connection.execute(
                select(func.count(), func.max(todos.c.id)).where(*_list_of(owner, session))).one()
            if count >= max_items:
                raise TodoLimitReached(
                    f"the list {session!r} already holds {count} items, the most one list may; complete and clear "
                    "it, or use another session", "TODO_LIST_FULL")
            if count == 0:
                lists = connection.execute(
                    select(func.count(func.distinct(todos.c.session))).where(todos.c.owner == owner)).scalar_one()
                if lists >= max_lists:
                    raise TodoLimitReached(
                        f"you already have {lists} todo lists, the most one caller may keep; clear one you no "
                        "longer need", "TODO_TOO_MANY_LISTS")
            item = TodoItem((highest or 0) + 1, content, status, now, now)
            connection.execute(insert(todos).values(
                owner=owner, session=session, id=item.id, content=content, status=status, created_at=now,
                updated_at=now))
            return TodoList(_items(connection, owner, session), changed=item)

    def update(self, owner: str, session: str, item_id: int, *, content: str | None = None,
               status: str | None = None) -> TodoList:
        """Change an item's content and/or status; TodoNotFound when the list has no such id."""
        changes: dict[str, Any] = {"updated_at": datetime.now(UTC)}
        if content is not None:
            changes["content"] = content
        if status is not None:
            changes["status"] = status
        with self.store.begin() as connection:
            done = connection.execute(
                update(todos).where(*_list_of(owner, session), todos.c.id == item_id).values(changes))
            if done.rowcount == 0:
                raise TodoNotFound(f"the list {session!r} has no item {item_id}")
            items = _items(connection, owner, session)
        changed = next(item for item in items if item.id == item_id)
        return TodoList(items, changed=changed)

    def clear(self, owner: str, session: str) -> TodoList:
        """Remove every item of the list; its ids start again at 1."""
        with self.store.begin() as connection:
            _lock_owner(connection, owner)
            removed = connection.execute(delete(todos).where(*_list_of(owner, session))).rowcount
        return TodoList((), cleared=removed)


def _list_of(owner: str, session: str) -> Sequence[Any]:
    return (todos.c.owner == owner, todos.c.session == session)


def _items(connection: Connection, owner: str, session: str) -> tuple[TodoItem, ...]:
    rows = connection.execute(
        select(todos.c.id, todos.c.content, todos.c.status, todos.c.created_at, todos.c.updated_at)
        .where(*_list_of(owner, session)).order_by(todos.c.id)).all()
    return tuple(TodoItem(row.id, row.content, row.status, _aware(row.created_at), _aware(row.updated_at))
                 for row in rows)


def _lock_owner(connection: Connection, owner: str) -> None:
    if connection.dialect.name == "postgresql":
        key = int.from_bytes(hashlib.sha256(owner.encode("utf-8")).digest()[:4], "big", signed=True)
        connection.execute(_LOCK_OWNER, {"lock_class": _TODO_LOCK_CLASS, "key": key})


def _aware(moment: datetime) -> datetime:
    # SQLite keeps no time zone: the times written were UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
