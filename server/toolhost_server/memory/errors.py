"""What the memory refuses, raised by its table and queries; the tools turn them into the server's errors."""

from __future__ import annotations

from ..errors import FieldViolation


class MemoryRefusal(Exception):
    """Base of the memory's refusals; the message says what to change."""


class StructureNotFound(MemoryRefusal):
    """No structure has that name."""


class RecordNotFound(MemoryRefusal):
    """No record has that id in that structure."""


class StructureExists(MemoryRefusal):
    """A structure of that name exists already."""


class StructureInUse(MemoryRefusal):
    """A structure that still holds records, deleted without `force`."""


class InvalidMemoryData(MemoryRefusal):
    """A structure's definition or a record's data that breaks the rules; each problem as a FieldViolation
    whose pointer starts at the argument (`/schema/...`, `/data/...`)."""

    def __init__(self, violations: list[FieldViolation]) -> None:
        super().__init__("; ".join(f"{v.pointer}: {v.reason}" for v in violations))
        self.violations = violations


class QueryRefused(MemoryRefusal):
    """A memory_query statement that is not one read-only SELECT over the memory views."""


class QueryTimedOut(MemoryRefusal):
    """The query ran past its time and was ended."""


class QueryUnavailable(MemoryRefusal):
    """The database cannot run memory queries as it is set up (PostgreSQL without the memory role)."""


class MemoryFull(MemoryRefusal):
    """The memory holds as many structures, or a structure as many records, as it may."""
