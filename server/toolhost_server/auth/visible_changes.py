"""What a caller sees change: the registry's view of the tools its rights show, and that view's generation."""

from __future__ import annotations

from ..registry import Registry, View
from .caller import Caller
from .policy import visibility_key


def view_of(registry: Registry, caller: Caller) -> View | None:
    """The view `caller`'s rights decide, or None when it sees every tool (and so the real generation).

    Keyed by the rights, as `visible_names` caches them, so callers with the same rights share one view and one
    generation. A dict lookup once the view is known: CallTool asks on every call.
    """
    permissions = caller.permissions
    if permissions.unrestricted:
        return None
    return registry.view(visibility_key(permissions), permissions.may_see)


def generation_seen(registry: Registry, caller: Caller) -> int:
    """The generation to tell `caller` about the current snapshot: its view's, so that edits of tools hidden
    from it do not show; the registry's own for a caller that sees every tool."""
    view = view_of(registry, caller)
    return registry.snapshot.generation if view is None else view.generation
