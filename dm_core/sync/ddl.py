"""DDL outside sharding groups: which tables a statement names, and its routed text.

Rendering edits the upstream's text (dm_core/ddl/text.py finds the names): every table name
becomes its routed, back-quoted, schema-qualified target; index, column and constraint
names, partition clauses, options and comments stay as the upstream ran them. So
``ALTER TABLE t DROP INDEX i`` stays a DROP INDEX of ``i`` on the routed table, and
statements sqlglot cannot parse (``RENAME TABLE``, ``PARTITION BY``, ``CONVERT TO
CHARACTER SET``) route like any other.

As DM renders them, statements are made safe to run twice where the syntax allows:
``CREATE TABLE IF NOT EXISTS``, ``DROP TABLE IF EXISTS``. (Replaying any other DDL over a
downstream that already has it is dm_core/ddl/replay.py's job.)

Which tables take part follows the task's block-allow list (``allow``):

* DROP TABLE of several tables drops the replicated ones only;
* RENAME TABLE renames the pairs whose old and new names are both replicated, skips pairs
  of tables the task does not replicate, and refuses a pair that moves a table into or out
  of the task (the downstream would be left without it, or with a stale copy); a pair whose
  old and new names route to the same target changes nothing downstream;
* for every other statement the first table named decides (the syncer asks ``allow`` and
  the binlog event filter about it).

Statements whose names this module cannot find are reported (``error``), never guessed at.

    >>> route = lambda s, t: ("db", t.upper())
    >>> route_ddl("alter table t drop index i, add column c int", "s", route).sql
    'alter table `db`.`T` drop index i, add column c int'
    >>> route_ddl("RENAME TABLE a TO b, x TO y", "s", route, allow=lambda s, t: t != "x").error
    'RENAME TABLE moves `s`.`x`, which this task does not replicate, to `s`.`y`, which it does (its rows are not downstream)'
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.db import qt
from dm_core.ddl.parsed import parse_ddl
from dm_core.ddl.text import Span, replace_spans

Table = tuple[str, str]

# DM event types the plain path replicates; anything else (GRANT, triggers, views,
# OPTIMIZE/ANALYZE/REPAIR TABLE, ...) is not table data and is skipped, as DM does.
TABLE_DDL = frozenset({
    "create table", "drop table", "alter table", "truncate table", "rename table", "create index", "drop index",
    "create database", "drop database", "alter database",
    "add table partition", "drop table partition", "truncate table partition", "reorganize table partition",
    "exchange table partition", "coalesce table partition", "rebuild table partition", "split table partition",
})


@dataclass
class RoutedDDL:
    kind: str                       # DM event type: "create table", "alter table", "add table partition", ...
    tables: list[Table]             # upstream tables named (RENAME: old and new of every pair); ("db", "") for databases
    sql: str | None                 # the routed statement; None when nothing is to run (see note) or it cannot (error)
    error: str | None = None
    targets: list[Table] = field(default_factory=list)  # downstream tables the statement changes
    note: str = ""                  # why nothing runs


def _always(schema: str, table: str) -> bool:
    return True


def route_ddl(sql: str, default_schema: str | None, route, allow=_always, mode: str | None = None) -> RoutedDDL:
    """Route ``sql`` through ``route(schema, table) -> (schema, table)``; ``allow(schema, table)``
    says which tables the task replicates (see the module docstring); ``mode``: the sql_mode
    the statement ran under (how its text reads, ddl/text.py)."""
    ddl = parse_ddl(sql, default_schema, mode)
    kind, spans = ddl.kind, list(ddl.spans)
    if not spans:
        return RoutedDDL(kind or "unknown", [], None, error="cannot tell which table this statement changes")
    if spans[0].role == "db":
        return RoutedDDL(kind, [(spans[0].schema, "")], None)
    if kind == "rename table" and spans[0].role == "old":
        return _rename(kind, spans, route, allow)
    if kind == "drop table":
        return _drop(kind, spans, route, allow)
    subject = spans[0]
    tables = [(s.schema, s.table) for s in spans]
    renamed = [s for s in spans if s.role == "new"]
    for s in renamed:  # ALTER TABLE ... RENAME TO
        if allow(subject.schema, subject.table) != allow(s.schema, s.table):
            return RoutedDDL(kind, tables, None, error=_moves(subject, s, allow(subject.schema, subject.table)))
    edits = [(s, qt(*route(s.schema, s.table))) for s in spans]
    if kind == "create table" and _may_add_if_not_exists(sql, subject):
        edits[0] = (subject, "IF NOT EXISTS " + edits[0][1])
    targets = [route(subject.schema, subject.table)] + [route(s.schema, s.table) for s in renamed]
    return RoutedDDL(kind, tables, replace_spans(sql, edits), targets=targets)


def _may_add_if_not_exists(sql: str, subject: Span) -> bool:
    """Not when the statement has IF NOT EXISTS already, or is CREATE OR REPLACE (which
    must not have it)."""
    head = sql[:subject.start].upper()
    return "EXISTS" not in head and "REPLACE" not in head


def _name(s: Span) -> str:
    return qt(s.schema, s.table)


def _moves(old: Span, new: Span, old_allowed: bool) -> str:
    if old_allowed:
        return (f"RENAME TABLE moves {_name(old)} out of the tables this task replicates "
                f"({_name(new)} is not replicated)")
    return (f"RENAME TABLE moves {_name(old)}, which this task does not replicate, to {_name(new)}, which it "
            f"does (its rows are not downstream)")


def _rename(kind: str, spans: list[Span], route, allow) -> RoutedDDL:
    tables = [(s.schema, s.table) for s in spans]
    pairs, targets, same = [], [], []
    for old, new in zip(spans[0::2], spans[1::2]):
        a, b = allow(old.schema, old.table), allow(new.schema, new.table)
        if not a and not b:
            continue
        if a != b:
            return RoutedDDL(kind, tables, None, error=_moves(old, new, a))
        ro, rn = route(old.schema, old.table), route(new.schema, new.table)
        if (ro[0].lower(), ro[1].lower()) == (rn[0].lower(), rn[1].lower()):
            same.append(f"{_name(old)} and {_name(new)} both go to {qt(*ro)}")
            continue
        pairs.append(f"{qt(*ro)} TO {qt(*rn)}")
        targets += [ro, rn]
    if not pairs:
        return RoutedDDL(kind, tables, None, note="; ".join(same) or "no replicated table is renamed")
    return RoutedDDL(kind, tables, "RENAME TABLE " + ", ".join(pairs), targets=targets)


def _drop(kind: str, spans: list[Span], route, allow) -> RoutedDDL:
    tables = [(s.schema, s.table) for s in spans]
    keep = [route(s.schema, s.table) for s in spans if allow(s.schema, s.table)]
    if not keep:
        return RoutedDDL(kind, tables, None, note="no replicated table is dropped")
    return RoutedDDL(kind, tables, "DROP TABLE IF EXISTS " + ", ".join(qt(*t) for t in keep), targets=keep)
