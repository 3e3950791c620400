"""What to compare for a task: per target table, the upstream shards merged into it (with
route, column mapping, extract columns and filters) and the downstream table's key.

Built once per validation run from the live servers (``discover`` on each source, as the
full load does), then handed to either engine: the in-process comparison (compare.py) or
the Spark job (spark_jobs/validate.py), which ships the picklable parts to executors.

Shards of one target may differ in columns (optimistic shard DDL): rows compare over the
union of their columns that the downstream table has, a column a shard lacks counting as the
downstream default. Columns the downstream lacks are reported on the table, not compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.db import as_str
from dm_core.full.discover import SourceTable, discover
from dm_core.validate.filters import AnyFlags, event_flags, expr_flags
from dm_core.validate.rows import RecordMaker, Shaper


@dataclass
class ShardPlan:
    table: SourceTable               # the upstream shard (source_id, schema, table, columns, key ...)
    maker: RecordMaker               # its rows → records

    @property
    def origin(self) -> str:
        return f"{self.table.source_id}:{self.table.schema}.{self.table.table}"


@dataclass
class TablePlan:
    schema: str                      # target
    table: str
    columns: list[str]               # target columns read on both sides, in order
    key: list[str]                   # downstream key columns (target names)
    down: SourceTable | None         # the downstream table (None: it does not exist)
    down_maker: RecordMaker
    shards: list[ShardPlan] = field(default_factory=list)
    missing_columns: list[str] = field(default_factory=list)   # upstream columns the downstream lacks
    buckets: int = 4096
    mode: str = "full"               # full: every column is compared; fast: the key only

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    def shard(self, origin: str) -> ShardPlan:
        return next(s for s in self.shards if s.origin == origin)


class _OneTable:
    """Rules that allow exactly one table and route it to itself (discover on the downstream)."""

    def __init__(self, schema: str, table: str):
        self.block_allow, self.router = self, self
        self._st = (schema, table)

    def allow_table(self, s: str, t: str) -> bool:
        return (s, t) == self._st

    def may_allow_tables_of(self, s: str) -> bool:
        return s == self._st[0]

    def route(self, s: str, t: str):
        return s, t

    def extract_values(self, s, t, sid) -> dict:
        return {}


def downstream_table(conn, schema: str, table: str) -> SourceTable | None:
    """The downstream table with its key (PK, else NOT NULL unique key, else none), or None."""
    got = discover(conn, "", _OneTable(schema, table), within=(schema, table))
    return got[0] if got else None


def defaults(conn, schema: str, table: str) -> dict:
    """``{column: default as text}`` of a downstream table (None: no default, or NULL)."""
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, COLUMN_DEFAULT FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (schema, table))
        found = {}
        for name, default in cur.fetchall():
            d = None if default is None else as_str(default)
            if d is not None and d.upper() == "NULL":
                d = None
            elif d is not None and len(d) >= 2 and d[0] == d[-1] == "'":
                d = d[1:-1].replace("''", "'")
            found[as_str(name)] = d
    return found


def bucket_count(rows: int) -> int:
    """About 1000 rows a bucket, between 16 and 65536: a difference costs one bucket's rows."""
    return max(16, min(65536, 1 << max(4, (max(rows, 1) // 1000).bit_length())))


def plan_task(task, up_conns: dict, down_conn, *, mode: str = "full", buckets: int | None = None) -> list[TablePlan]:
    """The tables of ``task`` to compare. ``up_conns``: source_id → connection; ``mode``:
    ``full`` compares every column, ``fast`` only the key (does each row exist)."""
    groups: dict[tuple[str, str], list[tuple]] = {}
    for inst in task.mysql_instances:
        rules = task.rules_for(inst.source_id)
        for st in discover(up_conns[inst.source_id], inst.source_id, rules):
            groups.setdefault((st.target_schema, st.target_table), []).append((rules, st))
    return [_table_plan(task, ts, tt, shards, down_conn, mode, buckets) for (ts, tt), shards in sorted(groups.items())]


def _table_plan(task, ts: str, tt: str, shards: list, down_conn, mode: str, buckets: int | None) -> TablePlan:
    down = downstream_table(down_conn, ts, tt)
    dflt = defaults(down_conn, ts, tt) if down else {}
    union: list[str] = []
    for _, st in shards:
        union += [c for c in st.columns + list(st.extract) if c not in union]
    if down is None:  # reported by the engines as a missing table; rows still counted upstream
        cols, missing, key = union, [], list(union)
    else:
        cols = [c for c in union if c in dflt] + [c for c in down.columns if c not in union]
        missing = [c for c in union if c not in dflt]
        key = list(down.key) if down.key and all(c in cols for c in down.key) else list(cols)
    n = buckets or bucket_count(sum(st.rows_estimate for _, st in shards))
    key_idx = [cols.index(c) for c in key]
    compare_idx = list(range(len(cols))) if mode == "full" else key_idx
    plan_shards, down_fns, down_table_flags = [], [], 0
    for rules, st in shards:
        up_flags, dn_flags = event_flags(rules.binlog_filter, st.schema, st.table)
        down_table_flags |= dn_flags
        exprs = [task.expression_filter[n] for n in task.instance(st.source_id).expression_filters]
        ef = expr_flags(exprs, task.case_sensitive, st.schema, st.table, st.columns, "up")
        if down is not None:
            df = expr_flags(exprs, task.case_sensitive, st.schema, st.table, cols, "down")
            if df is not None:
                down_fns.append(df)
        mapping = rules.column_mapper.plan(st.schema, st.table, st.columns)
        at = {c: i for i, c in enumerate(st.columns)}
        maker = RecordMaker(Shaper(st.columns, cols, dict(st.extract), dflt, mapping), key_idx, compare_idx, n,
                            f"{st.source_id}:{st.schema}.{st.table}", [at.get(c) for c in key], ef, up_flags)
        plan_shards.append(ShardPlan(st, maker))
    down_maker = RecordMaker(None, key_idx, compare_idx, n, "", [], AnyFlags(down_fns) if down_fns else None,
                             down_table_flags)
    return TablePlan(ts, tt, cols, key, down, down_maker, plan_shards, missing, n, mode)
