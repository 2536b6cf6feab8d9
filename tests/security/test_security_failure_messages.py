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


async def test_a_secret_across_where_the_message_is_cut_is_redacted_whole(start_server, tmp_path):
    # Placed where the message used to be cut (about 200 characters of the line), and where it is cut now
    # (500 characters of the message): neither cut may leave a recognisable part of the key behind.
    for padding in (185, 190, 470, 480):
        write_tool(tmp_path, f"leaky_{padding}", script_tool(f"leaky_{padding}", "x" * padding + " " + KEY_ID))
    server = await start_server(catalog_dirs=[tmp_path])
    for padding in (185, 190, 470, 480):
        response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name=f"leaky_{padding}"))
        assert not response.success and response.error.code == "NON_ZERO_EXIT"
        message = response.error.message
        assert "AKIA" not in message and "IOSFODNN" not in message, (padding, message)
        assert len(message) <= 500, len(message)
        if padding < 400:  # short enough to be quoted whole: the key is replaced, not cut away
            assert "[REDACTED]" in message, message
        assert "AKIA" not in response.stderr and "[REDACTED]" in response.stderr
