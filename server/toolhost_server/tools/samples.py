"""Small functions the bundled example catalog runs with the python runner."""

from __future__ import annotations


def greet(name: str, excited: bool = False) -> str:
    return f"Hello, {name}{'!' if excited else '.'}"
