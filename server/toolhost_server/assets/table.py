"""The assets table: the inventory, in the server's store (SQLite or PostgreSQL).

Blocking, every method one transaction: callers run it in a thread. Reads are read-only transactions (no lock
that makes a writer wait) whose statements stop at the caller's `deadline`, if it gives one. Names are unique
regardless of case; every filter ignores case and is evaluated by the database (by an index where it allows
one), so that asset_count over 100,000 assets reads no row into Python. "Regardless of case" is Python's
str.lower(), applied when a row is written (the `*_key` columns, store/schema.py) and to every value compared
with them, so that both databases agree.
"""

from __future__ import annotations

import dataclasses
import difflib
import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

from sqlalchemy import ColumnElement, Connection, delete, func, insert, select, update
from sqlalchemy import text as sql_text

from ..errors import AlreadyExistsError, FailedPreconditionError, InvalidRequestError, ResourceNotFoundError
from ..store.database import Store
from ..store.schema import asset_addresses, asset_tags, assets
from .model import AUTHENTICATIONS, MAX_ASSETS, Asset, AssetFilter, Authentication, ImportSummary, WinrmProfile

# The PostgreSQL advisory lock (transaction-scoped) every transaction that adds assets takes before it counts
# them and looks for the names it adds, so that two replicas never both pass MAX_ASSETS or both add one name.
# SQLite needs none: its write transactions start with BEGIN IMMEDIATE (store/engine.py) and take turns already.
INVENTORY_LOCK_ID: Final = 0x746F6F6C61737374  # "toolasst"
# find_host reads at most this many assets sharing one hostname: more than one is already "ambiguous".
MAX_HOST_MATCHES: Final = 20
# close_names reads this many names (and as many hostnames) on either side of `host` in sorted order: a bounded
# pair of indexed reads, whatever the size of the inventory.
CLOSE_NAMES_WINDOW: Final = 250
# ... compares at most this many leading characters of `host` and of each of them: names are chosen by asset
# editors, and a similarity costs up to the product of the two lengths (difflib's, in Python, holding the GIL)...
CLOSE_NAMES_PREFIX: Final = 48
# ... and computes the similarity of at most this many of them, those whose cheap upper bound (the characters
# they share with `host`) is highest: an unknown host costs tens of milliseconds of CPU at most, also against
# names built to be alike (1,000 of 128 characters over {a, b} cost seconds when each was compared whole).
CLOSE_NAMES_COMPARED: Final = 16
# How similar (difflib's ratio) a suggestion must be: get_close_matches' default.
CLOSE_NAMES_CUTOFF: Final = 0.6
# Values per IN (...) list: well under SQLite's 32,766 bound parameters and PostgreSQL's 65,535.
_CHUNK: Final = 500

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True, slots=True)
class SearchPage:
    """A page of matching assets (`page`'s), with how many match over every page, read from one snapshot."""

    assets: list[Asset]
    next_after: str
    total: int


def key_of(text: str) -> str:
    """The form in which assets are compared regardless of case (what the `*_key` columns hold)."""
    return text.lower()


def not_found_error(name: str) -> ResourceNotFoundError:
    return ResourceNotFoundError(f"there is no asset named {name!r}; `toolhost assets list` (ListAssets) lists them")


class AssetTable:
    """Reads and changes the inventory.

        table = AssetTable(store)
        table.create(Asset("ws-042", os="Microsoft Windows 10 Pro", tags=("finance",)))
        table.count(AssetFilter(os="windows 10"))                     # 1
        assets, next_after = table.page(AssetFilter(tag="finance"), after="", limit=100)
        table.search(AssetFilter(tag="finance"), after="", limit=100, deadline=time.monotonic() + 5).total
        table.update("WS-042", lambda asset: dataclasses.replace(asset, site="berlin"))
        table.find_host("ws-042.corp.example.com")                    # by name first, then by hostname

    `max_assets` bounds the inventory (MAX_ASSETS; tests lower it). A read's `deadline` is a time.monotonic()
    value: a statement still running then is stopped (StoreUnavailableError); None, the default, sets no bound.
    """

    def __init__(self, store: Store, *, max_assets: int = MAX_ASSETS) -> None:
        self.store = store
        self.max_assets = max_assets

    def create(self, asset: Asset) -> Asset:
        """Store a new (already validated) asset and return it with its times. AlreadyExistsError when the name
        is taken regardless of case; FailedPreconditionError at MAX_ASSETS."""
        now = datetime.now(UTC)
        created = dataclasses.replace(asset, created_at=now, updated_at=now)
        with self.store.begin() as connection:
            _lock_inventory(connection)
            taken = connection.execute(select(assets.c.name).where(assets.c.name_key == key_of(asset.name))).first()
            if taken is not None:
                raise AlreadyExistsError(
                    f"the name {asset.name!r} is taken by the asset {taken.name!r} (names are unique regardless of "
                    "case); choose another name, or change that asset (UpdateAsset)")
            self._check_room(connection, 1)
            _insert(connection, [created])
        return created

    def get(self, name: str, *, deadline: float | None = None) -> Asset:
        """The asset of that name regardless of case; ResourceNotFoundError when there is none."""
        with self.store.read(deadline) as connection:
            found = _read(connection, assets.c.name_key == key_of(name))
        if not found:
            raise not_found_error(name)
        return found[0]

    def page(self, where: AssetFilter, after: str, limit: int, *,
             deadline: float | None = None) -> tuple[list[Asset], str]:
        """Up to `limit` matching assets sorted by lower-cased name, after the lower-cased name `after` ("" for
        the first page), and the `after` of the next page ("" when this is the last). `limit` is at least 1."""
        with self.store.read(deadline) as connection:
            return _page(connection, where, after, limit)

    def count(self, where: AssetFilter, *, deadline: float | None = None) -> int:
        """How many assets match."""
        with self.store.read(deadline) as connection:
            return _count(connection, where)

    def search(self, where: AssetFilter, after: str, limit: int, *, deadline: float | None = None) -> SearchPage:
        """`page` and `count` of one snapshot, so that the total agrees with the page. A first page that is also
        the last is its own total: the count's scan of every match is left out then."""
        with self.store.read(deadline) as connection:
            found, next_after = _page(connection, where, after, limit)
            total = len(found) if not after and not next_after else _count(connection, where)
        return SearchPage(found, next_after, total)

    def update(self, name: str, transform: Callable[[Asset], Asset]) -> Asset:
        """Apply `transform` to the stored asset (the caller validates its result) under a row lock and store it;
        ResourceNotFoundError when there is none. The name never changes."""
        with self.store.begin() as connection:
            # FOR UPDATE on PostgreSQL: a concurrent update of the asset waits for this one, then transforms what
            # this one stored. SQLite's BEGIN IMMEDIATE has serialised every writer already.
            row = connection.execute(select(assets.c.id).where(assets.c.name_key == key_of(name))
                                     .with_for_update()).first()
            if row is None:
                raise not_found_error(name)
            [before] = _read(connection, assets.c.id == row.id)
            assert before.updated_at is not None
            after = dataclasses.replace(transform(before), name=before.name, created_at=before.created_at,
                                        updated_at=_later(before.updated_at))
            connection.execute(update(assets).where(assets.c.id == row.id).values(_columns(after)))
            _delete_children(connection, [row.id])
            _insert_children(connection, [(row.id, after)])
        return after

    def delete(self, name: str) -> Asset:
        """Remove the asset and return it as it was; ResourceNotFoundError when there is none."""
        with self.store.begin() as connection:
            asset_id = connection.execute(select(assets.c.id).where(assets.c.name_key == key_of(name))
                                          .with_for_update()).scalar()
            if asset_id is None:
                raise not_found_error(name)
            [removed] = _read(connection, assets.c.id == asset_id)
            _delete_children(connection, [asset_id])
            connection.execute(delete(assets).where(assets.c.id == asset_id))
        return removed

    def import_all(self, assets_to_store: Sequence[Asset], validate_only: bool = False) -> ImportSummary:
        """Create or replace (by name regardless of case) every asset in one transaction: all or none.
        FailedPreconditionError when the result would pass MAX_ASSETS. With validate_only, count and store
        nothing. A replaced asset takes the document's record whole (also its name's spelling) and keeps its
        creation time."""
        keys = [key_of(asset.name) for asset in assets_to_store]
        if len(set(keys)) < len(keys):
            raise InvalidRequestError("the import names one asset twice (names are compared regardless of case); "
                                      "keep one record per name")
        now = datetime.now(UTC)
        with self.store.begin() as connection:
            _lock_inventory(connection)
            existing: dict[str, tuple[int, datetime]] = {}
            for chunk in _chunks(keys):
                for row in connection.execute(select(assets.c.id, assets.c.name_key, assets.c.created_at)
                                              .where(assets.c.name_key.in_(chunk))):
                    existing[row.name_key] = (row.id, _aware(row.created_at))
            summary = ImportSummary(created=len(keys) - len(existing), replaced=len(existing))
            self._check_room(connection, summary.created)
            if validate_only:
                return summary
            replaced_ids = [asset_id for asset_id, _ in existing.values()]
            for id_chunk in _chunks(replaced_ids):
                _delete_children(connection, id_chunk)
                connection.execute(delete(assets).where(assets.c.id.in_(id_chunk)))
            _insert(connection, [
                dataclasses.replace(asset, created_at=existing[key][1] if key in existing else now, updated_at=now)
                for asset, key in zip(assets_to_store, keys, strict=True)])
        return summary

    def find_host(self, host: str, *, deadline: float | None = None) -> list[Asset]:
        """The asset named `host` (regardless of case) as a one-element list; else every asset whose hostname is
        `host` regardless of case (several: the caller says the host is ambiguous; at most MAX_HOST_MATCHES);
        else []. A trailing dot of a fully qualified `host` is ignored."""
        key = key_of(host.removesuffix("."))
        if not key:
            return []
        with self.store.read(deadline) as connection:
            return (_read(connection, assets.c.name_key == key)
                    or _read(connection, assets.c.hostname_key == key, limit=MAX_HOST_MATCHES))

    def close_names(self, host: str, limit: int = 5, *, deadline: float | None = None) -> list[str]:
        """Up to `limit` names and hostnames close to `host`, for an "unknown host" message, closest first.
        Only the CLOSE_NAMES_WINDOW names and hostnames on either side of `host` in sorted order are read, and
        their first CLOSE_NAMES_PREFIX characters compared: a typo late in a name is found among many thousands,
        one in its first characters only in a smaller inventory."""
        key = key_of(host)
        neighbours: list[Sequence[Any]] = []
        with self.store.read(deadline) as connection:
            for shown, sorted_by, beyond_empty in ((assets.c.name, assets.c.name_key, False),
                                                   (assets.c.hostname, assets.c.hostname_key, True)):
                below = select(shown, sorted_by).where(sorted_by < key).order_by(sorted_by.desc())
                if beyond_empty:
                    below = below.where(sorted_by > "")
                above = select(shown, sorted_by).where(sorted_by >= key).order_by(sorted_by)
                neighbours += [connection.execute(query.limit(CLOSE_NAMES_WINDOW)).all() for query in (below, above)]
        # Nearest in sorted order first (they share the longest prefix with `host`): how equally similar ones
        # are ranked, as when two names differ only beyond the characters compared.
        candidates: dict[str, str] = {}
        for row in itertools.chain.from_iterable(itertools.zip_longest(*neighbours)):
            if row is not None:
                candidates.setdefault(row[1], row[0])
        return [candidates[candidate] for candidate in closest(key, candidates, limit)]

    def _check_room(self, connection: Connection, adding: int) -> None:
        if adding <= 0:
            return
        count = int(connection.execute(select(func.count()).select_from(assets)).scalar_one())
        if count + adding > self.max_assets:
            raise FailedPreconditionError(
                f"this server keeps at most {self.max_assets} assets and has {count}; adding {adding} would pass "
                "that: delete the assets no longer needed (`toolhost assets delete NAME`) first")


def closest(key: str, candidates: Iterable[str], limit: int) -> list[str]:
    """Up to `limit` of `candidates` at least CLOSE_NAMES_CUTOFF similar to `key`, most similar first, as
    difflib.get_close_matches ranks them but over the first CLOSE_NAMES_PREFIX characters of each and with at most
    CLOSE_NAMES_COMPARED similarities computed (equally similar ones: the first given first)."""
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(key[:CLOSE_NAMES_PREFIX])
    bounded: list[tuple[float, int, str]] = []
    for position, candidate in enumerate(candidates):
        matcher.set_seq1(candidate[:CLOSE_NAMES_PREFIX])
        # Both are upper bounds of the ratio: what they rule out could never be suggested.
        if matcher.real_quick_ratio() >= CLOSE_NAMES_CUTOFF and (bound := matcher.quick_ratio()) >= CLOSE_NAMES_CUTOFF:
            bounded.append((-bound, position, candidate))
    scored: list[tuple[float, int, str]] = []
    for _, position, candidate in heapq.nsmallest(CLOSE_NAMES_COMPARED, bounded):
        matcher.set_seq1(candidate[:CLOSE_NAMES_PREFIX])
        if (score := matcher.ratio()) >= CLOSE_NAMES_CUTOFF:
            scored.append((-score, position, candidate))
    return [candidate for _, _, candidate in sorted(scored)[:limit]]


def _page(connection: Connection, where: AssetFilter, after: str, limit: int) -> tuple[list[Asset], str]:
    if limit < 1:
        raise ValueError(f"a page holds at least one asset, not {limit}")
    found = _read(connection, *_matching(where, connection), assets.c.name_key > after, limit=limit + 1)
    if len(found) > limit:
        return found[:limit], key_of(found[limit - 1].name)
    return found, ""


def _count(connection: Connection, where: AssetFilter) -> int:
    return int(connection.execute(
        select(func.count()).select_from(assets).where(*_matching(where, connection))).scalar_one())


def _matching(where: AssetFilter, connection: Connection) -> list[ColumnElement[bool]]:
    """The SQL conditions of a filter; none for an empty one."""
    conditions: list[ColumnElement[bool]] = []
    if where.os:
        # A plain substring search, not LIKE '%...%', whose cost per row is the product of the two lengths in
        # SQLite (7 s over 100,000 assets for a 256-character filter, against 0.03 s; review finding 4).
        position_of = func.strpos if connection.dialect.name == "postgresql" else func.instr
        conditions.append(position_of(assets.c.os_key, key_of(where.os)) > 0)
    if where.platform:
        conditions.append(assets.c.platform_key == key_of(where.platform))
    if where.site:
        conditions.append(assets.c.site_key == key_of(where.site))
    if where.tag:
        # IN over the tag index rather than a correlated EXISTS, which SQLite ran once per asset (a full scan:
        # 200 ms over 100,000 assets against 2 ms; `make bench --only assets`).
        conditions.append(assets.c.id.in_(
            select(asset_tags.c.asset_id).where(asset_tags.c.value_key == key_of(where.tag))))
    if where.name:
        glob = key_of(where.name)
        if "*" in glob or "?" in glob:
            conditions.append(assets.c.name_key.like(_like_of_glob(glob), escape="\\"))
        else:
            conditions.append(assets.c.name_key == glob)  # the unique index, not a scan
    return conditions


def _like_literal(text: str) -> str:
    """`text` as a LIKE pattern that matches only itself: its wildcards and the escape character escaped."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _like_of_glob(glob: str) -> str:
    """The LIKE pattern of a glob: `*` any characters, `?` one; everything else literal."""
    return "".join("%" if c == "*" else "_" if c == "?" else _like_literal(c) for c in glob)


def _lock_inventory(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(sql_text("SELECT pg_advisory_xact_lock(:id)"), {"id": INVENTORY_LOCK_ID})


def _columns(asset: Asset) -> dict[str, Any]:
    return {
        "name": asset.name, "name_key": key_of(asset.name),
        "hostname": asset.hostname, "hostname_key": key_of(asset.hostname),
        "os": asset.os, "os_key": key_of(asset.os),
        "platform": asset.platform, "platform_key": key_of(asset.platform),
        "site": asset.site, "site_key": key_of(asset.site),
        "winrm_port": asset.winrm.port, "winrm_ssl": asset.winrm.ssl, "winrm_domain": asset.winrm.domain,
        "winrm_credential": asset.winrm.credential, "winrm_authentication": asset.winrm.authentication,
        "created_at": asset.created_at, "updated_at": asset.updated_at,
    }


def _insert(connection: Connection, new: Sequence[Asset]) -> None:
    for chunk in _chunks(new):
        ids = connection.execute(insert(assets).returning(assets.c.id, sort_by_parameter_order=True),
                                 [_columns(asset) for asset in chunk]).scalars().all()
        _insert_children(connection, zip(ids, chunk, strict=True))


def _insert_children(connection: Connection, stored: Iterable[tuple[int, Asset]]) -> None:
    addresses: list[dict[str, Any]] = []
    tags: list[dict[str, Any]] = []
    for asset_id, asset in stored:
        addresses.extend({"asset_id": asset_id, "position": position, "address": address}
                         for position, address in enumerate(asset.addresses))
        tags.extend({"asset_id": asset_id, "position": position, "value": tag, "value_key": key_of(tag)}
                    for position, tag in enumerate(asset.tags))
    if addresses:
        connection.execute(insert(asset_addresses), addresses)
    if tags:
        connection.execute(insert(asset_tags), tags)


def _delete_children(connection: Connection, asset_ids: Sequence[int]) -> None:
    connection.execute(delete(asset_addresses).where(asset_addresses.c.asset_id.in_(asset_ids)))
    connection.execute(delete(asset_tags).where(asset_tags.c.asset_id.in_(asset_ids)))


def _read(connection: Connection, *conditions: ColumnElement[bool], limit: int | None = None) -> list[Asset]:
    """The assets that meet every condition, sorted by lower-cased name, with their addresses and tags."""
    query = select(assets).where(*conditions).order_by(assets.c.name_key)
    rows = connection.execute(query if limit is None else query.limit(limit)).mappings().all()
    ids = [row["id"] for row in rows]
    addresses: dict[int, list[str]] = {}
    tags: dict[int, list[str]] = {}
    for chunk in _chunks(ids):
        for asset_id, address in connection.execute(
                select(asset_addresses.c.asset_id, asset_addresses.c.address)
                .where(asset_addresses.c.asset_id.in_(chunk)).order_by(asset_addresses.c.asset_id,
                                                                       asset_addresses.c.position)):
            addresses.setdefault(asset_id, []).append(address)
        for asset_id, tag in connection.execute(
                select(asset_tags.c.asset_id, asset_tags.c.value)
                .where(asset_tags.c.asset_id.in_(chunk)).order_by(asset_tags.c.asset_id, asset_tags.c.position)):
            tags.setdefault(asset_id, []).append(tag)
    return [_asset(row, tuple(addresses.get(row["id"], ())), tuple(tags.get(row["id"], ()))) for row in rows]


def _asset(row: Any, addresses: tuple[str, ...], tags: tuple[str, ...]) -> Asset:
    # A value this release does not know (edited in the database) reads as NTLM, which never sends a password in
    # clear, rather than failing every read of the inventory.
    authentication: Authentication = next(
        (known for known in AUTHENTICATIONS if known == row["winrm_authentication"]), "ntlm")
    return Asset(
        name=row["name"], hostname=row["hostname"], addresses=addresses, os=row["os"], platform=row["platform"],
        site=row["site"], tags=tags,
        winrm=WinrmProfile(port=row["winrm_port"], ssl=bool(row["winrm_ssl"]), domain=row["winrm_domain"],
                           credential=row["winrm_credential"], authentication=authentication),
        created_at=_aware(row["created_at"]), updated_at=_aware(row["updated_at"]))


def _chunks(items: Sequence[_T]) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


def _later(previous: datetime) -> datetime:
    """Now, or just after `previous` when the clock has not moved past it: a change changes the update time."""
    now = datetime.now(UTC)
    return now if now > previous else previous + timedelta(microseconds=1)


def _aware(moment: datetime) -> datetime:
    # SQLite keeps no time zone: the times written were UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
