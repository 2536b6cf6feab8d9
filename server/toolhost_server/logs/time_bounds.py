"""Times as people give them to a log query: ISO 8601 ("2024-05-01T12:00:00Z", a date, no zone meaning local
time) or an age ("90s", "15m", "2h", "7d": that long ago)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_time_bound(text: str, now: datetime | None = None) -> datetime:
    """The UTC time `text` names; ValueError saying what is accepted when it names none."""
    age = _AGE.match(text)
    if age:
        amount, unit = float(age.group(1)), age.group(2)
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
    try:
        return datetime.fromisoformat(text.strip()).astimezone(UTC)
    except ValueError:
        raise ValueError(f"{text!r} is no time: give ISO 8601 (2024-05-01T12:00:00Z, 2024-05-01) or an age "
                         "(90s, 15m, 2h, 7d)") from None
