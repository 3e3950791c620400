"""Binlog event filter: Do, Ignore or Error for one event on one table.

DM's binlog-filter semantics, kept exactly:

* the rules matching the table are walked schema level first, then table level, each in
  DM's selector order (``trie.py``): DM's ``Match`` lists them so, and the walk stops at the
  first Ignore or Error, so a schema-level Error beats a table-level Ignore;
* event types: a rule whose ``events`` contain the event (directly, or through ``all``,
  ``all dml``, ``all ddl``, ``incompatible ddl changes``; ``none*`` stop the search) and whose
  action is Ignore or Error decides at once; a Do rule that does *not* list the event
  decides Ignore at once ("Do" is an allow list); a Do rule that lists it lets the walk go on;
* ``sql-pattern`` (regular expressions, case-insensitive, joined with ``|``) is then tried the
  same way on the statement text, when there is one;
* nothing decided: Do.

So Ignore and Error always beat Do: a Do never overrides another rule's exclusion.
An unknown event type (``""``, ``None``, or a DDL we could not classify) skips the event
check and is judged by ``sql-pattern`` alone, as DM's null event is. A rule may list ``""``
among its events, as DM allows; it matches nothing.

A rule naming an event DM does not know is left out whole by DM (``NewBinlogEvent`` logs
"invalid binlog event rule" and starts the task); ``usable_rules`` does the same for every
place that builds a filter from a file, which says so as a warning. The engine itself refuses
such a rule (RuleError), so nothing reaches it unchecked.

    >>> f = BinlogFilter([FilterRule("test_*", "t_*", ["truncate table", "drop table"], action="Ignore"),
    ...                   FilterRule("test_*", "", ["all dml"], action="Do")])
    >>> f.action("test_1", "t_1", "insert"), f.action("test_1", "t_1", TRUNCATE_TABLE)
    ('do', 'ignore')
    >>> f.action("test_1", "t_1", CREATE_TABLE), f.action("other", "t_1", "drop table")
    ('ignore', 'do')
    >>> f.ddl_event_type("ALTER TABLE t ADD PARTITION (PARTITION p1 VALUES LESS THAN (10))")
    'add table partition'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dm_core.ddl.kind import ddl_event_type
from dm_core.rules.patterns import RuleError, Selector
from dm_core.rules.re2 import compile_go

ALL = "all"
ALL_DML = "all dml"
ALL_DDL = "all ddl"
NONE = "none"
NONE_DDL = "none ddl"
NONE_DML = "none dml"
INCOMPATIBLE_DDL_CHANGES = "incompatible ddl changes"

INSERT, UPDATE, DELETE = "insert", "update", "delete"

CREATE_DATABASE = "create database"
DROP_DATABASE = "drop database"
ALTER_DATABASE = "alter database"
CREATE_TABLE = "create table"
DROP_TABLE = "drop table"
TRUNCATE_TABLE = "truncate table"
RENAME_TABLE = "rename table"
ALTER_TABLE = "alter table"
CREATE_INDEX = "create index"
DROP_INDEX = "drop index"
CREATE_VIEW = "create view"
DROP_VIEW = "drop view"
ADD_TABLE_PARTITION = "add table partition"
DROP_TABLE_PARTITION = "drop table partition"
TRUNCATE_TABLE_PARTITION = "truncate table partition"
REORGANIZE_TABLE_PARTITION = "reorganize table partition"
REBUILD_TABLE_PARTITION = "rebuild table partition"
EXCHANGE_TABLE_PARTITION = "exchange table partition"
COALESCE_TABLE_PARTITION = "coalesce table partition"
SPLIT_TABLE_PARTITION = "split table partition"

# DM's incompatible DDL events (pkg/binlog-filter ClassifyEvent), which `incompatible ddl changes`
# covers: the fine-grained changes the syncer tells apart in an ALTER TABLE (dm_core/ddl/incompatible.py)
# and the statements that drop, rename or empty. The last group are names DM accepts in a rule
# but its syncer never gives an event (an ADD COLUMN is `alter table`): a rule naming them is kept.
INCOMPATIBLE = frozenset({
    "value range decrease", "precision decrease", "modify column", "rename column", "rename index",
    "drop column", DROP_INDEX, TRUNCATE_TABLE_PARTITION, "drop primary key", "drop unique key",
    "modify default value", "modify constraint", "modify columns order", "modify charset",
    "modify collation", "remove auto increment", "modify storage engine", REORGANIZE_TABLE_PARTITION,
    REBUILD_TABLE_PARTITION, EXCHANGE_TABLE_PARTITION, COALESCE_TABLE_PARTITION, SPLIT_TABLE_PARTITION,
    DROP_DATABASE, DROP_TABLE, RENAME_TABLE, TRUNCATE_TABLE, DROP_TABLE_PARTITION,
    "add foreign key", "drop foreign key",
    "modify schema charset and collate", "modify table charset and collate", "modify table comment",
    "recover table", "alter table partitioning", "remove table partitioning", "add column",
    "set default value", "rebase auto id", "add primary key", "alter index visibility", "alter ttl info",
    "alter ttl remove", "multi schema change"})

DML_EVENTS = frozenset({INSERT, UPDATE, DELETE})
DDL_EVENTS = frozenset({
    CREATE_DATABASE, DROP_DATABASE, ALTER_DATABASE, CREATE_TABLE, DROP_TABLE, TRUNCATE_TABLE, RENAME_TABLE,
    ALTER_TABLE, CREATE_INDEX, DROP_INDEX, CREATE_VIEW, DROP_VIEW, ADD_TABLE_PARTITION, DROP_TABLE_PARTITION,
    SPLIT_TABLE_PARTITION}) | INCOMPATIBLE
GROUPS = frozenset({ALL, ALL_DML, ALL_DDL, NONE, NONE_DDL, NONE_DML, INCOMPATIBLE_DDL_CHANGES})
ALIASES = {"create schema": CREATE_DATABASE, "drop schema": DROP_DATABASE, "alter schema": ALTER_DATABASE}
NULL_EVENT = ""             # DM's NullEvent: accepted in a rule, never matched
EVENT_TYPES = DML_EVENTS | DDL_EVENTS | GROUPS | {NULL_EVENT}

ACTIONS = {"do": "do", "ignore": "ignore", "error": "error"}


@dataclass(frozen=True)
class FilterRule:
    """One entry of ``filters`` (or of a source file's ``filters``)."""

    schema_pattern: str
    table_pattern: str = ""
    events: list[str] = field(default_factory=list)
    sql_pattern: list[str] = field(default_factory=list)
    action: str = ""            # Do | Ignore | Error


@dataclass(frozen=True)
class _Compiled:
    events: frozenset[str]
    order: tuple[str, ...]      # events as written: `none` stops the search where it stands
    sql: re.Pattern | None
    action: str


def normalize_event(name: str) -> str:
    n = " ".join(str(name).lower().split())
    return ALIASES.get(n, n)


def unknown_events(rule: FilterRule) -> list[tuple[int, str]]:
    """(index, name) of each event of ``rule`` DM does not know."""
    return [(i, e) for i, e in enumerate(rule.events) if normalize_event(e) not in EVENT_TYPES]


def usable_rules(rules: list[FilterRule]) -> tuple[list[FilterRule], list[tuple[int, FilterRule, str]]]:
    """(the rules DM keeps, [(index, rule, first unknown event)] of those it leaves out).

    >>> kept, out = usable_rules([FilterRule("s", "", ["truncate"], action="Ignore"),
    ...                           FilterRule("s", "t", ["", "insert"], action="Ignore")])
    >>> [r.table_pattern for r in kept], [(i, e) for i, _, e in out]
    (['t'], [(0, 'truncate')])
    """
    kept, left_out = [], []
    for i, rule in enumerate(rules):
        bad = unknown_events(rule)
        if bad:
            left_out.append((i, rule, bad[0][1]))
        else:
            kept.append(rule)
    return kept, left_out


def _compile(rule: FilterRule) -> _Compiled:
    action = ACTIONS.get(str(rule.action).lower())
    if action is None:
        raise RuleError("action", f"must be Do, Ignore or Error, not {rule.action!r}")
    order = []
    for i, e in enumerate(rule.events):
        n = normalize_event(e)
        if n not in EVENT_TYPES:
            raise RuleError(f"events[{i}]", f"unknown event type {e!r}")
        order.append(n)
    sql = None
    if rule.sql_pattern:
        text = "|".join(rule.sql_pattern)   # DM compiles them as one Go regular expression
        try:
            sql = compile_go(text, re.IGNORECASE)
        except ValueError as e:
            raise RuleError("sql-pattern", f"invalid regular expression {text!r}: {e}",
                            "rewrite it in Go's syntax (RE2: no lookaround, backreferences, atomic groups "
                            "or possessive quantifiers)") from None
    return _Compiled(frozenset(order), tuple(order), sql, action)


def _kind(event: str) -> str:
    return "dml" if event in DML_EVENTS else "ddl" if event in DDL_EVENTS else ""


def _listed(kind: str, event: str, order: tuple[str, ...]) -> bool:
    """DM's matchEvent: walk the rule's events; the first one that speaks decides."""
    for r in order:
        if r == ALL:
            return True
        if r == NONE:
            return False
        if kind == "ddl" and r == ALL_DDL or kind == "dml" and r == ALL_DML:
            return True
        if kind == "ddl" and r == NONE_DDL or kind == "dml" and r == NONE_DML:
            return False
        if r == INCOMPATIBLE_DDL_CHANGES and event in INCOMPATIBLE:
            return True
        if r == event:
            return True
    return False


class BinlogFilter:
    """The compiled filter rules of one instance (or source)."""

    def __init__(self, rules: list[FilterRule], case_sensitive: bool = False):
        self._sel = Selector([(r.schema_pattern, r.table_pattern, _compile(r)) for r in rules], case_sensitive)

    def __bool__(self) -> bool:
        """Whether any rule is set (without one, every event is Do)."""
        return bool(self._sel)

    def applies(self, schema: str, table: str) -> bool:
        """Whether any rule matches ``schema``.``table`` (else every event there is Do)."""
        tables, schemas = self._sel.match(schema, table or "")
        return bool(tables or schemas)

    def action(self, schema: str, table: str, event_type: str | None, sql: str | None = None) -> str:
        """``"do"``, ``"ignore"`` or ``"error"`` for ``event_type`` on ``schema``.``table``."""
        tables, schemas = self._sel.match(schema, table or "")
        if not tables and not schemas:
            return "do"
        event = normalize_event(event_type or "")
        kind = _kind(event)
        for rule in schemas + tables:       # DM's order: schema level first
            if kind:
                if _listed(kind, event, rule.order):
                    if rule.action != "do":
                        return rule.action
                elif rule.action == "do":
                    return "ignore"
            if sql and rule.sql is not None:
                if rule.sql.search(sql):
                    if rule.action != "do":
                        return rule.action
                elif rule.action == "do":
                    return "ignore"
        return "do"

    ddl_event_type = staticmethod(ddl_event_type)
