"""The audit trail: one record per call, to the log stream at once and to the database in batches.

A record says who called which tool, when, for how long and how it ended, and which argument keys were
given — never their values, nor any output. The database write is off the call path: records wait in a
bounded queue that a background task drains in batches; when the database cannot keep up the oldest waiting
records are dropped and counted (the log line of each call has been written already).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

logger = logging.getLogger("toolhost.audit")


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One call as the audit trail keeps it. `outcome` is "OK", the tool's error code (TIMEOUT,
    NON_ZERO_EXIT, ...) or the refusal's reason (TOOL_NOT_FOUND, PERMISSION_DENIED, ...)."""

    time: datetime
    caller: str
    auth_method: str
    tool: str
    call_id: str
    trace_id: str
    duration_ms: float
    outcome: str
    argument_keys: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        fields = asdict(self)
        fields["time"] = self.time.isoformat()
        fields["argument_keys"] = list(self.argument_keys)
        return fields


class AuditTrail:
    """Where the pipeline reports each call: the log line now, and `store` (if any) later, in batches.

    `store` receives lists of records in a worker thread; an exception there is logged and the batch lost.
    Call `start()` on the event loop before the first record and `close()` to write what is still waiting.
    """

    def __init__(
        self,
        store: Callable[[Sequence[AuditRecord]], None] | None = None,
        *,
        batch_size: int = 500,
        flush_seconds: float = 1.0,
        max_waiting: int = 50_000,
    ) -> None:
        self._store = store
        self._batch_size = batch_size
        self._flush_seconds = flush_seconds
        self._waiting: deque[AuditRecord] = deque(maxlen=max_waiting)
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        """Records that never reached the store because too many were waiting."""
        self.failed = 0
        """Records the store could not write."""
        self._last_failure_logged = -math.inf

    def start(self) -> None:
        if self._store is not None and self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.create_task(self._drain(), name="audit-writer")

    def record(self, entry: AuditRecord) -> None:
        logger.info(
            "call tool=%s caller=%s outcome=%s duration_ms=%.1f call_id=%s argument_keys=%s",
            entry.tool, entry.caller, entry.outcome, entry.duration_ms, entry.call_id,
            ",".join(entry.argument_keys) or "-", extra={"audit": entry.as_dict()})
        if self._store is None or self._wake is None:
            return
        if len(self._waiting) == self._waiting.maxlen:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 10_000 == 0:
                logger.warning("the audit store falls behind: %d records dropped so far (the log has them)",
                               self.dropped)
        self._waiting.append(entry)
        if len(self._waiting) >= self._batch_size:
            self._wake.set()

    async def _drain(self) -> None:
        assert self._wake is not None
        while True:
            with suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._flush_seconds)
            self._wake.clear()
            await self._write_waiting()

    async def _write_waiting(self) -> None:
        assert self._store is not None
        while self._waiting:
            batch = [self._waiting.popleft() for _ in range(min(self._batch_size, len(self._waiting)))]
            try:
                await asyncio.to_thread(self._store, batch)
            except Exception:
                self.failed += len(batch)
                # Once a minute at most: a database that is down would otherwise add a traceback every second.
                now = time.monotonic()
                if now - self._last_failure_logged >= 60:
                    self._last_failure_logged = now
                    logger.exception("writing audit records to the database failed (%d records so far); they are "
                                     "in the log only", self.failed)

    async def close(self) -> None:
        """Stop the writer after storing what is waiting."""
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._store is not None:
            await self._write_waiting()
