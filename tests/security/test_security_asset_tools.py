"""asset_count and asset_search under attack, on SQLite and PostgreSQL: LIKE's own characters (`%`, `_`, `\\`) and
glob look-alikes in every filter match only themselves; filters too long or holding NUL and other control characters
are INVALID_ARGUMENT before the database sees them; forged page tokens (a NUL, an upper-case or over-long position,
another type, nested JSON) are INVALID_PAGE_TOKEN, never INTERNAL."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from sqlalchemy import URL

from toolhost_server.assets.model import Asset

from helpers.asset_tools import add_assets, asset_tool, search_all
from helpers.calls import call
from helpers.servers import RunningServer
from helpers.status import error_details
from helpers.todos import store_settings

HOSTILE_INVENTORY = (
    Asset("a-pct", os="100% Linux_x64", platform="linux", site="lab", tags=("web",)),
    Asset("b-plain", os="Linux amd64", platform="linux", site="lab", tags=("db",)),
    Asset("c-back", os="Back\\slash OS", platform="other", site="lab"),
    Asset("srv_1", os="Système ÉTÉ"),
    Asset("srv-1"),
    Asset("srvx1"),
)

# (filters, the names that must match: only what the characters say literally)
LITERAL_CASES: list[tuple[dict[str, str], list[str]]] = [
    ({"os": "%"}, ["a-pct"]),
    ({"os": "_"}, ["a-pct"]),
    ({"os": "100%"}, ["a-pct"]),
    ({"os": "1_0"}, []),
    ({"os": "\\"}, ["c-back"]),
    ({"os": "\\%"}, []),
    ({"os": "%%"}, []),
    ({"os": "été"}, ["srv_1"]),  # ignoring case beyond ASCII
    ({"os": "\uff2c\uff29\uff2e\uff35\uff38"}, []),  # LINUX in full-width letters: other letters
    ({"name": "srv_1"}, ["srv_1"]),
    ({"name": "SRV?1"}, ["srv-1", "srv_1", "srvx1"]),
    ({"name": "a_pct"}, []),
    ({"name": "%"}, []),
    ({"name": "a%"}, []),
    ({"name": "[ab]*"}, []),  # no character classes: not SQLite's GLOB
    ({"name": "*"}, ["a-pct", "b-plain", "c-back", "srv-1", "srv_1", "srvx1"]),
    ({"tag": "%"}, []),
    ({"tag": "_eb"}, []),
    ({"platform": "%"}, []),
    ({"site": "l_b"}, []),
]


async def refused(server: RunningServer, tool: str, **arguments: Any) -> tuple[str, list[tuple[str, str]]]:
    """The ErrorInfo reason and field violations of a call that must be INVALID_ARGUMENT."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, tool, arguments)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    info, violations = error_details(caught.value)
    return info.reason, violations


async def test_like_and_glob_characters_match_only_themselves(start_server, database: URL, tmp_path: Path):
    server = await start_server(**store_settings(database, tmp_path))
    await add_assets(server, *HOSTILE_INVENTORY)
    for filters, expected in LITERAL_CASES:
        text, _ = await asset_tool(server, "asset_count", **filters)
        assert text == str(len(expected)), filters
        assert sorted(await search_all(server, **filters), key=str.lower) == sorted(expected, key=str.lower), filters


@pytest.mark.parametrize("tool", ["asset_count", "asset_search"])
@pytest.mark.parametrize(("argument", "value"), [
    ("os", "x" * 257),
    ("name", "*" * 257),
    ("os", "Windows\x00 10"),
    ("tag", "finance\n"),
    ("site", "\x1b[31mred"),
    ("platform", "win\x7f"),
])
async def test_overlong_and_control_character_filters_never_reach_the_database(start_server, tool, argument, value):
    server = await start_server()
    reason, violations = await refused(server, tool, **{argument: value})
    assert reason == "INVALID_ARGUMENTS"
    assert [field for field, _ in violations] == [f"/{argument}"]


async def test_the_longest_filter_allowed_is_answered(start_server):
    server = await start_server()
    await add_assets(server, Asset("ws-1", os="Windows"))
    text, _ = await asset_tool(server, "asset_count", os="é" * 256, name="*" * 256)
    assert text == "0"
    assert await search_all(server, name="*" * 256) == ["ws-1"]


@pytest.mark.parametrize(("argument", "value"), [("page_size", 0), ("page_size", 1001), ("page_size", -1),
                                                 ("page_token", "x" * 513)])
async def test_page_arguments_out_of_bounds_are_refused(start_server, argument, value):
    server = await start_server()
    reason, violations = await refused(server, "asset_search", **{argument: value})
    assert reason == "INVALID_ARGUMENTS" and [field for field, _ in violations] == [f"/{argument}"]


def _forge(token: str, **changes: Any) -> str:
    data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    data.update(changes)
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


async def test_forged_page_tokens_are_refused_not_run(start_server):
    server = await start_server()
    await add_assets(server, *(Asset(f"ws-{i}", os="Windows") for i in range(3)))
    _, first = await asset_tool(server, "asset_search", page_size=1)
    token = first["next_page_token"]
    nested = "[" * 100_000
    forged = [
        "garbage", "!!!", "eyJhIjogMX0", token + "x",
        _forge(token, a="ws-0\x00"), _forge(token, a="WS-0"), _forge(token, a="x" * 129), _forge(token, a=5),
        _forge(token, a=["ws-0"]), _forge(token, a="' OR 1=1 --"), _forge(token, f=None),
        base64.urlsafe_b64encode(nested.encode()[:380]).decode(),
    ]
    for bad in forged:
        reason, _ = await refused(server, "asset_search", page_size=1, page_token=bad)
        assert reason == "INVALID_PAGE_TOKEN", bad
    # The genuine one still works after all that.
    _, second = await asset_tool(server, "asset_search", page_size=1, page_token=token)
    assert [asset["name"] for asset in second["assets"]] == ["ws-1"]
