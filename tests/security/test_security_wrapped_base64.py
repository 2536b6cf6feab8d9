"""Security review finding 12 (issue 16): base64 wrapped at 76 columns (base64(1), PEM, MIME) was not matched as a
known value, so a tool could print its credential past the redactor by encoding it with `base64`. A real server
runs a script that does, with the break falling at every place inside the encoded credential."""

from __future__ import annotations

import base64
import json

import pytest

from toolhost_server.sanitize.known_values import base64_fragments

from helpers.calls import call
from helpers.catalogs import write_tool

SECRET = "correct-horse-battery-staple-42"
# Each line: 0 to 79 bytes before the credential, base64(1) wraps at 76, so the break lands at every position
# of each of its three alignments.
SCRIPT = """#!/bin/sh
for pad in $(seq 0 79); do
  printf '%*s%s tail' "$pad" '' "$TOOL_CRED_LEAKY_TOKEN" | base64 -w {width}
done
"""


@pytest.mark.parametrize("width", [76, 64])
async def test_a_credential_encoded_as_wrapped_base64_is_redacted(start_server, tmp_path, monkeypatch, width):
    monkeypatch.setenv("TOOLHOST_CRED_LEAKY_TOKEN", SECRET)
    write_tool(tmp_path, "leaky", "name: leaky\ndescription: Prints its credential, base64-wrapped.\n"
               "credentials: [leaky]\n"
               f"runner: {{type: script, script: {json.dumps(SCRIPT.format(width=width))}}}\n")
    server = await start_server(catalog_dirs=[tmp_path])
    response = await call(server, "leaky")
    assert response.success, response.error
    assert response.redacted
    unwrapped = response.output.replace("\n", "")
    assert not [fragment for fragment in base64_fragments(SECRET.encode()) if fragment in unwrapped]
    # The wrapping is real: each of the 80 encodings took more than one line.
    assert len(response.output.splitlines()) > 80
    assert "[REDACTED]" in response.output


def test_the_unwrapped_text_would_have_held_the_credential():
    # What the assertion above looks for is there in an unredacted wrapped encoding: the test can fail.
    encoded = base64.encodebytes(b"   " + SECRET.encode() + b" tail").decode()
    assert any(fragment in encoded.replace("\n", "") for fragment in base64_fragments(SECRET.encode()))
