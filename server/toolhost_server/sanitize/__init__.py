"""Keeps secrets out of outputs, log records and spans: by key, by known value and by pattern.

The server builds one Redactor from its configuration and derives one per call with the credentials
that call resolved:

    redactor = Redactor(extra_secret_keys=config_keys, known_values=config_values)   # ValueError if unsafe
    call = redactor.with_values(resolved_credentials)
    call.redact_text(text)           -> RedactionResult[str]   (.value, .redacted)
    call.redact_value(structured)    -> RedactionResult[Any]   JSON-like, walked, never mutated
    StreamRedactor(call).feed(chunk) / .finish()               secrets split across chunks
    handler.addFilter(RedactingLogFilter(redactor))            log messages, tracebacks, extras
    learning = LearningRedactor(redactor); learning.learn(values)   every value resolved so far, for logs

Modules: `keys` (the secret-name rule, documented with examples), `known_values`, `patterns`,
`assignments` (the Sanitizer implementations, found by `discovery`), `structure`, `redactor`,
`streaming`, `log_filter`.
"""

from __future__ import annotations

from .base import REDACTED, RedactionResult, Sanitizer, SanitizerSettings, Span
from .keys import SecretKeyRule, split_words
from .known_values import MIN_KNOWN_VALUE_LENGTH, check_known_value
from .learning import LearningRedactor, current_redactor
from .log_filter import REDACTED_BY, RedactingLogFilter
from .redactor import Redactor
from .streaming import StreamRedactor

__all__ = [
    "MIN_KNOWN_VALUE_LENGTH",
    "REDACTED",
    "REDACTED_BY",
    "LearningRedactor",
    "RedactingLogFilter",
    "RedactionResult",
    "Redactor",
    "Sanitizer",
    "SanitizerSettings",
    "SecretKeyRule",
    "Span",
    "StreamRedactor",
    "check_known_value",
    "current_redactor",
    "split_words",
]
