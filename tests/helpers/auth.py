"""Bearer tokens for three roles and the auth file that grants them, with a catalog on which the roles differ:
an agent calls echo_* and the probes category, a viewer lists testing and probes, an admin does everything."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from toolhost_server.auth import hash_token

from helpers.catalogs import write_tool

GREET = "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n" \
        "parameters: [{name: name, type: string, required: true}]\n"
CATALOG = {
    "echo_one": "category: testing\n",
    "net_probe": "category: probes\n",
    "secret_tool": "category: testing\n",
    "admin_tool": "category: testing\nrequires_admin: true\n",
}
AGENT_SEES = ["admin_tool", "echo_one", "net_probe"]
EVERY_TOOL = sorted(CATALOG)  # of the catalog; a caller with every right also sees the built-in tools


def write_catalog(directory: Path, names: list[str] = EVERY_TOOL) -> Path:
    """Write the catalog's tools (those in `names`) into `directory`; the directory."""
    for name in names:
        write_tool(directory, name, f"name: {name}\ndescription: Test tool {name}.\n{CATALOG[name]}{GREET}")
    return directory


@dataclass
class Tokens:
    """One bearer token per role of auth_file_text."""

    agent: str
    viewer: str
    admin: str

    @classmethod
    def generate(cls) -> Tokens:
        """Three fresh random tokens."""
        return cls(*(secrets.token_urlsafe(32) for _ in range(3)))


def auth_file_text(tokens: Tokens, agent_calls: str = '["echo_*", admin_tool]', certificates: str = "") -> str:
    """An auth file with the agent, viewer and admin roles, each granted to its token; `certificates` is
    appended (a `certificates:` section)."""
    return f"""\
roles:
  agent:
    call: {{tools: {agent_calls}, categories: [probes]}}
  viewer:
    list: {{categories: [testing, probes]}}
  admin:
    admin: true
    call: {{tools: ["*"]}}
tokens:
  - {{name: agent-token, sha256: {hash_token(tokens.agent)}, roles: [agent]}}
  - {{name: viewer-token, sha256: {hash_token(tokens.viewer)}, roles: [viewer]}}
  - {{name: admin-token, sha256: {hash_token(tokens.admin)}, roles: [admin]}}
{certificates}"""
