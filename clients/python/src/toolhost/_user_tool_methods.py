"""The UserToolService methods of Client and AsyncClient (mixed in), and the requests they share.

    with toolhost.Client("127.0.0.1:50051", timeout=30) as client:
        client.create_user_tool("disk_usage", description="Disk usage of a directory.",
                                script='du -sh -- "$TOOL_ARG_PATH"',
                                input_schema={"type": "object", "properties": {"path": {"type": "string"}},
                                              "required": ["path"]})
        print(client.call_tool("disk_usage", path="/var/log").output)
        client.update_user_tool("disk_usage", script='du -sh --apparent-size -- "$TOOL_ARG_PATH"')
        client.restore_user_tool_version("disk_usage", 1)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from google.protobuf import field_mask_pb2, json_format, struct_pb2

from ._user_tool_results import (
    CONFLICT_TYPES,
    ConflictType,
    ToolConflict,
    ToolConflictPage,
    UserTool,
    UserToolEnabled,
    UserToolPage,
    UserToolVersion,
    UserToolVersionPage,
)
from .v1 import user_tool_service_pb2 as pb

__all__ = ["AsyncUserToolMethods", "UserToolMethods"]

_Response = TypeVar("_Response")


def _schema(input_schema: Mapping[str, Any]) -> struct_pb2.Struct:
    if not isinstance(input_schema, Mapping):
        raise TypeError(f"input_schema must be a mapping (a JSON Schema object), not {type(input_schema).__name__}")
    message = struct_pb2.Struct()
    json_format.ParseDict(dict(input_schema), message)
    return message


def _names(values: Iterable[str], what: str) -> list[str]:
    if isinstance(values, str):
        raise TypeError(f"{what} must be a list of names, not one string")
    return list(values)


def create_request(
    slug: str, description: str, script: str, input_schema: Mapping[str, Any], name: str, category: str,
    system_prompt: str, timeout_seconds: float | None, tags: Iterable[str], credentials: Iterable[str],
) -> pb.CreateUserToolRequest:
    tool = pb.UserTool(slug=slug, name=name, description=description, category=category,
                       system_prompt=system_prompt, input_schema=_schema(input_schema), script=script,
                       timeout_seconds=timeout_seconds or 0.0, tags=_names(tags, "tags"),
                       credentials=_names(credentials, "credentials"))
    return pb.CreateUserToolRequest(user_tool=tool)


def update_request(slug: str, changes: Mapping[str, Any]) -> pb.UpdateUserToolRequest:
    """The request that changes the fields in `changes` (the keyword arguments of update_user_tool that are not
    None) and only those: they are the update mask."""
    tool = pb.UserTool(slug=slug)
    paths = []
    for key, value in changes.items():
        if value is None:
            continue
        if key == "input_schema":
            tool.input_schema.CopyFrom(_schema(value))
        elif key == "timeout_seconds":
            tool.timeout_seconds = value
        elif key in ("tags", "credentials"):
            getattr(tool, key).extend(_names(value, key))
        else:
            setattr(tool, key, value)
        paths.append(key)
    if not paths:
        raise ValueError("update_user_tool needs at least one field to change (script=..., description=..., ...)")
    return pb.UpdateUserToolRequest(user_tool=tool, update_mask=field_mask_pb2.FieldMask(paths=paths))


def conflict_request(tool_a: str, tool_b: str, type: ConflictType, resolution_hint: str) -> pb.SetToolConflictRequest:
    try:
        kind = CONFLICT_TYPES[type]
    except KeyError:
        raise ValueError(f"type must be 'equivalent' or 'incompatible', not {type!r}") from None
    return pb.SetToolConflictRequest(conflict=pb.ToolConflict(
        tool_a=tool_a, tool_b=tool_b, type=kind, resolution_hint=resolution_hint))


class UserToolMethods:
    """UserToolService for the blocking Client. Every method needs the admin role or a role with the
    `manage_tools` right when the server authenticates (PermissionDeniedError otherwise)."""

    _user_tool_stub: Any

    def _unary(self, method: Callable[..., _Response], request: Any, deadline: float | None = None) -> _Response:
        raise NotImplementedError  # the Client's

    def create_user_tool(
        self, slug: str, *, description: str, script: str, input_schema: Mapping[str, Any] | None = None,
        name: str = "", category: str = "", system_prompt: str = "", timeout_seconds: float | None = None,
        tags: Iterable[str] = (), credentials: Iterable[str] = (),
    ) -> UserTool:
        """Store and serve a new user tool, at version 1. Each argument reaches the script as the environment
        variable TOOL_ARG_<NAME>. AlreadyExistsError when any tool has the slug; InvalidArgumentError for a bad
        slug or schema, or a credential the caller's roles may not grant."""
        request = create_request(slug, description, script, input_schema or {"type": "object"}, name, category,
                                 system_prompt, timeout_seconds, tags, credentials)
        return UserTool.from_proto(self._unary(self._user_tool_stub.CreateUserTool, request).user_tool)

    def get_user_tool(self, slug: str) -> UserTool:
        """One user tool, with its script; NotFoundError when there is none."""
        response = self._unary(self._user_tool_stub.GetUserTool, pb.GetUserToolRequest(slug=slug))
        return UserTool.from_proto(response.user_tool)

    def list_user_tools_page(self, page_size: int = 0, page_token: str = "") -> UserToolPage:
        """One page of user tools sorted by slug (page_size 0: the server's 100, at most 1000)."""
        request = pb.ListUserToolsRequest(page_size=page_size, page_token=page_token)
        return UserToolPage.from_proto(self._unary(self._user_tool_stub.ListUserTools, request))

    def list_user_tools(self, page_size: int = 0) -> Iterator[UserTool]:
        """Every user tool, sorted by slug; pages are fetched as the iteration needs them."""
        request = pb.ListUserToolsRequest(page_size=page_size)
        while True:
            page = UserToolPage.from_proto(self._unary(self._user_tool_stub.ListUserTools, request))
            yield from page.user_tools
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    def update_user_tool(
        self, slug: str, *, name: str | None = None, description: str | None = None, category: str | None = None,
        system_prompt: str | None = None, input_schema: Mapping[str, Any] | None = None, script: str | None = None,
        timeout_seconds: float | None = None, tags: Iterable[str] | None = None,
        credentials: Iterable[str] | None = None,
    ) -> UserTool:
        """Change the fields given (None leaves a field as it is; timeout_seconds=0 returns to the server's
        default) as a new version; the next call of the tool runs it."""
        request = update_request(slug, {
            "name": name, "description": description, "category": category, "system_prompt": system_prompt,
            "input_schema": input_schema, "script": script, "timeout_seconds": timeout_seconds, "tags": tags,
            "credentials": credentials})
        return UserTool.from_proto(self._unary(self._user_tool_stub.UpdateUserTool, request).user_tool)

    def delete_user_tool(self, slug: str) -> UserTool:
        """Remove a user tool and its versions, and stop serving it; the tool as it was."""
        response = self._unary(self._user_tool_stub.DeleteUserTool, pb.DeleteUserToolRequest(slug=slug))
        return UserTool.from_proto(response.user_tool)

    def list_user_tool_versions_page(self, slug: str, page_size: int = 0, page_token: str = "") -> UserToolVersionPage:
        """One page of a user tool's versions, newest first."""
        request = pb.ListUserToolVersionsRequest(slug=slug, page_size=page_size, page_token=page_token)
        return UserToolVersionPage.from_proto(self._unary(self._user_tool_stub.ListUserToolVersions, request))

    def list_user_tool_versions(self, slug: str, page_size: int = 0) -> Iterator[UserToolVersion]:
        """Every version of a user tool, newest first."""
        request = pb.ListUserToolVersionsRequest(slug=slug, page_size=page_size)
        while True:
            page = UserToolVersionPage.from_proto(self._unary(self._user_tool_stub.ListUserToolVersions, request))
            yield from page.versions
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    def restore_user_tool_version(self, slug: str, version: int) -> UserTool:
        """Make a new version equal to `version` (its script, system prompt and schema) and serve it."""
        request = pb.RestoreUserToolVersionRequest(slug=slug, version=version)
        return UserTool.from_proto(self._unary(self._user_tool_stub.RestoreUserToolVersion, request).user_tool)

    def set_user_tool_enabled(self, slug: str, enabled: bool) -> UserToolEnabled:
        """Serve or stop serving a user tool. Enabling one `incompatible` with an enabled tool raises
        FailedPreconditionError naming it and the resolution hint; `equivalent` ones come back in `conflicts`."""
        request = pb.SetUserToolEnabledRequest(slug=slug, enabled=enabled)
        return UserToolEnabled.from_proto(self._unary(self._user_tool_stub.SetUserToolEnabled, request))

    def list_tool_conflicts_page(self, page_size: int = 0, page_token: str = "") -> ToolConflictPage:
        """One page of the conflicts table, sorted by the pair's names."""
        request = pb.ListToolConflictsRequest(page_size=page_size, page_token=page_token)
        return ToolConflictPage.from_proto(self._unary(self._user_tool_stub.ListToolConflicts, request))

    def list_tool_conflicts(self, page_size: int = 0) -> Iterator[ToolConflict]:
        """Every conflict of the table."""
        request = pb.ListToolConflictsRequest(page_size=page_size)
        while True:
            page = ToolConflictPage.from_proto(self._unary(self._user_tool_stub.ListToolConflicts, request))
            yield from page.conflicts
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    def set_tool_conflict(
        self, tool_a: str, tool_b: str, type: ConflictType, resolution_hint: str = ""
    ) -> ToolConflict:
        """Add the conflict of a pair, or replace the one it has (in either order)."""
        request = conflict_request(tool_a, tool_b, type, resolution_hint)
        return ToolConflict.from_proto(self._unary(self._user_tool_stub.SetToolConflict, request).conflict)

    def delete_tool_conflict(self, tool_a: str, tool_b: str) -> ToolConflict:
        """Remove the conflict of a pair (in either order); NotFoundError when it has none."""
        request = pb.DeleteToolConflictRequest(tool_a=tool_a, tool_b=tool_b)
        return ToolConflict.from_proto(self._unary(self._user_tool_stub.DeleteToolConflict, request).conflict)


class AsyncUserToolMethods:
    """UserToolService for the AsyncClient: the same methods as Client's, awaited (the list_* ones are async
    iterators)."""

    _user_tool_stub: Any

    async def _unary(
        self, method: Callable[..., Awaitable[_Response]], request: Any, deadline: float | None = None
    ) -> _Response:
        raise NotImplementedError  # the AsyncClient's

    async def create_user_tool(
        self, slug: str, *, description: str, script: str, input_schema: Mapping[str, Any] | None = None,
        name: str = "", category: str = "", system_prompt: str = "", timeout_seconds: float | None = None,
        tags: Iterable[str] = (), credentials: Iterable[str] = (),
    ) -> UserTool:
        """See Client.create_user_tool."""
        request = create_request(slug, description, script, input_schema or {"type": "object"}, name, category,
                                 system_prompt, timeout_seconds, tags, credentials)
        return UserTool.from_proto((await self._unary(self._user_tool_stub.CreateUserTool, request)).user_tool)

    async def get_user_tool(self, slug: str) -> UserTool:
        response = await self._unary(self._user_tool_stub.GetUserTool, pb.GetUserToolRequest(slug=slug))
        return UserTool.from_proto(response.user_tool)

    async def list_user_tools_page(self, page_size: int = 0, page_token: str = "") -> UserToolPage:
        request = pb.ListUserToolsRequest(page_size=page_size, page_token=page_token)
        return UserToolPage.from_proto(await self._unary(self._user_tool_stub.ListUserTools, request))

    async def list_user_tools(self, page_size: int = 0) -> AsyncIterator[UserTool]:
        request = pb.ListUserToolsRequest(page_size=page_size)
        while True:
            page = UserToolPage.from_proto(await self._unary(self._user_tool_stub.ListUserTools, request))
            for tool in page.user_tools:
                yield tool
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    async def update_user_tool(
        self, slug: str, *, name: str | None = None, description: str | None = None, category: str | None = None,
        system_prompt: str | None = None, input_schema: Mapping[str, Any] | None = None, script: str | None = None,
        timeout_seconds: float | None = None, tags: Iterable[str] | None = None,
        credentials: Iterable[str] | None = None,
    ) -> UserTool:
        """See Client.update_user_tool."""
        request = update_request(slug, {
            "name": name, "description": description, "category": category, "system_prompt": system_prompt,
            "input_schema": input_schema, "script": script, "timeout_seconds": timeout_seconds, "tags": tags,
            "credentials": credentials})
        return UserTool.from_proto((await self._unary(self._user_tool_stub.UpdateUserTool, request)).user_tool)

    async def delete_user_tool(self, slug: str) -> UserTool:
        response = await self._unary(self._user_tool_stub.DeleteUserTool, pb.DeleteUserToolRequest(slug=slug))
        return UserTool.from_proto(response.user_tool)

    async def list_user_tool_versions_page(
        self, slug: str, page_size: int = 0, page_token: str = ""
    ) -> UserToolVersionPage:
        request = pb.ListUserToolVersionsRequest(slug=slug, page_size=page_size, page_token=page_token)
        return UserToolVersionPage.from_proto(await self._unary(self._user_tool_stub.ListUserToolVersions, request))

    async def list_user_tool_versions(self, slug: str, page_size: int = 0) -> AsyncIterator[UserToolVersion]:
        request = pb.ListUserToolVersionsRequest(slug=slug, page_size=page_size)
        while True:
            page = UserToolVersionPage.from_proto(
                await self._unary(self._user_tool_stub.ListUserToolVersions, request))
            for version in page.versions:
                yield version
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    async def restore_user_tool_version(self, slug: str, version: int) -> UserTool:
        request = pb.RestoreUserToolVersionRequest(slug=slug, version=version)
        response = await self._unary(self._user_tool_stub.RestoreUserToolVersion, request)
        return UserTool.from_proto(response.user_tool)

    async def set_user_tool_enabled(self, slug: str, enabled: bool) -> UserToolEnabled:
        request = pb.SetUserToolEnabledRequest(slug=slug, enabled=enabled)
        return UserToolEnabled.from_proto(await self._unary(self._user_tool_stub.SetUserToolEnabled, request))

    async def list_tool_conflicts_page(self, page_size: int = 0, page_token: str = "") -> ToolConflictPage:
        request = pb.ListToolConflictsRequest(page_size=page_size, page_token=page_token)
        return ToolConflictPage.from_proto(await self._unary(self._user_tool_stub.ListToolConflicts, request))

    async def list_tool_conflicts(self, page_size: int = 0) -> AsyncIterator[ToolConflict]:
        request = pb.ListToolConflictsRequest(page_size=page_size)
        while True:
            page = ToolConflictPage.from_proto(await self._unary(self._user_tool_stub.ListToolConflicts, request))
            for conflict in page.conflicts:
                yield conflict
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    async def set_tool_conflict(
        self, tool_a: str, tool_b: str, type: ConflictType, resolution_hint: str = ""
    ) -> ToolConflict:
        request = conflict_request(tool_a, tool_b, type, resolution_hint)
        return ToolConflict.from_proto((await self._unary(self._user_tool_stub.SetToolConflict, request)).conflict)

    async def delete_tool_conflict(self, tool_a: str, tool_b: str) -> ToolConflict:
        request = pb.DeleteToolConflictRequest(tool_a=tool_a, tool_b=tool_b)
        response = await self._unary(self._user_tool_stub.DeleteToolConflict, request)
        return ToolConflict.from_proto(response.conflict)
