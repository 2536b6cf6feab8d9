"""What a set of roles may do: which tools it sees and runs (by name globs and categories), and admin rights."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from ..model import ToolSpec


@dataclass(frozen=True, slots=True)
class ToolSet:
    """Tools chosen by name globs (fnmatch: `*`, `?`, `[abc]`, case-sensitive) and by category.

    An alias is covered as its target is (a grant of `read` covers `load`). A tool marked grant_by_name_only
    (`bash`) is covered only by its exact name, or its target's: a `*` or a `file_ops` grant written for reading
    files must not hand out a shell. `everything` is the set of the callers the server does not tell apart (no
    authentication, a trusted socket, a client certificate without roles): every tool, those too.
    """

    names: tuple[str, ...] = ()
    categories: frozenset[str] = frozenset()
    everything: bool = False

    def covers(self, spec: ToolSpec) -> bool:
        if self.everything:
            return True
        names = (spec.name, spec.alias_of) if spec.alias_of else (spec.name,)
        if spec.grant_by_name_only:
            return any(name in self.names for name in names)
        return spec.category in self.categories or any(
            fnmatchcase(name, glob) for glob in self.names for name in names)

    def __or__(self, other: ToolSet) -> ToolSet:
        names = self.names + tuple(n for n in other.names if n not in self.names)
        return ToolSet(names, self.categories | other.categories, self.everything or other.everything)


EVERY_TOOL = ToolSet(names=("*",), everything=True)


@dataclass(frozen=True, slots=True)
class Permissions:
    """The rights of a caller. Hashable, so a snapshot can cache the names each distinct set of rights sees.

    A tool the caller may call is also one it may see: a call grant that hid its tool would only confuse.
    `admin` allows Reload and calling the `requires_admin` tools among those `call` covers. `manage_tools`
    allows creating, changing and removing user tools (admin implies it), and `grantable_credentials` names the
    credentials a user tool made by the caller may declare: only those listed, never implied (not even by
    admin), since a user tool's script can print them. `manage_assets` allows creating, changing, importing and
    removing assets of the inventory (admin implies it).
    """

    list: ToolSet = ToolSet()
    call: ToolSet = ToolSet()
    admin: bool = False
    manage_tools: bool = False
    grantable_credentials: frozenset[str] = frozenset()
    manage_assets: bool = False

    def may_see(self, spec: ToolSpec) -> bool:
        return self.list.covers(spec) or self.call.covers(spec)

    def may_call(self, spec: ToolSpec) -> bool:
        return self.call.covers(spec) and (self.admin or not spec.requires_admin)

    @property
    def may_manage_tools(self) -> bool:
        return self.admin or self.manage_tools

    @property
    def may_manage_assets(self) -> bool:
        return self.admin or self.manage_assets

    @property
    def unrestricted(self) -> bool:
        return self == FULL_RIGHTS

    @staticmethod
    def union(grants: Iterable[Permissions]) -> Permissions:
        """Everything any of `grants` allows (a caller with several roles has the rights of each)."""
        result = Permissions()
        for grant in grants:
            if grant.unrestricted:
                return FULL_RIGHTS
            result = Permissions(result.list | grant.list, result.call | grant.call, result.admin or grant.admin,
                                 result.manage_tools or grant.manage_tools,
                                 result.grantable_credentials | grant.grantable_credentials,
                                 result.manage_assets or grant.manage_assets)
        return result


# No grantable credentials: a caller the server does not tell apart (no authentication, the trusted socket)
# may make user tools, but only a role in the auth file may hand one a credential.
FULL_RIGHTS = Permissions(list=EVERY_TOOL, call=EVERY_TOOL, admin=True, manage_tools=True, manage_assets=True)
