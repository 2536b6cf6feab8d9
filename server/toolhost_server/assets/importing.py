"""Reading an ImportAssets document (YAML or CSV) into assets, or into the problems that keep it out, by line.

Nothing of a document is evaluated: YAML is read as plain nodes (yaml_nodes.py: no tag makes an object, aliases
are refused, and a value is the text written: `name: 042` is "042", not the octal number 34), and a CSV cell is
text whatever it starts with (`=cmd|...` is an os like any other). Every record goes through
validate_asset; a name twice in one document is a problem too. At most MAX_IMPORT_ASSETS records, and at most
MAX_IMPORT_PROBLEMS problems are returned, the last saying how many more there are.

    assets, problems = parse_assets("csv", "name,os,tags\\nws-042,Microsoft Windows 10 Pro,finance;berlin\\n")
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

from .model import (
    AUTHENTICATIONS,
    MAX_IMPORT_ASSETS,
    MAX_IMPORT_PROBLEMS,
    WINRM_FIELDS,
    Asset,
    Authentication,
    ImportProblem,
    WinrmProfile,
)
from .validation import LIST_SEPARATOR, shown, validate_asset
from .yaml_nodes import YAML_TAG, DocumentError, Node, read_document

ImportFormat = Literal["yaml", "csv"]
IMPORT_FORMATS: Final[tuple[ImportFormat, ...]] = ("yaml", "csv")

CSV_COLUMNS: Final = ("name", "hostname", "addresses", "os", "platform", "site", "tags", "winrm_port", "winrm_ssl",
                      "winrm_domain", "winrm_credential", "winrm_authentication")
YAML_KEYS: Final = ("name", "hostname", "addresses", "os", "platform", "site", "tags", "winrm")
_TEXT_KEYS: Final = ("name", "hostname", "os", "platform", "site")
_LIST_KEYS: Final = ("addresses", "tags")
# No asset document nests deeper than a list of mappings holding lists and the winrm mapping (3).
_MAX_NESTING: Final = 8
_PORT_TEXT = re.compile(r"[0-9]{1,6}")
_BOOLEANS: Final = {"true": True, "false": False}
# What YAML 1.1 also reads as a boolean when it is not quoted.
_YAML_BOOLEANS: Final = {**_BOOLEANS, "yes": True, "no": False, "on": True, "off": False}

if TYPE_CHECKING:
    from _csv import Reader as _CsvReader

# The tags that may be written explicitly (`!!str 042`): each leaves the text as it is. Any other (`!!binary`,
# `!!python/...`) is refused.
_PLAIN_TAGS: Final = frozenset(YAML_TAG + kind for kind in ("str", "int", "float", "bool", "null", "seq", "map"))


def parse_assets(format: ImportFormat, content: str) -> tuple[list[Asset], list[ImportProblem]]:
    """The document's assets, validated, and its problems: either every asset and no problem, or no asset (an
    import is all or nothing) and the problems in the document's order."""
    problems = _Problems()
    content = content.removeprefix("\ufeff")  # a byte order mark some editors write first
    if not _is_utf8(content):
        problems.add(0, "", "the document is not valid Unicode text (it holds a lone surrogate): send it as UTF-8")
        return [], problems.reported()
    if format == "yaml":
        records = _yaml_records(content, problems)
    elif format == "csv":
        records = _csv_records(content, problems)
    else:
        raise ValueError(f"unknown import format {format!r}: yaml or csv")
    assets: list[Asset] = []
    lines_of_names: dict[str, int] = {}
    for record in records:
        # Validated as read, so that the problems come in the document's order.
        violations = validate_asset(record.asset, prefix="")
        for violation in violations:
            field_name = record.field_name(violation.pointer)
            if field_name not in record.unread:  # its default stands in for what could not be read: no news
                problems.add(record.line_of(violation.pointer), field_name, violation.reason)
        if any(violation.pointer == "name" for violation in violations):
            continue
        key = record.asset.name.lower()
        if key in lines_of_names:
            problems.add(record.line, record.field_name("name"),
                         f"the name {record.asset.name!r} is also on line {lines_of_names[key]} (names are unique "
                         "regardless of case): keep one record per asset")
            continue
        lines_of_names[key] = record.line
        if record.readable and not violations:
            assets.append(record.asset)
    if problems.count:
        return [], problems.reported()
    return assets, []


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass
class _Problems:
    """The problems found so far: the first MAX_IMPORT_PROBLEMS - 1 kept, the rest only counted."""

    kept: list[ImportProblem] = field(default_factory=list)
    count: int = 0

    def add(self, line: int, field: str, message: str) -> None:
        self.count += 1
        if len(self.kept) < MAX_IMPORT_PROBLEMS:
            self.kept.append(ImportProblem(line, field, message))

    def reported(self) -> list[ImportProblem]:
        # In the document's order: a record's own problems come before the ones its validation found.
        if self.count <= MAX_IMPORT_PROBLEMS:
            return sorted(self.kept, key=_by_line)
        shown_count = MAX_IMPORT_PROBLEMS - 1
        return [*sorted(self.kept[:shown_count], key=_by_line), ImportProblem(
            0, "", f"{self.count - shown_count} more problems are not listed: fix these and import again to see "
                   "them")]


def _by_line(problem: ImportProblem) -> int:
    return problem.line


@dataclass(frozen=True)
class _Record:
    """One record of a document, read: the asset, the line it starts on, and the lines of its fields. Not
    `readable` when something could not be read (reported already; `unread` names the fields): the asset holds
    defaults in their place, so that the rest of the record is still validated, and is not imported."""

    asset: Asset
    line: int
    format: ImportFormat
    field_lines: dict[str, int] = field(default_factory=dict)
    readable: bool = True
    unread: frozenset[str] = frozenset()

    def line_of(self, path: str) -> int:
        return self.field_lines.get(path) or self.field_lines.get(path.split("[")[0]) or self.line

    def field_name(self, path: str) -> str:
        """`path` (validate_asset's `winrm.port`, `tags[2]`) as the document names it: the CSV column, or the
        YAML path."""
        if self.format == "yaml":
            return path
        return path.split("[")[0].replace("winrm.", "winrm_")


# --- YAML --------------------------------------------------------------------------------------------------


def _yaml_records(text: str, problems: _Problems) -> Iterator[_Record]:
    try:
        root = read_document(text, _MAX_NESTING)
    except DocumentError as exc:
        for line in exc.lines:
            problems.add(line, "", exc.message)
        return
    if root is None:
        problems.add(0, "", "the document is empty: write a YAML list of assets, for example `- {name: ws-042, os: "
                            "Microsoft Windows 10 Pro}`")
        return
    if root.kind != "seq" or root.tag:
        problems.add(root.line, "", "the document must be a YAML list of assets, one `- name: ...` mapping each")
        return
    for index, node in enumerate(root.items):
        if index == MAX_IMPORT_ASSETS:
            problems.add(node.line, "", _too_many_records())
            return
        record = _YamlRecord(node, problems).read()
        if record is not None:
            yield record


class _YamlRecord:
    """Reads one list item into a record, reporting what is wrong with it; None when it is no mapping."""

    def __init__(self, node: Node, problems: _Problems) -> None:
        self.node = node
        self.problems = problems
        self.field_lines: dict[str, int] = {}
        self.unread: set[str] = set()

    def read(self) -> _Record | None:
        if not self._readable(self.node, ""):
            return None
        if self.node.kind != "map":
            self._refuse(self.node, "", "each asset is a mapping of its fields, such as `name: ws-042`")
            return None
        values = self._mapping(self.node, "", YAML_KEYS)
        text = {key: self._text(values[key], key) if key in values else "" for key in _TEXT_KEYS}
        lists = {key: self._list(values[key], key) if key in values else () for key in _LIST_KEYS}
        winrm = self._winrm(values["winrm"]) if "winrm" in values else WinrmProfile()
        asset = Asset(text["name"], hostname=text["hostname"], addresses=lists["addresses"], os=text["os"],
                      platform=text["platform"], site=text["site"], tags=lists["tags"], winrm=winrm)
        return _Record(asset, self.node.line, "yaml", self.field_lines, not self.unread, frozenset(self.unread))

    def _winrm(self, node: Node) -> WinrmProfile:
        if node.is_null:
            return WinrmProfile()
        if node.kind != "map":
            self._refuse(node, "winrm", "winrm is a mapping of port, ssl, domain, credential and authentication, "
                                        "such as `{port: 5986, ssl: true}`")
            return WinrmProfile()
        values = self._mapping(node, "winrm.", WINRM_FIELDS)
        port = self._port(values["port"]) if "port" in values else 0
        ssl = self._boolean(values["ssl"], "winrm.ssl") if "ssl" in values else False
        domain = self._text(values["domain"], "winrm.domain") if "domain" in values else ""
        credential = self._text(values["credential"], "winrm.credential") if "credential" in values else ""
        authentication = (self._authentication(values["authentication"]) if "authentication" in values
                          else "ntlm")
        return WinrmProfile(port=port, ssl=ssl, domain=domain, credential=credential, authentication=authentication)

    def _mapping(self, node: Node, prefix: str, keys: tuple[str, ...]) -> dict[str, Node]:
        values: dict[str, Node] = {}
        for key_node, value_node in node.pairs():
            if not self._readable(key_node, prefix.rstrip(".")):
                continue
            key = key_node.text if key_node.kind == "scalar" else None
            if key not in keys:
                self._refuse(key_node, prefix.rstrip("."), f"{shown(key) if key is not None else 'this key'} is not "
                                                           f"a field here: use {', '.join(keys)}")
            elif prefix + key in self.field_lines:
                self._refuse(key_node, prefix + key, f"{key} appears twice (first on line "
                                                     f"{self.field_lines[prefix + key]}): keep one")
            else:
                self.field_lines[prefix + key] = key_node.line
                if self._readable(value_node, prefix + key):
                    values[key] = value_node
        return values

    def _text(self, node: Node, path: str) -> str:
        if node.is_null:
            return ""
        if node.kind == "scalar":
            return node.text
        self._refuse(node, path, f"{path} must be text, not a list or mapping")
        return ""

    def _list(self, node: Node, path: str) -> tuple[str, ...]:
        if node.is_null:
            return ()
        if node.kind != "seq":
            self._refuse(node, path, f"{path} must be a list, such as [finance, berlin]")
            return ()
        items: list[str] = []
        for index, item in enumerate(node.items):
            item_path = f"{path}[{index}]"
            if self._readable(item, item_path):
                self.field_lines[item_path] = item.line
                items.append(self._text(item, item_path))
        return tuple(items)

    def _port(self, node: Node) -> int:
        if node.is_null:
            return 0
        if node.kind == "scalar" and _PORT_TEXT.fullmatch(node.text):
            return int(node.text)
        self._refuse(node, "winrm.port", "winrm.port must be a whole number from 1 to 65535, or 0 for the default "
                                         "(5985, or 5986 with ssl)")
        return 0

    def _boolean(self, node: Node, path: str) -> bool:
        if node.is_null:
            return False
        if node.kind == "scalar":
            value = (_YAML_BOOLEANS if node.plain else _BOOLEANS).get(node.text.lower())
            if value is not None:
                return value
        self._refuse(node, path, f"{path} must be true or false")
        return False

    def _authentication(self, node: Node) -> Authentication:
        text = "" if node.is_null else node.text if node.kind == "scalar" else None
        if text == "":
            return "ntlm"
        for known in AUTHENTICATIONS:
            if text == known:
                return known
        self._refuse(node, "winrm.authentication", f"winrm.authentication must be one of {', '.join(AUTHENTICATIONS)}")
        return "ntlm"

    def _readable(self, node: Node, path: str) -> bool:
        """Whether `node` may be read: every node read is asked about first."""
        if node.tag and node.tag not in _PLAIN_TAGS:
            self._refuse(node, path, f"{path or 'this value'} has the YAML tag {shown(node.tag)}: tags are not "
                                     "allowed in an import, write plain values")
            return False
        return True

    def _refuse(self, node: Node, path: str, message: str) -> None:
        self.unread.add(path)
        self.problems.add(node.line, path, message)


# --- CSV ---------------------------------------------------------------------------------------------------


def _csv_records(text: str, problems: _Problems) -> Iterator[_Record]:
    # newline="": the csv module finds the ends of lines itself (CRLF too, and line breaks inside quotes).
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows = _rows(reader, problems)
    header = next(rows, None)
    if header is None:
        problems.add(0, "", f"the document is empty: its first line names the columns, such as "
                            f"{','.join(CSV_COLUMNS)} (only name is required)")
        return
    columns = _columns(header[1], problems)
    if columns is None:
        return
    count = 0
    for line, row in rows:
        if not any(cell.strip() for cell in row):
            continue  # a blank line
        if count == MAX_IMPORT_ASSETS:
            problems.add(line, "", _too_many_records())
            return
        count += 1
        if len(row) != len(columns):
            problems.add(line, "", f"this line has {len(row)} values and the header names {len(columns)} columns: "
                                   "write one value per column (an empty one as nothing between two commas)")
            continue
        yield _csv_record(line, dict(zip(columns, (cell.strip() for cell in row), strict=True)), problems)


def _rows(reader: _CsvReader, problems: _Problems) -> Iterator[tuple[int, list[str]]]:
    """Each row with the line it starts on; a CSV error is reported and ends the document."""
    line_num = 0
    while True:
        start = line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if "field limit" in str(exc):
                problems.add(start, "", f"a value is longer than {csv.field_size_limit()} characters, far more than "
                                        "any field of an asset holds: check the quotes before it")
            else:
                problems.add(start, "", f"this is not valid CSV: {exc} (quote a value holding ',' or '\"' in double "
                                        "quotes, and double a '\"' inside one)")
            return
        line_num = reader.line_num
        yield start, row


def _columns(header: list[str], problems: _Problems) -> list[str] | None:
    columns = [cell.strip().lower() for cell in header]
    valid = True
    for index, column in enumerate(columns):
        if column not in CSV_COLUMNS:
            problems.add(1, column, f"the column {shown(column)} is not one of {', '.join(CSV_COLUMNS)}: rename or "
                                    "remove it (the first line must name the columns)")
            valid = False
        elif column in columns[:index]:
            problems.add(1, column, f"the column {column} is named twice: keep one")
            valid = False
    if "name" not in columns:
        problems.add(1, "name", f"the header has no name column: the first line names the columns, such as "
                                f"{','.join(CSV_COLUMNS)} (only name is required)")
        valid = False
    return columns if valid else None


def _csv_record(line: int, cells: dict[str, str], problems: _Problems) -> _Record:
    unread: set[str] = set()

    def refuse(column: str, message: str) -> None:
        unread.add(column)
        problems.add(line, column, message)

    port_text = cells.get("winrm_port", "")
    port = int(port_text) if _PORT_TEXT.fullmatch(port_text) else 0
    if port_text and not _PORT_TEXT.fullmatch(port_text):
        refuse("winrm_port", f"winrm_port {shown(port_text)} must be a whole number from 1 to 65535, or empty for "
                             "the default (5985, or 5986 with ssl)")
    ssl_text = cells.get("winrm_ssl", "")
    ssl = _BOOLEANS.get(ssl_text.lower(), False)
    if ssl_text and ssl_text.lower() not in _BOOLEANS:
        refuse("winrm_ssl", f"winrm_ssl {shown(ssl_text)} must be true or false (empty means false)")
    authentication_text = cells.get("winrm_authentication", "").lower()
    authentication: Authentication = "ntlm"
    for known in AUTHENTICATIONS:
        if authentication_text == known:
            authentication = known
    if authentication_text and authentication_text != authentication:
        refuse("winrm_authentication", f"winrm_authentication {shown(authentication_text)} must be one of "
                                       f"{', '.join(AUTHENTICATIONS)} (empty means ntlm)")
    winrm = WinrmProfile(port=port, ssl=ssl, domain=cells.get("winrm_domain", ""),
                         credential=cells.get("winrm_credential", ""), authentication=authentication)
    asset = Asset(cells["name"], hostname=cells.get("hostname", ""), addresses=_split(cells.get("addresses", "")),
                  os=cells.get("os", ""), platform=cells.get("platform", ""), site=cells.get("site", ""),
                  tags=_split(cells.get("tags", "")), winrm=winrm)
    return _Record(asset, line, "csv", readable=not unread, unread=frozenset(unread))


def _split(cell: str) -> tuple[str, ...]:
    """The values of a cell that holds several, separated by ';' (`finance; berlin;` is two)."""
    return tuple(value.strip() for value in cell.split(LIST_SEPARATOR) if value.strip())


def _too_many_records() -> str:
    return (f"the document holds more than {MAX_IMPORT_ASSETS} assets (this is the first beyond them): import it in "
            f"parts of at most {MAX_IMPORT_ASSETS}")
