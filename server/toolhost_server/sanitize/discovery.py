"""Finds the Sanitizer implementations: every concrete subclass defined in this package's modules."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil

from .base import Sanitizer

_PACKAGE = __name__.rpartition(".")[0]


@functools.cache
def sanitizer_classes() -> tuple[type[Sanitizer], ...]:
    """The Sanitizer classes every Redactor builds, in a stable order (the result does not depend on it)."""
    package = importlib.import_module(_PACKAGE)
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{_PACKAGE}.{module.name}")
    found: list[type[Sanitizer]] = []
    pending = list(Sanitizer.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        # Subclasses defined elsewhere (a test's, a plugin's) are not picked up behind the server's back.
        if not inspect.isabstract(cls) and cls.__module__.startswith(f"{_PACKAGE}."):
            found.append(cls)
    return tuple(sorted(set(found), key=lambda cls: cls.__qualname__))
