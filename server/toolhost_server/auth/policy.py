"""Authorization: which tools a caller sees and may call, and who may act as admin.

A tool the caller may not see must be indistinguishable from one that does not exist, or names and their
existence would leak: `find_visible` raises the same ToolNotFoundError for both, with suggestions drawn only
from the tools the caller sees.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import PermissionDeniedError, ToolNotFoundError
from ..model import ToolSpec
from ..registry import RegisteredTool, Snapshot, close_names
from .caller import Caller
from .permissions import Permissions
from .rights import Right


def may_see(caller: Caller, spec: ToolSpec) -> bool:
    return caller.permissions.may_see(spec)


def may_call(caller: Caller, spec: ToolSpec) -> bool:
    return caller.permissions.may_call(spec)


def is_admin(caller: Caller) -> bool:
    return caller.permissions.admin


def visibility_key(permissions: Permissions) -> tuple[str, Permissions]:
    """What the tools a set of rights sees are cached under: per snapshot (visible_names), and in the registry's
    views (visible_changes.view_of), so that both agree on one set of rights."""
    return ("visible", permissions)


def visible_names(snapshot: Snapshot, caller: Caller) -> Sequence[str]:
    """The sorted names of the tools `caller` sees in `snapshot` (cached per snapshot and set of rights)."""
    permissions = caller.permissions
    if permissions.unrestricted:
        return snapshot.names
    return snapshot.filtered(visibility_key(permissions), permissions.may_see)


def find_visible(snapshot: Snapshot, caller: Caller, name: str) -> RegisteredTool:
    """The tool called `name` if `caller` may see it; otherwise ToolNotFoundError as for an unknown name."""
    tool = snapshot.tools().get(name)
    if tool is not None and may_see(caller, tool.spec):
        return tool
    raise ToolNotFoundError(name, close_names(name, visible_names(snapshot, caller)))


def authorize_call(caller: Caller, spec: ToolSpec) -> None:
    """PermissionDeniedError unless `caller` may run the tool (which it is known to see)."""
    if may_call(caller, spec):
        return
    if spec.requires_admin and caller.permissions.call.covers(spec):
        raise PermissionDeniedError(
            f"tool {spec.name!r} requires the admin role, which {_who(caller)} does not have")
    raise PermissionDeniedError(
        f"{_who(caller)} may see tool {spec.name!r} but not call it; a role with a call grant for it is needed")


def require_admin(caller: Caller, action: str) -> None:
    """PermissionDeniedError unless `caller` has the admin role."""
    if not is_admin(caller):
        raise PermissionDeniedError(f"{action} needs the admin role, which {_who(caller)} does not have")


def require_right(caller: Caller, right: Right, action: str, audit: Callable[[str], None] | None = None) -> None:
    """PermissionDeniedError unless `caller` holds `right`, one a role grants by its own key in the auth file
    (manage_tools, manage_assets; the admin role holds both); `audit` is told the refusal's reason first."""
    if _holds(caller.permissions, right):
        return
    error = PermissionDeniedError(
        f"{action} needs the admin role or a role with `{right}: true` in the server's auth file, which "
        f"{_who(caller)} does not have")
    if audit is not None:
        audit(error.reason)
    raise error


def _holds(permissions: Permissions, right: Right) -> bool:
    if right is Right.MANAGE_TOOLS:
        return permissions.may_manage_tools
    if right is Right.MANAGE_ASSETS:
        return permissions.may_manage_assets
    raise ValueError(f"{right} is no right a role grants by its own key")


def _who(caller: Caller) -> str:
    roles = ", ".join(sorted(caller.roles)) or "none"
    return f"caller {caller.name!r} (roles: {roles})"
