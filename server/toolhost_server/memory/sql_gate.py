"""The first check of a memory_query statement, on its text: one SELECT (or WITH ... SELECT, VALUES, TABLE) that
calls only known harmless functions in name(...) form and names no catalog (pg_*, sqlite_*, information_schema)
nor a reg* type (::regclass would tell whether any table exists). It exists because PostgreSQL lets any role read
its catalogs and call functions such as set_config, pg_notify or query_to_xml, which no grant can take away.

It is a filter, not the boundary. The databases enforce the rest (sqlite_query.py: the authorizer allows reading
the memory views and calling these functions only; postgres_query.py: the memory role, which may read nothing else,
in a read-only transaction). A call the text does not show as name(...) is one the scanner cannot always see:
PostgreSQL's attribute notation calls f(x) for x.f when x has no column f. The scanner refuses (expr).f and the
row functions such notation reaches in PostgreSQL 15 (ROW_FUNCTIONS); another function an extension adds could
still be reached so, as the role.

The scanner follows both databases' lexical rules where they agree, and refuses what it cannot read the way both
would (dollar quotes, E'' and U& strings, nested comments, `$`, backquotes, [brackets], a number run into a name):
a query it passes is one the databases tokenize as it did.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import QueryRefused

MAX_QUERY_CHARS = 20_000

# Functions a query may call: aggregates, windows, arithmetic, text, dates and JSON of SQLite and PostgreSQL that
# read their arguments and nothing else, and cannot make a value much larger than the query (no repeat, replace,
# printf, lpad, zeroblob). `like`, `glob`, `->` and `->>` are the functions behind SQLite's operators.
ALLOWED_FUNCTIONS = frozenset({
    "count", "sum", "avg", "min", "max", "total", "group_concat", "string_agg", "array_agg", "json_agg",
    "jsonb_agg", "json_group_array", "json_group_object", "json_object_agg", "bool_and", "bool_or", "every",
    "abs", "round", "ceil", "ceiling", "floor", "trunc", "sign", "mod", "power", "sqrt",
    "length", "char_length", "character_length", "octet_length", "lower", "upper", "trim", "ltrim", "rtrim",
    "btrim", "substr", "substring", "instr", "strpos", "position", "left", "right", "initcap", "split_part",
    "starts_with", "coalesce", "nullif", "ifnull", "iif", "greatest", "least", "concat", "concat_ws", "cast",
    "extract", "date", "time", "datetime", "julianday", "strftime", "unixepoch", "date_trunc", "date_part",
    "to_char", "now", "age", "typeof", "json_extract", "json_array_length", "jsonb_array_length", "json_type",
    "json_typeof", "jsonb_typeof", "json_valid", "json_extract_path", "json_extract_path_text", "to_json",
    "to_jsonb", "json_build_array", "json_build_object", "jsonb_build_object",
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead", "first_value",
    "last_value", "nth_value", "like", "glob", "->", "->>",
})
# Type names that take a modifier in parentheses: numeric(10, 2), varchar(20).
_TYPES_WITH_MODIFIERS = frozenset({"numeric", "decimal", "varchar", "char", "character", "bit", "float",
                                   "timestamp", "interval"})
# Keywords that a parenthesis may follow without being a call.
_KEYWORDS_BEFORE_PARENTHESIS = frozenset({
    "select", "from", "where", "and", "or", "not", "in", "exists", "as", "on", "using", "join", "by", "having",
    "when", "then", "else", "case", "like", "ilike", "between", "union", "intersect", "except", "all", "any",
    "some", "distinct", "lateral", "limit", "offset", "values", "over", "filter", "group", "array", "row",
    "materialized", "escape", "is", "with", "glob", "end", "asc", "desc",
})
# Unquoted words that make a statement more than a read: refused even where the databases would refuse them too,
# so that the caller learns why in one place.
_REFUSED_WORDS = frozenset({
    "insert", "update", "delete", "merge", "upsert", "replace", "drop", "create", "alter", "truncate", "grant",
    "revoke", "attach", "detach", "pragma", "vacuum", "reindex", "analyze", "explain", "copy", "call", "do",
    "lock", "set", "reset", "listen", "notify", "load", "into", "returning", "begin", "commit", "rollback",
    "savepoint", "release", "prepare", "execute", "deallocate", "declare", "fetch", "move", "close", "discard",
    "checkpoint", "cluster", "comment", "security", "import",
})
# PostgreSQL's one-argument functions that take any row (record, anyelement, "any") and are not allowed: x.f
# calls them on the row x (SELECT p.row_to_json FROM people p). pg_* ones are refused by their prefix; mode needs
# WITHIN GROUP, so it cannot be called that way.
ROW_FUNCTIONS = frozenset({
    "row_to_json", "quote_literal", "quote_nullable", "num_nulls", "num_nonnulls", "hash_record", "record_out",
    "record_send", "any_out", "anyelement_out", "anynonarray_out", "anycompatible_out", "anycompatiblenonarray_out",
})
# PostgreSQL's object identifier types: a cast to one ('credentials'::regclass) looks the name up in the catalogs.
_REG_TYPES = frozenset({
    "regclass", "regcollation", "regconfig", "regdictionary", "regnamespace", "regoper", "regoperator", "regproc",
    "regprocedure", "regrole", "regtype",
})
_FIRST_WORDS = frozenset({"select", "with", "values", "table"})
_CATALOG_NAMES = frozenset({"information_schema", "pg_catalog"})
_CATALOG_PREFIXES = ("pg_", "sqlite_")
_SPACE = " \t\n\r\f\v"
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_DIGITS = frozenset("0123456789")


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "word", "name" (a quoted identifier), "string", "number", "symbol"
    text: str  # a word in lower case, a quoted name unquoted, a symbol as written
    at: int = field(default=0, compare=False)  # where it starts in the query


def checked_query(sql: str) -> str:
    """The statement to run (without a trailing semicolon), or QueryRefused saying what to change."""
    if len(sql) > MAX_QUERY_CHARS:
        raise QueryRefused(f"the query has {len(sql)} characters; at most {MAX_QUERY_CHARS}")
    if "\x00" in sql:
        raise QueryRefused("the query holds a NUL character")
    tokens = _tokens(sql)
    end = len(sql)
    while tokens and tokens[-1] == _Token("symbol", ";"):
        end = tokens.pop().at
    if not tokens:
        raise QueryRefused("the query is empty: give one SELECT over the memory views")
    if any(token == _Token("symbol", ";") for token in tokens):
        raise QueryRefused("one statement only: memory_query runs a single SELECT (remove the ';' between "
                           "statements)")
    first = next((token for token in tokens if token != _Token("symbol", "(")), tokens[0])
    if first.kind != "word" or first.text not in _FIRST_WORDS:
        raise QueryRefused("only a SELECT (or WITH ... SELECT, VALUES) may run: memory_query only reads; change "
                           "records with memory_create, memory_update and memory_delete")
    for index, token in enumerate(tokens):
        _check_token(tokens, index, token)
    # Without the trailing semicolons (and any comment after them): PostgreSQL runs it inside DECLARE CURSOR.
    return sql[:end]


def _check_token(tokens: list[_Token], index: int, token: _Token) -> None:
    if token.kind not in ("word", "name"):
        return
    folded = token.text.lower()
    if token.kind == "word" and folded in _REFUSED_WORDS:
        raise QueryRefused(f"{folded.upper()} is not allowed: memory_query runs one read-only SELECT over the "
                           "memory views")
    if folded in _CATALOG_NAMES or folded.startswith(_CATALOG_PREFIXES):
        raise QueryRefused(f"{token.text!r} names the database's catalog or another schema: memory_query reads "
                           "only the memory views (memory_structure_get lists them and their columns)")
    if folded in _REG_TYPES:
        raise QueryRefused(f"the type {folded} is not allowed: it looks names up in the database's catalog; "
                           "memory_query reads only the memory views")
    if index > 0 and tokens[index - 1] == _Token("symbol", "."):
        before = tokens[index - 2] if index > 1 else None
        if before == _Token("symbol", ")"):
            raise QueryRefused(f"(...).{token.text} is not allowed: PostgreSQL may read it as a call of "
                               f"{token.text}(...); select a column of a view or subquery by alias.column")
        if folded in ROW_FUNCTIONS:
            raise QueryRefused(f".{folded} is not allowed: PostgreSQL reads alias.{folded} as a call of {folded} on "
                               "the row, a function memory_query does not allow")
    following = tokens[index + 1] if index + 1 < len(tokens) else None
    if following != _Token("symbol", "("):
        return
    if token.kind == "word" and (folded in _KEYWORDS_BEFORE_PARENTHESIS or folded in _TYPES_WITH_MODIFIERS):
        return
    name = folded if token.kind == "word" else token.text
    if index > 0 and tokens[index - 1] == _Token("symbol", "."):
        raise QueryRefused(f"the call of {name!r} names a schema; call functions by their bare names")
    if name not in ALLOWED_FUNCTIONS:
        raise QueryRefused(
            f"the function {name!r} is not allowed in memory_query: it calls aggregates, window functions and "
            "common text, number, date and JSON functions only (the README lists them). A column list after a name, "
            "as in WITH r(x) AS (...), is refused too: name the columns inside the query instead "
            "(WITH r AS (SELECT 1 AS x ...))")


def _tokens(sql: str) -> list[_Token]:
    tokens: list[_Token] = []
    position, length = 0, len(sql)
    while position < length:
        char = sql[position]
        if char in _SPACE:
            position += 1
        elif sql.startswith("--", position):
            end = sql.find("\n", position)
            position = length if end < 0 else end + 1
        elif sql.startswith("/*", position):
            position = _end_of_comment(sql, position)
        elif char == "'":
            end = _end_of_quoted(sql, position, "'", "a string")
            tokens.append(_Token("string", sql[position + 1:end - 1], position))
            position = end
        elif char == '"':
            end = _end_of_quoted(sql, position, '"', "a quoted name")
            tokens.append(_Token("name", sql[position + 1:end - 1].replace('""', '"'), position))
            position = end
        elif char in _DIGITS or (char == "." and sql[position + 1:position + 2] in _DIGITS):
            position = _end_of_number(sql, position)
            tokens.append(_Token("number", "", position))
        elif char in _NAME_START or ord(char) >= 0x80:
            end = position + 1
            while end < length and (sql[end] in _NAME_START or sql[end] in _DIGITS or ord(sql[end]) >= 0x80):
                end += 1
            word = sql[position:end]
            following = sql[end:end + 1]
            if word.lower() == "e" and following == "'":
                raise QueryRefused("E'...' strings are not allowed: write the text in a plain '...' string")
            if word.lower() == "u" and following == "&":
                raise QueryRefused("U&'...' and U&\"...\" escapes are not allowed: write the characters themselves")
            if following == "$":
                raise QueryRefused("'$' is not allowed in a name: memory_query takes no parameters")
            tokens.append(_Token("word", word.lower(), position))
            position = end
        elif char in "$`":
            raise QueryRefused(f"{char!r} is not allowed outside a string: memory_query takes no parameters, dollar "
                               "quotes or backquoted names (quote names with \"...\")")
        elif char in "[]":
            # SQLite reads [x] as a quoted name ([readfile](...) a call), PostgreSQL as a subscript whose inside is
            # more SQL: the two readings cannot both be checked.
            raise QueryRefused("square brackets are not allowed outside a string: SQLite reads [x] as a name and "
                               "PostgreSQL as a subscript; quote names with \"...\" and read JSON with ->, ->> or "
                               "json_extract")
        else:
            tokens.append(_Token("symbol", char, position))
            position += 1
    return tokens


def _end_of_comment(sql: str, start: int) -> int:
    end = sql.find("*/", start + 2)
    if end < 0:
        raise QueryRefused("a /* comment is not closed")
    if sql.find("/*", start + 2, end) >= 0:
        # PostgreSQL nests block comments and SQLite does not: text the two would read differently is refused.
        raise QueryRefused("a /* comment inside another is not allowed")
    return end + 2


def _end_of_quoted(sql: str, start: int, quote: str, what: str) -> int:
    position = start + 1
    while True:
        end = sql.find(quote, position)
        if end < 0:
            raise QueryRefused(f"{what} is not closed")
        if sql.startswith(quote * 2, end):
            position = end + 2
            continue
        return end + 1


def _end_of_number(sql: str, start: int) -> int:
    position, length = start, len(sql)
    if sql.startswith(("0x", "0X"), position):
        position += 2
        while position < length and sql[position] in "0123456789abcdefABCDEF":
            position += 1
    else:
        while position < length and sql[position] in _DIGITS:
            position += 1
        if position < length and sql[position] == ".":
            position += 1
            while position < length and sql[position] in _DIGITS:
                position += 1
        if position < length and sql[position] in "eE":
            exponent = position + 1
            if exponent < length and sql[exponent] in "+-":
                exponent += 1
            if exponent < length and sql[exponent] in _DIGITS:
                position = exponent
                while position < length and sql[position] in _DIGITS:
                    position += 1
    if position < length and (sql[position] in _NAME_START or sql[position] in _DIGITS or sql[position] == "."
                              or ord(sql[position]) >= 0x80):
        raise QueryRefused("a number runs into a name or another number: put a space between them")
    return position
