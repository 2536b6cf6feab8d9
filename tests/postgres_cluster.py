"""A throwaway PostgreSQL server for tests, as a pytest plugin (conftest.py loads it).

`postgres_cluster` (session) runs initdb and pg_ctl from PostgreSQL's server binaries on a temporary directory,
listening on 127.0.0.1 only, on a free port, with a random password; it is stopped and removed at the end of
the session, also when tests fail. PostgreSQL refuses to run as root, so a root test run starts it as the
`postgres` user. `postgres_url` (per test) creates a fresh database in it and yields its SQLAlchemy URL.

Missing binaries fail the tests that need them, with what to install: a skip would let CI pass untested.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import URL

from toolhost_server.store.engine import sqlite_file_url

POSTGRES_BIN = Path(os.environ.get("TOOLHOST_TEST_POSTGRES_BIN", "/usr/lib/postgresql/15/bin"))
SUPERUSER = "postgres"
# The params of a fixture that gives each test both databases: PostgreSQL's runs are marked slow (they need the
# session's cluster), so that `-m "not slow"` keeps SQLite's. The fixture asks for `postgres_url` by
# request.getfixturevalue when its param is "postgresql".
DATABASES = ("sqlite", pytest.param("postgresql", marks=pytest.mark.slow))


@dataclass
class PostgresCluster:
    """A running PostgreSQL server: where it listens, its superuser password and its files."""

    directory: Path
    port: int
    password: str
    _databases: int = 0

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    def url(self, database: str = "postgres", password: str | None = None) -> URL:
        return URL.create("postgresql+psycopg", username=SUPERUSER, password=password or self.password,
                          host="127.0.0.1", port=self.port, database=database)

    def execute(self, statement: str, database: str = "postgres") -> list[tuple[Any, ...]]:
        with psycopg.connect(host="127.0.0.1", port=self.port, user=SUPERUSER, password=self.password,
                             dbname=database, autocommit=True) as connection:
            cursor = connection.execute(statement)
            return cursor.fetchall() if cursor.description else []

    def create_database(self) -> str:
        self._databases += 1
        name = f"test_{self._databases}"
        self.execute(f"CREATE DATABASE {name}")
        return name

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        # Durability off: the cluster lives for one test session. The socket directory is ours, not /run.
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.directory} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off")
        _run([str(POSTGRES_BIN / "pg_ctl"), "--pgdata", str(self.data_dir), "--log", str(self.directory / "server.log"),
              "--wait", "--timeout", "60", "--options", options, "start"], _as_server_user(), self.directory)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server and wait until it has: `fast` cuts every connection, as a restart or failover does."""
        _run([str(POSTGRES_BIN / "pg_ctl"), "--pgdata", str(self.data_dir), "--mode", mode, "--wait", "stop"],
             _as_server_user(), self.directory)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_server_user() -> dict[str, Any]:
    """subprocess arguments that run a program as the user PostgreSQL accepts."""
    if os.geteuid() != 0:
        return {}
    try:
        entry = pwd.getpwnam(SUPERUSER)
    except KeyError:
        pytest.fail(f"tests run as root and PostgreSQL refuses root, but there is no {SUPERUSER!r} user to run it "
                    "as: install postgresql-15 (it creates the user), or run the tests as another user")
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _run(argv: list[str], as_user: dict[str, Any], directory: Path) -> None:
    result = subprocess.run(argv, cwd=directory, capture_output=True, text=True, timeout=120, check=False,
                            **as_user)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    with throwaway_cluster() as cluster:
        yield cluster


@contextmanager
def throwaway_cluster() -> Iterator[PostgresCluster]:
    """A new cluster, running until the block ends, then stopped and removed (the session's, or one of a test
    that stops and starts it)."""
    initdb, pg_ctl = POSTGRES_BIN / "initdb", POSTGRES_BIN / "pg_ctl"
    if not (initdb.exists() and pg_ctl.exists()):
        pytest.fail(f"PostgreSQL server programs not found in {POSTGRES_BIN}: install postgresql-15 "
                    "(apt-get install postgresql-15; make test does) or point TOOLHOST_TEST_POSTGRES_BIN at them")
    as_user = _as_server_user()
    directory = Path(tempfile.mkdtemp(prefix="toolhost-postgres-"))
    cluster = PostgresCluster(directory, _free_port(), secrets.token_urlsafe(18))
    started = False
    try:
        password_file = directory / "password"
        password_file.write_text(cluster.password)
        if as_user:
            os.chown(directory, as_user["user"], as_user["group"])
            os.chown(password_file, as_user["user"], as_user["group"])
        _run([str(initdb), "--pgdata", str(cluster.data_dir), "--username", SUPERUSER, "--pwfile", str(password_file),
              "--auth", "scram-sha-256", "--encoding", "UTF8", "--no-sync"], as_user, directory)
        started = True
        cluster.start()
        yield cluster
    finally:
        if started:
            subprocess.run([str(pg_ctl), "--pgdata", str(cluster.data_dir), "--mode", "immediate", "--wait", "stop"],
                           cwd=directory, capture_output=True, timeout=60, check=False, **as_user)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> Iterator[URL]:
    """A new, empty database of the session's cluster."""
    name = postgres_cluster.create_database()
    yield postgres_cluster.url(name)
    postgres_cluster.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=DATABASES)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> URL:
    """An empty store database, once each kind: a SQLite file in a data dir (0700, as the server makes it), or a
    new database of the test session's PostgreSQL."""
    if request.param == "sqlite":
        (tmp_path / "data").mkdir(mode=0o700)
        return sqlite_file_url(tmp_path / "data" / "toolhost.db")
    url: URL = request.getfixturevalue("postgres_url")
    return url
