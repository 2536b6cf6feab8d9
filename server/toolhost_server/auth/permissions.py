"""What a set of roles may do: which tools it sees and runs (by name globs and categories), and admin rights."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from ..model import ToolSpec


@dataclass(frozen=True, slots=True)
class ToolSet:
    """Tools chosen by name globs (fnmatch: `*`, `?`, `[abc]`, case-sensitive) and by category."""

    names: tuple[str, ...] = ()
    categories: frozenset[str] = frozenset()

    def covers(self, spec: ToolSpec) -> bool:
        return spec.category in self.categories or any(fnmatchcase(spec.name, glob) for glob in self.names)

    def __or__(self, other: ToolSet) -> ToolSet:
        names = self.names + tuple(n for n in other.names if n not in self.names)
        return ToolSet(names, self.categories | other.categories)


EVERY_TOOL = ToolSet(names=("*",))


@dataclass(frozen=True, slots=True)
class Permissions:
    """The rights of a caller. Hashable, so a snapshot can cache the names each distinct set of rights sees.

    A tool the caller may call is also one it may see: a call grant that hid its tool would only confuse.
    `admin` allows Reload and calling the `requires_admin` tools among those `call` covers.
    """

    list: ToolSet = ToolSet()
    call: ToolSet = ToolSet()
    admin: bool = False

    def may_see(self, spec: ToolSpec) -> bool:
        return self.list.covers(spec) or self.call.covers(spec)

    def may_call(self, spec: ToolSpec) -> bool:
        return self.call.covers(spec) and (self.admin or not spec.requires_admin)

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
            result = Permissions(result.list | grant.list, result.call | grant.call, result.admin or grant.admin)
        return result


FULL_RIGHTS = Permissions(list=EVERY_TOOL, call=EVERY_TOOL, admin=True)
