"""Security review finding 9 (issue 16): a failure message quotes what a process wrote, and a secret there must be
redacted whole before the message is shortened: cut first, most of a secret survived unrecognised."""

from __future__ import annotations

import json

from toolhost.v1 import tool_service_pb2

from helpers.catalogs import write_tool

# An AWS access key id: recognised by its shape (AKIA and 16 more), not once it is cut short.
KEY_ID = "AKIAIOSFODNN7EXAMPLE"


def script_tool(name: str, line: str) -> str:
    script = f"#!/bin/sh\nprintf '%s\\n' '{line}' >&2\nexit 3\n"
    return (f"name: {name}\ndescription: Fails, quoting a secret.\n"
            f"runner: {{type: script, script: {json.dumps(script)}}}\n")


# The message is "sh exited with status 3: " and the line; it is cut at 500 characters.
PREFIX = "sh exited with status 3: "
# Where the old cut of the quoted line (200 characters) and where the message's cut (500) fall inside the key.
PADDINGS = (185, 190, 499 - len(PREFIX) - 1 - 8)


async def test_a_secret_across_where_the_message_is_cut_is_redacted_whole(start_server, tmp_path):
    for padding in PADDINGS:
        write_tool(tmp_path, f"leaky_{padding}", script_tool(f"leaky_{padding}", "x" * padding + " " + KEY_ID))
    server = await start_server(catalog_dirs=[tmp_path])
    for padding in PADDINGS:
        response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name=f"leaky_{padding}"))
        assert not response.success and response.error.code == "NON_ZERO_EXIT"
        message = response.error.message
        assert message.startswith(PREFIX + "x" * padding + " "), message[:80]
        # No part of the key survives: cut first, its first 8 characters would have.
        assert not any(KEY_ID[:n] in message for n in range(3, len(KEY_ID) + 1)), (padding, message[-40:])
        assert len(message) <= 500, len(message)
        after = message[len(PREFIX) + padding + 1:].removesuffix("…")
        assert "[REDACTED]".startswith(after), (padding, after)  # the replacement, whole or cut, or nothing
        assert "AKIA" not in response.stderr and "[REDACTED]" in response.stderr
