"""Races made certain on PostgreSQL: a test connection holds a lock, the contenders queue behind it, and the test
waits until each one does (pg_stat_activity says so) before letting them go.

    with psycopg.connect(libpq_dsn(url)) as holder:
        holder.execute("SELECT pg_advisory_lock(...)")
        started = [pool.submit(outcome_of, contender) for contender in contenders]
        await queued_behind_lock(url, started, "both contenders wait")
        holder.rollback()
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import psycopg
from sqlalchemy import URL

from helpers.waiting import until


def libpq_dsn(url: URL) -> str:
    """The store's SQLAlchemy URL as psycopg's own connect() takes it."""
    return url.render_as_string(hide_password=False).replace("postgresql+psycopg", "postgresql")


def store_connections_waiting_on_locks(url: URL) -> int:
    with psycopg.connect(libpq_dsn(url), autocommit=True) as watcher:
        row = watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                              "AND application_name = 'toolhost' AND wait_event_type = 'Lock'").fetchone()
    return int(row[0]) if row else 0


async def queued_behind_lock(url: URL, started: list[Future[Any]], what: str) -> None:
    """Wait until each started contender waits on a lock or has finished (it took no lock then)."""
    await until(lambda: store_connections_waiting_on_locks(url) + sum(future.done() for future in started)
                == len(started), what)


def outcome_of(call: Callable[[], Any]) -> Any:
    """What `call` returned, or the exception it raised: the outcome itself is what a race test compares."""
    try:
        return call()
    except Exception as exc:
        return exc
