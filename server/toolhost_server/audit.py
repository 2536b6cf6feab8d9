"""The audit trail: one record per call, to the log stream at once and to the database in batches.

A record says who called which tool, when, for how long and how it ended, and which argument keys were
given — never their values, nor any output. The database write is off the call path: records wait in a
queue bounded in bytes (store_buffer_bytes) that a background task drains in batches; while the database is
down they are kept and written once it is back, and beyond the bound the oldest are dropped and counted (the log
line of each call has been written already). See batching.py for what is retried and what may be lost.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .batching import DEFAULT_MAX_WAITING_BYTES, BatchWriter
from .logs.record import EXTRAS_FINAL
from .sanitize import REDACTED_BY, LearningRedactor, Redactor, current_redactor

logger = logging.getLogger("toolhost.audit")
_MESSAGE = "call tool=%s caller=%s outcome=%s duration_ms=%.1f call_id=%s argument_keys=%s"
_MESSAGE_WITH_CLIENT_TRACE_ID = _MESSAGE + " client_trace_id=%s"
# A value a caller chose is written as it is only when it cannot be read as more than one logfmt value: printable
# ASCII without a space, `"`, `=` or backslash. Any other is quoted (`client_trace_id=x caller=admin` would
# otherwise add a field for a logfmt reader).
_PLAIN_VALUE = re.compile(r'[!#-<>-\[\]-~]+')


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
    # How many keys the arguments had: `argument_keys` keeps at most 64 (request_checks.recorded_keys).
    argument_key_count: int = 0
    # The caller's own correlation id, when it sent one that is no W3C trace id (the REST API's trace_id).
    client_trace_id: str = ""

    def as_dict(self) -> dict[str, Any]:
        # Spelled out: dataclasses.asdict deep-copies every field, which cost more than the rest of the log line.
        return {
            "time": self.time.isoformat(), "caller": self.caller, "auth_method": self.auth_method, "tool": self.tool,
            "call_id": self.call_id, "trace_id": self.trace_id, "duration_ms": self.duration_ms,
            "outcome": self.outcome, "argument_keys": list(self.argument_keys),
            "argument_key_count": self.argument_key_count, "client_trace_id": self.client_trace_id,
        }


# The record object with its datetime, float and tuple, besides its text. A typical record held 0.3 KiB
# measured with tracemalloc, and is estimated at 0.7 KiB: the estimate errs high (it counts the texts that
# records share, such as the tool's name, each time).
_RECORD_OVERHEAD_BYTES = 256
_TUPLE_SLOT_BYTES = 8


def estimated_size(record: AuditRecord) -> int:
    """Roughly the memory `record` holds, in bytes: what store_buffer_bytes counts."""
    texts = (record.caller, record.auth_method, record.tool, record.call_id, record.trace_id, record.outcome,
             record.client_trace_id)
    keys = record.argument_keys
    return (_RECORD_OVERHEAD_BYTES + sum(map(sys.getsizeof, texts)) + sum(map(sys.getsizeof, keys))
            + _TUPLE_SLOT_BYTES * len(keys))


class AuditTrail:
    """Where the pipeline reports each call: the log line now, and `store` (if any) later, in batches.

    `store` receives lists of records in a worker thread; a batch it cannot write is kept and retried (see
    BatchWriter), within `max_waiting_bytes`. Call `start()` on the event loop before the first record and
    `close()` to write what is still waiting.

    With `redactor` (the one the log handlers' RedactingLogFilter holds), the log line is redacted here, where
    the few fields a caller chose are known, and the filters pass it on as it is: the generic filter would
    look at every field of the record, on every handler, on every call.
    """

    def __init__(
        self,
        store: Callable[[Sequence[AuditRecord]], None] | None = None,
        *,
        redactor: Redactor | LearningRedactor | None = None,
        batch_size: int = 500,
        flush_seconds: float = 1.0,
        max_waiting_bytes: int = DEFAULT_MAX_WAITING_BYTES,
        retry_seconds: float = 0.5,
    ) -> None:
        self._redactor = redactor
        self.writer: BatchWriter[AuditRecord] | None = None
        """What writes the records to `store`, None without one: its stats() are the metrics'."""
        if store is not None:
            self.writer = BatchWriter(store, what="audit records", logger=logger, size_of=estimated_size,
                                      max_waiting_bytes=max_waiting_bytes, batch_size=batch_size,
                                      flush_seconds=flush_seconds, retry_seconds=retry_seconds)

    @property
    def dropped(self) -> int:
        """Records that never reached the store because more than max_waiting_bytes were waiting."""
        return self.writer.dropped if self.writer is not None else 0

    @property
    def failed(self) -> int:
        """Records the store refused, or could not write before close() gave up."""
        return self.writer.failed if self.writer is not None else 0

    def start(self) -> None:
        if self.writer is not None:
            self.writer.start()

    def record(self, entry: AuditRecord) -> None:
        if entry.client_trace_id and self._redactor is not None:
            # Kept as the log shows it: the caller's free text may hold a secret, which the store would keep
            # for as long as it keeps records (the tool name and call id are names the server checks).
            redacted = current_redactor(self._redactor).redact_text(entry.client_trace_id)
            if redacted.redacted:
                entry = dataclasses.replace(entry, client_trace_id=redacted.value)
        if logger.isEnabledFor(logging.INFO):
            self._log(entry)
        if self.writer is not None:
            self.writer.add(entry)

    def _log(self, entry: AuditRecord) -> None:
        fields = entry.as_dict()
        extra: dict[str, Any] = {"audit": fields, EXTRAS_FINAL: True}  # `fields` is this record's alone
        if self._redactor is not None:
            redactor = current_redactor(self._redactor)
            # What the caller chose (its identity, the tool name it asked for, its call and client trace ids and
            # argument keys); the rest the server wrote: times, hex trace ids, outcome codes.
            untrusted = (entry.caller, entry.tool, entry.call_id, entry.client_trace_id, *entry.argument_keys)
            if any(map(redactor.find_spans, untrusted)):  # rarely: most calls' fields hold no trigger at all
                caller, tool, call_id, client_trace_id, *keys = redactor.redact_value(untrusted).value
                fields.update(caller=caller, tool=tool, call_id=call_id, client_trace_id=client_trace_id,
                              argument_keys=keys)
            extra[REDACTED_BY] = redactor
        # Made here and handed to the handlers: logger.info would first walk the stack to find the calling line,
        # which is always this one.
        args: tuple[Any, ...] = (logfmt_value(fields["tool"]), logfmt_value(fields["caller"]), fields["outcome"],
                                 fields["duration_ms"], logfmt_value(fields["call_id"]),
                                 logfmt_value(",".join(fields["argument_keys"]) or "-"))
        message = _MESSAGE
        if entry.client_trace_id:
            message, args = _MESSAGE_WITH_CLIENT_TRACE_ID, (*args, logfmt_value(fields["client_trace_id"]))
        logger.handle(logger.makeRecord(logger.name, logging.INFO, __file__, 0, message, args, None, "_log", extra))

    async def close(self) -> None:
        """Stop the writer after storing what is waiting."""
        if self.writer is not None:
            await self.writer.close()


def logfmt_value(value: str) -> str:
    """`value` as one value of a `key=value` log line: as it is when plain, else JSON-quoted in ASCII."""
    return value if _PLAIN_VALUE.fullmatch(value) else json.dumps(value)
