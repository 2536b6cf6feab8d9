"""Which Python entrypoints a catalog file may name: functions and Tool classes of trusted modules only.

Whoever writes a catalog file chooses what the python runner imports and calls inside the server. Were any
importable callable allowed, `entrypoint: "os:system"` would give every caller a shell with the server's rights
and every credential in its environment. So a catalog entrypoint must be a function defined in, or a Tool
subclass of, a module under one of the `python_entrypoint_modules` prefixes, and the standard library never is.
The module's name is checked before it is imported (importing runs its code), the object after.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from ..runners.python import resolve_entrypoint, split_entrypoint
from ..tools.base import Tool
from .builtins import ENTRY_POINT_GROUP

BUILTIN_TOOLS_PACKAGE = "toolhost_server.tools"
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_ATTRIBUTE_PATH = _MODULE_NAME
_HOW_TO_ALLOW = ("to allow a module of your own, add it or a package above it to python_entrypoint_modules "
                 "(TOOLHOST_PYTHON_ENTRYPOINT_MODULES or --python-entrypoint-modules, comma-separated; a list "
                 f"replaces the default, so keep {BUILTIN_TOOLS_PACKAGE} in it)")


class EntrypointSettingError(ValueError):
    """python_entrypoint_modules lists something that is no module name or that may never hold entrypoints."""


class EntrypointRefusedError(Exception):
    """A catalog file names a Python entrypoint it may not; the message says why and how to allow a module."""


def is_standard_library(module_name: str) -> bool:
    """Whether `module_name` is part of Python's standard library (builtins included)."""
    return module_name.partition(".")[0] in sys.stdlib_module_names


def installed_pack_modules() -> tuple[str, ...]:
    """The modules of the tool packs installed under the `toolhost.tools` entry-point group."""
    return tuple(sorted({entry_point.module for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP)}))


@dataclass(frozen=True, slots=True)
class EntrypointPolicy:
    """The module prefixes whose functions and Tool classes catalog files may name, matched on dotted
    boundaries: `toolhost_server.tools` allows `toolhost_server.tools.samples`, not `toolhost_server.toolsx`.

        policy = EntrypointPolicy.from_setting(config.python_entrypoint_modules)
        policy.check("toolhost_server.tools.samples:greet")   # passes
        policy.check("os:system")                            # EntrypointRefusedError
    """

    prefixes: tuple[str, ...]
    # Whether the prefixes are the default, not the operator's list: the refusal says which.
    is_default: bool = False

    @classmethod
    def from_setting(cls, modules: Sequence[str]) -> EntrypointPolicy:
        """The policy of the python_entrypoint_modules setting; when it is empty, toolhost_server.tools and the
        installed tool packs' modules. EntrypointSettingError when it lists something that cannot be allowed."""
        if not modules:
            return cls.default()
        for module in modules:
            if not _MODULE_NAME.fullmatch(module):
                raise EntrypointSettingError(
                    f"python_entrypoint_modules: {module!r} is not a module name; list module prefixes such as "
                    f"{BUILTIN_TOOLS_PACKAGE} or mycompany.tools, separated by commas")
            if is_standard_library(module):
                raise EntrypointSettingError(
                    f"python_entrypoint_modules: {module!r} is Python's standard library, which catalog files may "
                    "never name: its functions (os.system, subprocess.run, builtins.eval) would run whatever a "
                    "caller sends with the server's rights; list only modules written to be tools")
        return cls(tuple(modules))

    @classmethod
    def default(cls) -> EntrypointPolicy:
        """toolhost_server.tools and the modules of the installed tool packs (a pack that registers a standard
        library module gains nothing: such a module is refused anyway)."""
        packs = [module for module in installed_pack_modules() if not is_standard_library(module)]
        return cls((BUILTIN_TOOLS_PACKAGE, *packs), is_default=True)

    def allows_module(self, module_name: str) -> bool:
        """Whether catalog entrypoints may name objects of `module_name`."""
        return not is_standard_library(module_name) and any(
            module_name == prefix or module_name.startswith(prefix + ".") for prefix in self.prefixes)

    def describe(self) -> str:
        """The allowed prefixes as the log and the refusals show them."""
        listed = ", ".join(self.prefixes)
        return f"the default: {listed}" if self.is_default else listed

    def check(self, entrypoint: str) -> Any:
        """The function or Tool subclass `entrypoint` names, its module imported only once its name is allowed.
        EntrypointRefusedError when it may not be named; RunnerConfigError when it is malformed or missing."""
        module_name, attribute = split_entrypoint(entrypoint)
        if not _MODULE_NAME.fullmatch(module_name) or not _ATTRIBUTE_PATH.fullmatch(attribute):
            raise self._refused(entrypoint, "it is not 'package.module:function' with dotted Python names")
        if is_standard_library(module_name):
            raise self._refused(entrypoint, (
                f"{module_name!r} is Python's standard library, which can never be allowed (os.system, "
                "subprocess.run or builtins.eval would run whatever a caller sends with the server's rights); "
                "write the tool as a function or Tool class of your own"))
        if not self.allows_module(module_name):
            raise self._refused(entrypoint, f"module {module_name!r} is not under python_entrypoint_modules")
        if any(part.startswith("_") for part in attribute.split(".")):
            raise self._refused(entrypoint, "it names a private attribute (a leading '_')")
        target = resolve_entrypoint(entrypoint)
        if isinstance(target, type):
            if not issubclass(target, Tool) or inspect.isabstract(target):
                raise self._refused(entrypoint, f"it is the class {_qualified(target)}, not a concrete Tool subclass")
            if not self.allows_module(target.__module__):
                raise self._refused(entrypoint, (
                    f"the Tool class {_qualified(target)} is defined in {target.__module__!r}, which is not under "
                    "python_entrypoint_modules"))
            return target
        if not inspect.isfunction(target):
            raise self._refused(entrypoint, f"it is a {type(target).__name__}, not a function or a Tool subclass")
        if target.__module__ != module_name:
            # A re-export (`from os import system` in an allowed module) brings the other module's power along.
            raise self._refused(entrypoint, (
                f"it is {_qualified(target)}, a function defined in {target.__module__!r}, not in {module_name!r} "
                "(name a function where it is defined)"))
        return target

    def _refused(self, entrypoint: str, why: str) -> EntrypointRefusedError:
        return EntrypointRefusedError(
            f"entrypoint {entrypoint!r} is refused: {why}. Catalog files may name only functions defined in, and "
            f"Tool classes of, the modules under python_entrypoint_modules ({self.describe()}); {_HOW_TO_ALLOW}")


def _qualified(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"

