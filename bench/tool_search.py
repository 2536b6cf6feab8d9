"""SearchTools at scale: 10,000 catalog tools (1,000 with --quick), each against a same-run baseline.

The catalog is generated: each tool a YAML file whose name, display name, description (15 to 45 words) and tags
are drawn, with a fixed seed, from a vocabulary of 300 common and 6,000 rare words, so terms are spread as in a
real catalog (a few in most tools, most in a few); one tool in ten has an intent ("run job <text> on
tool_00042"). The queries are 2 to 6 of those words, a tenth of them an intent's phrase. A toolhost is built
in-process from a Config (the built-in tools and the bundled catalog besides), served on 127.0.0.1 port 0.

- search_10000_in_process: p50 of ToolSearch.search(query, page_size 10), what every surface calls, against
  listing.list_tools of one page of 10 tools with a tag filter: the cheapest catalog-wide question the same
  caller can ask (a name-sorted page, cached per filter), so the ratio says what ranking costs over listing.
- search_10000_grpc: p50 of the SearchTools RPC over grpc.aio, against the ListTools RPC of one page of 10
  (page_size 10, the same tag filter): the same tool count in BASIC view through the same channel and
  servicer machinery. Client and server share this process and its event loop, so both include both sides.
- index_build_10000: seconds to build the ranked index of the whole catalog from nothing (a first load), against
  building the next generation's when every tool's terms are kept (a reload that changed nothing of them):
  reported, no target.

    .venv/bin/python -m bench.tool_search [--quick]
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import statistics
import tempfile
import time
from pathlib import Path

import grpc

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.api.server import GrpcServer, create_toolhost
from toolhost_server.auth import ANONYMOUS
from toolhost_server.config import Config
from toolhost_server.listing import ToolFilter, list_tools
from toolhost_server.tool_search.index import RankedIndex

from .harness import Figure, Target, interleave, interleave_async, run_standalone

COMMAND = 'make bench BENCH_ARGS="--only tool_search"'
PAGE = 10
FILTER_TAG = "group_3"
SEED = 24


def vocabulary(rng: random.Random) -> tuple[list[str], list[str]]:
    """300 common and 6,000 rare made-up words (pronounceable, no stop words, no stemmable endings)."""
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "do", "gu", "fa", "bri", "sto", "len", "mar"]
    words: set[str] = set()
    while len(words) < 6300:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) + rng.choice("kmnprtx"))
    ordered = sorted(words)
    rng.shuffle(ordered)
    return ordered[:300], ordered[300:]


def phrase(rng: random.Random, common: list[str], rare: list[str], count: int) -> list[str]:
    return [rng.choice(common) if rng.random() < 0.6 else rng.choice(rare) for _ in range(count)]


def write_catalog(directory: Path, count: int, rng: random.Random, common: list[str], rare: list[str]) -> None:
    for index in range(count):
        name_words = phrase(rng, common, rare, 2)
        description = " ".join(phrase(rng, common, rare, rng.randint(15, 45)))
        tags = ", ".join([f"group_{index % 10}", *phrase(rng, common, rare, rng.randint(1, 3))])
        intent = f"intents: ['run job (?P<text>\\S+) on tool_{index:05d}']\n" if index % 10 == 0 else ""
        (directory / f"tool_{index:05d}.yaml").write_text(
            f"name: {'_'.join(name_words)}_{index:05d}\n"
            f"display_name: {' '.join(name_words).title()} {index}\n"
            f"description: {description}.\n"
            "platform: linux\n"
            'runner: {type: process, argv: ["echo", "{text}"]}\n'
            "parameters:\n"
            "  - {name: text, type: string, description: The text., required: true}\n"
            f"tags: [{tags}]\n"
            f"{intent}")


def queries(rng: random.Random, common: list[str], rare: list[str], count: int, tools: int) -> list[str]:
    found = []
    for index in range(count):
        if index % 10 == 0:
            found.append(f"run job x{index} on tool_{rng.randrange(0, tools, 10):05d}")
        else:
            found.append(" ".join(phrase(rng, common, rare, rng.randint(2, 6))))
    return found


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


async def measure(quick: bool) -> list[Figure]:
    tools = 1000 if quick else 10_000
    rounds = 5 if quick else 15
    per_round = 60 if quick else 200
    rng = random.Random(SEED)
    common, rare = vocabulary(rng)
    with tempfile.TemporaryDirectory(prefix="bench-tool-search-") as scratch:
        catalog = Path(scratch) / "catalog"
        catalog.mkdir()
        write_catalog(catalog, tools, rng, common, rare)
        config = dataclasses.replace(Config(), grpc_address="127.0.0.1:0", http_address="", watch_catalog=False,
                                     data_dir=str(Path(scratch) / "data"), catalog_dirs=(str(catalog),),
                                     audit_database=False)
        toolhost = create_toolhost(config)
        await toolhost.start()
        server = GrpcServer(toolhost)
        port = await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}",
                                            options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)])
        try:
            return await _figures(toolhost, tool_service_pb2_grpc.ToolServiceStub(channel), tools, rounds,
                                  per_round, queries(rng, common, rare, per_round * rounds, tools))
        finally:
            await channel.close()
            await server.stop(0)
            await toolhost.close()


async def _figures(toolhost, stub, tools: int, rounds: int, per_round: int,  # type: ignore[no-untyped-def]
                   asked: list[str]) -> list[Figure]:
    search, registry = toolhost.tool_search, toolhost.registry
    tag_filter, no_filter = ToolFilter(tags=(FILTER_TAG,)), ToolFilter()
    served = len(registry.snapshot)
    routed = sum(1 for q in asked[:200] if (hits := search.search(q, ANONYMOUS, no_filter, PAGE).hits)
                 and hits[0].matched_intent)
    batches = [asked[i * per_round:(i + 1) * per_round] for i in range(rounds)]
    round_index = [0, 0]

    def search_round() -> float:
        batch = batches[round_index[0] % rounds]
        round_index[0] += 1
        samples = []
        for query in batch:
            started = time.perf_counter()
            search.search(query, ANONYMOUS, no_filter, PAGE)
            samples.append(time.perf_counter() - started)
        return p50_ms(samples)

    def list_round() -> float:
        samples = []
        for _ in range(per_round):
            started = time.perf_counter()
            list_tools(registry.snapshot, tag_filter, PAGE, "", ANONYMOUS)
            samples.append(time.perf_counter() - started)
        return p50_ms(samples)

    searched, listed = interleave(rounds, search_round, list_round)

    async def rpc_search_round() -> float:
        batch = batches[round_index[1] % rounds]
        round_index[1] += 1
        samples = []
        for query in batch:
            started = time.perf_counter()
            await stub.SearchTools(tool_service_pb2.SearchToolsRequest(query=query, page_size=PAGE))
            samples.append(time.perf_counter() - started)
        return p50_ms(samples)

    async def rpc_list_round() -> float:
        request = tool_service_pb2.ListToolsRequest(tags=[FILTER_TAG], page_size=PAGE)
        samples = []
        for _ in range(per_round):
            started = time.perf_counter()
            await stub.ListTools(request)
            samples.append(time.perf_counter() - started)
        return p50_ms(samples)

    rpc_searched, rpc_listed = await interleave_async(rounds, rpc_search_round, rpc_list_round)

    specs = [tool.spec for tool in registry.snapshot.tools().values()]
    cold, warm = [], []
    for _ in range(3):
        started = time.perf_counter()
        index = RankedIndex(specs)
        cold.append(time.perf_counter() - started)
        started = time.perf_counter()
        RankedIndex(specs, index)
        warm.append(time.perf_counter() - started)
    extra = {"tools_served": served, "queries": len(asked), "intent_routed_share_of_first_200": routed / 200}
    return [
        Figure.from_rounds(
            key=f"search_{tools}_in_process", title=f"ToolSearch.search p50, {tools:,} catalog tools", unit="ms",
            measured=searched, baseline=listed, baseline_name="list_tools, one page of 10 (tag filter)",
            target=Target.value_at_most(5.0), command=COMMAND, extra=extra),
        Figure.from_rounds(
            key=f"search_{tools}_grpc", title=f"SearchTools RPC p50, {tools:,} catalog tools", unit="ms",
            measured=rpc_searched, baseline=rpc_listed, baseline_name="ListTools RPC, one page of 10 (tag filter)",
            target=Target.value_at_most(5.0), command=COMMAND, extra=extra,
            note="client and server in one process and event loop"),
        Figure.from_rounds(
            key=f"index_build_{tools}", title=f"Ranked index build, {tools:,} tools: cold vs terms kept", unit="s",
            measured=cold, baseline=warm, baseline_name="the next generation, every tool's terms kept",
            target=None, command=COMMAND),
    ]


def run(quick: bool) -> list[Figure]:
    return asyncio.run(measure(quick))


if __name__ == "__main__":
    run_standalone("tool_search", run, __doc__)
