"""Fuzzing the log line parser (logs/line_parser.py): the lines of `log_files`, which any program may have
written, as the file reader hands them over (UTF-8 decoded with replacement, at most 64 KiB).

What it proves:
- any line, JSON or text, parses to a record or to None (a continuation line), never an exception: deep
  nesting, 4000-digit numbers, NaN, lone surrogates in JSON escapes, odd times of every kind;
- a parsed record is one every surface can carry (QueryLogs and TailLogs as protobuf, log_inspector and
  `toolhost logs --json` as JSON): a UTC time, one of the five levels, text without lone surrogates, and
  fields that convert to a google.protobuf.Struct and to strict JSON;
- a line in the server's own JSON or text format gives back its time, level, logger and message.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import assume, example, given
from hypothesis import strategies as st

from toolhost_server.api.convert import to_struct
from toolhost_server.logs.line_parser import LineParser, ParsedLine
from toolhost_server.logs.record import LEVELS

from helpers.json_strategies import json_scalars, json_values, nested, odd_text

MAX_LINE_CHARS = 64 * 1024
TIME_KEYS = ("time", "timestamp", "@timestamp", "ts", "asctime", "datetime")
OTHER_KEYS = ("level", "levelname", "severity", "logger", "name", "message", "msg", "event", "trace_id", "traceId",
              "span_id", "spanId", "extra", "fields")
PARSER = LineParser()


def times() -> st.SearchStrategy[Any]:
    """What programs write as a time: ISO 8601 text of any year and zone, epoch seconds and milliseconds, and
    values that are no time at all."""
    return st.one_of(
        st.datetimes(timezones=st.one_of(st.none(), st.timezones())).map(datetime.isoformat),
        st.integers(-(2**70), 2**70), st.floats(), st.sampled_from(["", "now", "2024-13-45T99:99:99Z"]),
        json_scalars())


def json_lines() -> st.SearchStrategy[str]:
    """JSON objects with the keys the parser looks for, of any values, written by json.dumps (which escapes
    lone surrogates as \\udXXX, as a program's JSON logger would)."""
    values = st.one_of(json_values(), nested(1000), st.builds(lambda d: int("9" * d), st.integers(300, 4000)))
    return st.builds(
        lambda time_key, moment, others, ascii_only: json.dumps({time_key: moment, **others}, ensure_ascii=ascii_only),
        st.sampled_from(TIME_KEYS), times(),
        st.dictionaries(st.one_of(st.sampled_from(OTHER_KEYS), odd_text(6)), values, max_size=5),
        st.booleans()).filter(lambda line: len(line) <= MAX_LINE_CHARS)


def text_lines() -> st.SearchStrategy[str]:
    """Lines in the server's text format with odd parts, and any text."""
    return st.one_of(
        st.builds(lambda moment, level, logger, message: f"{moment} {level} {logger}: {message}",
                  st.datetimes().map(lambda d: d.strftime("%Y-%m-%d %H:%M:%S,") + f"{d.microsecond // 1000:03d}"),
                  st.sampled_from(["INFO", "WARN", "fatal", "X"]), st.text(min_size=1, max_size=8).filter(
                      lambda s: not any(c.isspace() or c == ":" for c in s)), st.text(max_size=40)),
        st.text(max_size=200))


def as_read(line: str) -> str:
    """The line as the file reader gives it: from UTF-8 bytes, decoded with replacement."""
    return line.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def check_record(parsed: ParsedLine) -> None:
    assert parsed.time.tzinfo is not None and parsed.time.utcoffset() == timedelta(0)
    assert parsed.level in LEVELS
    for text in (parsed.logger, parsed.message, parsed.trace_id, parsed.span_id):
        assert isinstance(text, str)
        text.encode("utf-8")  # protobuf strings are UTF-8: a lone surrogate cannot be sent
    to_struct(parsed.fields).SerializeToString()  # what QueryLogs and TailLogs send
    json.dumps(parsed.fields, allow_nan=False).encode("utf-8")  # what log_inspector and --json print


DEEP = '{"time": 1700000000, "message": "deep", "x": ' + "[" * 5000 + "]" * 5000 + "}"


@given(st.one_of(json_lines(), text_lines(), odd_text(80)).map(as_read))
@example(DEEP).via("a line nested past the JSON reader's recursion limit made the file reader fail")
@example('{"time": 1700000000, "x": ' + "[" * 150 + "]" * 150 + "}").via(
    "fields nested 150 levels made QueryLogs INTERNAL (a Struct nests at most 100)")
@example('{"time": 1700000000, "message": "\\ud800"}').via("a lone surrogate in a message made QueryLogs INTERNAL")
@example('{"time": 1700000000, "k\\udc00": 1}').via("a lone surrogate in a field name made QueryLogs INTERNAL")
@example('{"time": 1700000000, "x": ' + "9" * 400 + "}").via(
    "a number past a double's range made QueryLogs INTERNAL")
@example('{"time": 1700000000, "x": NaN}').via("NaN made log_inspector's output INVALID_OUTPUT")
@example('{"time": 1700000000, "message": ' + "[" * 900 + "]" * 900 + "}").via(
    "a deeply nested message was turned into text by repr(), which recursed past the limit")
def test_any_line_parses_to_a_record_every_surface_can_carry_or_to_none(line: str) -> None:
    parsed = PARSER.parse(line)
    if parsed is not None:
        check_record(parsed)


LEVELS_WRITTEN = st.sampled_from([logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL])
MOMENTS = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9000, 1, 1), timezones=st.just(UTC))
LOGGERS = st.from_regex(r"\A[a-z][a-z0-9_.]{0,20}\Z")


@given(MOMENTS, LEVELS_WRITTEN, LOGGERS, st.text(max_size=60))
def test_a_json_line_of_the_server_gives_back_what_was_logged(moment: datetime, level: int, logger: str,
                                                              message: str) -> None:
    line = json.dumps({"time": moment.isoformat().replace("+00:00", "Z"), "level": logging.getLevelName(level),
                       "logger": logger, "message": message, "trace_id": "", "span_id": ""})
    parsed = PARSER.parse(line)
    assert parsed is not None
    assert (parsed.time, parsed.level, parsed.logger, parsed.message) == (
        moment, logging.getLevelName(level), logger, message)


@given(MOMENTS, LEVELS_WRITTEN, LOGGERS, st.text(st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")),
                                                  max_size=60))
def test_a_text_line_of_the_server_gives_back_what_was_logged(moment: datetime, level: int, logger: str,
                                                              message: str) -> None:
    moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)  # the text format keeps milliseconds
    local = moment.astimezone()  # a text line without a zone is local time, as the server writes it
    assume(local.replace(tzinfo=None).astimezone(UTC) == moment)  # not in an hour a DST change repeats
    stamp = local.strftime("%Y-%m-%d %H:%M:%S,") + f"{local.microsecond // 1000:03d}"
    parsed = PARSER.parse(f"{stamp} {logging.getLevelName(level)} {logger}: {message}")
    assert parsed is not None
    assert (parsed.time, parsed.level, parsed.logger, parsed.message) == (
        moment, logging.getLevelName(level), logger, message)
