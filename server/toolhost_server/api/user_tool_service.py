"""toolhost.v1.UserToolService over grpc.aio: requests to the user-tools core (which checks the rights and the
values), records to responses, errors to status.

A caller without the manage_tools right is refused before anything else of its request is read (a bad mask, a
NaN timeout, a missing store): the servicer then hands the core only the names the refusal's audit entry needs,
and the core, which checks the right first and audits each refused change, refuses.
"""

from __future__ import annotations

import grpc

from toolhost.v1 import user_tool_service_pb2 as pb
from toolhost.v1 import user_tool_service_pb2_grpc

from ..app import Toolhost
from ..auth import Caller, require_right
from ..auth.rights import Right
from ..errors import FailedPreconditionError
from ..user_tools.conflicts import ToolConflicts
from ..user_tools.service import UserTools
from .authentication import authenticate
from .message_pages import page_bytes, page_within
from .rights import requires
from .status import translate_errors
from .user_tool_messages import (
    conflict_message,
    conflict_record,
    slug_only_tool,
    unread_conflict,
    update_changes,
    user_tool_message,
    user_tool_record,
    version_message,
)

USER_TOOL_SERVICE_NAME = pb.DESCRIPTOR.services_by_name["UserToolService"].full_name
_NO_STORE = ("this server keeps no user tools: it runs without its store (the SQLite file in data_dir, or "
             "database_url); start it with one")


class UserToolService(user_tool_service_pb2_grpc.UserToolServiceServicer):
    def __init__(self, toolhost: Toolhost) -> None:
        self._toolhost = toolhost

    def _caller(self, context: grpc.aio.ServicerContext) -> Caller:
        return authenticate(self._toolhost.authenticator, context, self._toolhost.config.trusted_unix_socket)

    def _user_tools(self, caller: Caller, rpc: str) -> UserTools:
        user_tools = self._toolhost.user_tools
        if user_tools is None:
            require_right(caller, Right.MANAGE_TOOLS, rpc)
            raise FailedPreconditionError(_NO_STORE)
        return user_tools

    def _conflicts(self, caller: Caller, rpc: str) -> ToolConflicts:
        conflicts = self._toolhost.conflicts
        if conflicts is None:
            require_right(caller, Right.MANAGE_TOOLS, rpc)
            raise FailedPreconditionError(_NO_STORE)
        return conflicts

    @requires(Right.MANAGE_TOOLS)
    @translate_errors
    async def CreateUserTool(
        self, request: pb.CreateUserToolRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateUserToolResponse:
        caller = self._caller(context)
        user_tools = self._user_tools(caller, "CreateUserTool")
        tool = user_tool_record(request.user_tool) if _manages(caller) else slug_only_tool(request.user_tool.slug)
        created = await user_tools.create(caller, tool)
        return pb.CreateUserToolResponse(user_tool=user_tool_message(created))

    @requires(Right.MANAGE_TOOLS)
    @translate_errors
    async def GetUserTool(
        self, request: pb.GetUserToolRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetUserToolResponse:
        caller = self._caller(context)
        tool = await self._user_tools(caller, "GetUserTool").get(caller, request.slug)
        return pb.GetUserToolResponse(user_tool=user_tool_message(tool))

    @requires(Right.MANAGE_TOOLS)
    @translate_errors
    async def ListUserTools(
        self, request: pb.ListUserToolsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListUserToolsResponse:
        caller = self._caller(context)
        user_tools = self._user_tools(caller, "ListUserTools")
        budget = page_bytes(self._toolhost.config.max_message_bytes)
        tools, next_token = await user_tools.list(caller, request.page_size, request.page_token)
        messages = [user_tool_message(t) for t in tools]
        fitting = page_within(messages, budget)
        while fitting < len(messages):
            # Cut short to stay under the message limit: asked again for just the tools that fit, the core
            # gives the token that continues after the last of them (re-checked: they may have changed).
            tools, next_token = await user_tools.list(caller, fitting, request.page_token)
            messages = [user_tool_message(t) for t in tools]
            fitting = page_within(messages, budget)
        return pb.ListUserToolsResponse(user_tools=messages, next_page_token=next_token)

    @requires(Right.MANAGE_TOOLS)
    @translate_errors
    async def UpdateUserTool(
        self, request: pb.UpdateUserToolRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateUserToolResponse:
        caller = self._caller(context)
        user_tools = self._user_tools(caller, "UpdateUserTool")
        changes = update_changes(request.user_tool, request.update_mask.paths) if _manages(caller) else {}
        updated = await user_tools.update(caller, request.user_tool.slug, changes)
        return pb.UpdateUserToolResponse(user_tool=user_tool_message(updated))

    @requires(Right.MANAGE_TOOLS)
    @translate_errors
    async def DeleteUserTool(
        self, request: pb.DeleteUserToolRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteUserToolResponse:
        caller = self._caller(context)
        deleted = await self._user_tools(caller, "DeleteUserTool").delete(caller, request.slug)
        return pb.DeleteUserToolResponse(user_tool=user_tool_message(deleted))

    @requires(Right.MANAGE_TOOLS)
    @translate_errors
    async def ListUserToolVersions(
        self, request: pb.ListUserToolVersionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListUserToolVersionsResponse:
        caller = self._caller(context)
        versions, next_token = await self._user_tools(caller, "ListUserToolVersions").versions(
            caller, request.slug, request.page_size, request.page_token)
        return pb.ListUserToolVersionsResponse(versions=[version_message(v) for v in versions],
                                               next_page_token=next_token)

    @requires(Right.MANAGE_TOOLS)
    @translate_errors
    async def RestoreUserToolVersion(
        self, request: pb.RestoreUserToolVersionRequest, context: grpc.aio.ServicerContext
    ) -> pb.RestoreUserToolVersionResponse:
        caller = self._caller(context)
        restored = await self._user_tools(caller, "RestoreUserToolVersion").restore(caller, request.slug,
                                                                                   request.version)
        return pb.RestoreUserToolVersionResponse(user_tool=user_tool_message(restored))

    @requires(Right.MANAGE_TOOLS)
    @translate_errors
    async def SetUserToolEnabled(
        self, request: pb.SetUserToolEnabledRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetUserToolEnabledResponse:
        caller = self._caller(context)
        tool, conflicts = await self._user_tools(caller, "SetUserToolEnabled").set_enabled(
            caller, request.slug, request.enabled)
        return pb.SetUserToolEnabledResponse(user_tool=user_tool_message(tool),
                                             conflicts=[conflict_message(c) for c in conflicts])

    @requires(Right.MANAGE_TOOLS)
    @translate_errors
    async def ListToolConflicts(
        self, request: pb.ListToolConflictsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListToolConflictsResponse:
        caller = self._caller(context)
        conflicts, next_token = await self._conflicts(caller, "ListToolConflicts").list(
            caller, request.page_size, request.page_token)
        return pb.ListToolConflictsResponse(conflicts=[conflict_message(c) for c in conflicts],
                                            next_page_token=next_token)

    @requires(Right.MANAGE_TOOLS)
    @translate_errors
    async def SetToolConflict(
        self, request: pb.SetToolConflictRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetToolConflictResponse:
        caller = self._caller(context)
        conflict = conflict_record(request.conflict) if _manages(caller) else unread_conflict(request.conflict)
        stored = await self._conflicts(caller, "SetToolConflict").set(caller, conflict)
        return pb.SetToolConflictResponse(conflict=conflict_message(stored))

    @requires(Right.MANAGE_TOOLS)
    @translate_errors
    async def DeleteToolConflict(
        self, request: pb.DeleteToolConflictRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteToolConflictResponse:
        caller = self._caller(context)
        deleted = await self._conflicts(caller, "DeleteToolConflict").delete(caller, request.tool_a,
                                                                              request.tool_b)
        return pb.DeleteToolConflictResponse(conflict=conflict_message(deleted))


def _manages(caller: Caller) -> bool:
    return caller.permissions.may_manage_tools


