"""A logging.Filter that redacts every record before any handler formats it.

Install it on the handlers (a filter on a logger does not see records propagated from child loggers):

    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingLogFilter(redactor))

A record is redacted once per redactor: the filter marks it with the redactor it used (REDACTED_BY), and the
filters of the other handlers, holding the same redactor, pass it through. A producer that redacts its own
fields at the source (the audit trail, on every call) sets the mark itself; a redactor that has learned new
values since is another redactor, and redacts the record again.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from .base import REDACTED
from .learning import LearningRedactor, current_redactor
from .redactor import Redactor

# Everything a LogRecord has of its own; the rest of its attributes came from `extra=`.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
# The record attribute naming the Redactor that has redacted it (private: formatters skip "_" attributes).
REDACTED_BY = "_redacted_by"


class RedactingLogFilter(logging.Filter):
    """Redacts a record's message (with its arguments filled in), traceback, stack and `extra` fields.

    Never drops a record. Running it twice on a record (on two handlers) changes nothing more.
    """

    def __init__(self, redactor: Redactor | LearningRedactor, name: str = "") -> None:
        super().__init__(name)
        self._source = redactor

    @property
    def _redactor(self) -> Redactor:
        # A LearningRedactor's current redactor changes as credentials are resolved: read it per record.
        return current_redactor(self._source)

    def filter(self, record: logging.LogRecord) -> bool:
        if not super().filter(record):
            return False
        redactor = self._redactor
        if getattr(record, REDACTED_BY, None) is redactor:
            return True
        self._redact_message(record, redactor)
        if record.exc_info and not record.exc_text:
            # Formatters reuse exc_text when it is set, so the traceback is only ever shown redacted.
            record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if record.exc_text:
            record.exc_text = redactor.redact_text(record.exc_text).value
        if record.stack_info:
            record.stack_info = redactor.redact_text(record.stack_info).value
        for name, value in list(vars(record).items()):
            if name not in _RECORD_ATTRIBUTES and not name.startswith("_"):
                setattr(record, name, _redact_extra(redactor, name, value))
        setattr(record, REDACTED_BY, redactor)
        return True

    @staticmethod
    def _redact_message(record: logging.LogRecord, redactor: Redactor) -> None:
        try:
            message = record.getMessage()
            unformattable = False
        except Exception:
            # The handler would print msg and args on its error path: redact what it would show.
            message = f"{record.msg!s} (unformattable arguments: {record.args!r})"
            unformattable = True
        result = redactor.redact_text(message)
        if result.redacted or unformattable:
            # Formatting is done now; the formatter must not apply the arguments a second time.
            record.msg, record.args = result.value, None


def _redact_extra(redactor: Redactor, name: str, value: Any) -> Any:
    if redactor.is_secret_key(name):
        return REDACTED
    if value is None or isinstance(value, bool | int | float | str | dict | list | tuple):
        return redactor.redact_value(value).value
    # Any other object is shown by str(): redact that, but keep the object when it holds no secret.
    shown = redactor.redact_text(str(value))
    return shown.value if shown.redacted else value
