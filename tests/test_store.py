"""The store: encrypted credential values at rest in SQLite and in a real PostgreSQL, and its error messages."""

from __future__ import annotations

import base64
import dataclasses
import os
import socket
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import URL, select, text, update

from toolhost_server.config import Config
from toolhost_server.credentials.names import InvalidCredentialError
from toolhost_server.store.cipher import ValueCipher
from toolhost_server.store.credential_table import CredentialTable
from toolhost_server.store.database import Store, database_url
from toolhost_server.store.engine import parse_database_url, sqlite_file_url
from toolhost_server.store.errors import StoreDecryptionError, StoreKeyError, StoreUnavailableError
from toolhost_server.store.keys import (
    STORE_KEY_ENV,
    generate_store_key_text,
    load_store_key,
    parse_store_key,
    require_store_key,
    write_store_key_file,
)
from toolhost_server.store.schema import credentials

from postgres_cluster import DATABASES, PostgresCluster

PASSWORD = "correct-horse-battery-staple"
USERNAME = "svc-automation"


def new_cipher() -> ValueCipher:
    return ValueCipher(parse_store_key(generate_store_key_text(), "test key"))


@pytest.fixture(params=DATABASES)
def store(request: pytest.FixtureRequest, tmp_path: Path):
    url: URL = sqlite_file_url(tmp_path / "data" / "toolhost.db") if request.param == "sqlite" \
        else request.getfixturevalue("postgres_url")
    opened = Store(url)
    yield opened
    opened.close()


def test_values_round_trip_and_a_new_value_replaces_the_old(store: Store):
    table = CredentialTable(store, new_cipher())
    assert table.get("winrm") is None
    table.put("winrm", "password", "first-password-value")
    table.put("winrm", "username", USERNAME)
    table.put("winrm", "password", PASSWORD)
    table.put("vcenter", "api_key", "vc-api-key-0123456789")
    assert table.get("winrm") == {"password": PASSWORD, "username": USERNAME}
    assert [(k.name, k.key) for k in table.list_keys()] == [
        ("vcenter", "api_key"), ("winrm", "password"), ("winrm", "username")]
    assert all(k.updated_at.tzinfo is not None for k in table.list_keys())
    assert table.delete("winrm", "username") == 1
    assert table.get("winrm") == {"password": PASSWORD}
    assert table.delete("winrm") == 1
    assert table.delete("winrm") == 0
    assert table.get("winrm") is None


def test_listing_and_deleting_need_no_key_but_reading_and_writing_do(store: Store):
    CredentialTable(store, new_cipher()).put("winrm", "password", PASSWORD)
    keyless = CredentialTable(store, None)
    assert [k.key for k in keyless.list_keys()] == ["password"]
    for attempt in (lambda: keyless.get("winrm"), lambda: keyless.put("winrm", "domain", "corp.example")):
        with pytest.raises(StoreKeyError, match=f"no store key.*{STORE_KEY_ENV}.*generate-key"):
            attempt()
    assert keyless.delete("winrm") == 1


def test_the_sqlite_file_holds_no_plaintext(tmp_path: Path):
    data_dir = tmp_path / "data"
    store = Store.from_config(dataclasses.replace(Config(), data_dir=str(data_dir)))
    CredentialTable(store, new_cipher()).put("winrm", "password", PASSWORD)
    # The WAL holds recent writes until a checkpoint; read every file of the database, as a thief would.
    raw = b"".join(path.read_bytes() for path in data_dir.iterdir())
    store.close()
    assert b"winrm" in raw  # the bytes read are the database's
    assert PASSWORD.encode() not in raw
    assert base64.b64encode(PASSWORD.encode()) not in raw


def test_postgresql_data_files_hold_no_plaintext(postgres_cluster: PostgresCluster, postgres_url: URL):
    store = Store(postgres_url)
    CredentialTable(store, new_cipher()).put("winrm", "password", PASSWORD)
    store.close()
    postgres_cluster.execute("CHECKPOINT")
    raw = b"".join(path.read_bytes() for path in postgres_cluster.data_dir.rglob("*") if path.is_file())
    assert b"svc-automation" not in raw and PASSWORD.encode() not in raw
    assert b"winrm" in raw  # the row was written: heap and WAL were read


def test_a_different_key_is_told_apart_from_damage(store: Store):
    CredentialTable(store, new_cipher()).put("winrm", "password", PASSWORD)
    other = new_cipher()
    with pytest.raises(StoreDecryptionError) as caught:
        CredentialTable(store, other).get("winrm")
    message = str(caught.value)
    assert "'winrm' key 'password'" in message
    assert "does not match the key the value was written with" in message
    assert PASSWORD not in message


def test_a_value_moved_to_another_row_does_not_decrypt(store: Store):
    table = CredentialTable(store, new_cipher())
    table.put("winrm", "password", PASSWORD)
    table.put("winrm", "username", USERNAME)
    table.put("vcenter", "password", "vcenter-password-value")
    with store.begin() as connection:
        blob = connection.execute(select(credentials.c.value).where(
            credentials.c.name == "winrm", credentials.c.key == "password")).scalar_one()
        # Someone with write access to the database gives the username row the password's value...
        connection.execute(update(credentials).where(
            credentials.c.name == "winrm", credentials.c.key == "username").values(value=blob))
        # ... and vcenter the winrm password.
        connection.execute(update(credentials).where(
            credentials.c.name == "vcenter", credentials.c.key == "password").values(value=blob))
    for name in ("winrm", "vcenter"):
        with pytest.raises(StoreDecryptionError, match="altered, or copied from another row"):
            table.get(name)


def test_a_tampered_or_foreign_value_does_not_decrypt():
    cipher = new_cipher()
    blob = cipher.encrypt(PASSWORD, ("credentials", "winrm", "password"))
    assert cipher.decrypt(blob, ("credentials", "winrm", "password")) == PASSWORD
    flipped = blob[:-1] + bytes([blob[-1] ^ 1])
    with pytest.raises(StoreDecryptionError, match="altered"):
        cipher.decrypt(flipped, ("credentials", "winrm", "password"))
    with pytest.raises(StoreDecryptionError, match="not in a format this toolhost reads"):
        cipher.decrypt(b"\x07" + blob[1:], ("credentials", "winrm", "password"))
    with pytest.raises(StoreDecryptionError, match="not in a format"):
        cipher.decrypt(b"plain", ("credentials", "winrm", "password"))
    # The context is JSON-encoded: these two contexts do not collide.
    colon = cipher.encrypt(PASSWORD, ("a", "b:c"))
    with pytest.raises(StoreDecryptionError):
        cipher.decrypt(colon, ("a:b", "c"))
    assert "secret" not in repr(cipher) and cipher.decrypt(colon, ("a", "b:c")) == PASSWORD


def test_values_too_short_to_redact_are_refused_when_written_and_when_read(store: Store):
    cipher = new_cipher()
    table = CredentialTable(store, cipher)
    with pytest.raises(InvalidCredentialError) as caught:
        table.put("winrm", "domain", "CORP")
    assert "'winrm' key 'domain'" in str(caught.value) and "too short" in str(caught.value)
    assert "CORP" not in str(caught.value)
    # A row written by something that skipped the check is refused when read too.
    with store.begin() as connection:
        connection.execute(credentials.insert().values(
            name="winrm", key="domain", value=cipher.encrypt("CORP", ("credentials", "winrm", "domain")),
            updated_at=datetime.now(UTC)))
    with pytest.raises(InvalidCredentialError, match=r"'winrm' key 'domain'.*too short"):
        table.get("winrm")


def test_invalid_names_and_keys_are_refused(store: Store):
    table = CredentialTable(store, new_cipher())
    for name, key in (("win_rm", "password"), ("WinRM", "password"), ("aws-prod", "secret"), ("winrm", "Pass"),
                      ("winrm", "pass.word"), ("", "password")):
        with pytest.raises(InvalidCredentialError):
            table.put(name, key, PASSWORD)


def test_the_schema_is_created_once_by_many_stores_at_once(store: Store):
    stores = [Store(store.url) for _ in range(6)]
    errors: list[BaseException] = []

    def first_use(each: Store) -> None:
        try:
            CredentialTable(each, None).list_keys()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=first_use, args=(each,)) for each in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for each in stores:
        each.close()
    assert errors == []


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path: Path):
    store = Store(sqlite_file_url(tmp_path / "toolhost.db"))
    with store.begin() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA busy_timeout")).scalar() == 10_000
    store.close()


def test_the_default_database_is_a_sqlite_file_in_a_private_data_dir(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    config = Config()
    assert database_url(config) == sqlite_file_url(tmp_path / "xdg" / "toolhost" / "toolhost.db")
    store = Store.from_config(config)
    assert not (tmp_path / "xdg").exists()  # nothing is created before the first use
    CredentialTable(store, None).list_keys()
    store.close()
    data_dir = tmp_path / "xdg" / "toolhost"
    assert (data_dir / "toolhost.db").is_file()
    assert data_dir.stat().st_mode & 0o777 == 0o700


def test_a_data_dir_that_cannot_be_created_is_reported_at_first_use(tmp_path: Path):
    (tmp_path / "file").write_text("not a directory")
    store = Store.from_config(dataclasses.replace(Config(), data_dir=str(tmp_path / "file" / "data")))
    with pytest.raises(StoreUnavailableError, match=r"cannot create the data directory .*TOOLHOST_DATA_DIR"):
        CredentialTable(store, None).list_keys()


def test_an_unreachable_database_is_reported_without_its_password():
    closed_port = _closed_port()
    store = Store(parse_database_url(f"postgresql://toolhost:pw-Sekrit-4711@127.0.0.1:{closed_port}/toolhost"))
    with pytest.raises(StoreUnavailableError) as caught:
        CredentialTable(store, None).list_keys()
    message = str(caught.value)
    assert "pw-Sekrit-4711" not in message and "pw-Sekrit-4711" not in repr(store)
    assert f"postgresql+psycopg://toolhost:***@127.0.0.1:{closed_port}/toolhost" in message
    assert "TOOLHOST_DATABASE_URL" in message


def test_a_wrong_database_password_is_reported_without_it(postgres_cluster: PostgresCluster, postgres_url: URL):
    wrong = postgres_url.set(password="Wrong-Password-42")
    store = Store(wrong)
    with pytest.raises(StoreUnavailableError) as caught:
        CredentialTable(store, None).list_keys()
    assert "password authentication failed" in str(caught.value)
    assert "Wrong-Password-42" not in str(caught.value) and postgres_cluster.password not in str(caught.value)


def test_database_urls():
    assert parse_database_url("postgresql://u:p@h/db").drivername == "postgresql+psycopg"
    assert parse_database_url("postgres://u:p@h/db").drivername == "postgresql+psycopg"
    assert parse_database_url("postgresql+psycopg://u:p@h/db").drivername == "postgresql+psycopg"
    with pytest.raises(StoreUnavailableError, match="psycopg 3") as caught:
        parse_database_url("postgresql+psycopg2://u:Sekrit-Pw@h/db")
    assert "Sekrit-Pw" not in str(caught.value)
    with pytest.raises(StoreUnavailableError, match="mysql is not supported"):
        parse_database_url("mysql://u:p@h/db")
    with pytest.raises(StoreUnavailableError) as caught:
        parse_database_url("::not a url with Sekrit-Pw")
    assert "Sekrit-Pw" not in str(caught.value)


def test_store_keys(tmp_path: Path):
    text = generate_store_key_text()
    assert len(base64.b64decode(text)) == 32
    assert load_store_key("", {}) is None
    with pytest.raises(StoreKeyError, match=f"no store key.*{STORE_KEY_ENV}.*store_key_file.*generate-key"):
        require_store_key("", {})
    key = load_store_key("", {STORE_KEY_ENV: text})
    assert key is not None and text not in repr(key) and key.origin == STORE_KEY_ENV
    url_safe = text.replace("+", "-").replace("/", "_")
    assert parse_store_key(url_safe, "x").secret == key.secret
    with pytest.raises(StoreKeyError, match=f"{STORE_KEY_ENV} is not base64"):
        load_store_key("", {STORE_KEY_ENV: "not*base64"})
    with pytest.raises(StoreKeyError, match="holds 16 bytes; a store key is 32"):
        load_store_key("", {STORE_KEY_ENV: base64.b64encode(os.urandom(16)).decode()})
    key_file = tmp_path / "store.key"
    write_store_key_file(key_file, text)
    assert key_file.stat().st_mode & 0o777 == 0o600
    loaded = load_store_key(str(key_file), {})
    assert loaded is not None and loaded.secret == key.secret and loaded.key_id == key.key_id
    with pytest.raises(FileExistsError):
        write_store_key_file(key_file, generate_store_key_text())
    with pytest.raises(StoreKeyError, match="both TOOLHOST_STORE_KEY and store_key_file"):
        load_store_key(str(key_file), {STORE_KEY_ENV: text})
    with pytest.raises(StoreKeyError, match=r"cannot read store key file .*missing"):
        load_store_key(str(tmp_path / "missing"), {})


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
