"""How a refused asset or import document is reported: InvalidFieldsError with one FieldViolation per problem,
within what one error can carry.

A gRPC status carries its message three times (grpc-message, and the message and BadRequest of
grpc-status-details-bin, base64) in trailers that a client takes only up to 8 KiB of by default: past that it
reports a transport error instead of the problems. So the message lists problems up to MESSAGE_BYTES and the
violations up to VIOLATION_BYTES; what is left out is counted, and fixing the listed ones shows the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..errors import FieldViolation, InvalidFieldsError
from .model import ImportProblem

# UTF-8 bytes. Worst case on the wire: the message percent-encoded (3x) plus base64 (4/3) of message and
# violations, about 6.5 KiB with the ErrorInfo.
MESSAGE_BYTES: Final = 500
VIOLATION_BYTES: Final = 2800
# What the message says of problems left out of the field violations too (the CLI looks for it).
UNLISTED_PROBLEMS: Final = "not listed in the field violations either"
# One problem's text: a value quoted whole could fill the budget alone.
REASON_CHARS: Final = 300


def _printable(text: str) -> str:
    """Each character that is not printable as a \\uXXXX escape: a problem may name what a document holds (a
    CSV column of control characters), and the refusal reaches terminals and logs."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def _shortened(text: str, limit: int = REASON_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} ... {text[-half:]}"


def _size(violation: FieldViolation) -> int:
    # What a FieldViolation adds to a BadRequest besides its text: two tags, two lengths, its own framing.
    return len(violation.pointer.encode()) + len(violation.reason.encode()) + 8


def fitted(violations: Sequence[FieldViolation]) -> list[FieldViolation]:
    """The first violations (each shortened) that fit VIOLATION_BYTES; at least one."""
    kept: list[FieldViolation] = []
    used = 0
    for violation in violations:
        shortened = FieldViolation(_shortened(_printable(violation.pointer), 128),
                                   _shortened(_printable(violation.reason)))
        used += _size(shortened)
        if kept and used > VIOLATION_BYTES:
            break
        kept.append(shortened)
    return kept


def refusal(what: str, violations: Sequence[FieldViolation], total: int | None = None) -> InvalidFieldsError:
    """InvalidFieldsError for `what` ("the asset cannot be stored") with `violations` (of `total` problems, when
    the caller had more than it passes), the message listing as many as fit."""
    total = len(violations) if total is None else total
    kept = fitted(violations)
    listed: list[str] = []
    used = len(what.encode())
    for violation in kept:
        item = f"{violation.pointer}: {violation.reason}" if violation.pointer else violation.reason
        used += len(item.encode()) + 2
        if listed and used > MESSAGE_BYTES:
            break
        listed.append(item if len(item.encode()) <= MESSAGE_BYTES else _shortened(item, MESSAGE_BYTES // 4))
    count = "1 problem" if total == 1 else f"{total} problems"
    message = f"{what} ({count}): {'; '.join(listed)}"
    if len(listed) < total:
        message += f"; and {total - len(listed)} more"
        message += (f" ({total - len(kept)} {UNLISTED_PROBLEMS}: fix these and try again to see them)"
                    if len(kept) < total else " (in the field violations)")
    return InvalidFieldsError(message, kept)


def import_violations(problems: Sequence[ImportProblem]) -> list[FieldViolation]:
    """Each problem of an import document as a violation: the field, and the line in the description."""
    return [FieldViolation(problem.field, f"line {problem.line}: {problem.message}" if problem.line
                           else f"document: {problem.message}") for problem in problems]
