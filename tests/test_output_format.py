"""Result formats (drowcoder's `as_type`): CallToolRequest.output_format and filter_empty_fields, through a real
server: each format, the filtering, redaction before rendering, and the output limit on the rendered text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from toolhost.v1 import tool_service_pb2
from toolhost_server.output_format import OutputFormat, cut_at, rendered, without_empty_fields
from toolhost_server.tools.base import ToolOutput

from helpers.catalogs import write_tool
from helpers.servers import RunningServer, ServerFactory
from helpers.status import error_details

JSON = tool_service_pb2.OUTPUT_FORMAT_JSON
PRETTY = tool_service_pb2.OUTPUT_FORMAT_PRETTY
TEXT = tool_service_pb2.OUTPUT_FORMAT_TEXT
UNSPECIFIED = tool_service_pb2.OUTPUT_FORMAT_UNSPECIFIED

# A result with every kind of empty field, at several depths, next to values that only look empty.
DATA: dict[str, Any] = {
    "name": "report", "count": 0, "ok": False, "missing": None, "blank": "", "none_yet": [], "nothing": {},
    "nested": {"kept": "é", "gone": None, "emptied": {"also_gone": ""}},
    "rows": [{"a": 1, "b": None}, None, "", [], {}],
}
FILTERED: dict[str, Any] = {
    "name": "report", "count": 0, "ok": False, "nested": {"kept": "é"},
    "rows": [{"a": 1}, None, "", [], {}],
}
CANARY = "vault-token-5c1f0b7e9a"
PATTERN_SECRETS = ("hunter2hunter2", "ghp_abcdefghijklmnop", "s3cretpass")


def report(**arguments: Any) -> ToolOutput:
    """Its own text differs from any JSON of its structured output, which is the arguments."""
    return ToolOutput(text=f"a report of {len(arguments)} fields", structured=dict(arguments))


def revealing(credentials: Any) -> dict[str, Any]:
    """Returns its credential in every place of a structured output, and secrets recognised by their shape."""
    token = credentials["vault"].token
    return {
        "plain": token, "nested": {"list": [token, f"Authorization: Bearer {token}"]}, "empty": None,
        "config": {"DB_PASSWORD": "hunter2hunter2", "githubToken": "ghp_abcdefghijklmnop", "max_tokens": 512},
        "note": "connect with postgres://app:s3cretpass@db:5432/app",
    }


def catalog(directory: Path) -> Path:
    write_tool(directory, "report", "name: report\ndescription: Reports its arguments.\n"
               "runner: {type: python, entrypoint: 'test_output_format:report'}\ninput_schema: {type: object}\n")
    write_tool(directory, "report_small", "name: report_small\ndescription: Reports, 64 bytes kept.\n"
               "max_output_bytes: 64\n"
               "runner: {type: python, entrypoint: 'test_output_format:report'}\ninput_schema: {type: object}\n")
    write_tool(directory, "revealing", "name: revealing\ndescription: Leaks on purpose.\ncredentials: [vault]\n"
               "runner: {type: python, entrypoint: 'test_output_format:revealing'}\n")
    return directory


@pytest.fixture
async def server(start_server: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunningServer:
    monkeypatch.setenv("TOOLHOST_CRED_VAULT_TOKEN", CANARY)
    return await start_server(catalog_dirs=[catalog(tmp_path / "catalog")], max_output_bytes=1000)


async def call(server: RunningServer, name: str, arguments: dict[str, Any] | None = None,
               output_format: int = UNSPECIFIED, filter_empty: bool = False) -> tool_service_pb2.CallToolResponse:
    response: tool_service_pb2.CallToolResponse = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name=name, arguments_json=json.dumps(arguments or {}), output_format=output_format,  # type: ignore[arg-type]
        filter_empty_fields=filter_empty))
    return response


def structured(response: tool_service_pb2.CallToolResponse) -> Any:
    """The structured output as the tool returned it: protobuf carries numbers as doubles, 512 as 512.0."""
    return whole_numbers(json_format.MessageToDict(response.structured_output))


def whole_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)


async def test_each_format_writes_the_output_and_structured_output_stays_the_data(server):
    own_text = f"a report of {len(DATA)} fields"
    expected = {
        UNSPECIFIED: own_text,  # the tool's default, as before the field existed
        TEXT: own_text,
        JSON: compact(DATA),
        PRETTY: pretty(DATA),
    }
    for output_format, output in expected.items():
        response = await call(server, "report", DATA, output_format)
        assert response.success and response.output == output, output_format
        assert structured(response) == json.loads(json.dumps(DATA)), output_format
        assert not response.truncated and response.original_size_bytes == 0
    # The renderings are exact: one line with no spaces between tokens; two-space indents, keys sorted.
    assert compact(DATA).startswith('{"blank":"","count":0,"missing":null,"name":"report","nested":{"emptied":')
    assert pretty(DATA).startswith('{\n  "blank": "",\n  "count": 0,\n')


async def test_filter_empty_fields_drops_them_at_every_depth_from_structured_output_and_rendering(server):
    own_text = f"a report of {len(DATA)} fields"  # the tool's text is its own: not filtered
    for output_format, output in {UNSPECIFIED: own_text, TEXT: own_text, JSON: compact(FILTERED),
                                  PRETTY: pretty(FILTERED)}.items():
        response = await call(server, "report", DATA, output_format, filter_empty=True)
        assert response.success and response.output == output, output_format
        assert structured(response) == FILTERED, output_format


def test_filtering_keeps_false_zero_and_list_elements_and_an_empty_top_level_value():
    assert without_empty_fields(DATA) == FILTERED
    assert without_empty_fields({"a": None, "b": {"c": []}}) == {}
    assert without_empty_fields([None, {"a": ""}]) == [None, {}]
    assert without_empty_fields("") == "" and without_empty_fields(None) is None
    assert without_empty_fields({"zero": 0, "false": False, "space": " "}) == {"zero": 0, "false": False, "space": " "}
    untouched = {"a": [1, {"b": None}]}
    without_empty_fields(untouched)
    assert untouched == {"a": [1, {"b": None}]}  # a copy is filtered: the tool's value is not changed


async def test_a_tool_without_structured_output_keeps_its_text_in_every_format(server):
    for output_format in (UNSPECIFIED, TEXT, JSON, PRETTY):
        response = await call(server, "echo", {"text": "plain words"}, output_format, filter_empty=True)
        assert response.success and response.output == "plain words", output_format
        assert not response.HasField("structured_output")


async def test_an_unknown_output_format_is_invalid_argument_on_both_calls(server):
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(server, "report", {}, output_format=99)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "output_format 99" in (refused.value.details() or "")
    assert error_details(refused.value)[0].reason == "INVALID_REQUEST"
    stream = server.stub.StreamCallTool(tool_service_pb2.StreamCallToolRequest(
        name="report", output_format=-1))  # type: ignore[arg-type]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        async for _ in stream:
            pass
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_streamed_call_renders_its_result(server):
    events = [event async for event in server.stub.StreamCallTool(tool_service_pb2.StreamCallToolRequest(
        name="report", arguments_json=json.dumps(DATA), output_format=PRETTY, filter_empty_fields=True))]
    result = events[-1].result
    assert result.success and result.output == pretty(FILTERED)
    assert structured(result) == FILTERED


async def test_secrets_in_the_structured_output_stay_redacted_in_every_format(server):
    for output_format in (UNSPECIFIED, TEXT, JSON, PRETTY):
        for filter_empty in (False, True):
            response = await call(server, "revealing", {}, output_format, filter_empty)
            assert response.success and response.redacted, output_format
            for secret in (CANARY, *PATTERN_SECRETS):
                assert secret not in response.output and secret not in str(response.structured_output), secret
            data = structured(response)
            assert data["plain"] == "[REDACTED]" and data["config"]["max_tokens"] == 512
            if output_format in (JSON, PRETTY):
                # The rendering is made of the redacted structured output the caller gets anyway, nothing more.
                render = compact if output_format == JSON else pretty
                assert response.output == render(data)
                assert ('"empty"' in response.output) is not filter_empty


async def test_the_output_limit_applies_to_the_rendered_text(server):
    # Compact, the data fits the tool's 64 bytes (the tool's own check); indented, it does not.
    data = {"items": ["one", "two", "three", "é" * 8]}
    assert len(compact(data)) < 64 < len(pretty(data).encode())
    small = await call(server, "report_small", data, PRETTY)
    rendered = pretty(data).encode()
    assert small.success and small.truncated and small.original_size_bytes == len(rendered)
    # Cut at 64 bytes, inside an "é": the half character is dropped.
    assert small.output == rendered[:64].decode(errors="ignore") == rendered[:63].decode()
    assert structured(small) == data
    assert not (await call(server, "report_small", data, JSON)).truncated

    # Without a limit of its own, a tool's rendering is cut at the server's (1000 bytes here).
    wide = {"rows": [{"id": i, "name": f"row {i}"} for i in range(30)]}
    assert len(compact(wide)) < 1000 < len(pretty(wide))
    response = await call(server, "report", wide, PRETTY)
    assert response.truncated and len(response.output.encode()) == 1000
    assert pretty(wide).startswith(response.output) and response.original_size_bytes == len(pretty(wide))


def test_a_cut_never_splits_a_character():
    cut = cut_at("ab" + "é" * 3, 5)  # bytes: a b c3 a9 c3 | a9 c3 a9
    assert cut.text == "abé" and cut.truncated and cut.original_size_bytes == 8
    assert cut_at("abc", 3).text == "abc" and not cut_at("abc", 3).truncated


def test_a_whole_number_renders_the_same_whether_it_came_as_an_integer_or_as_protobufs_double():
    assert rendered({"a": 1, "b": 1.0, "c": 1.5, "d": [2.0]}, OutputFormat.JSON) == '{"a":1,"b":1,"c":1.5,"d":[2]}'
    assert rendered({"big": 2.0**60}, OutputFormat.JSON) == '{"big":1.152921504606847e+18}'  # not known exactly
    assert rendered({"a": 1}, OutputFormat.TEXT) is None and rendered({"a": 1}, OutputFormat.DEFAULT) is None
