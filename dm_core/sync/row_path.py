"""The row path of sync: one upstream row change → the downstream job that applies it.

In order, per row: the block-allow list (a table the task does not replicate gives
nothing), the shard DDL gate (rows a rewind already applied), the binlog event filter (by
row operation), the expression filters, then routing (the target table, narrowed to the
columns this row shape carries), column mapping and the route's extract columns. Each
upstream table shape is planned once (``TablePlan``) until a DDL makes the syncer
``forget`` it. The syncer (syncer.py) calls ``jobs`` per transaction; bench/rules.py
measures it alone.
"""

from __future__ import annotations

import dataclasses
import logging

from dm_core.binlog.txn import RowChange, Txn
from dm_core.db import connect
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.sync import versioned
from dm_core.sync.job import RowJob
from dm_core.target import TargetTable

log = logging.getLogger("shardflow.sync")

# The columns of a MariaDB sequence (CREATE SEQUENCE), in order, as its row events carry them
SEQUENCE_COLUMNS = ("next_not_cached_value", "minimum_value", "maximum_value", "start_value", "increment",
                    "cache_size", "cycle_option", "cycle_count")


def written_columns(target: TargetTable, row_columns: set[str]) -> TargetTable:
    """``target`` narrowed to the columns a row of this upstream shape carries (its key
    always stays; a key whose columns the rows lack is replaced, ``TargetTable.for_columns``). A target column the row lacks gets its downstream default, as the
    upstream gave it when the column was added, instead of NULL: what a DM worker writes
    (it uses the upstream table's columns), and what makes replay over a target created
    after an ADD COLUMN converge (dm_core/full/phase.py)."""
    target = target.for_columns(row_columns)  # a key the rows do not carry is no key for them
    if all(c in row_columns for c in target.columns):
        return target
    if not target.key_is_unique:  # keyless: the key is every column, so it narrows too
        keep = tuple(c for c in target.columns if c in row_columns)
        return dataclasses.replace(target, columns=keep, key=keep)
    keep = tuple(c for c in target.columns if c in row_columns or c in target.key)
    return dataclasses.replace(target, columns=keep)


class TablePlan:
    """Everything the row path needs for one upstream table shape, built once."""

    __slots__ = ("skip", "target", "mapping", "columns", "extract", "expr", "actions", "missing", "unknown", "period")

    def __init__(self):
        self.skip = False
        self.target = None
        self.mapping = None
        self.columns = None
        self.extract = {}
        self.expr = None
        self.actions = {}  # binlog event filter's answer by row op: without SQL text it depends on nothing else
        self.missing = None  # the error when the target table does not exist downstream
        self.unknown = ()    # columns the rows carry that the target lacks (see jobs)
        self.period = None   # a system-versioned table's (row start, row end) columns (versioned.py)


class RowPath:
    """The row path of one source: its rules, and the downstream catalog of target tables."""

    def __init__(self, rules, source_id: str, catalog=None):
        self.rules, self.source_id, self.catalog = rules, source_id, catalog
        self._plans: dict[tuple, TablePlan] = {}
        self._missing_noted: set[tuple[str, str]] = set()
        # rows of keyless targets counted per upstream table in the transaction being read
        # (its start's key), across the pieces of a large one (RowJob.origin); from 0 whenever a
        # transaction's first piece is read, also when a later window reads it again
        self._ordinals: dict[str, int] = {}
        self._ordinals_of: tuple | None = None
        self.upstream = None   # the upstream endpoint (the syncer's window), asked about versioned tables
        self._periods: dict[tuple[str, str], tuple | None] = {}

    def use_catalog(self, catalog) -> None:
        """A new downstream connection's catalog: plans are built again against it."""
        self.catalog = catalog
        self._plans.clear()

    def forget(self, schema: str, table: str) -> None:
        """A DDL changed the target ``schema.table``: its shape and every plan are read again."""
        if self.catalog is not None:
            self.catalog.forget(schema, table)
        self._plans.clear()
        self._periods.clear()   # ADD / DROP SYSTEM VERSIONING

    def plan(self, ch: RowChange) -> TablePlan:
        """The row path of one upstream table shape (built once, until ``forget``)."""
        row = ch.after if ch.after is not None else ch.before
        cols = tuple(row)
        key = (ch.schema, ch.table, cols)
        p = self._plans.get(key)
        if p is not None:
            return p
        p = TablePlan()
        r = self.rules
        if not r.block_allow.allow_table(ch.schema, ch.table):
            p.skip = True
        elif cols == SEQUENCE_COLUMNS:
            # a MariaDB sequence: NEXTVAL logs its new state as a row; the values it hands out are
            # in the rows that use them, and there is no table downstream to write the state to
            p.skip = True
            log.info("source %s: rows of `%s`.`%s` skipped: it is a sequence (its state, not data; create it "
                     "downstream at cutover, starting past the upstream's NEXTVAL)", self.source_id, ch.schema,
                     ch.table)
        else:
            if any(c.startswith("UNKNOWN_COL") for c in cols):
                raise ErrorCode.SCHEMA_UNKNOWN.error(
                    f"row events of `{ch.schema}`.`{ch.table}` carry no column names")
            ts, tt = r.router.route(ch.schema, ch.table)
            target = None
            try:
                target = self.catalog.get(ts, tt)
            except ShardflowError as e:
                if e.code is not ErrorCode.DML_EXEC_FAILED:
                    raise
                p.missing = e  # see jobs
            p.period = self._period(ch.schema, ch.table, cols, target)
            p.columns = [c for c in cols if p.period is None or c not in p.period]
            p.mapping = r.column_mapper.plan(ch.schema, ch.table, p.columns)
            p.extract = r.router.extract_values(ch.schema, ch.table, self.source_id)
            if target is not None:
                p.target = written_columns(target, set(p.columns) | set(p.extract))
                have = {c.lower() for c in target.columns} | {c.lower() for c in target.generated}
                p.unknown = tuple(c for c in [*p.columns, *p.extract] if c.lower() not in have)
            p.expr = r.expr_filter.compile(ch.schema, ch.table, p.columns)
        self._plans[key] = p
        return p

    def _period(self, schema: str, table: str, cols: tuple, target) -> tuple[str, str] | None:
        """A system-versioned upstream table's period columns (versioned.py), asked of the
        upstream only for rows that may carry them: the invisible row_start / row_end, or
        columns the target computes itself (a versioned MariaDB target's own period)."""
        if self.upstream is None or target is None:
            return None
        if not ({"row_start", "row_end"} <= set(cols) or any(c in target.generated for c in cols)):
            return None
        k = (schema, table)
        if k not in self._periods:
            conn = connect(self.upstream)
            try:
                self._periods[k] = versioned.period_columns(conn, schema, table)
            finally:
                conn.close()
        return self._periods[k]

    @staticmethod
    def map_row(p: "TablePlan", row: dict | None) -> dict | None:
        if row is None:
            return None
        if p.mapping is not None:
            row = dict(zip(p.columns, p.mapping.map_row([row[c] for c in p.columns])))
        if p.extract:
            row = {**row, **p.extract}
        return row

    def jobs(self, txn: Txn, safe: bool, skip_table=None, *, lenient: bool | None = None,
             replay: bool | None = None) -> list[RowJob]:
        """The downstream jobs of ``txn``'s rows, in order: rows of tables the block-allow list,
        ``skip_table(schema, table)``, the binlog event filter or an expression filter drop
        produce none; the rest are routed and mapped. ``safe``: the jobs replay idempotently.
        ``lenient`` (default: ``safe``): the rows may be older than their target's definition --
        the full phase's catch-up, up to its high watermark -- so columns the target lacks are
        left out instead of pausing the source (``_unknown_columns``). ``replay`` (default:
        ``safe``): the transaction lies in a range read before -- the catch-up, or up to where a
        crashed run had got -- so rows of a target gone since are skipped; elsewhere (safe mode
        set in the task, the first minutes of a start) a missing target pauses the source."""
        lenient = safe if lenient is None else lenient
        replay = safe if replay is None else replay
        out: list[RowJob] = []
        bf = self.rules.binlog_filter
        here = None   # the transaction's start key, once a row of a keyless target asks for it
        if txn.piece == 0:   # a transaction read from its start (also again, by a later window): from 0
            self._ordinals_of = None
        for ch in txn.rows:
            p = self.plan(ch)
            if p.skip:
                continue
            origin = None
            if p.target is not None and not p.target.key_is_unique:  # counted before any filter: stable
                if here is None:
                    here = (txn.start or txn.end).key()
                    if self._ordinals_of != here:
                        self._ordinals_of, self._ordinals = here, {}
                name = f"{ch.schema}.{ch.table}"
                n = self._ordinals.get(name, 0)
                self._ordinals[name] = n + 1
                # a piece before the last: where it ends is unknown, a position inside it says the same
                origin = (*here, name, n) if txn.inside is None else (*here, name, n, txn.inside.key())
            if skip_table is not None and skip_table((ch.schema, ch.table)):
                continue
            if p.period is not None:   # a system-versioned table: its current rows only (versioned.py)
                got = versioned.current_change(ch.op, ch.before, ch.after, p.period)
                if got is None:
                    continue
                ch = RowChange(got[0], ch.schema, ch.table, got[1], got[2])
            if p.unknown and not lenient:
                raise self._unknown_columns(ch, p)
            action = p.actions.get(ch.op)
            if action is None:
                action = p.actions[ch.op] = bf.action(ch.schema, ch.table, ch.op, None)
            if action == "ignore":
                continue
            if action == "error":
                raise ErrorCode.FILTERED_AS_ERROR.error(
                    f"binlog event filter says Error for {ch.op} on `{ch.schema}`.`{ch.table}`")
            if p.expr is not None:
                if ch.op == "insert" and p.expr.skip_insert(ch.after):
                    continue
                if ch.op == "update" and p.expr.skip_update(ch.before, ch.after):
                    continue
                if ch.op == "delete" and p.expr.skip_delete(ch.before):
                    continue
            if p.missing is not None:  # after the filters: rows they drop need no target
                if not replay:
                    raise self._no_target(ch, p)
                # Replaying the safe-mode range over targets created after it began: a table
                # renamed or dropped later in the binlog is gone already, and its rows as of
                # then were read by the full load (dm_core/full/phase.py).
                self._note_missing(ch)
                continue
            before, after = ch.before, ch.after
            if p.mapping is not None or p.extract:  # else map_row would return the rows as they are
                before, after = self.map_row(p, before), self.map_row(p, after)
            out.append(RowJob(ch.op, p.target, before, after, safe, txn.end, origin))
        return out

    @staticmethod
    def _unknown_columns(ch: RowChange, p: TablePlan) -> ShardflowError:
        """Rows carrying columns the target lacks are not written without them: the source
        pauses, as DM's does on the downstream's "Unknown column" (a new shard created with
        a column the merged table does not have, a target the user made narrower, a column an
        ALTER the binlog event filter ignored added upstream), also after a resume in safe
        mode. Only in the full phase's catch-up are they written without them: there the target
        may have been created after a DROP COLUMN the binlog has not reached yet
        (dm_core/full/phase.py)."""
        t = p.target
        cols = ", ".join(f"`{c}`" for c in p.unknown)
        err = ErrorCode.DML_REJECTED.error(
            f"rows of `{ch.schema}`.`{ch.table}` carry column(s) {cols} that the downstream table "
            f"`{t.schema}`.`{t.table}` does not have (the downstream's error 1054: Unknown column '{p.unknown[0]}' "
            f"in 'field list')",
            workaround=f"Add the column(s) to `{t.schema}`.`{t.table}` downstream, then `dmctl resume-task TASK -s "
                       f"SOURCE`; or `dmctl binlog skip TASK -s SOURCE` to drop the transaction.")
        err.statement = f"{ch.op.upper()} `{t.schema}`.`{t.table}` ({', '.join(f'`{c}`' for c in [*p.columns, *p.extract])})"
        return err

    def _no_target(self, ch: RowChange, p: "TablePlan") -> ShardflowError:
        """Rows whose target table is not downstream, outside the replay range: nothing creates it
        by waiting (it was retried as a transient error for minutes), so the source pauses at once."""
        ts, tt = self.rules.router.route(ch.schema, ch.table)
        err = ErrorCode.DML_REJECTED.error(
            f"rows of `{ch.schema}`.`{ch.table}` have no target: {p.missing.message}",
            workaround=f"Create `{ts}`.`{tt}` downstream (as the upstream's SHOW CREATE TABLE, routed), then "
                       f"`dmctl resume-task TASK -s SOURCE` (a re-sync of the table then fills what it missed: "
                       f"trigger dm_TASK_resync); or `dmctl binlog skip TASK -s SOURCE` to drop the transaction.")
        err.statement = f"{ch.op.upper()} `{ts}`.`{tt}`"
        return err

    def _note_missing(self, ch: RowChange) -> None:
        key = (ch.schema, ch.table)
        if key not in self._missing_noted:
            self._missing_noted.add(key)
            log.warning("source %s: rows of `%s`.`%s` skipped while replaying in safe mode: its target does not "
                        "exist downstream (renamed or dropped later in the binlog)", self.source_id, *key)
