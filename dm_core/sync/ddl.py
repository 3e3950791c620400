"""DDL outside sharding groups: find the tables a statement touches and route them.

sqlglot parses the MySQL text; table names are rewritten through the task's routes and the
statement is regenerated in MySQL dialect, so the downstream (TiDB, MySQL, MariaDB) sees
a statement with quoted, routed identifiers. Statements sqlglot cannot parse are reported,
never guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class RoutedDDL:
    kind: str                       # a binlog-filter event type: "create table", "alter table", ...
    tables: list[tuple[str, str]]   # upstream (schema, table) touched; ("db", "") for database DDL
    sql: str | None                 # the routed statement, None when it cannot be parsed
    error: str | None = None


def _kind(stmt) -> str:
    from sqlglot import exp

    if isinstance(stmt, exp.Create):
        k = (stmt.args.get("kind") or "").upper()
        return {"TABLE": "create table", "DATABASE": "create database", "SCHEMA": "create database",
                "INDEX": "create index", "VIEW": "create view"}.get(k, "create table")
    if isinstance(stmt, exp.Drop):
        k = (stmt.args.get("kind") or "").upper()
        return {"TABLE": "drop table", "DATABASE": "drop database", "SCHEMA": "drop database",
                "INDEX": "drop index", "VIEW": "drop view"}.get(k, "drop table")
    if isinstance(stmt, exp.Alter):
        return "alter table"
    if isinstance(stmt, exp.TruncateTable):
        return "truncate table"
    if type(stmt).__name__ == "RenameTable" or "RENAME" in stmt.sql().upper()[:12]:
        return "rename table"
    return "unknown"


_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_OBJECT = re.compile(
    rf"^\s*(?:/\*.*?\*/\s*)*(?:CREATE|ALTER|DROP|TRUNCATE)\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+|ONLINE\s+|IGNORE\s+)*"
    rf"(?:TABLE|DATABASE|SCHEMA)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?({_IDENT})(?:\s*\.\s*({_IDENT}))?",
    re.I | re.S,
)


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def touched_tables(sql: str, default_schema: str | None) -> list[tuple[str, str]]:
    """The object a DDL names, found without a full parse (for statements sqlglot rejects).

    >>> touched_tables("CREATE TABLE IF NOT EXISTS `a`.`b c` (g point)", None)
    [('a', 'b c')]
    >>> touched_tables("alter table t add column x geometry", "db")
    [('db', 't')]
    """
    m = _OBJECT.match(sql)
    if not m:
        return []
    first, second = _unquote(m.group(1)), m.group(2) and _unquote(m.group(2))
    if re.match(r"^\s*(?:/\*.*?\*/\s*)*\w+\s+(?:DATABASE|SCHEMA)\b", sql, re.I | re.S):
        return [(first, "")]
    return [(first, second)] if second else [(default_schema or "", first)]


def route_ddl(sql: str, default_schema: str | None, route) -> RoutedDDL:
    """Parse ``sql`` and rename every table through ``route(schema, table) -> (schema, table)``."""
    import sqlglot
    from sqlglot import exp

    try:
        stmts = sqlglot.parse(sql, read="mysql")
    except Exception as e:  # sqlglot raises ParseError / TokenError
        return RoutedDDL("unknown", touched_tables(sql, default_schema), None, f"cannot parse: {e}")
    if len(stmts) != 1 or stmts[0] is None or isinstance(stmts[0], exp.Command):
        return RoutedDDL("unknown", touched_tables(sql, default_schema), None, "not a statement shardflow can parse")
    stmt = stmts[0]
    kind = _kind(stmt)
    if kind in ("create database", "drop database"):
        name = stmt.this.name if stmt.this is not None else ""
        return RoutedDDL(kind, [(name, "")], None)
    touched: list[tuple[str, str]] = []
    for t in stmt.find_all(exp.Table):
        if not t.name:
            continue
        schema = t.db or default_schema or ""
        touched.append((schema, t.name))
        ts, tt = route(schema, t.name)
        t.set("db", exp.to_identifier(ts, quoted=True))
        t.set("this", exp.to_identifier(tt, quoted=True))
    return RoutedDDL(kind, touched, stmt.sql(dialect="mysql"))
