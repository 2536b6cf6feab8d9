"""What a caller of database_schema is told when a database cannot be read: a short message from a fixed set that
says what to check, never the driver's text (the server log gets that, with secrets removed)."""

from __future__ import annotations

import logging
import sqlite3

import sqlalchemy.exc

from .database_sources import DatabaseSource, SourceUnusable

# PostgreSQL's codes for a statement stopped by statement_timeout (57014) or lock_timeout (55P03).
_TIMEOUT_SQLSTATES = ("57014", "55P03")
# SQLite's: interrupted (the progress handler, or sqlite3_interrupt at the statement's time), and locked (a writer
# held the database for the whole busy timeout, which is the statement's time).
_SQLITE_TIMEOUT_WORDS = ("interrupted", "database is locked")


# What a database whose reading ran out of memory is told: the reading process's limits, not the server's, and
# SQLite's heap limit is shared by the SQLite files of one call (a huge one can leave too little for the others).
TOO_LARGE = ("the schema is too large to read within the memory allowed for the call's SQLite files: read it alone "
             "with database=NAME, or check that the file is the database meant")


def is_timeout(exc: BaseException) -> bool:
    """Whether `exc` is a statement that ran out of its time."""
    original = getattr(exc, "orig", exc)
    if getattr(original, "sqlstate", None) in _TIMEOUT_SQLSTATES:
        return True
    text = str(original).lower()
    return isinstance(original, sqlite3.OperationalError) and any(word in text for word in _SQLITE_TIMEOUT_WORDS)


def safe_message(exc: BaseException, source: DatabaseSource) -> str:
    """A message about `exc` for the caller: what failed and what to check, naming only what the configuration
    already shows (host, port, user, database, file)."""
    if isinstance(exc, SourceUnusable):
        return str(exc)
    if _is_out_of_memory(exc):
        return TOO_LARGE
    if is_timeout(exc):
        return ("the database did not answer in time: a writer held it locked, or it is overloaded; try again, "
                "or name one table with table=NAME")
    text = str(getattr(exc, "orig", exc)).lower()
    url = source.url
    where = f"{url.host or 'localhost'}:{url.port or 5432}" if url is not None else "the server"
    user = (url.username or "") if url is not None else ""
    if source.dialect == "sqlite":
        if "not a database" in text or "malformed" in text:
            return "the file is not a SQLite database, or it is damaged"
        if "unable to open" in text or "readonly" in text or "permission" in text:
            return "the server cannot open the SQLite file for reading: check its permissions and its directory's"
        return "cannot read the SQLite database; the server log has the detail"
    if "password authentication failed" in text or "authentication failed" in text:
        return f"authentication failed for user {user!r}: check the user and password of this connection"
    if "no password supplied" in text:
        return f"the server asks for a password for user {user!r} and the URL gives none"
    if "does not exist" in text and "database" in text:
        return f"the database {url.database if url is not None else ''!r} does not exist on {where}"
    if "connection refused" in text:
        return f"connection refused at {where}: is PostgreSQL running and listening there?"
    if "timeout expired" in text or "timed out" in text:
        return f"no answer from {where} within the connect timeout: check the host, port and firewalls"
    if "could not translate host name" in text or "name or service not known" in text:
        return f"cannot resolve the host of {where}: check the host name"
    if "permission denied" in text:
        return f"user {user!r} may not read the schema; grant it USAGE on the schemas and SELECT on the tables"
    if "no pg_hba.conf entry" in text:
        return f"{where} does not accept this connection (pg_hba.conf): ask its administrator"
    if isinstance(exc, sqlalchemy.exc.SQLAlchemyError):
        return "cannot read this database; the server log has the detail"
    return "reading this database failed unexpectedly; the server log has the detail"


def _is_out_of_memory(exc: BaseException) -> bool:
    original = getattr(exc, "orig", exc)
    if isinstance(original, MemoryError):
        return True
    return isinstance(original, sqlite3.Error) and "out of memory" in str(original).lower()


def log_failure(logger: logging.Logger, source: DatabaseSource, what: str, exc: BaseException) -> None:
    """The detail of a failure, for the server log, with the source's password and secret query values removed.
    Not exc_info: a traceback's text cannot be cleaned before a handler writes it."""
    detail = f"{type(exc).__name__}: {exc}"
    original = getattr(exc, "orig", None)
    if original is not None and str(original) not in detail:
        detail += f" (from {type(original).__name__}: {original})"
    for secret in source.secrets:
        detail = detail.replace(secret, "[REDACTED]")
    logger.warning("database_schema: %s of database %r (%s) failed: %s", what, source.name, source.safe_url, detail)
