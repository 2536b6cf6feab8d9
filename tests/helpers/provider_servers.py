"""A server for the provider rules, the conflicts and the instructions: a fixed catalog, the workspace tools, two
user tools, and an auth file whose `agent` role is granted a fixed list of tools by name, so that what it is
offered never changes when built-in tools are added elsewhere."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import struct_pb2

from toolhost.v1 import tool_service_pb2, user_tool_service_pb2, user_tool_service_pb2_grpc
from toolhost_server.auth import hash_token
from toolhost_server.workspaces import Workspace

from helpers.auth import Tokens
from helpers.catalogs import write_tool
from helpers.servers import RunningServer, ServerFactory

_RUNNER = "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:return_arguments'}\n"
CATALOG = {
    "net_check": (
        "name: net_check\n"
        "description: |\n  Check that a host answers on a TCP port.\n  Says how long the connection took.\n"
        "category: network\n" + _RUNNER +
        "parameters:\n"
        "  - {name: host, type: string, required: true, description: The host name or address.}\n"
        "  - {name: port, type: integer, default: 443, description: The TCP port.}\n"
        "  - {name: mode, type: string, default: tcp, enum: [tcp, tls], description: How to connect.}\n"),
    "file_peek": (
        "name: file_peek\ndescription: Show the first lines of a file.\ncategory: file_ops\n" + _RUNNER +
        "parameters:\n  - {name: path, type: string, required: true}\n"),
    "uptime_report": (
        "name: uptime_report\ndescription: How long the host has been up.\ncategory: system\n" + _RUNNER),
}
# The user tools the admin creates: one with a system prompt and a schema, one with neither.
DISK_REPORT_PROMPT = ("Use disk_report before deleting anything to free space.\n\n"
                      "It lists the largest directories first; `depth` 1 is usually enough.")
USER_TOOLS = (
    user_tool_service_pb2.UserTool(
        slug="disk_report", name="Disk report", description="Disk usage by directory.",
        system_prompt=DISK_REPORT_PROMPT, script="du -sh .\n"),
    user_tool_service_pb2.UserTool(slug="say_hello", description="Say hello.", script="echo hello\n"),
)
DISK_REPORT_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "The directory to measure."},
                   "depth": {"type": "integer", "description": "How many levels to show.", "default": 1}},
    "required": ["path"],
}
FILE_TOOLS = ["bash", "edit", "execute", "glob", "grep", "load", "read", "search_content", "write"]
AGENT_TOOLS = sorted([*FILE_TOOLS, *CATALOG, "disk_report", "say_hello"])
# What a CLI provider offers the agent: no file_ops (all the file tools and file_peek).
CLI_AGENT_TOOLS = ["disk_report", "net_check", "say_hello", "uptime_report"]


@dataclass
class ProviderServer:
    """The running server, its stubs, and the metadata of each role's token."""

    server: RunningServer
    tokens: Tokens
    token_files: dict[str, Path]
    user_tools: user_tool_service_pb2_grpc.UserToolServiceStub

    def metadata(self, role: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {getattr(self.tokens, role)}"),)

    async def list_names(self, role: str, provider: str = "") -> list[str]:
        """Every tool ListTools with `provider` gives the role, across pages."""
        names: list[str] = []
        token = ""
        while True:
            page = await self.server.stub.ListTools(
                tool_service_pb2.ListToolsRequest(provider=provider, page_token=token, page_size=50),
                metadata=self.metadata(role))
            names += [tool.name for tool in page.tools]
            token = page.next_page_token
            if not token:
                return names

    async def instructions(self, role: str, provider: str) -> tool_service_pb2.GetInstructionsResponse:
        return await self.server.stub.GetInstructions(tool_service_pb2.GetInstructionsRequest(provider=provider),
                                                      metadata=self.metadata(role))


def auth_text(tokens: Tokens) -> str:
    """agent: the AGENT_TOOLS by name; viewer: sees uptime_report only; admin: everything."""
    return f"""\
roles:
  agent:
    call: {{tools: [{", ".join(AGENT_TOOLS)}]}}
  viewer:
    list: {{tools: [uptime_report]}}
  admin:
    admin: true
    call: {{tools: ["*"]}}
tokens:
  - {{name: agent-token, sha256: {hash_token(tokens.agent)}, roles: [agent]}}
  - {{name: viewer-token, sha256: {hash_token(tokens.viewer)}, roles: [viewer]}}
  - {{name: admin-token, sha256: {hash_token(tokens.admin)}, roles: [admin]}}
"""


async def start_provider_server(start_server: ServerFactory, directory: Path, auth: str | None = None,
                                tokens: Tokens | None = None, create_user_tools: bool = True,
                                **config: object) -> ProviderServer:
    """The server, with the user tools created by the admin through UserToolService (unless another server on
    the same database made them). `auth`: the auth file's text, for `tokens` (auth_text's by default)."""
    tokens = tokens or Tokens.generate()
    catalog = directory / "catalog"
    for name, body in CATALOG.items():
        write_tool(catalog, name, body)
    workspace = directory / "w"
    workspace.mkdir(exist_ok=True)
    auth_file = directory / "auth.yaml"
    auth_file.write_text(auth if auth is not None else auth_text(tokens))
    token_files = {}
    for role in ("agent", "viewer", "admin"):
        token_files[role] = directory / f"{role}.token"
        token_files[role].write_text(getattr(tokens, role) + "\n")
    # bash_as_server_user, user_tools_as_server_user: the test server's process_user is root, the server's own.
    workspaces = (Workspace("w", str(workspace), allow_bash=True, bash_as_server_user=True),)
    config.setdefault("user_tools_as_server_user", True)
    server = await start_server(catalog_dirs=[catalog], auth_file=auth_file, workspaces=workspaces, **config)
    served = ProviderServer(server, tokens, token_files,
                            user_tool_service_pb2_grpc.UserToolServiceStub(server.channel))
    for tool in USER_TOOLS if create_user_tools else ():
        request = user_tool_service_pb2.CreateUserToolRequest(user_tool=tool)
        if tool.slug == "disk_report":
            schema = struct_pb2.Struct()
            schema.update(DISK_REPORT_SCHEMA)
            request.user_tool.input_schema.CopyFrom(schema)
        await served.user_tools.CreateUserTool(request, metadata=served.metadata("admin"))
    return served


def status_of(error: BaseException) -> tuple[grpc.StatusCode, str]:
    assert isinstance(error, grpc.aio.AioRpcError), error
    return error.code(), error.details() or ""
