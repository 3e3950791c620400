"""``collation_compatible: strict`` (DM's task key): a CREATE DATABASE or CREATE TABLE from the
binlog that names no charset gets the one it had upstream, written out.

Why: without one the statement takes the *downstream's* default (a server's, or a database's
that may differ), so a table that was utf8_general_ci upstream can compare case-sensitively
downstream. Upstream, CREATE DATABASE without a charset took the session's
``collation_server`` (its QUERY event records the id) and CREATE TABLE took its database's
default. ``loose`` (DM's default) runs the statements as written.

    >>> with_database_collation("CREATE DATABASE IF NOT EXISTS `d`", "utf8mb3_general_ci")
    'CREATE DATABASE IF NOT EXISTS `d` COLLATE `utf8mb3_general_ci`'
    >>> names_charset("create database d charset utf8"), names_charset("create table t (a int) collate=x")
    (True, True)
    >>> names_charset("create table t (a varchar(3) charset latin1)")   # a column's, not the table's
    False
    >>> with_table_defaults("create table t (a int) engine=InnoDB", "utf8mb3", "utf8mb3_general_ci")
    'create table t (a int) DEFAULT CHARSET=`utf8mb3` COLLATE=`utf8mb3_general_ci` engine=InnoDB'
"""

from __future__ import annotations

from dm_core.db import qi
from dm_core.ddl.text import tokenize

_WORDS = {"CHARSET", "CHARACTER", "COLLATE"}


def _top_level_after_columns(sql: str, mode: str | None = None):
    """Tokens outside any parentheses, and the index in ``sql`` where the first parenthesised
    group (a CREATE TABLE's column list) ends (None if there is none)."""
    depth, out, end = 0, [], None
    for t in tokenize(sql, mode):
        if t.kind == "punct" and t.text == "(":
            depth += 1
            continue
        if t.kind == "punct" and t.text == ")":
            depth -= 1
            if depth == 0 and end is None:
                end = t.end
            continue
        if depth == 0:
            out.append(t)
    return out, end


def names_charset(sql: str, mode: str | None = None) -> bool:
    """The statement names a charset or collation of its own (a database's, or a table's
    options, not a column's)."""
    toks, _ = _top_level_after_columns(sql, mode)
    return any(t.kind == "word" and t.text.upper() in _WORDS for t in toks)


def database_defaults(conn, schema: str) -> tuple[str, str | None] | None:
    """(default charset, default collation) of ``schema`` on ``conn``'s server, or None when it
    has no such database (what a table created there without a charset gets)."""
    with conn.cursor() as cur:
        cur.execute("SELECT default_character_set_name, default_collation_name FROM information_schema.schemata "
                    "WHERE schema_name = %s", (schema,))
        got = cur.fetchone()
    if not got or not got[0]:
        return None
    cs, coll = (v.decode() if isinstance(v, bytes) else v for v in got)
    return cs, coll


def collation_name(conn, collation_id: int) -> str | None:
    """The name ``conn``'s server gives a collation id (a QUERY event's collation_server)."""
    with conn.cursor() as cur:
        cur.execute("SELECT collation_name FROM information_schema.collations WHERE id = %s", (int(collation_id),))
        got = cur.fetchone()
    return (got[0].decode() if isinstance(got[0], bytes) else got[0]) if got else None


def with_database_collation(sql: str, collation: str) -> str:
    return f"{sql.rstrip().rstrip(';')} COLLATE {qi(collation)}"


def with_table_defaults(sql: str, charset: str, collation: str, mode: str | None = None) -> str:
    """``sql`` (a CREATE TABLE with a column list) with the table's default charset and collation
    written right after the column list; unchanged when it has no column list (``LIKE``)."""
    _, end = _top_level_after_columns(sql, mode)
    if end is None:
        return sql
    return f"{sql[:end]} DEFAULT CHARSET={qi(charset)} COLLATE={qi(collation)}{sql[end:]}"
