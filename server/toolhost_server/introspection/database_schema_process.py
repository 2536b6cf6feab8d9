"""The server's side of database_schema's reading process (database_schema_child): start it with this server's
interpreter, hand it the request through a pipe, collect each database's result as it comes, and kill it at the
call's deadline, or when the call is cancelled. Whatever a database does (stop answering after the login, send a
schema built to fill memory), what is left after the call is nothing: no thread, no process, no connection."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .database_reading import ReadLimits, SourceResult
from .database_sources import DatabaseSource

# The reading process's memory: its address space (the interpreter, SQLAlchemy and psycopg take about 100 MB of it)
# and SQLite's heap within it. A schema that needs more is an entry saying it is too large.
ADDRESS_SPACE_BYTES = 512 * 1024 * 1024
SQLITE_HEAP_BYTES = 256 * 1024 * 1024
# The process says which databases ran out of time this long before the server would kill it.
_CHILD_MARGIN_SECONDS = 0.5
# What is kept of the process's stderr (a crash's traceback) for the server log.
_STDERR_KEPT_BYTES = 8192
_CHILD_CODE = ("import sys; sys.path.insert(0, sys.argv[1]); "
               "from toolhost_server.introspection.database_schema_child import main; main()")


@dataclass(frozen=True, slots=True)
class Reading:
    """What one call asks of its reading process."""

    sources: Sequence[DatabaseSource]
    table: str | None
    row_counts: bool
    limits: ReadLimits
    deadline: float  # time.monotonic()


@dataclass
class ReadingOutcome:
    """Each database's result, by name; whether the reading ran out of time, and else why it ended early."""

    results: dict[str, SourceResult] = field(default_factory=dict)
    expired: bool = False
    ended_early: str = ""


async def read_in_child(reading: Reading, logger: logging.Logger,
                        running: set[asyncio.subprocess.Process]) -> ReadingOutcome:
    """Run `reading` in a new reading process (kept in `running` while it lives, for the server to kill at
    shutdown) and return what it answered by the deadline."""
    outcome = ReadingOutcome()
    secrets = [secret for source in reading.sources for secret in source.secrets]
    # The lines are at most a database's tables (limits.output_bytes of pretty JSON, less as compact JSON) and its
    # notes (a few per table, each under a kilobyte).
    line_limit = 2 * reading.limits.output_bytes + 4 * 1024 * 1024
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-c", _CHILD_CODE, _package_parent(),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=_environment(), cwd="/", limit=line_limit, start_new_session=True)
    except OSError as exc:
        logger.warning("database_schema: cannot start the reading process: %s", exc)
        outcome.ended_early = "the reading process could not start"
        return outcome
    running.add(process)
    stderr = asyncio.ensure_future(_tail(process.stderr))
    try:
        try:
            async with asyncio.timeout_at(_loop_time(reading.deadline)):
                await _send(process, reading)
                await _collect(process, outcome, logger)
                await process.wait()
        except TimeoutError:
            outcome.expired = True
        except (OSError, ValueError, asyncio.LimitOverrunError) as exc:  # a broken pipe, a line beyond the limit
            outcome.ended_early = f"the reading process failed ({type(exc).__name__})"
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        # Shielded: a cancelled call still reaps its process before the slot it holds is given back.
        await asyncio.shield(process.wait())
        running.discard(process)
        tail = await asyncio.shield(stderr)
    missing = [source.name for source in reading.sources if source.name not in outcome.results]
    if missing and not outcome.expired and not outcome.ended_early:
        outcome.ended_early = f"the reading process ended with status {process.returncode}"
    if missing and outcome.ended_early:
        logger.warning("database_schema: %s before reading %s: %s", outcome.ended_early, ", ".join(missing),
                       _without(tail, secrets) or "nothing on its stderr")
    return outcome


async def _send(process: asyncio.subprocess.Process, reading: Reading) -> None:
    assert process.stdin is not None
    request = {
        "sources": [{"name": source.name, "problem": source.problem,
                     "url": source.url.render_as_string(hide_password=False) if source.url is not None else None}
                    for source in reading.sources],
        "table": reading.table, "row_counts": reading.row_counts, "limits": asdict(reading.limits),
        "deadline": reading.deadline - _CHILD_MARGIN_SECONDS,
        "address_space_bytes": ADDRESS_SPACE_BYTES, "sqlite_heap_bytes": SQLITE_HEAP_BYTES,
        "libpq_environment": {key: value for key, value in os.environ.items() if key.startswith("PG")},
    }
    process.stdin.write(json.dumps(request).encode("utf-8"))
    await process.stdin.drain()
    process.stdin.close()


async def _collect(process: asyncio.subprocess.Process, outcome: ReadingOutcome, logger: logging.Logger) -> None:
    assert process.stdout is not None
    while line := await process.stdout.readline():
        message: dict[str, Any] = json.loads(line)
        if "result" in message:
            outcome.results[str(message["source"])] = SourceResult.from_json(message["result"])
        elif "log" in message:
            logger.warning("%s", message["log"])
        elif message.get("expired"):
            outcome.expired = True


async def _tail(stream: asyncio.StreamReader | None) -> str:
    """The last bytes the process wrote to `stream`, read as they come so that it never waits on a full pipe."""
    kept = b""
    if stream is not None:
        while chunk := await stream.read(65536):
            kept = (kept + chunk)[-_STDERR_KEPT_BYTES:]
    return kept.decode("utf-8", "replace").strip()


def _without(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "[REDACTED]")
    return text


def _environment() -> dict[str, str]:
    """Nothing of the server's environment but where programs and the home directory are (libpq looks for
    ~/.pgpass and ~/.postgresql there): the server's may hold the store key and database URLs with passwords."""
    environment = {"LC_ALL": "C.UTF-8", "MALLOC_ARENA_MAX": "2", "PATH": os.environ.get("PATH", os.defpath)}
    if "HOME" in os.environ:
        environment["HOME"] = os.environ["HOME"]
    return environment


def _package_parent() -> str:
    """The directory that holds toolhost_server, for the process started with -I (which ignores PYTHONPATH and
    the current directory): it imports the server's own code, never a file in a directory an agent may write."""
    return str(Path(__file__).resolve().parents[2])


def _loop_time(monotonic_deadline: float) -> float:
    loop = asyncio.get_running_loop()
    return loop.time() + (monotonic_deadline - time.monotonic())
