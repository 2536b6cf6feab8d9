"""The inspector of the server running in this process, for the built-in log_inspector tool.

Tools are plain classes the runner instantiates without arguments, so they cannot be handed the server; the
logs they inspect are the process's anyway (the memory ring is one per process). The server sets it when it
starts and clears it when it stops.
"""

from __future__ import annotations

from .inspector import LogInspector

_current: LogInspector | None = None


def set_active_inspector(inspector: LogInspector | None) -> None:
    global _current
    _current = inspector


def clear_active_inspector(inspector: LogInspector) -> None:
    """Clear it, unless another server of this process has set its own since."""
    global _current
    if _current is inspector:
        _current = None


def active_inspector() -> LogInspector | None:
    return _current
