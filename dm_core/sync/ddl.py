"""DDL outside sharding groups: find the tables a statement touches and route them.

sqlglot parses the MySQL text; table names are rewritten through the task's routes and the
statement is regenerated in MySQL dialect, so the downstream (TiDB, MySQL, MariaDB) sees
a statement with quoted, routed identifiers. Statements sqlglot cannot parse are reported,
never guessed at.
"""

from __future__ import annotations

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


def route_ddl(sql: str, default_schema: str | None, route) -> RoutedDDL:
    """Parse ``sql`` and rename every table through ``route(schema, table) -> (schema, table)``."""
    import sqlglot
    from sqlglot import exp

    try:
        stmts = sqlglot.parse(sql, read="mysql")
    except Exception as e:  # sqlglot raises ParseError / TokenError
        return RoutedDDL("unknown", [], None, f"cannot parse: {e}")
    if len(stmts) != 1 or stmts[0] is None or isinstance(stmts[0], exp.Command):
        return RoutedDDL("unknown", [], None, "not a statement shardflow can parse")
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
