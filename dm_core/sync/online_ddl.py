"""``online-ddl: true``: gh-ost and pt-osc changes replicated as the change they make.

Both tools change a table ``t`` without locking it, through tables of their own:

* gh-ost: ``CREATE TABLE _t_gho LIKE t``; ``ALTER TABLE _t_gho <change>``; a changelog table
  ``_t_ghc``; rows copied into ``_t_gho`` and every write to ``t`` applied there too; then
  ``RENAME TABLE t TO _t_del, _t_gho TO t`` and ``DROP TABLE _t_del, _t_ghc``;
* pt-osc: ``CREATE TABLE _t_new (...)``; ``ALTER TABLE _t_new <change>``; triggers on ``t``
  copy writes; rows copied in chunks; ``RENAME TABLE t TO _t_old, _t_new TO t``; ``DROP
  TABLE _t_old``.

The task's ``shadow-table-rules`` / ``trash-table-rules`` (regular expressions over table
names, DM's defaults ``^_(.+)_(?:new|gho)$`` / ``^_(.+)_(?:ghc|del|old)$``; the first group
is the real table's name) say which tables are the tools'. What shardflow does, as DM's
online DDL plugin does:

* nothing of a shadow or trash table reaches the downstream: no CREATE, no rows (the copy
  is not replicated: the real table's own rows are), no DROP; the block-allow list answers
  no for them (``OnlineBlockAllow``), so they are also left out of the full load and of
  validation. A shadow table's DDL is judged by its real table's name;
* an ALTER (or CREATE/DROP INDEX) of a shadow table is recorded in the state store
  (table ``online_ddl``: task, source, shadow table -> real table, statements with their
  binlog positions) before the checkpoint moves past it; a statement met again after a
  restart (same position) is not recorded twice; a CREATE or DROP of the shadow table
  starts its record afresh;
* the RENAME that swaps the shadow table in (``shadow -> t``; ``t -> trash`` is ignored)
  becomes the recorded changes on ``t`` (ALTERs joined into one statement). From there it
  is ``t``'s own DDL: routed, filtered, and coordinated as shard DDL when ``t`` belongs to
  a sharding group -- each shard's online DDL is one shard DDL;
* the record stays after the swap (the next CREATE of that shadow table resets it): a
  swap met again after a crash replays the changes, which then run only where they are not
  in effect downstream (dm_core/ddl/replay.py).

Refused with DM's errors (the source pauses): renaming a real table to a shadow table,
renaming a shadow or trash table to another tool table than its swap, swapping in a shadow
table of which no change was recorded (the task started in the middle of the tool's run:
run the tool again, or ``dmctl binlog replace`` with the change).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field

from dm_core import faults
from dm_core.db import qt
from dm_core.errors import ErrorCode
from dm_core.ddl.kind import ddl_event_type
from dm_core.ddl.parsed import parse_ddl
from dm_core.state import schema as _schema
from dm_core.ddl.text import Span, table_spans

log = logging.getLogger("shardflow.sync.online_ddl")

REAL, SHADOW, TRASH = "real", "shadow", "trash"

_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.online_ddl (
    task          text NOT NULL,
    source_id     text NOT NULL,
    shadow_schema text NOT NULL,
    shadow_table  text NOT NULL,
    real_schema   text NOT NULL,
    real_table    text NOT NULL,
    ddls          jsonb NOT NULL DEFAULT '[]',   -- [[binlog position, statement], ...]
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, source_id, shadow_schema, shadow_table)
);
"""

_TABLES = _schema.PartTables("online_ddl", _DDL, newest=("online_ddl", "ddls"))
# create the table if missing (before ``delete_task`` in a wider transaction)
ensure = _TABLES.ensure
# forget a task's records (its positions are being forgotten), inside the caller's transaction
delete_task = _TABLES.delete_task


class TableKinds:
    """Shadow / trash / real, by the task's rules."""

    def __init__(self, shadow_rules, trash_rules):
        self.shadow = [re.compile(r) for r in shadow_rules]
        self.trash = [re.compile(r) for r in trash_rules]

    def kind(self, table: str) -> str:
        """
        >>> k = TableKinds([r"^_(.+)_(?:new|gho)$"], [r"^_(.+)_(?:ghc|del|old)$"])
        >>> [k.kind(t) for t in ("t", "_t_gho", "_t_new", "_t_ghc", "_t_del", "_t_old", "t_gho")]
        ['real', 'shadow', 'shadow', 'trash', 'trash', 'trash', 'real']
        """
        if any(r.search(table) for r in self.shadow):
            return SHADOW
        if any(r.search(table) for r in self.trash):
            return TRASH
        return REAL

    def real_name(self, table: str) -> str:
        """
        >>> TableKinds([r"^_(.+)_(?:new|gho)$"], []).real_name("_orders_gho")
        'orders'
        """
        for r in self.shadow + self.trash:
            m = r.search(table)
            if m and m.groups() and m.group(1):
                return m.group(1)
        return table


class OnlineBlockAllow:
    """A block-allow list that never moves the online DDL tools' own tables."""

    def __init__(self, inner, kinds: TableKinds):
        self.inner = inner
        self.kinds = kinds

    @property
    def rule(self):
        return self.inner.rule

    def allow_schema(self, schema: str) -> bool:
        return self.inner.allow_schema(schema)

    def selects_schema(self, schema: str) -> bool:
        return self.inner.selects_schema(schema)

    def may_allow_tables_of(self, schema: str) -> bool:
        return self.inner.may_allow_tables_of(schema)

    def allow_table(self, schema: str, table: str) -> bool:
        if table and self.kinds.kind(table) != REAL:
            return False
        return self.inner.allow_table(schema, table)


def kinds_of(task) -> TableKinds:
    return TableKinds(task.shadow_table_rules, task.trash_table_rules)


@dataclass
class OnlineStep:
    """What replaces one upstream statement that touches the tools' tables: ``sqls`` (maybe
    none) to handle as the upstream's DDL of real tables, in order."""

    sqls: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class OnlineDDL:
    """The online DDL plugin of one source of a task."""

    def __init__(self, task, source_id: str, store, rules):
        self.task = task
        self.source_id = source_id
        self.store = store
        self.kinds = kinds_of(task)
        ba = rules.block_allow
        self.allow = ba.inner if isinstance(ba, OnlineBlockAllow) else ba
        self.binlog_filter = rules.binlog_filter

    # ---- records ------------------------------------------------------------------------------
    def _get(self, schema: str, shadow: str) -> tuple[str, str, list] | None:
        ensure(self.store)
        with self.store.tx() as cur:
            cur.execute(f"SELECT real_schema, real_table, ddls FROM {_schema.SCHEMA}.online_ddl WHERE task = %s AND "
                        "source_id = %s AND shadow_schema = %s AND shadow_table = %s",
                        (self.task.name, self.source_id, schema, shadow))
            row = cur.fetchone()
        if row is None:
            return None
        ddls = row[2] if isinstance(row[2], list) else json.loads(row[2])
        return row[0], row[1], ddls

    def _reset(self, schema: str, shadow: str) -> None:
        ensure(self.store)
        with self.store.tx() as cur:
            cur.execute(f"DELETE FROM {_schema.SCHEMA}.online_ddl WHERE task = %s AND source_id = %s AND "
                        "shadow_schema = %s AND shadow_table = %s", (self.task.name, self.source_id, schema, shadow))

    def _record(self, schema: str, shadow: str, sql: str, pos: str) -> bool:
        got = self._get(schema, shadow)
        ddls = got[2] if got else []
        if any(p == pos for p, _ in ddls):
            return False  # met again after a restart
        ddls.append([pos, sql])
        with self.store.tx() as cur:
            cur.execute(
                f"INSERT INTO {_schema.SCHEMA}.online_ddl (task, source_id, shadow_schema, shadow_table, real_schema, "
                "real_table, ddls) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (task, source_id, shadow_schema, "
                "shadow_table) DO UPDATE SET ddls = EXCLUDED.ddls, updated_at = now()",
                (self.task.name, self.source_id, schema, shadow, schema, self.kinds.real_name(shadow),
                 json.dumps(ddls)))
        faults.hit("online_ddl.after_record")
        return True

    def recorded(self, schema: str, shadow: str) -> list[str]:
        """The statements recorded for a shadow table (for tests and dmctl)."""
        got = self._get(schema, shadow)
        return [s for _, s in got[2]] if got else []

    # ---- statements ---------------------------------------------------------------------------
    def handle(self, sql: str, default_schema: str | None, pos) -> OnlineStep | None:
        """None: the statement does not touch the tools' tables (handle it as usual)."""
        ddl = parse_ddl(sql, default_schema)
        spans = list(ddl.spans)
        if not spans or spans[0].role == "db":
            return None
        kinds = [self.kinds.kind(s.table) for s in spans]
        if all(k == REAL for k in kinds):
            return None
        subject = spans[0]
        if not self.allow.allow_table(subject.schema, self.kinds.real_name(subject.table)):
            return OnlineStep(notes=[f"online DDL of a table this task does not replicate: {sql}"])
        kind = ddl.kind
        if subject.role == "old":
            return self._rename(spans, sql)
        if kind == "drop table":
            return self._drop(spans)
        sk = self.kinds.kind(subject.table)
        if sk == TRASH:
            return OnlineStep(notes=[f"ignored on an online DDL trash table: {sql}"])
        if sk == REAL:
            return None  # e.g. CREATE TABLE t LIKE _t_gho: a real table's own DDL
        if kind == "create table":
            self._reset(subject.schema, subject.table)
            return OnlineStep(notes=[f"online DDL starts on shadow table {qt(subject.schema, subject.table)}"])
        if kind in ("alter table", "create index", "drop index"):
            new = self._record(subject.schema, subject.table, sql.strip().rstrip(";"), str(pos))
            return OnlineStep(notes=[("recorded" if new else "already recorded") +
                                     f" for {qt(subject.schema, self.kinds.real_name(subject.table))}: {sql}"])
        return OnlineStep(notes=[f"ignored on an online DDL shadow table: {sql}"])

    def _drop(self, spans: list[Span]) -> OnlineStep:
        real, notes = [], []
        for s in spans:
            k = self.kinds.kind(s.table)
            if k == REAL:
                real.append(qt(s.schema, s.table))
            else:
                if k == SHADOW:
                    self._reset(s.schema, s.table)
                notes.append(f"online DDL table {qt(s.schema, s.table)} dropped (nothing downstream)")
        return OnlineStep(["DROP TABLE " + ", ".join(real)] if real else [], notes)

    def _rename(self, spans: list[Span], sql: str) -> OnlineStep:
        out, plain, notes = [], [], []
        for old, new in zip(spans[0::2], spans[1::2]):
            ko, kn = self.kinds.kind(old.table), self.kinds.kind(new.table)
            if ko == REAL and kn == REAL:
                plain.append(f"{qt(old.schema, old.table)} TO {qt(new.schema, new.table)}")
            elif ko == REAL and kn == TRASH:
                notes.append(f"{qt(old.schema, old.table)} moved aside to {qt(new.schema, new.table)}: ignored")
            elif ko == REAL:
                raise ErrorCode.DDL_UNSUPPORTED.error(
                    f"online DDL: renaming a table to the shadow table {qt(new.schema, new.table)} is not supported: "
                    f"{sql}")
            elif ko == SHADOW and kn == REAL:
                swapped = self._swap(old, new, sql)
                out += [swapped] if swapped else []
                notes.append(f"shadow table {qt(old.schema, old.table)} swapped in as {qt(new.schema, new.table)}"
                             + ("" if swapped else ": every recorded change is filtered out"))
            elif ko == SHADOW and kn == TRASH:
                self._reset(old.schema, old.table)
                notes.append(f"shadow table {qt(old.schema, old.table)} moved to the trash: its changes are dropped")
            elif kn == REAL:
                raise ErrorCode.DDL_UNSUPPORTED.error(
                    f"online DDL: renaming the trash table {qt(old.schema, old.table)} to a real table is not "
                    f"supported: {sql}")
            else:
                notes.append(f"{qt(old.schema, old.table)} -> {qt(new.schema, new.table)}: online DDL tables, ignored")
        sqls = (["RENAME TABLE " + ", ".join(plain)] if plain else []) + out
        return OnlineStep(sqls, notes)

    def _swap(self, shadow: Span, real: Span, sql: str) -> str | None:
        got = self._get(shadow.schema, shadow.table)
        stmts = [s for _, s in got[2]] if got else []
        if not stmts:
            raise ErrorCode.DDL_UNSUPPORTED.error(
                f"online DDL: {qt(shadow.schema, shadow.table)} is swapped in as {qt(real.schema, real.table)}, but no "
                f"change of it was recorded (the task started while the tool ran?): {sql}",
                workaround="Run `dmctl binlog replace TASK \"ALTER TABLE ...\"` with the change the tool made, or "
                           "`dmctl binlog skip TASK` if it made none.")
        kept = []
        for stmt in stmts:  # the binlog event filter judges each change as the statement the user ran
            one = on_real_table([stmt], shadow, real)
            action = self.binlog_filter.action(real.schema, real.table, ddl_event_type(stmt), one)
            if action == "error":
                raise ErrorCode.FILTERED_AS_ERROR.error(f"binlog event filter says Error for: {one}")
            if action != "ignore":
                kept.append(stmt)
        return on_real_table(kept, shadow, real) if kept else None


def on_real_table(stmts: list[str], shadow: Span, real: Span) -> str:
    """The shadow table's recorded statements as one statement on the real table: the ALTERs'
    specifications joined; (CREATE/DROP INDEX become ADD/DROP INDEX specifications).

    >>> s = Span("old", "d", "_t_gho", 0, 0)
    >>> on_real_table(["ALTER TABLE `d`.`_t_gho` ADD COLUMN c int", "alter table _t_gho add key k (c);",
    ...                "CREATE UNIQUE INDEX u ON _t_gho (c)", "DROP INDEX k ON d._t_gho"], s, Span("new", "d", "t", 0, 0))
    'ALTER TABLE `d`.`t` ADD COLUMN c int, add key k (c), ADD UNIQUE INDEX u (c), DROP INDEX k'
    """
    specs = []
    for stmt in stmts:
        stmt = stmt.strip().rstrip(";").strip()
        spans = table_spans(stmt, shadow.schema)
        kind = ddl_event_type(stmt)
        if kind == "alter table" and spans:
            specs.append(stmt[spans[0].end:].strip())
        elif kind == "create index" and spans:
            head = re.match(r"^\s*CREATE\s+(?:ONLINE\s+|OFFLINE\s+)?(UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\s+"
                            r"(?:IF\s+NOT\s+EXISTS\s+)?((?:`(?:[^`]|``)+`|\S+))", stmt, re.I)
            modifier = (head.group(1) or "").strip().upper() if head else ""
            name = head.group(2) if head else ""
            specs.append(f"ADD {modifier + ' ' if modifier else ''}INDEX {name} {stmt[spans[0].end:].strip()}")
        elif kind == "drop index":
            head = re.match(r"^\s*DROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?((?:`(?:[^`]|``)+`|\S+))", stmt, re.I)
            specs.append(f"DROP INDEX {head.group(1) if head else ''}")
        else:
            raise ErrorCode.DDL_UNSUPPORTED.error(f"online DDL: cannot apply `{stmt}` to {qt(real.schema, real.table)}")
    return f"ALTER TABLE {qt(real.schema, real.table)} " + ", ".join(specs)
