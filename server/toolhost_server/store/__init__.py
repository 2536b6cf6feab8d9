"""The database toolhost keeps its state in: a SQLite file in the data dir by default, PostgreSQL by URL.

    errors.py            StoreError and its kinds; every message says how to fix the problem
    keys.py              the store key (32 random bytes, base64) from TOOLHOST_STORE_KEY or store_key_file
    cipher.py            AES-256-GCM for values at rest, bound to their row, with a key id for rotation
    engine.py            SQLAlchemy engines from a URL; database errors translated in one place
    schema.py            the tables (SQLAlchemy Core MetaData); later tables are added there
    database.py          Store: opened on first use, schema created idempotently
    credential_table.py  CredentialTable: the encrypted credential values

Import the module you need: this package re-exports nothing because SQLAlchemy takes about 0.3 s to import,
and a server that never opens its store (no credentials in the database) should not pay for it.
"""
