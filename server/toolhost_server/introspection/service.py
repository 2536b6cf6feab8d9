"""ServerIntrospection: the narrow, read-only view of one running server that the introspection tools get.

Tools receive this object (ToolServices.introspection), never the Toolhost: it answers three questions and
offers no way to change anything. Every answer passes the server's redactor before it leaves, besides the
pipeline's own pass: a credential value that found its way into a setting or a detail line is hidden here too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..sanitize.learning import current_redactor
from .application import StartTime, application_info
from .components import server_components
from .names import NameNotFound
from .parts import ServerParts
from .settings import effective_settings, setting_at, summary

if TYPE_CHECKING:
    from ..sanitize import LearningRedactor, Redactor


class ServerIntrospection:
    """Answers application_info, component_inspector and config_access for one server::

        introspection = ServerIntrospection(lambda: ServerParts(...), toolhost.redactor)
        await introspection.components("store")    # {"components": [...], "summary": {...}}

    `parts` is called at each question, so answers show the server as it is then. NameNotFound for a name
    that names nothing.
    """

    def __init__(self, parts: Callable[[], ServerParts], redactor: Redactor | LearningRedactor) -> None:
        self._parts = parts
        self._redactor = redactor
        self.started = StartTime()

    def application(self) -> dict[str, Any]:
        return self._redacted(application_info(self._parts(), self.started))

    async def components(self, name: str = "") -> dict[str, Any]:
        notes: list[str] = []
        found = await server_components(self._parts(), notes)
        if name:
            chosen = [component for component in found if component.name == name]
            if not chosen:
                raise NameNotFound("component", name, [component.name for component in found])
            listed = [component.inspected() for component in chosen]
        else:
            listed = [component.listed() for component in found]
        states: dict[str, int] = {}
        for entry in listed:
            states[entry["state"]] = states.get(entry["state"], 0) + 1
        return self._redacted({"components": listed,
                               "summary": {"components": len(listed), "by_state": states, "notes": notes}})

    def settings(self, key: str = "") -> dict[str, Any]:
        parts = self._parts()
        rows = [setting_at(parts.config, parts.sources, key)] if key else effective_settings(parts.config,
                                                                                               parts.sources)
        notes = []
        if parts.sources.by_key and all(source == "program" for source in parts.sources.by_key.values()):
            notes.append("this server was given its Config by a program, not loaded from flags, variables or a "
                         "file: changed settings show the source 'program'")
        return self._redacted({"settings": rows, "summary": {**summary(rows), "notes": notes}})

    def _redacted(self, answer: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = current_redactor(self._redactor).redact_value(answer).value
        return result


__all__ = ["NameNotFound", "ServerIntrospection"]
