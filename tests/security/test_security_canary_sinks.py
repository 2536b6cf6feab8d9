"""A canary credential, resolved on a real `toolhost serve` for tools that leak it through every channel they
have, is searched for in every sink a client or an operator reads, in plain and encoded forms.

Two credentials come from credentials_dir: `canary`, whose plain, JSON-escaped, percent-encoded, base64 and hex
forms all differ, there from the start; and `canarycode`, shaped like a failure code (so that only redaction,
not the code check, can keep it out of an outcome), added after the start as a rotated Secret is, so that it is
hidden once a call resolves it. Three tools leak them:
- a bash script: plain, base64, base64 wrapped at 76 columns (three alignments), hex, split across two output
  chunks, on stdout and stderr, and in the stderr line its NON_ZERO_EXIT message quotes;
- a Python script: percent-encoded (four ways), JSON-escaped (ASCII and not), URL-safe base64, MIME base64, hex;
- a Python tool (`LeakyPython`, below): its own logger and a foreign one, `%r` of a dict and of bytes, log fields
  (a value and a key), a logged traceback, warnings.warn, print, sys.stderr, an exception ending a thread, an
  unraisable exception, its span's attribute, event and recorded exception, progress, text and structured output
  (a value and a key), an exception, a failure message, and a failure code equal to `canarycode` (or `canary`).
Each tool also reports a SHA-256 of what it received: the test fails if a credential is not delivered at all.

After CallTool and StreamCallTool calls, no form of either value may be in: the responses and stream events;
the server's stdout and stderr; QueryLogs and TailLogs (as an admin) and the log_inspector tool, reading the
memory ring, log_files (a file this test wrote holding the canary, and the server's own stderr captured to a
file) and the database; every column of every row of every table of the store (SQLite; PostgreSQL too); the
OTLP export requests an in-test collector received; /metrics. Each sink must also show the leak attempts'
markers, so a sink that received nothing cannot pass for a clean one.

A second test reads a log file through QueryLogs before any call has resolved the credentials: those the
environment, credentials_dir or the database hold are hidden from the start, not only once a tool has used them;
a third, that each source lists exactly the credentials it holds.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import logging
import os
import re
import secrets
import sys
import threading
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import grpc
import httpx
import pytest
import sqlalchemy
from opentelemetry import trace

from toolhost.v1 import log_service_pb2, log_service_pb2_grpc, tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.config import Config
from toolhost_server.credentials.base import CredentialSourceError
from toolhost_server.credentials.directory import DirectoryCredentialSource
from toolhost_server.credentials.environment import EnvironmentCredentialSource
from toolhost_server.logs.record import LogRecord
from toolhost_server.model import Parameter
from toolhost_server.store.cipher import ValueCipher
from toolhost_server.store.credential_table import CredentialTable
from toolhost_server.store.database import Store
from toolhost_server.store.keys import generate_store_key_text, require_store_key
from toolhost_server.store.log_table import LogTable
from toolhost_server.tools.base import Tool, ToolContext, ToolOutput, ToolRaisedFailure

from helpers.auth import Tokens, auth_file_text
from helpers.otlp import ExportedSpan, otlp_receiver
from helpers.paths import TESTS_DIR
from helpers.servers import ServerProcess
from helpers.sinks import every_row, json_lines, texts_of, texts_of_value
from helpers.waiting import HANG_GUARD_SECONDS, within
from postgres_cluster import DATABASES

pytestmark = pytest.mark.server  # a `toolhost serve` child

# "cn", 16 random hex digits, "/é+\"\\ " and 16 more: every encoding below changes some of it.
CANARY = f"cn{secrets.token_hex(8)}/é+\"\\ {secrets.token_hex(8)}"
# A valid failure code (^[A-Z][A-Z0-9_]{0,63}$), so that only redaction keeps it out of an outcome.
CODE_CANARY = f"CANARY_{secrets.token_hex(10).upper()}"
REDACTED = "[REDACTED]"


def sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def encoded_forms(value: str) -> dict[str, str]:
    """Each form `value` could take in a sink, by name: what must be in none of them."""
    data = value.encode()
    forms = {
        "plain": value,
        "JSON-escaped": json.dumps(value)[1:-1],
        "JSON-escaped, not ASCII": json.dumps(value, ensure_ascii=False)[1:-1],
        "percent-encoded": quote(value, safe=""),
        "percent-encoded as a path": quote(value),
        "percent-encoded as a form": quote_plus(value),
        "percent-encoded, lowercase": re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quote(value, safe="")),
        "Python repr": repr(value)[1:-1],
        "Python bytes repr": repr(data)[2:-1],
        "Python ASCII repr": ascii(value)[1:-1],
        "hex": data.hex(),
        "HEX": data.hex().upper(),
    }
    # In a longer base64 text the value starts at byte 0, 1 or 2 of a 3-byte group; the characters whose bits all
    # come from the value are the same whatever surrounds it.
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode()
        stable = encoded[-(-8 * offset // 6):8 * (offset + len(data)) // 6]
        forms[f"base64 at offset {offset}"] = stable
        forms[f"URL-safe base64 at offset {offset}"] = stable.replace("+", "-").replace("/", "_")
    # A part of it: the random runs of the canary, the random digits of the code.
    forms.update({f"random part {i}": part for i, part in enumerate(re.findall(r"[0-9a-f]{16}|[0-9A-F]{20}", value))})
    return forms


FORMS = {f"{which} {name}": form for which, value in (("canary", CANARY), ("code", CODE_CANARY))
         for name, form in encoded_forms(value).items()}


def leaks_in(text: str) -> list[str]:
    """The forms found in `text`, also where line breaks (raw or JSON-escaped) split a base64 form."""
    unwrapped = re.sub(r"\r|\n|\\r|\\n", "", text)
    return [name for name, form in FORMS.items() if form in text or form in unwrapped]


# --- the leaky tools ----------------------------------------------------------------------------------------

LEAKY_SCRIPT = r"""#!/bin/bash
set -u
token="$TOOL_CRED_CANARY_TOKEN"
printf 'proof %s\n' "$(printf '%s' "$token" | sha256sum | cut -d' ' -f1)"
printf 'leak:plain %s\n' "$token"
printf 'leak:base64 %s\n' "$(printf '%s' "$token" | base64 -w0)"
for pad in 40 41 42; do  # base64(1) wraps at 76 columns: the value straddles a line break, at each alignment
  printf 'leak:base64-wrapped %s\n' "$pad"
  { head -c "$pad" /dev/zero | tr '\0' x; printf '%s' "$token"; } | base64
done
printf 'leak:hex %s\n' "$(printf '%s' "$token" | od -An -tx1 -v | tr -d ' \n')"
printf 'leak:stderr %s\n' "$token" >&2
if [ -n "${TOOL_ARG_GATE:-}" ]; then
  # More than the stream redactor holds back, so that a chunk goes out before the value's second half exists.
  for i in $(seq 1 300); do printf 'filler line %04d, written before the split\n' "$i"; done
  printf 'leak:split %s' "${token:0:10}"
  read -r _ < "$TOOL_ARG_GATE"
  printf '%s\n' "${token:10}"
fi
printf 'leak:exit-message %s\n' "$token" >&2
exit 3
"""

LEAKY_ENCODER = r"""
import base64, hashlib, json, os, re, sys
from urllib.parse import quote, quote_plus

for name in ("CANARY", "CANARYCODE"):
    value = os.environ[f"TOOL_CRED_{name}_TOKEN"]
    data = value.encode()
    print("proof", name, hashlib.sha256(data).hexdigest())
    print("leak:percent", quote(value, safe=""), quote(value), quote_plus(value))
    print("leak:percent-lower", re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quote(value, safe="")))
    print("leak:json", json.dumps({"token": value}), json.dumps({"token": value}, ensure_ascii=False))
    print("leak:hex", data.hex(), data.hex().upper())
    print("leak:base64url", base64.urlsafe_b64encode(b"?" + data).decode())
    print("leak:mime")
    print(base64.encodebytes(b"y" * 50 + data).decode(), end="")
    print("leak:stderr-json", json.dumps({"token": value}), file=sys.stderr)
"""

ENDS = ("return", "raise", "code", "badcode")


class _RaisesWhenCollected:
    """Raises from __del__, where nothing can catch it: Python hands it to sys.unraisablehook."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __del__(self) -> None:
        raise RuntimeError(f"leak:unraisable {self.token}")


def _raise_in_thread(token: str) -> None:
    raise RuntimeError(f"leak:thread {token}")


class LeakyPython(Tool):
    """Puts its credentials into every channel a Python tool has, then ends as `end` says."""

    name = "leaky_python"
    description = "Leaks its credentials through every channel a Python tool has."
    parameters = (Parameter("end", "string", "How the call ends.", required=True, enum=ENDS),)
    credentials = ("canary", "canarycode")

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        token = context.credentials["canary"]["token"]
        code = context.credentials["canarycode"]["token"]
        context.logger.warning("leak:tool-logger %s", token)
        logging.getLogger("vendor.sdk").error("leak:foreign-logger %s", token)
        context.logger.warning("leak:repr %r %r", {"token": token}, token.encode())
        context.logger.warning("leak:log-fields", extra={"request": {"note": f"uses {token}", "list": [code],
                                                                     f"key {token}": 1}})
        try:
            raise ValueError(f"leak:traceback {token}")
        except ValueError:
            context.logger.exception("leak:logged-exception")
        warnings.warn(f"leak:warning {token}", stacklevel=1)
        print(f"leak:print {token}")
        sys.stderr.write(f"leak:stderr-write {code}\n")
        thread = threading.Thread(target=_raise_in_thread, args=(token,), name="leaky-thread")
        thread.start()
        thread.join()
        _RaisesWhenCollected(token)  # dropped at once: its __del__ raises into sys.unraisablehook
        span = trace.get_current_span()
        span.set_attribute("leak.attribute", f"leak:span-attribute {token}")
        span.add_event(f"leak:span-event {token}", {"detail": code})
        span.record_exception(RuntimeError(f"leak:span-exception {token}"))
        context.report_progress(1, 2, f"leak:progress {token}")
        end = arguments["end"]
        if end == "raise":
            raise RuntimeError(f"leak:exception {token}")
        if end in ("code", "badcode"):
            raise ToolRaisedFailure(f"leak:failure {token}", code if end == "code" else token)
        return ToolOutput(text=f"leak:output {token} {code}", structured={
            "note": token, "nested": {"list": [code]}, f"key {token}": "leak:structured-key",
            "proof": sha256(token), "proof_code": sha256(code)})


def write_catalog(directory: Path) -> Path:
    directory.mkdir()
    (directory / "leaky_script.yaml").write_text(
        "name: leaky_script\ndescription: Prints its credential as a shell would.\ncredentials: [canary]\n"
        f"runner: {json.dumps({'type': 'script', 'script': LEAKY_SCRIPT})}\n"
        "parameters: [{name: gate, type: string}]\n")
    (directory / "leaky_encoder.yaml").write_text(
        "name: leaky_encoder\ndescription: Prints its credentials encoded.\ncredentials: [canary, canarycode]\n"
        f"runner: {json.dumps({'type': 'script', 'script': LEAKY_ENCODER, 'interpreter': [sys.executable]})}\n")
    (directory / "leaky_python.yaml").write_text(
        "name: leaky_python\ndescription: Leaks its credentials.\ncredentials: [canary, canarycode]\n"
        f"runner: {{type: python, entrypoint: '{__name__}:LeakyPython'}}\n"
        f"parameters: [{{name: end, type: string, required: true, enum: {list(ENDS)}}}]\n")
    return directory


def write_log_file(path: Path) -> None:
    """Another program's log, holding the credentials: a JSON record with fields and a continuation line, and a
    line in the server's text format."""
    now = datetime.now(UTC)
    record = {"time": now.isoformat(), "level": "ERROR", "logger": "app",
              "message": f"leak:file-json {CANARY}",
              "context": {"token": CANARY, "encoded": base64.b64encode(CANARY.encode()).decode(),
                          "url": f"https://example.com/?t={quote(CANARY, safe='')}", "code": CODE_CANARY}}
    path.write_text(json.dumps(record) + f"\n  leak:file-continuation {CANARY}\n"
                    f"{now:%Y-%m-%d %H:%M:%S},000 ERROR app: leak:file-text {CANARY} {CODE_CANARY}\n")


# --- the server, its output kept ----------------------------------------------------------------------------

class CapturedServer(ServerProcess):
    """A `toolhost serve` child whose stdout and stderr are both kept; stderr is also appended to a file, line by
    line as it comes, which the server reads back as one of its log_files."""

    def __init__(self, *args: str, env: Mapping[str, str], stderr_file: Path) -> None:
        super().__init__(*args, env=env)
        self.stderr_file = stderr_file
        self.stdout = b""
        self.http_port = 0
        self._line = asyncio.Event()
        self._stderr_ended = False
        self._readers: list[asyncio.Future[None]] = []

    async def start(self, timeout: float = HANG_GUARD_SECONDS) -> int:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "toolhost_server.cli", "serve", "--grpc-address", self.address, *self.args,
            env=self.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        self._readers = [asyncio.ensure_future(self._read_stderr()), asyncio.ensure_future(self._read_stdout())]
        self.port = int((await self.logged(rb"serving gRPC on 127\.0\.0\.1:(\d+)", timeout)).group(1))
        self.http_port = int((await self.logged(rb"serving HTTP .* on 127\.0\.0\.1:(\d+)", timeout)).group(1))
        return self.port

    async def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        with self.stderr_file.open("ab") as copy:
            while line := await self.process.stderr.readline():
                self.log += line
                copy.write(line)
                copy.flush()
                self._line.set()
        self._stderr_ended = True
        self._line.set()

    async def _read_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while chunk := await self.process.stdout.read(65536):
            self.stdout += chunk

    async def logged(self, pattern: bytes, seconds: float = HANG_GUARD_SECONDS) -> re.Match[bytes]:
        """The first match of `pattern` in stderr, once a line holds it."""
        async def appears() -> re.Match[bytes]:
            while (found := re.search(pattern, self.log)) is None:
                if self._stderr_ended:
                    raise AssertionError(f"the server's stderr ended without {pattern!r}:\n{self.log.decode()}")
                self._line.clear()
                await self._line.wait()
            return found
        return await within(appears(), f"a server log line matching {pattern!r}", seconds)

    async def wait(self, timeout: float = HANG_GUARD_SECONDS) -> int:
        assert self.process is not None
        await within(asyncio.gather(*self._readers), "the end of the server's stdout and stderr", timeout)
        return await self.process.wait()

    async def stop(self) -> None:
        await super().stop()
        for reader in self._readers:
            reader.cancel()


@dataclass
class Api:
    """The server's gRPC API as an admin."""

    tools: tool_service_pb2_grpc.ToolServiceStub
    logs: log_service_pb2_grpc.LogServiceStub
    metadata: tuple[tuple[str, str], ...]

    async def call(self, name: str, call_id: str, **arguments: Any) -> tool_service_pb2.CallToolResponse:
        request = tool_service_pb2.CallToolRequest(name=name, call_id=call_id, arguments_json=json.dumps(arguments))
        response: tool_service_pb2.CallToolResponse = await self.tools.CallTool(request, metadata=self.metadata)
        return response

    async def stream(self, name: str, call_id: str, release: int | None = None,
                     **arguments: Any) -> list[tool_service_pb2.StreamCallToolResponse]:
        """The events of a streamed call. With `release` (a FIFO's descriptor), a line is written to it once the
        first output chunk has arrived: the tool waits for that line before it writes the rest."""
        request = tool_service_pb2.StreamCallToolRequest(name=name, call_id=call_id,
                                                         arguments_json=json.dumps(arguments))

        async def collect() -> list[tool_service_pb2.StreamCallToolResponse]:
            events = []
            async for event in self.tools.StreamCallTool(request, metadata=self.metadata):
                events.append(event)
                outputs = sum(e.WhichOneof("event") == "output" for e in events)
                if release is not None and outputs == 1 and event.WhichOneof("event") == "output":
                    os.write(release, b"go\n")
            return events
        return await within(collect(), f"the streamed call {call_id}")

    async def query_logs(self) -> list[log_service_pb2.LogRecord]:
        """Every record QueryLogs returns, all pages."""
        records, token = [], ""
        while True:
            page = await self.logs.QueryLogs(log_service_pb2.QueryLogsRequest(page_size=1000, page_token=token),
                                             metadata=self.metadata)
            records.extend(page.records)
            token = page.next_page_token
            if not token:
                return records

    async def tail_logs(self, markers: Iterable[str]) -> list[log_service_pb2.LogRecord]:
        """What TailLogs sends, with the largest backlog, until every one of `markers` has been in a record."""
        async def collect() -> list[log_service_pb2.LogRecord]:
            records: list[log_service_pb2.LogRecord] = []
            texts: list[str] = []
            stream = self.logs.TailLogs(log_service_pb2.TailLogsRequest(backlog=1000), metadata=self.metadata)
            async for response in stream:
                records.append(response.record)
                texts.extend(texts_of(response.record))
                if not missing(texts, markers):
                    break
            stream.cancel()
            return records
        return await within(collect(), f"TailLogs records with each of {markers}")


# Another replica sharing the store, which never resolved the credentials, wrote them into the logs table as they
# were: the database reader must redact them when it reads them (this server's own rows it skips, reading its
# memory ring instead).
REPLICA = "canary-replica:1:planted"


def plant_replica_row(url: str) -> None:
    store = Store(sqlalchemy.make_url(url))
    try:
        LogTable(store).append([LogRecord(
            time=datetime.now(UTC), level="ERROR", logger="replica.tool", message=f"leak:replica-row {CANARY}",
            fields={"token": CANARY, "encoded": quote(CANARY, safe=""), "code": CODE_CANARY})], REPLICA)
    finally:
        store.close()


# --- the test -----------------------------------------------------------------------------------------------

@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest) -> str:
    """"" for SQLite (toolhost.db in the server's data_dir), else a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return ""
    return str(request.getfixturevalue("postgres_url").render_as_string(hide_password=False))


@dataclass
class Setup:
    """Where the server's inputs are, written by the test."""

    catalog: Path
    credentials: Path
    log_file: Path
    stderr_file: Path
    auth_file: Path
    tokens: Tokens


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "canary.token").write_text(CANARY)
    tokens = Tokens.generate()
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    log_file = tmp_path / "logs" / "app.log"
    log_file.parent.mkdir()
    write_log_file(log_file)
    return Setup(write_catalog(tmp_path / "catalog"), credentials, log_file, tmp_path / "logs" / "server.stderr",
                 auth_file, tokens)


def server_environment(setup: Setup, database_url: str, otlp_endpoint: str) -> dict[str, str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith(("OTEL_", "TOOLHOST_"))}
    return {
        **environment,
        # This module is the Python tool's entrypoint module: the server imports it from tests/security.
        "PYTHONPATH": f"{TESTS_DIR}:{Path(__file__).parent}",
        "TOOLHOST_CREDENTIALS_DIR": str(setup.credentials),
        "TOOLHOST_STORE_KEY": "",
        "TOOLHOST_AUTH_FILE": str(setup.auth_file),
        "TOOLHOST_LOG_FORMAT": "json",
        "TOOLHOST_LOG_FILES": f"{setup.log_file}:{setup.stderr_file}",
        "TOOLHOST_LOG_DATABASE": "true",
        "TOOLHOST_AUDIT_DATABASE": "true",
        **({"TOOLHOST_DATABASE_URL": database_url} if database_url else {}),
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }


# What each sink must show of the leak attempts: the records of the Python tool's channels, and of the log file.
LOG_MARKERS = ("leak:tool-logger", "leak:foreign-logger", "leak:repr", "leak:log-fields", "leak:logged-exception",
               "leak:traceback", "leak:warning", "leak:print", "leak:stderr-write", "leak:thread", "leak:unraisable",
               "leak:exception")
FILE_MARKERS = ("leak:file-json", "leak:file-continuation", "leak:file-text")
REPLICA_MARKERS = ("leak:replica-row",)
READ_MARKERS = LOG_MARKERS + FILE_MARKERS + REPLICA_MARKERS  # what every log surface reads
SPAN_MARKERS = ("leak:span-attribute", "leak:span-event", "leak:span-exception")


def missing(texts: Iterable[str], markers: Iterable[str]) -> list[str]:
    text = "\n".join(texts)
    return [marker for marker in markers if marker not in text]


async def logs_once_complete(api: Api) -> list[log_service_pb2.LogRecord]:
    """Every QueryLogs record, once each reader has the records of every leak attempt (the file's once the test
    has copied the server's stderr)."""
    wanted = {"memory": LOG_MARKERS, "file": LOG_MARKERS + FILE_MARKERS, "database": REPLICA_MARKERS}
    absent: dict[str, list[str]] = {}
    try:
        async with asyncio.timeout(HANG_GUARD_SECONDS):
            while True:
                records = await api.query_logs()
                absent = {source: missing((t for r in records if r.source == source for t in texts_of(r)), markers)
                          for source, markers in wanted.items()}
                if not any(absent.values()):
                    return records
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"QueryLogs still lacks, by reader: {absent}") from None


async def inspector_records(api: Api) -> list[str]:
    """The texts of every record log_inspector returns, all pages, and of its responses."""
    texts: list[str] = []
    page_token = ""
    while True:
        arguments: dict[str, Any] = {"limit": 1000, **({"page_token": page_token} if page_token else {})}
        response = await api.call("log_inspector", f"inspect-{len(texts)}", **arguments)
        assert response.success, response.error
        texts.extend(texts_of(response))
        page = json.loads(response.output)
        texts.extend(texts_of_value(page["records"]))
        page_token = page["next_page_token"]
        if not page_token:
            return texts


def assert_delivered_and_redacted(responses: Mapping[str, tool_service_pb2.CallToolResponse],
                                  streams: Mapping[str, list[tool_service_pb2.StreamCallToolResponse]]) -> None:
    """Each tool got both credentials (its proof is their hash) and the server replaced them."""
    script = responses["leaky_script"]
    assert script.exit_code == 3 and script.redacted, script
    assert f"proof {sha256(CANARY)}\nleak:plain {REDACTED}\n" in script.output
    assert f"leak:stderr {REDACTED}\n" in script.stderr
    assert script.error.code == "NON_ZERO_EXIT" and f"leak:exit-message {REDACTED}" in script.error.message
    encoder = responses["leaky_encoder"]
    assert encoder.success and encoder.redacted, encoder
    assert f"proof CANARY {sha256(CANARY)}" in encoder.output
    assert f"proof CANARYCODE {sha256(CODE_CANARY)}" in encoder.output
    returned = responses["leaky_python return"]
    assert returned.success and returned.output == f"leak:output {REDACTED} {REDACTED}", returned
    proofs = {key: returned.structured_output.struct_value.fields[key].string_value for key in ("proof", "proof_code")}
    assert proofs == {"proof": sha256(CANARY), "proof_code": sha256(CODE_CANARY)}
    assert responses["leaky_python raise"].error.code == "TOOL_EXCEPTION"
    for end in ("code", "badcode"):
        failed = responses[f"leaky_python {end}"]
        # A code holding a credential is no code: the failure is TOOL_EXCEPTION, its message redacted.
        assert failed.error.code == "TOOL_EXCEPTION", failed
        assert failed.error.message == f"leak:failure {REDACTED}", failed

    streamed = streams["leaky_script"]
    stdout = [e.output.data.decode() for e in streamed
              if e.WhichOneof("event") == "output" and e.output.stream == tool_service_pb2.OUTPUT_STREAM_STDOUT]
    assert len(stdout) >= 2, "the split was not across two chunks"
    assert f"leak:split {REDACTED}\n" in "".join(stdout)
    assert streamed[-1].result.exit_code == 3
    progress = [e.progress.message for e in streams["leaky_python return"] if e.WhichOneof("event") == "progress"]
    assert progress == [f"leak:progress {REDACTED}"]
    assert streams["leaky_python return"][-1].result.success


async def test_a_canary_credential_reaches_no_sink_in_any_form(setup: Setup, database_url: str,
                                                               tmp_path: Path) -> None:
    gate_path = tmp_path / "gate"
    os.mkfifo(gate_path)
    # Open for reading and writing: opening never blocks, and a line written waits in the FIFO for the script.
    gate = os.open(gate_path, os.O_RDWR)
    sinks: dict[str, list[str]] = {}
    expected: dict[str, tuple[str, ...]] = {}
    async with otlp_receiver() as (receiver, endpoint):
        server = CapturedServer("--catalog-dir", str(setup.catalog), "--watch-catalog", "false",
                                "--process-user", "root", env=server_environment(setup, database_url, endpoint),
                                stderr_file=setup.stderr_file)
        try:
            await server.start()
            # Added after the start, as a rotated Secret is: learned when a call first resolves it.
            (setup.credentials / "canarycode.token").write_text(CODE_CANARY)
            store_url = database_url or f"sqlite:///{server.data_dir}/toolhost.db"
            await asyncio.to_thread(plant_replica_row, store_url)
            async with grpc.aio.insecure_channel(server.target) as channel:
                api = Api(tool_service_pb2_grpc.ToolServiceStub(channel), log_service_pb2_grpc.LogServiceStub(channel),
                          (("authorization", f"Bearer {setup.tokens.admin}"),))
                responses = {"leaky_script": await api.call("leaky_script", "canary-script"),
                             "leaky_encoder": await api.call("leaky_encoder", "canary-encoder")}
                for end in ENDS:
                    responses[f"leaky_python {end}"] = await api.call("leaky_python", f"canary-python-{end}", end=end)
                streams = {
                    "leaky_script": await api.stream("leaky_script", "canary-script-streamed", release=gate,
                                                     gate=str(gate_path)),
                    "leaky_encoder": await api.stream("leaky_encoder", "canary-encoder-streamed"),
                    "leaky_python return": await api.stream("leaky_python", "canary-python-streamed", end="return"),
                }
                assert_delivered_and_redacted(responses, streams)
                sinks["responses"] = [t for r in responses.values() for t in texts_of(r)]
                sinks["stream events"] = [t for events in streams.values() for e in events for t in texts_of(e)]

                records = await logs_once_complete(api)
                for source in ("memory", "file", "database"):
                    sinks[f"QueryLogs from {source}"] = [t for r in records if r.source == source for t in texts_of(r)]
                assert len(records) <= 1000, "more records than one TailLogs backlog: make the test log less"
                sinks["TailLogs"] = [t for r in await api.tail_logs(READ_MARKERS) for t in texts_of(r)]
                sinks["log_inspector"] = await inspector_records(api)
                expected["log_inspector"] = READ_MARKERS

                trace_ids = {r.trace_id for r in responses.values()} | {s[-1].result.trace_id for s in streams.values()}

                def every_trace_and_leak(spans: list[ExportedSpan]) -> bool:
                    return trace_ids <= {s.trace_id for s in spans} and not missing(
                        (str(s.attributes) + str(s.events) for s in spans), SPAN_MARKERS)

                await receiver.wait_for(every_trace_and_leak, timeout=HANG_GUARD_SECONDS)
                sinks["OTLP export requests"] = [t for request in receiver.requests for t in texts_of(request)]
                expected["OTLP export requests"] = SPAN_MARKERS

                async with httpx.AsyncClient() as http:
                    scraped = await http.get(f"http://127.0.0.1:{server.http_port}/metrics")
                assert scraped.status_code == 200
                sinks["/metrics"] = [scraped.text]
                expected["/metrics"] = ('tool="leaky_python"', 'tool="leaky_script"', 'tool="leaky_encoder"')

            assert server.process is not None
            server.process.terminate()
            assert await server.wait() == 0
            sinks["the server's stdout"] = [server.stdout.decode("utf-8", "replace")]
            sinks["the server's stderr"] = list(json_lines(server.log.decode("utf-8", "replace")))
            expected["the server's stderr"] = LOG_MARKERS
            # Read after the stop, which writes the batches still waiting.
            store = await asyncio.to_thread(every_row, store_url)
        finally:
            await server.stop()
            os.close(gate)
    assert {"audit_records", "logs"} <= set(store), store.keys()
    for table, rows in store.items():
        sinks[f"the store's table {table}"] = [text for row in rows if REPLICA not in row for text in row]
    expected["the store's table logs"] = LOG_MARKERS
    expected["the store's table audit_records"] = tuple(r.call_id for r in responses.values())

    absent = {sink: missing(sinks[sink], markers) for sink, markers in expected.items()}
    assert not any(absent.values()), f"sinks that did not get the leak attempts: {absent}"
    leaks = {sink: leaks_in("\n".join(texts)) for sink, texts in sinks.items()}
    assert not any(leaks.values()), {sink: found for sink, found in leaks.items() if found}


def put_in_database(config: Config, values: Mapping[str, str]) -> None:
    """Store each credential's `token` key, encrypted, as `toolhost credentials set` does."""
    store = Store.from_config(config)
    try:
        table = CredentialTable(store, ValueCipher(require_store_key(config.store_key_file, {})))
        for name, value in values.items():
            table.put(name, "token", value)
    finally:
        store.close()


@pytest.mark.parametrize("source", ["environment", "credentials_dir", "database"])
async def test_a_configured_credential_is_hidden_before_any_call_resolves_it(
        start_server, setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> None:
    # Before the fix, the redactor knew a credential only once a call had resolved it: a log file (or another
    # replica's rows) read before that, or after a restart, showed it as it was.
    values = {"canary": CANARY, "canarycode": CODE_CANARY}
    settings: dict[str, Any] = {"log_files": (str(setup.log_file),), "data_dir": str(tmp_path / "data")}
    if source == "environment":
        for name, value in values.items():
            monkeypatch.setenv(f"TOOLHOST_CRED_{name.upper()}_TOKEN", value)
    elif source == "credentials_dir":
        (setup.credentials / "canarycode.token").write_text(CODE_CANARY)
        settings["credentials_dir"] = str(setup.credentials)
    else:
        key_file = tmp_path / "store.key"
        key_file.write_text(generate_store_key_text())
        settings["store_key_file"] = str(key_file)
        await asyncio.to_thread(put_in_database, dataclasses.replace(Config(), **settings), values)
    server = await start_server(**settings)
    logs = log_service_pb2_grpc.LogServiceStub(server.channel)
    page = await logs.QueryLogs(log_service_pb2.QueryLogsRequest(filter=log_service_pb2.LogFilter(source="file")))
    texts = [text for record in page.records for text in texts_of(record)]
    assert not missing(texts, FILE_MARKERS), texts
    assert not leaks_in("\n".join(texts)), texts


def test_each_source_lists_the_credentials_it_holds_and_nothing_else(tmp_path: Path) -> None:
    environment = EnvironmentCredentialSource({
        "TOOLHOST_CRED_WINRM_PASSWORD": "x" * 8, "TOOLHOST_CRED_DB_URL": "x" * 8, "TOOLHOST_CRED_bad_KEY": "x" * 8,
        "TOOLHOST_CRED_NOKEY": "x" * 8, "TOOLHOST_CRED_WEIRD-NAME_KEY": "x" * 8, "PATH": "/bin"})
    assert environment.names() == ["db", "winrm"]
    # A Kubernetes Secret volume: the files of the version ..data points at, beside links and hidden entries.
    secret = tmp_path / "secret"
    (secret / "..v1").mkdir(parents=True)
    for file_name in ("vcenter.password", "vcenter.username", "api.token"):
        (secret / "..v1" / file_name).write_text("x" * 8)
        (secret / file_name).symlink_to(Path("..data") / file_name)
    (secret / "..data").symlink_to("..v1")
    (secret / "..v1" / "README").write_text("not a credential")
    assert DirectoryCredentialSource(secret).names() == ["api", "vcenter"]
    with pytest.raises(CredentialSourceError, match="cannot list"):
        DirectoryCredentialSource(tmp_path / "absent").names()
