"""The introspection tools (application_info, component_inspector, config_access) show an admin the server's own
configuration: they must never show a secret it holds. A `toolhost serve` child gets a canary credential (a
credentials_dir file and a TOOLHOST_CRED_ variable), a store key in TOOLHOST_STORE_KEY, database passwords in
TOOLHOST_DATABASE_<NAME>_URL (in the userinfo, escaped, in the query, and unescaped so that it spills into the
host and path), a metrics token and the admin's own bearer token; every tool is called with every narrowing
argument the server offers, in every output format, and none of them appears in anything returned, nor in the
server's log. Hostile keys and component names are refused before the tool runs, or are NOT_FOUND."""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import quote

import pytest

import toolhost
from toolhost_server.auth import hash_token
from toolhost_server.introspection.redaction import REDACTED, redacted_url
from toolhost_server.store.keys import generate_store_key_text

from helpers.log_drain import draining
from helpers.servers import ServerProcess
from helpers.waiting import HANG_GUARD_SECONDS

pytestmark = pytest.mark.server  # a `toolhost serve` child

CANARY = "canary" + secrets.token_hex(12)
STORE_KEY = generate_store_key_text()
DB_PASSWORD = "dbpw" + secrets.token_hex(10)
ESCAPED_PASSWORD = "esc" + secrets.token_hex(8)
QUERY_PASSWORD = "qpw" + secrets.token_hex(10)
SPILLED_PASSWORD = "spill" + secrets.token_hex(8)
METRICS_TOKEN = "metrics" + secrets.token_hex(20)
ADMIN_TOKEN = secrets.token_urlsafe(32)
SECRETS = {"canary": CANARY, "store key": STORE_KEY, "database password": DB_PASSWORD,
           "escaped password": ESCAPED_PASSWORD, "query password": QUERY_PASSWORD,
           "spilled password": SPILLED_PASSWORD, "metrics token": METRICS_TOKEN, "admin token": ADMIN_TOKEN}
# Every form a value might be shown in.
FORMS = {f"{name} ({how})": form for name, value in SECRETS.items() for how, form in (
    ("plain", value), ("base64", base64.b64encode(value.encode()).decode()), ("percent", quote(value, safe="")),
    ("hash", hash_token(value)))}
FORMATS = (None, "json", "pretty", "text")


def assert_clean(text: str, where: str) -> None:
    for name, form in FORMS.items():
        assert form not in text, f"the {name} leaked in {where}"


@pytest.fixture
async def server(tmp_path) -> AsyncIterator[ServerProcess]:
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "canary.token").write_text(CANARY)
    metrics_token = tmp_path / "metrics.token"
    metrics_token.write_text(METRICS_TOKEN)
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text("roles:\n  admin: {admin: true, call: {tools: ['*']}}\n"
                         f"tokens:\n  - {{name: ops, sha256: {hash_token(ADMIN_TOKEN)}, roles: [admin]}}\n")
    (tmp_path / "w").mkdir()
    process = ServerProcess(
        "--watch-catalog", "false", "--credentials-dir", str(credentials), "--auth-file", str(auth_file),
        "--metrics-token-file", str(metrics_token), "--workspace", f"w={tmp_path / 'w'}",
        "--database", f"local=sqlite:///{tmp_path}/local.db",
        # The canary where no setting should hold it: the learned credential values hide it there too.
        "--pipeline-target", f"dns:///{CANARY}.example:50051",
        env={"TOOLHOST_CRED_CANARY_TOKEN": CANARY, "TOOLHOST_STORE_KEY": STORE_KEY,
             "TOOLHOST_DATABASE_ANALYTICS_URL": f"postgresql://reader:{DB_PASSWORD}@127.0.0.1:9/analytics",
             "TOOLHOST_DATABASE_ESCAPED_URL": f"postgresql://reader:%40{ESCAPED_PASSWORD}%2F@127.0.0.1:9/x",
             "TOOLHOST_DATABASE_QUERY_URL": f"postgresql://reader@127.0.0.1:9/q?sslmode=disable&password="
                                            f"{QUERY_PASSWORD}",
             "TOOLHOST_DATABASE_SPILLED_URL": f"postgresql://reader:x@y/{SPILLED_PASSWORD}@127.0.0.1:9/s"})
    await process.start()
    async with draining(process):  # hundreds of calls log more than a pipe holds
        yield process
    await process.stop()


async def calls(client: toolhost.AsyncClient, tool: str, arguments: dict[str, Any]) -> list[toolhost.ToolResult]:
    return [await client.call_tool(tool, arguments, output_format=output_format) for output_format in FORMATS]


def everything_returned(result: toolhost.ToolResult) -> str:
    return "\n".join((result.output, result.stderr, json.dumps(result.structured_output),
                      result.error.message if result.error else ""))


def dotted_keys(prefix: str, value: Any) -> Iterator[str]:
    """`prefix` and every dotted key into `value`."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from dotted_keys(f"{prefix}.{key}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from dotted_keys(f"{prefix}.{index}", item)


async def test_no_secret_the_server_holds_appears_in_any_answer_to_any_argument(server):
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=ADMIN_TOKEN,
                                    insecure_token_ok=True) as admin:
        settings = (await admin.call_tool("config_access")).structured_output["settings"]
        components = (await admin.call_tool("component_inspector")).structured_output["components"]
        asked: list[tuple[str, dict[str, Any]]] = [("application_info", {}), ("component_inspector", {}),
                                                   ("config_access", {})]
        asked += [("component_inspector", {"component": component["name"]}) for component in components]
        asked += [("config_access", {"key": key}) for row in settings for key in dotted_keys(row["key"], row["value"])]
        results = [(tool, arguments, result) for tool, arguments in asked
                   for result in await calls(admin, tool, arguments)]
    assert len(asked) > 60
    for tool, arguments, result in results:
        assert result.success, (tool, arguments, result.error)
        assert_clean(everything_returned(result), f"{tool} {arguments}")

    # What the operator sees instead: the settings that hold secrets say so, with user, host and database kept.
    rows = {row["key"]: row for row in settings}
    assert rows["store_key"] == {"key": "store_key", "value": REDACTED,
                                 "source": "environment TOOLHOST_STORE_KEY", "sensitive": True}
    assert rows["databases"]["sensitive"] is True
    assert rows["databases"]["value"] == {
        "analytics": f"postgresql://reader:{REDACTED}@127.0.0.1:9/analytics",
        "escaped": f"postgresql://reader:{REDACTED}@127.0.0.1:9/x",
        "local": rows["databases"]["value"]["local"],
        "query": f"postgresql://reader@127.0.0.1:9/q?password={REDACTED}&sslmode=disable",
        "spilled": REDACTED}
    auth = next(c for c in components if c["name"] == "auth")
    assert auth["state"] == "ok"
    server_log = server.log.decode(errors="replace")
    assert_clean(server_log, "the server's log")


async def test_hostile_keys_and_component_names_are_refused_or_not_found(server):
    hostile_keys = ["\x00", "log_level\x00.x", "a" * 257, "..", "workspaces..path", ".log_level", "log_level.",
                    "../../etc/passwd", "workspaces.-1", "workspaces.0.__class__", "__class__", "\uff4cog_level",
                    "workspaces.99999999999999999999999", "databases.analytics.password", "store_key.value"]
    hostile_components = ["\x00", "store\n", "../store", "STORE", "s" * 65, "store.__dict__", "runner..process"]
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=ADMIN_TOKEN,
                                    insecure_token_ok=True) as admin:
        outcomes = [(tool, value, await _outcome(admin, tool, {argument: value}))
                    for tool, argument, values in (("config_access", "key", hostile_keys),
                                                   ("component_inspector", "component", hostile_components))
                    for value in values]
    for tool, value, (code, message) in outcomes:
        # Refused by the schema before the tool runs, or NOT_FOUND by the tool: never data, never a crash.
        assert code in ("INVALID_ARGUMENT", "NOT_FOUND"), (tool, value, code, message)
        assert "Traceback" not in message and len(message) < 2000, (tool, value)
        assert_clean(message, f"{tool} {value!r}")


async def _outcome(client: toolhost.AsyncClient, tool: str, arguments: dict[str, Any]) -> tuple[str, str]:
    try:
        result = await client.call_tool(tool, arguments)
    except toolhost.InvalidArgumentError as exc:
        return "INVALID_ARGUMENT", exc.message
    assert not result.success and result.error is not None, (tool, arguments, result.structured_output)
    return result.error.code, result.error.message


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://u:secretpw@h:5432/db", f"postgresql://u:{REDACTED}@h:5432/db"),
    ("postgresql://u:%40secretpw%3A@h/db", f"postgresql://u:{REDACTED}@h/db"),
    ("postgresql://u@h/db?sslpassword=secretpw&application_name=a",
     f"postgresql://u@h/db?application_name=a&sslpassword={REDACTED}"),
    ("postgresql://u@h/db?options=-c%20x&passfile=/secretpw", f"postgresql://u@h/db?options=-c+x&passfile={REDACTED}"),
    ("postgresql://u:x@y/secretpw@h/db", REDACTED),  # an unescaped @ moved the password's end into the path
    ("postgresql://u:secretpw@h@other/db", REDACTED),
    ("not a url secretpw", REDACTED),
    ("sqlite:////var/lib/a.db", "sqlite:////var/lib/a.db"),
])
def test_database_urls_lose_their_password_wherever_it_sits(url, shown):
    assert redacted_url(url) == shown
    assert "secretpw" not in redacted_url(url)
