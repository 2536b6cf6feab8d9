"""UserTools: what every surface (the gRPC service, the tool-management tools, the CLI through them) asks of the
user tools. Each method checks the caller's right itself, stores the change, serves it before returning, and
audits it. Once a change is stored it is the answer: a failure to serve it here is logged, and the next sync
(propagation.py) serves it.

    tools = toolhost.user_tools
    await tools.create(caller, UserToolRecord(slug="disk_usage", description="...", script="du -sh .", ...))
    await tools.update(caller, "disk_usage", {"script": "du -sh -- \\"$TOOL_ARG_PATH\\""})
    await tools.restore(caller, "disk_usage", 1)
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import dataclasses
import json
import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from ..audit import AuditRecord, AuditTrail
from ..auth import Caller, require_right
from ..auth.rights import Right
from ..catalog.loader import ToolLoader
from ..errors import (
    FailedPreconditionError,
    InvalidPageTokenError,
    InvalidRequestError,
    ToolhostError,
)
from ..listing import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from ..pipeline import new_call_id
from ..registry import Registry
from ..runners import RunnerConfigError
from ..telemetry import trace_id_of
from .admission import ConflictAdmission
from .records import DEFAULT_CATEGORY, MUTABLE_FIELDS, ConflictRecord, UserToolRecord, UserToolVersionRecord
from .serving import UserToolServing
from .table import UserToolTable, taken_name_error
from .validation import check_record, check_slug

logger = logging.getLogger("toolhost.user_tools")


class UserTools:
    """Creates, reads, changes and removes user tools for callers with the admin role or `manage_tools`.

    Creating or enabling a tool checks the tool conflicts (admission.py): an `incompatible` pair with an enabled
    tool is refused (FailedPreconditionError), `equivalent` ones are returned by set_enabled. On a server whose
    user tools would run as its own user (serving.refusal), what would serve a tool (create, update, restore,
    enable) is FailedPreconditionError saying why; reading, disabling and deleting still work.
    """

    def __init__(self, table: UserToolTable, serving: UserToolServing, loader: ToolLoader, registry: Registry,
                 audit: AuditTrail) -> None:
        self.table = table
        self.serving = serving
        self._loader = loader
        self._registry = registry
        self._audit = audit

    async def create(self, caller: Caller, tool: UserToolRecord) -> UserToolRecord:
        """Store `tool` as version 1, enabled, and serve it. Its version, times and `enabled` are ignored."""
        with self._audited(caller, "CREATE", tool.slug, ()):
            self._require_serving("CreateUserTool")
            check_slug(tool.slug)
            if tool.slug in self.serving.taken_names():
                raise taken_name_error(tool.slug)
            tool = _normalized(dataclasses.replace(tool, enabled=True))
            self._check(caller, tool)
            created = await asyncio.to_thread(self.table.create, tool, caller.name, self._admission(caller, "create"))
            await self._serve(created.slug)
            return self._with_shadow(created)

    async def get(self, caller: Caller, slug: str) -> UserToolRecord:
        require_right(caller, Right.MANAGE_TOOLS, "GetUserTool")
        return self._with_shadow(await asyncio.to_thread(self.table.get, slug))

    async def list(self, caller: Caller, page_size: int, page_token: str) -> tuple[list[UserToolRecord], str]:
        """One page of the user tools, sorted by slug; the token of the next page ("" on the last)."""
        require_right(caller, Right.MANAGE_TOOLS, "ListUserTools")
        size = _page_size(page_size)
        after = str(_decode_token(page_token, "user_tools", str)) if page_token else ""
        records, next_after = await asyncio.to_thread(self.table.page, after, size)
        token = _encode_token("user_tools", next_after) if next_after else ""
        return [self._with_shadow(record) for record in records], token

    async def update(self, caller: Caller, slug: str, changes: Mapping[str, Any]) -> UserToolRecord:
        """Change the fields `changes` names (MUTABLE_FIELDS) and store the result as the next version."""
        with self._audited(caller, "UPDATE", slug, tuple(f for f in MUTABLE_FIELDS if f in changes)):
            self._require_serving("UpdateUserTool")
            unknown = sorted(set(changes) - set(MUTABLE_FIELDS))
            if unknown:
                raise InvalidRequestError(f"cannot update {', '.join(unknown)}; the fields that change are "
                                          f"{', '.join(MUTABLE_FIELDS)} (`enabled` through SetUserToolEnabled)")
            if not changes:
                raise InvalidRequestError(f"name at least one field to change: {', '.join(MUTABLE_FIELDS)}")
            values = dict(changes)
            for field in ("tags", "credentials"):
                if field in values:
                    values[field] = tuple(values[field])

            def apply(before: UserToolRecord) -> UserToolRecord:
                after = _normalized(dataclasses.replace(before, **values))
                self._check(caller, after)
                return after

            _, after = await asyncio.to_thread(self.table.change, slug, apply, caller.name, "update")
            await self._serve(slug)
            return self._with_shadow(after)

    async def delete(self, caller: Caller, slug: str) -> UserToolRecord:
        """Remove the tool and its versions, and stop serving it; the tool as it was."""
        with self._audited(caller, "DELETE", slug, ()):
            require_right(caller, Right.MANAGE_TOOLS, "DeleteUserTool")
            deleted = await asyncio.to_thread(self.table.delete, slug)
            await self._serve(slug)
            return dataclasses.replace(deleted, shadowed_by="")

    async def versions(self, caller: Caller, slug: str, page_size: int,
                       page_token: str) -> tuple[builtins.list[UserToolVersionRecord], str]:
        """One page of the tool's versions, newest first; the token of the next page ("" on the last)."""
        require_right(caller, Right.MANAGE_TOOLS, "ListUserToolVersions")
        size = _page_size(page_size)
        before = int(_decode_token(page_token, slug, int)) if page_token else 0
        records = await asyncio.to_thread(self.table.versions, slug, before, size + 1)
        more = len(records) > size
        records = records[:size]
        return records, _encode_token(slug, records[-1].version) if more else ""

    async def restore(self, caller: Caller, slug: str, version: int) -> UserToolRecord:
        """Store a new version whose editable record is that of `version`, and serve it. A version stored before
        schema version 7 kept only its script, system prompt and schema: the other fields stay as they are."""
        with self._audited(caller, "RESTORE", slug, ()):
            require_right(caller, Right.MANAGE_TOOLS, "RestoreUserToolVersion")
            self._require_serving("RestoreUserToolVersion")
            old = await asyncio.to_thread(self.table.version, slug, version)

            def apply(before: UserToolRecord) -> UserToolRecord:
                after = dataclasses.replace(before, script=old.script, system_prompt=old.system_prompt,
                                            input_schema=old.input_schema)
                if old.details is not None:
                    details = old.details
                    after = dataclasses.replace(
                        after, name=details.name, description=details.description, category=details.category,
                        timeout_seconds=details.timeout_seconds, tags=details.tags, credentials=details.credentials)
                # The caller's own grants decide, not those of whoever made that version.
                self._check(caller, after)
                return after

            _, after = await asyncio.to_thread(self.table.change, slug, apply, caller.name,
                                               f"restore of version {version}")
            await self._serve(slug)
            return self._with_shadow(after)

    async def set_enabled(self, caller: Caller, slug: str,
                          enabled: bool) -> tuple[UserToolRecord, builtins.list[ConflictRecord]]:
        """Serve the tool or stop serving it (its version stays). Enabling it beside an enabled tool it is
        `incompatible` with is FailedPreconditionError; the `equivalent` enabled tools the caller may see are
        returned."""
        with self._audited(caller, "ENABLE" if enabled else "DISABLE", slug, ()):
            require_right(caller, Right.MANAGE_TOOLS, "SetUserToolEnabled")
            admission = None
            if enabled:
                self._require_serving("SetUserToolEnabled (enabled: true)")
                admission = self._admission(caller, "enable")
            _, after = await asyncio.to_thread(
                self.table.change, slug, lambda before: dataclasses.replace(before, enabled=enabled), caller.name,
                "enable" if enabled else "disable", new_version=False, admit=admission)
            await self._serve(slug)
            equivalents = admission.equivalents if admission is not None else []
            return self._with_shadow(after), equivalents

    def _require_serving(self, action: str) -> None:
        """FailedPreconditionError when this server serves no user tools: a change that would serve one is
        refused rather than stored to no effect."""
        if self.serving.refusal:
            raise FailedPreconditionError(f"{action} is refused: {self.serving.refusal}")

    def _admission(self, caller: Caller, verb: str) -> ConflictAdmission:
        """The conflict check of one create or enable, with what the caller may see of the served tools."""
        tools = self._registry.snapshot.tools()

        def may_see(name: str) -> bool:
            registered = tools.get(name)
            return registered is not None and caller.permissions.may_see(registered.spec)

        return ConflictAdmission(self.serving.served_elsewhere(), may_see, verb)

    async def _serve(self, slug: str) -> None:
        """Serve what is stored now. The change is committed whatever happens here: a failure is logged, and the
        sync that follows the store (propagation.py) serves it once it can."""
        try:
            await self.serving.refresh()
        except Exception:
            logger.exception("user tool %r: the change is stored, but serving it failed here; the next sync of the "
                             "user tools serves it", slug)

    def _check(self, caller: Caller, tool: UserToolRecord) -> None:
        """InvalidRequestError unless `tool` can be served, with credentials only the caller may grant."""
        spec = check_record(tool, caller.permissions.grantable_credentials)
        try:
            self._loader.compile(spec)
        except RunnerConfigError as exc:
            raise InvalidRequestError(f"script: {exc}") from None
        except ValueError as exc:  # the argument validator refused the schema
            raise InvalidRequestError(f"input_schema: {exc}") from None

    def _with_shadow(self, record: UserToolRecord) -> UserToolRecord:
        return dataclasses.replace(record, shadowed_by=self.serving.shadowed_by(record.slug))

    @contextmanager
    def _audited(self, caller: Caller, action: str, slug: str, fields: tuple[str, ...]) -> Iterator[None]:
        """Audit the change: tool = the slug, outcome = what was done (CREATED, UPDATED, ...) or, when refused,
        the action and the reason (UPDATE_REFUSED:PERMISSION_DENIED); argument_keys = the fields changed."""
        require_right(caller, Right.MANAGE_TOOLS, _ACTIONS[action][1], audit=lambda reason: self._record(
            caller, slug, f"{action}_REFUSED:{reason}", fields, 0.0))
        started = time.perf_counter()
        outcome = f"{action}_REFUSED:INTERNAL"
        try:
            yield
            outcome = _ACTIONS[action][0]
        except ToolhostError as exc:
            outcome = f"{action}_REFUSED:{exc.reason}"
            raise
        finally:
            self._record(caller, slug, outcome, fields, (time.perf_counter() - started) * 1000)

    def _record(self, caller: Caller, slug: str, outcome: str, fields: tuple[str, ...], duration_ms: float) -> None:
        self._audit.record(AuditRecord(
            time=datetime.now(UTC), caller=caller.name, auth_method=caller.method.value, tool=slug[:256],
            call_id=new_call_id(), trace_id=trace_id_of(trace.get_current_span()), duration_ms=duration_ms,
            outcome=outcome, argument_keys=fields, argument_key_count=len(fields)))


# Each change: its outcome when done, and the RPC that asks for it (for refusal messages).
_ACTIONS = {
    "CREATE": ("CREATED", "CreateUserTool"), "UPDATE": ("UPDATED", "UpdateUserTool"),
    "DELETE": ("DELETED", "DeleteUserTool"), "RESTORE": ("RESTORED", "RestoreUserToolVersion"),
    "ENABLE": ("ENABLED", "SetUserToolEnabled"), "DISABLE": ("DISABLED", "SetUserToolEnabled"),
}


def _normalized(tool: UserToolRecord) -> UserToolRecord:
    """Empty category: "custom"; a timeout of 0: the server's default."""
    return dataclasses.replace(
        tool, category=tool.category or DEFAULT_CATEGORY,
        timeout_seconds=tool.timeout_seconds or None, tags=tuple(tool.tags), credentials=tuple(tool.credentials))


def _page_size(page_size: int) -> int:
    if page_size < 0:
        raise InvalidRequestError(f"page_size must not be negative (got {page_size}); use 0 for the default of "
                                  f"{DEFAULT_PAGE_SIZE}")
    return min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def _encode_token(scope: str, after: str | int) -> str:
    raw = json.dumps({"s": scope, "a": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str, scope: str, kind: type[str] | type[int]) -> str | int:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        token_scope, after = data["s"], data["a"]
    except (ValueError, KeyError, TypeError, RecursionError):
        raise InvalidPageTokenError("page_token is not one this server issued; start again with an empty "
                                    "page_token") from None
    if token_scope != scope or type(after) is not kind:
        raise InvalidPageTokenError("page_token belongs to another list; start again with an empty page_token")
    return after
