"""A canary credential resolved on the server for tools that try to leak it every way they can.

It must appear nowhere a client or an operator reads: responses (output, stderr, structured output, error
messages), stream chunks (also when a chunk boundary splits it), progress messages, ListTools, the server's
log, and process argv. Exported spans are the last place: a tool that writes the canary into its span is
tested against a real OTLP receiver in
tests/test_tracing.py::test_a_credential_a_tool_puts_in_its_span_is_redacted_on_export (this server runs as a
subprocess without tracing).
"""

from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path
from urllib.parse import quote

import pytest

import toolhost

from helpers.servers import ServerProcess

pytestmark = pytest.mark.server  # a `toolhost serve` child (the `server` fixture)

CANARY = "canary-" + secrets.token_hex(12)
# A credential no tool declares: one tool resolves it during its call (ToolServices.resolve_credentials).
LATE_CANARY = "latecanary-" + secrets.token_hex(12)
# Every form a tool might print it in, and that must therefore never reach a client or the log.
FORMS = (CANARY, base64.b64encode(CANARY.encode()).decode(), quote(CANARY), CANARY[: len(CANARY) // 2 + 2],
         CANARY[len(CANARY) // 2 - 2:])

LEAKY_SCRIPT = r"""#!/bin/bash
token="$TOOL_CRED_CANARY_TOKEN"
tr '\0' ' ' < /proc/$$/cmdline > "$TOOL_ARG_ARGV_FILE"
echo "plain $token"
printf '%s' "$token" | base64
printf 'split %s' "${token:0:12}"
sleep 0.3
printf '%s done\n' "${token:12}"
echo "stderr $token" >&2
exit 3
"""


def catalog(directory: Path) -> Path:
    directory.mkdir()
    (directory / "leaky_script.yaml").write_text(
        "name: leaky_script\ndescription: Prints its credential.\ncredentials: [canary]\n"
        f"runner: {json.dumps({'type': 'script', 'script': LEAKY_SCRIPT})}\n"
        "parameters: [{name: argv_file, type: string, required: true}]\n")
    (directory / "canary_everywhere.yaml").write_text(
        "name: canary_everywhere\ndescription: Leaks its credential.\ncredentials: [canary]\n"
        "runner: {type: python, entrypoint: 'catalog_functions:CanaryEverywhere'}\n"
        "parameters: [{name: fail, type: boolean}]\n")
    (directory / "canary_resolved_at_run.yaml").write_text(
        "name: canary_resolved_at_run\ndescription: Leaks a credential it resolved itself.\n"
        "runner: {type: python, entrypoint: 'catalog_functions:CanaryResolvedAtRun'}\n"
        "parameters: [{name: fail, type: boolean}]\n")
    (directory / "canary_function.yaml").write_text(
        "name: canary_function\ndescription: Returns its credential.\ncredentials: [canary]\n"
        "runner: {type: python, entrypoint: 'catalog_functions:canary_function'}\n")
    (directory / "needs_missing.yaml").write_text(
        "name: needs_missing\ndescription: Declares a credential nobody configured.\n"
        "credentials: [canary, nowheretobefound]\n"
        "runner: {type: process, argv: [\"true\"]}\n")
    return directory


def assert_clean(text: str, where: str) -> None:
    for form in FORMS:
        assert form not in text, f"{form!r} leaked in {where}"


@pytest.fixture
async def server(tmp_path):
    process = ServerProcess(
        "--catalog-dir", str(catalog(tmp_path / "catalog")), "--watch-catalog", "false", "--process-user", "root",
        "--data-dir", str(tmp_path / "data"),
        env={"TOOLHOST_CRED_CANARY_TOKEN": CANARY, "TOOLHOST_STORE_KEY": ""})
    await process.start()
    yield process
    await process.stop()


async def test_a_canary_credential_appears_nowhere(server, tmp_path):
    argv_file = tmp_path / "argv"
    async with toolhost.AsyncClient(server.target, timeout=60) as client:
        script = await client.call_tool("leaky_script", argv_file=str(argv_file))
        streamed = [e async for e in client.stream_call("leaky_script", argv_file=str(argv_file))]
        python_ok = await client.call_tool("canary_everywhere")
        python_failed = await client.call_tool("canary_everywhere", fail=True)
        python_streamed = [e async for e in client.stream_call("canary_everywhere")]
        function = await client.call_tool("canary_function")
        listed = [tool.to_dict() async for tool in client.list_tools(view="full")]
        missing = await client.call_tool("needs_missing")

    # The script really had the credential (in its environment, not its argv) and printed it.
    assert script.exit_code == 3 and script.redacted
    assert script.output.startswith("plain [REDACTED]\n") and script.output.endswith(" done\n")
    assert "[REDACTED]" in script.stderr
    assert ".toolhost-script" in argv_file.read_text()  # it was written by the script
    assert_clean(argv_file.read_text(), "the process's argv")
    chunks = [e for e in streamed if isinstance(e, toolhost.OutputChunk)]
    assert len([c for c in chunks if c.stream == "stdout"]) >= 2
    assert_clean("".join(c.text for c in chunks), "stream chunks")
    for result in (script, streamed[-1], python_ok, python_failed, python_streamed[-1], function):
        assert isinstance(result, toolhost.ToolResult)
        assert result.redacted, result
        assert_clean(str(result.raw), f"the response of {result.tool}")  # every field, as protobuf text
    assert python_ok.output.startswith("token [REDACTED] and basic ")
    assert python_failed.error is not None and python_failed.error.code == "REFUSED"
    assert python_failed.error.message == "the service refused [REDACTED]"
    progress = [e for e in python_streamed if isinstance(e, toolhost.CallProgress)]
    assert [p.message for p in progress] == ["authenticated as [REDACTED]"]
    assert function.output == "function sees [REDACTED]"
    assert_clean(json.dumps(listed), "ListTools")

    # A credential nobody configured: a failed result naming it, never a value.
    assert not missing.success and missing.error is not None and missing.error.code == "MISSING_CREDENTIALS"
    assert "nowheretobefound" in missing.error.message and "canary " not in missing.error.message
    assert_clean(missing.error.message, "the missing-credentials message")

    assert server.process is not None
    server.process.terminate()
    assert await server.wait() == 0
    log = server.log.decode()
    assert "calling the service with token [REDACTED]" in log, log  # the tool's log line was written, redacted
    assert_clean(log, "the server log")



async def test_a_credential_a_tool_resolves_during_its_call_is_hidden_as_a_declared_ones(tmp_path):
    # The value is written after the server started, so that it did not learn it at start (it learns every
    # configured value then): only the tool's resolving it makes it known.
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    process = ServerProcess(
        "--catalog-dir", str(catalog(tmp_path / "catalog")), "--watch-catalog", "false",
        "--data-dir", str(tmp_path / "data"), "--credentials-dir", str(secrets_dir), env={"TOOLHOST_STORE_KEY": ""})
    await process.start()
    try:
        (secrets_dir / "latecanary.token").write_text(LATE_CANARY)
        async with toolhost.AsyncClient(process.target, timeout=60) as client:
            ok = await client.call_tool("canary_resolved_at_run")
            failed = await client.call_tool("canary_resolved_at_run", fail=True)
    finally:
        assert process.process is not None
        process.process.terminate()
        assert await process.wait() == 0
    assert ok.success and ok.redacted and ok.output == "late value [REDACTED]", ok
    assert ok.structured_output == {"note": "[REDACTED]"}
    assert failed.error is not None and failed.error.message == "the service refused [REDACTED]", failed
    for result in (ok, failed):
        assert LATE_CANARY not in str(result.raw), result
    log = process.log.decode()
    assert "resolved late value [REDACTED]" in log, log
    assert LATE_CANARY not in log
