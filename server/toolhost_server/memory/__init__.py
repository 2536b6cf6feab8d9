"""The memory tools' data: structures (a JSON Schema of a record) and their records, kept in the store and read
with one read-only SQL SELECT over a view per structure. Memory is shared by every caller allowed the tools.

    structures.py      what a structure may be named and hold; the columns of its view
    errors.py          what the memory refuses, as the tools report it
    table.py           MemoryTable: structures and records in the store, each change one transaction
    views.py           the SQL of a structure's view, on SQLite and on PostgreSQL
    sql_gate.py        the first check of a query's text: one SELECT, known functions, no catalog names
    sqlite_query.py    a query on SQLite: run in a process of its own, its rows collected, killed when done
    sqlite_worker.py   that process: a read-only connection, an authorizer, a heap and a step budget
    postgres_query.py  a query on PostgreSQL: the memory role's READ ONLY transaction, timed and bounded
    postgres_role.py   the memory role and schema, made once by `toolhost db init-memory-role`
    query.py           the one entry point that picks the database's way, and the collector that bounds a result
"""
