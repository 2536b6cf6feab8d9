"""WatchTools for one caller: the registry's generation changes, reduced to the tools the caller sees."""

from __future__ import annotations

from ..registry import GenerationChange, Snapshot
from .caller import Caller
from .policy import visible_names


class VisibleChanges:
    """Translates each GenerationChange of one stream into what its caller may see.

    The names the caller was shown are remembered, so a tool leaving the caller's view is reported as removed
    and one entering it as added, whether the catalog or the caller's rights changed. A generation that changes
    nothing the caller sees is skipped, so its timing reveals nothing either.
    """

    def __init__(self, caller: Caller) -> None:
        self._caller = caller
        self._shown: frozenset[str] | None = None

    def translate(self, change: GenerationChange, snapshot: Snapshot) -> GenerationChange | None:
        """The change as the caller sees it, or None when it sees no difference. `snapshot` is the registry's
        current one, which a change that was queued for a while may already be behind."""
        if self._caller.permissions.unrestricted:
            return change
        names = visible_names(snapshot, self._caller)
        visible = frozenset(names)
        shown = self._shown
        self._shown = visible
        if shown is None:
            return GenerationChange(change.generation, len(visible), tuple(names), (), ())
        added = tuple(sorted(visible - shown))
        removed = tuple(sorted(shown - visible))
        changed = tuple(n for n in change.changed if n in visible and n in shown)
        if not (added or removed or changed):
            return None
        return GenerationChange(change.generation, len(visible), added, removed, changed)
