"""SearchTools over gRPC, the search_tools tool and `toolhost tools search`, against a real server: an intent's
match first with arguments typed by the tool's schema, ranked results in the BASIC view, the filter, the bounds
of page_size and of the query, and the index following reloads. Hidden tools and hostile input are in
tests/security/test_security_search_api.py."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from toolhost.v1 import tool_pb2, tool_service_pb2

from helpers.catalogs import write_tool
from helpers.cli import cli_env, toolhost
from helpers.servers import RunningServer, ServerFactory
from helpers.status import error_details

KETTLES = 60  # more than the most a search returns (50)
GREET = "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n"
TYPED = "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:return_arguments'}\n"
PORT_QUERY = "check port 5432 on db.example.com"


def write_search_catalog(directory: Path) -> Path:
    """Sixty kettle tools in the kitchen (the first ten tagged descaling, the last for windows), and a tea tool
    whose intent captures a whole number."""
    for index in range(KETTLES):
        tags = "tags: [kitchen, descaling]\n" if index < 10 else "tags: [kitchen]\n"
        platform = "platform: windows\n" if index == KETTLES - 1 else ""
        write_tool(directory, f"kettle_{index:02}", (
            f"name: kettle_{index:02}\ndescription: Works the office kettle.\ncategory: kitchen\n{tags}{platform}"
            f"{GREET}parameters: [{{name: name, type: string, required: true}}]\n"))
    write_tool(directory, "brew_tea", (
        "name: brew_tea\ndescription: Brews tea for the team.\ncategory: kitchen\n"
        "intents: ['brew (?P<cups>\\d+) cups? of (?P<kind>\\w+)']\n"
        f"{TYPED}parameters:\n  - {{name: cups, type: integer, minimum: 1, maximum: 12, required: true}}\n"
        "  - {name: kind, type: string, required: true}\n"))
    return directory


@pytest.fixture
async def server(start_server: ServerFactory, tmp_path: Path) -> RunningServer:
    return await start_server(catalog_dirs=[write_search_catalog(tmp_path / "catalog")])


async def search(server: RunningServer, query: str, **fields: object) -> tool_service_pb2.SearchToolsResponse:
    return await server.stub.SearchTools(tool_service_pb2.SearchToolsRequest(query=query, **fields))  # type: ignore[arg-type]


async def refusal(server: RunningServer, query: str, **fields: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await search(server, query, **fields)
    return caught.value


def names(response: tool_service_pb2.SearchToolsResponse) -> list[str]:
    return [result.tool.name for result in response.results]


# --- SearchTools ------------------------------------------------------------------------------------------------


async def test_an_intent_match_comes_first_with_its_arguments_typed_by_the_schema(server):
    response = await search(server, "Check port 5432 on db.example.com")
    first, *rest = response.results
    assert first.tool.name == "tcp_port_check" and first.matched_intent
    # A Struct holds the port as a number, as the tool's integer parameter types it; not the captured text.
    assert first.arguments.fields["port"].WhichOneof("kind") == "number_value"
    assert json_format.MessageToDict(first.arguments) == {"host": "db.example.com", "port": 5432}
    assert all(first.score > other.score for other in rest)
    # The ranked results after it carry neither an intent nor arguments (unset, not an empty Struct).
    assert all(not other.matched_intent and not other.HasField("arguments") for other in rest)
    assert "tcp_port_check" not in names(response)[1:]


async def test_a_catalog_intent_types_its_capture_and_its_arguments_call_the_tool(server):
    response = await search(server, "brew 3 cups of oolong")
    first = response.results[0]
    assert first.tool.name == "brew_tea"
    assert json_format.MessageToDict(first.arguments) == {"cups": 3, "kind": "oolong"}
    called = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name=first.tool.name, arguments=first.arguments))
    assert called.success, called.error
    assert json_format.MessageToDict(called.structured_output) == {"cups": 3, "kind": "oolong"}


async def test_a_match_the_schema_refuses_is_no_intent_match(server):
    # 13 cups is past the parameter's maximum: the tool may still rank, but not as the intent's answer.
    response = await search(server, "brew 13 cups of oolong")
    assert all(not result.matched_intent and not result.HasField("arguments") for result in response.results)


async def test_results_are_the_basic_view_best_first(server):
    response = await search(server, "office kettle", page_size=5)
    assert len(response.results) == 5 and all(name.startswith("kettle_") for name in names(response))
    scores = [result.score for result in response.results]
    assert scores == sorted(scores, reverse=True)
    for result in response.results:
        assert result.tool.description == "Works the office kettle." and result.tool.category == "kitchen"
        assert not result.tool.parameters and not result.tool.HasField("input_schema")
        assert not result.tool.examples


@pytest.mark.parametrize(("page_size", "count"), [(0, 10), (1, 1), (50, 50), (51, 50), (2**31 - 1, 50)])
async def test_page_size_zero_means_ten_and_fifty_is_the_most(server, page_size, count):
    assert len((await search(server, "office kettle", page_size=page_size)).results) == count


async def test_a_negative_page_size_is_invalid_argument(server):
    error = await refusal(server, "office kettle", page_size=-1)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "page_size" in (error.details() or "")


async def test_the_query_may_have_a_thousand_characters_and_no_more(server):
    at_limit = await search(server, ("kettle " * 143)[:1000])
    assert at_limit.results, "a query of 1,000 characters is answered"
    error = await refusal(server, "k" * 1001)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    info, _ = error_details(error)
    assert info.reason == "INVALID_REQUEST"
    assert "1,000" in (error.details() or "") or "1000" in (error.details() or "")


async def test_an_empty_query_finds_nothing(server):
    response = await search(server, "")
    assert list(response.results) == [] and response.generation >= 1


async def test_every_filter_given_must_match(server):
    def only(response: tool_service_pb2.SearchToolsResponse) -> set[str]:
        return set(names(response))

    kitchen = await search(server, "office kettle tea", page_size=50, category="kitchen")
    assert kitchen.results and all(result.tool.category == "kitchen" for result in kitchen.results)
    assert only(await search(server, "office kettle", page_size=50, tags=["descaling"])) == {
        f"kettle_{i:02}" for i in range(10)}
    assert only(await search(server, "office kettle", page_size=50, tags=["descaling", "kitchen"])) == {
        f"kettle_{i:02}" for i in range(10)}
    assert only(await search(server, "office kettle", platform="windows")) == {f"kettle_{KETTLES - 1}"}
    assert not (await search(server, "office kettle", category="network")).results
    # The filter applies to an intent's match too: out of the category, no match.
    assert "tcp_port_check" not in only(await search(server, PORT_QUERY, category="kitchen"))


async def test_an_unknown_provider_is_invalid_argument(server):
    error = await refusal(server, "office kettle", provider="no_such_provider")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "claude_code" in (error.details() or ""), "the message names the known providers"


async def test_the_index_follows_reloads_and_the_generation_is_the_served_one(server, tmp_path):
    before = await search(server, "samovar")
    assert "samovar_pour" not in names(before)
    listed = await server.stub.ListTools(tool_service_pb2.ListToolsRequest())
    assert before.generation == listed.generation
    write_tool(tmp_path / "catalog", "samovar_pour", (
        f"name: samovar_pour\ndescription: Pours from the samovar.\n{GREET}"
        "parameters: [{name: name, type: string, required: true}]\n"))
    await server.toolhost.reloader.reload("test")
    after = await search(server, "samovar")
    assert names(after)[:1] == ["samovar_pour"] and after.generation > before.generation
    (tmp_path / "catalog" / "samovar_pour.yaml").unlink()
    await server.toolhost.reloader.reload("test")
    assert "samovar_pour" not in names(await search(server, "samovar"))


# --- the search_tools tool --------------------------------------------------------------------------------------


async def call_search_tool(server: RunningServer, **arguments: object) -> tool_service_pb2.CallToolResponse:
    return await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="search_tools", arguments_json=json.dumps(arguments)))


async def test_the_tool_returns_the_intent_match_and_the_ranked_ones(server):
    response = await call_search_tool(server, query=PORT_QUERY, limit=3)
    assert response.success, response.error
    found = json_format.MessageToDict(response.structured_output)
    first, *rest = found["results"]
    assert first["name"] == "tcp_port_check" and first["matched_intent"]
    assert first["arguments"] == {"host": "db.example.com", "port": 5432}
    call_line = next(line for line in response.output.splitlines() if "matches the request" in line)
    assert call_line == '   matches the request: call tcp_port_check with {"host": "db.example.com", "port": 5432}'
    assert len(rest) <= 2 and all(r["arguments"] is None and r["matched_intent"] == "" for r in rest)
    assert response.output.startswith("1. tcp_port_check: ")
    assert found["generation"] >= 1


async def test_the_tool_filters_and_limits(server):
    response = await call_search_tool(server, query="office kettle", limit=4, tags=["descaling"])
    assert response.success, response.error
    results = json_format.MessageToDict(response.structured_output)["results"]
    assert len(results) == 4 and {r["name"] for r in results} <= {f"kettle_{i:02}" for i in range(10)}
    nothing = await call_search_tool(server, query="office kettle", category="network")
    assert nothing.success and json_format.MessageToDict(nothing.structured_output)["results"] == []
    assert nothing.output.startswith("No tool matches")


@pytest.mark.parametrize("arguments", [
    {"query": "kettle", "limit": 0}, {"query": "kettle", "limit": 51}, {"query": ""}, {"query": "k" * 1001},
    {"query": "kettle", "tags": "kitchen"}, {},
])
async def test_the_tool_refuses_arguments_past_its_bounds(server, arguments):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call_search_tool(server, **arguments)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_the_tool_is_read_only_idempotent_and_closed_world(server):
    tool = (await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="search_tools"))).tool
    assert tool.annotations == tool_pb2.ToolAnnotations(read_only=True, idempotent=True)


# --- toolhost tools search ---------------------------------------------------------------------------------------


async def test_the_cli_prints_the_call_for_an_intent_and_a_table(server):
    run = await toolhost("--target", server.target, "tools", "search", PORT_QUERY, env=cli_env(COLUMNS="200"))
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0].startswith("tcp_port_check answers this request (intent ")
    assert lines[1] == "  toolhost call tcp_port_check host=db.example.com port=5432"
    header = next(line for line in lines if line.startswith("NAME"))
    assert header.split() == ["NAME", "SCORE", "CATEGORY", "DESCRIPTION"]
    rows = lines[lines.index(header) + 1:]
    assert rows[0].split()[:2] == ["tcp_port_check", "intent"]


async def test_the_cli_json_limit_and_filters(server):
    run = await toolhost("--target", server.target, "tools", "search", "office kettle", "--limit", "3",
                         "--tag", "descaling", "--json")
    assert run.code == 0, run.err
    results = json.loads(run.out)
    assert len(results) == 3
    for result in results:
        assert result["tool"]["name"] in {f"kettle_{i:02}" for i in range(10)}
        assert result["matched_intent"] == "" and result["arguments"] is None
    run = await toolhost("--target", server.target, "tools", "search", "office kettle", "--category", "network")
    assert (run.code, run.out) == (0, "") and "no tool matches" in run.err


@pytest.mark.parametrize("limit", ["0", "51", "ten"])
async def test_the_cli_refuses_a_limit_out_of_range(server, limit):
    run = await toolhost("--target", server.target, "tools", "search", "kettle", "--limit", limit)
    assert run.code == 2 and "--limit" in run.err


async def test_the_cli_reports_the_servers_refusal(server):
    run = await toolhost("--target", server.target, "tools", "search", "k" * 1001)
    # As for every request the server finds malformed: exit 2, the usage error.
    assert run.code == 2 and "INVALID_ARGUMENT" in run.err and "1000" in run.err
