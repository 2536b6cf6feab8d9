"""The database toolhost keeps its state in: a SQLite file in the data dir by default, PostgreSQL by URL.

    errors.py            StoreError and its kinds; every message says how to fix the problem
    keys.py              the store key (32 random bytes, base64) from TOOLHOST_STORE_KEY or store_key_file
    cipher.py            AES-256-GCM for values at rest, bound to their row, with a key id for rotation
    engine.py            SQLAlchemy engines from a URL; database errors translated in one place
    schema.py            the tables at the latest schema version (SQLAlchemy Core MetaData)
    schema_v1.py         the tables at version 1, frozen: where the migrations start
    migrations.py        the schema versions (in the schema_version table) and the migrations between them
    database.py          Store: opened on first use (or at a server's start), its schema migrated then
    credential_table.py  CredentialTable: the encrypted credential values
    audit_table.py       AuditTable: the audit trail's records
    log_table.py         LogTable: log records, written in batches and queried
    todo_table.py        TodoTable: the todo tool's lists, per caller identity and session, written at once

Import the module you need: this package re-exports nothing because SQLAlchemy takes about 0.3 s to import,
and a server that never opens its store (no credentials in the database) should not pay for it.
"""
