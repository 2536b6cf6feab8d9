"""log_inspector read as one of the introspection tools: an unknown source is refused by the schema naming the
readers, a reader this server lacks is an empty answer with a note, and the summary counts the records and says in words
which readers could not answer."""

from __future__ import annotations

import logging
import secrets

import pytest

import toolhost

from helpers.servers import RunningServer
from helpers.waiting import HANG_GUARD_SECONDS


async def test_an_unknown_source_is_invalid_and_names_the_readers(start_server):
    server: RunningServer = await start_server()
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        with pytest.raises(toolhost.InvalidArgumentError) as refused:
            await client.call_tool("log_inspector", source="databse")
    assert "/source" in refused.value.message
    assert all(reader in refused.value.message for reader in ("memory", "file", "database"))


async def test_a_reader_the_server_lacks_is_an_empty_answer_with_a_note(start_server):
    server: RunningServer = await start_server()
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        result = await client.call_tool("log_inspector", source="file")
    assert result.success, result.error
    output = result.structured_output
    assert output["records"] == [] and output["summary"]["record_count"] == 0
    assert any("no file log reader" in note and "log_files" in note for note in output["summary"]["notes"])


async def test_the_summary_counts_records_and_notes_each_reader_that_could_not_answer(start_server, tmp_path,
                                                                                       caplog):
    caplog.set_level(logging.INFO)
    text = f"counted-{secrets.token_hex(6)}"
    server: RunningServer = await start_server(log_files=(str(tmp_path / "missing-*.log"),))
    for index in range(3):
        logging.getLogger("toolhost.test").warning("%s %d", text, index)
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        result = await client.call_tool("log_inspector", text=text, limit=2)
        assert result.success, result.error
        summary = result.structured_output["summary"]
        assert summary["record_count"] == 2 and summary["level_counts"] == {"WARNING": 2}
        assert "file" in summary["unavailable"]
        assert any(note.startswith("the file log reader could not answer: ") for note in summary["notes"])
        # The names the README and older tests use still work, the enum's values among them.
        for source in ("memory", "file", "database"):
            assert (await client.call_tool("log_inspector", source=source, limit=1)).success
        tool = await client.get_tool("log_inspector")
        assert "introspection" in tool.tags and tool.category == "diagnostics"
