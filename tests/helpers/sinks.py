"""What a sink holds, as the texts to search: every string of a protobuf message, every key and leaf of a JSON
value, each line of a JSON log decoded, every column of every row of every table of a database.

    leaked = [text for text in texts_of(response) if secret in text]
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import sqlalchemy
from google.protobuf.message import Message


def texts_of(message: Message) -> Iterable[str]:
    """Every string and bytes field of a protobuf message, nested messages, maps and Structs included."""
    for descriptor, value in message.ListFields():
        is_map = descriptor.message_type is not None and descriptor.message_type.GetOptions().map_entry
        if is_map:
            for key, item in value.items():
                yield str(key)
                yield from texts_of(item) if isinstance(item, Message) else [str(item)]
            continue
        for item in value if descriptor.is_repeated else [value]:
            if isinstance(item, Message):
                yield from texts_of(item)
            elif isinstance(item, bytes):
                yield item.decode("utf-8", "replace")
            else:
                yield str(item)


def texts_of_value(value: Any) -> Iterable[str]:
    """Every key and leaf of a decoded JSON value or database cell, as text."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from texts_of_value(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from texts_of_value(item)
    elif isinstance(value, bytes | memoryview):
        yield bytes(value).decode("utf-8", "replace")
    elif value is not None:
        yield str(value)


def json_lines(text: str) -> Iterable[str]:
    """The decoded keys and leaves of each JSON line of a log, and the line itself."""
    for line in text.splitlines():
        yield line
        try:
            decoded = json.loads(line)
        except ValueError:
            continue  # a line that is not JSON: the line itself was searched
        yield from texts_of_value(decoded)


def every_row(url: str) -> dict[str, list[list[str]]]:
    """The text of every column of every row, by table, of the store at `url`."""
    engine = sqlalchemy.create_engine(url)
    try:
        tables: dict[str, list[list[str]]] = {}
        with engine.connect() as connection:
            for name in sqlalchemy.inspect(connection).get_table_names():
                table = sqlalchemy.Table(name, sqlalchemy.MetaData(), autoload_with=connection)
                tables[name] = [list(texts_of_value(list(row))) for row in connection.execute(sqlalchemy.select(table))]
        return tables
    finally:
        engine.dispose()
