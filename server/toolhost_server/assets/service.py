"""AssetInventory: what every surface (the gRPC AssetService, the CLI through it, and any later one) asks of the
asset inventory. Each method checks the caller's right itself, first, before it looks at anything else of the
request; then the values; then it runs the blocking table in a thread. Every change is audited, and so is every
refused one.

    inventory = toolhost.assets
    await inventory.create(caller, Asset("ws-042", os="Microsoft Windows 10 Pro", tags=("finance",)))
    page = await inventory.list(caller, AssetFilter(os="windows 10"), page_size=100, page_token="")
    await inventory.update(caller, "ws-042", ("winrm.port",), Asset("ws-042", winrm=WinrmProfile(port=5986)))
    await inventory.import_assets(caller, "csv", text, validate_only=True)
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from opentelemetry import trace

from ..audit import AuditRecord, AuditTrail
from ..auth import Caller, require_right
from ..auth.rights import Right
from ..errors import InvalidRequestError, ToolhostError
from ..pipeline import new_call_id
from ..request_checks import is_printable
from ..store.errors import StoreCommitUnknownError, StoreError
from ..telemetry import trace_id_of
from .importing import IMPORT_FORMATS, parse_assets
from .model import (
    MAX_TEXT_CHARS,
    MUTABLE_FIELDS,
    NAME_PATTERN,
    WINRM_FIELDS,
    Asset,
    AssetFilter,
    ImportSummary,
)
from .paging import decode_page_token, encode_page_token, page_size_of
from .problems import import_violations, refusal
from .table import AssetTable
from .validation import validate_asset

# The paths UpdateAsset's mask may name: a whole field, or one field of the WinRM profile.
UPDATE_PATHS: Final = (*MUTABLE_FIELDS, *(f"winrm.{field}" for field in WINRM_FIELDS))
# Named in a mask, these get their own explanation.
_NOT_UPDATABLE: Final = {
    "name": "the name cannot change: create the asset under the new name and delete the old one",
    "create_time": "create_time is set by the server",
    "update_time": "update_time is set by the server",
}
_QUOTED_CHARS: Final = 64
# The audit's `tool` column holds 256 characters.
_AUDITED_NAME_CHARS: Final = 200


@dataclass(frozen=True, slots=True)
class AssetPage:
    """One page of ListAssets: the assets, the token of the next page ("" on the last), and how many match."""

    assets: list[Asset]
    next_page_token: str
    total_size: int


class AssetInventory:
    """Creates, reads, changes, imports and removes assets, for callers with the admin role or `manage_assets`.

    Every method raises PermissionDeniedError first for any other caller; InvalidRequestError (InvalidFieldsError
    with one violation per field) for values that cannot be stored; the table's AlreadyExistsError,
    ResourceNotFoundError and FailedPreconditionError; StoreError when the database cannot be used.
    """

    def __init__(self, table: AssetTable, audit: AuditTrail, read_seconds: float) -> None:
        self.table = table
        self._audit = audit
        # The longest a read (GetAsset, ListAssets) may run, as a tool call's: its statements stop then.
        self._read_seconds = read_seconds

    def _read_deadline(self) -> float:
        return time.monotonic() + self._read_seconds

    async def create(self, caller: Caller, asset: Asset) -> Asset:
        """Store a new asset; its times are the server's."""
        with self._audited(caller, "CREATE", _audited_name(asset.name), ()):
            asset = dataclasses.replace(asset, created_at=None, updated_at=None)
            _check(asset, "the asset cannot be created")
            return await asyncio.to_thread(self.table.create, asset)

    async def get(self, caller: Caller, name: str) -> Asset:
        require_right(caller, Right.MANAGE_ASSETS, "GetAsset")
        _check_name(name, "name")
        return await asyncio.to_thread(self.table.get, name, deadline=self._read_deadline())

    async def list(self, caller: Caller, where: AssetFilter, page_size: int, page_token: str) -> AssetPage:
        """One page of the assets `where` matches, sorted by name regardless of case."""
        require_right(caller, Right.MANAGE_ASSETS, "ListAssets")
        _check_filter(where)
        size = page_size_of(page_size)
        after = decode_page_token(page_token, where)
        # One snapshot: the total agrees with the page.
        found = await asyncio.to_thread(self.table.search, where, after, size, deadline=self._read_deadline())
        return AssetPage(found.assets, encode_page_token(where, found.next_after), found.total)

    async def update(self, caller: Caller, name: str, paths: Sequence[str], values: Asset) -> Asset:
        """Give the fields `paths` names (UPDATE_PATHS) their values in `values`; the others stay as stored."""
        with self._audited(caller, "UPDATE", _audited_name(name), tuple(p for p in UPDATE_PATHS if p in paths)):
            _check_name(name, "asset.name")
            fields = update_fields(paths)

            def apply(before: Asset) -> Asset:
                after = _with_fields(before, fields, values)
                _check(after, "the asset cannot be updated")
                return after

            return await asyncio.to_thread(self.table.update, name, apply)

    async def delete(self, caller: Caller, name: str) -> Asset:
        """Remove the asset; it as it was."""
        with self._audited(caller, "DELETE", _audited_name(name), ()):
            _check_name(name, "name")
            return await asyncio.to_thread(self.table.delete, name)

    async def import_assets(self, caller: Caller, format: str, content: str, validate_only: bool) -> ImportSummary:
        """Create or replace every asset of the document, or none: InvalidFieldsError listing its problems by
        line. With `validate_only`, only what it would do."""
        action = "VALIDATE_IMPORT" if validate_only else "IMPORT"
        with self._audited(caller, action, "assets:import", ("content", "format")):
            if format not in IMPORT_FORMATS:
                raise InvalidRequestError(f"format must be yaml or csv, not {format or 'unset'}")
            # Parsing a document of thousands of records takes a while: not on the event loop.
            assets, problems = await asyncio.to_thread(parse_assets, format, content)
            if problems:
                raise refusal("the document was not imported, nothing changed", import_violations(problems))
            return await asyncio.to_thread(self.table.import_all, assets, validate_only)

    @contextmanager
    def _audited(self, caller: Caller, action: str, target: str, fields: tuple[str, ...]) -> Iterator[None]:
        """Audit one change: tool = `target` (`asset:NAME`, or `assets:import`), outcome = ASSET_CREATED, ... or,
        refused, ASSET_CREATE_REFUSED:PERMISSION_DENIED; argument_keys = the fields changed."""
        done, refused, rpc = _ACTIONS[action]
        require_right(caller, Right.MANAGE_ASSETS, rpc, audit=lambda reason: self._record(
            caller, target, f"{refused}:{reason}", fields, 0.0))
        started = time.perf_counter()
        outcome = f"{refused}:INTERNAL"
        try:
            yield
            outcome = done
        except ToolhostError as exc:
            outcome = f"{refused}:{exc.reason}"
            raise
        except StoreError as exc:
            reason = "STORE_OUTCOME_UNKNOWN" if isinstance(exc, StoreCommitUnknownError) else "STORE_UNAVAILABLE"
            outcome = f"{refused}:{reason}"
            raise
        finally:
            self._record(caller, target, outcome, fields, (time.perf_counter() - started) * 1000)

    def _record(self, caller: Caller, target: str, outcome: str, fields: tuple[str, ...], duration_ms: float) -> None:
        self._audit.record(AuditRecord(
            time=datetime.now(UTC), caller=caller.name, auth_method=caller.method.value, tool=target,
            call_id=new_call_id(), trace_id=trace_id_of(trace.get_current_span()), duration_ms=duration_ms,
            outcome=outcome, argument_keys=fields, argument_key_count=len(fields)))


# Each change: its audit outcome when done and when refused (before `:REASON`), and the RPC that asks for it.
_ACTIONS: Final = {
    "CREATE": ("ASSET_CREATED", "ASSET_CREATE_REFUSED", "CreateAsset"),
    "UPDATE": ("ASSET_UPDATED", "ASSET_UPDATE_REFUSED", "UpdateAsset"),
    "DELETE": ("ASSET_DELETED", "ASSET_DELETE_REFUSED", "DeleteAsset"),
    "IMPORT": ("ASSETS_IMPORTED", "ASSETS_IMPORT_REFUSED", "ImportAssets"),
    "VALIDATE_IMPORT": ("ASSETS_IMPORT_VALIDATED", "ASSETS_IMPORT_VALIDATION_REFUSED", "ImportAssets"),
}


def _audited_name(name: str) -> str:
    """What the audit records of an asset's name: bounded, and every character that is not printable escaped
    (a refused name may hold a NUL, which PostgreSQL refuses in the audit row, or a bidirectional override,
    which makes a log viewer show another name)."""
    cut = name[:_AUDITED_NAME_CHARS]
    return "asset:" + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in cut)


def _quoted(text: str) -> str:
    # Cut short: the message travels in a gRPC header, which a value of any length would overflow.
    return repr(text) if len(text) <= _QUOTED_CHARS else f"{text[:_QUOTED_CHARS]!r}..."


def _check_name(name: str, field: str) -> None:
    """InvalidRequestError for a name no asset can have: nothing of such a request reaches the database."""
    if not name:
        raise InvalidRequestError(f"{field} is required: the asset's name (`toolhost assets list` lists them)")
    if NAME_PATTERN.fullmatch(name) is None:
        raise InvalidRequestError(
            f"{field} {_quoted(name)} is no asset name: a letter or digit, then up to 127 letters, "
            "digits, `.`, `_` or `-`")


def _check_filter(where: AssetFilter) -> None:
    """InvalidRequestError for a filter no asset can match, before it reaches the database: longer than any
    stored value, or holding a control character."""
    for field in ("os", "platform", "site", "tag", "name"):
        value = getattr(where, field)
        if len(value) > MAX_TEXT_CHARS:
            raise InvalidRequestError(f"filter.{field} is {len(value)} characters long: at most {MAX_TEXT_CHARS}")
        if not is_printable(value):
            raise InvalidRequestError(f"filter.{field} holds a control character: filters are printable text")


def _check(asset: Asset, what: str) -> None:
    violations = validate_asset(asset)
    if violations:
        raise refusal(what, violations)


def update_fields(paths: Sequence[str]) -> tuple[str, ...]:
    """The paths an update changes, each once, in UPDATE_PATHS order; InvalidRequestError for none, or for a
    path that is not one of them, saying why."""
    if not paths:
        raise InvalidRequestError(
            f"the request changes no field: name the fields to change in update_mask (among "
            f"{', '.join(UPDATE_PATHS)}; naming one gives it its empty value), or leave the mask empty and set "
            "the new values")
    for path in paths:
        if path in _NOT_UPDATABLE:
            raise InvalidRequestError(f"update_mask names {path!r}: {_NOT_UPDATABLE[path]}")
        if path not in UPDATE_PATHS:
            raise InvalidRequestError(
                f"update_mask names {_quoted(path)}, which is no field UpdateAsset changes: name fields "
                f"among {', '.join(UPDATE_PATHS)} (or `*` for all of them, or leave the mask empty to change the "
                "fields the request sets)")
    return tuple(path for path in UPDATE_PATHS if path in paths)


def _with_fields(before: Asset, fields: Sequence[str], values: Asset) -> Asset:
    """`before` with each of `fields` taken from `values`; the name and the times stay."""
    changes: dict[str, object] = {}
    winrm = before.winrm
    for path in fields:
        if path == "winrm":
            winrm = values.winrm
        elif path.startswith("winrm."):
            key = path.removeprefix("winrm.")
            winrm = dataclasses.replace(winrm, **{key: getattr(values.winrm, key)})
        else:
            changes[path] = getattr(values, path)
    return dataclasses.replace(before, winrm=winrm, **changes)  # type: ignore[arg-type]
