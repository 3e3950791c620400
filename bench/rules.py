"""Rules: the syncer's per-row rule chain on one core vs just iterating the rows.

Task (``TASK_YAML``, parsed with ``parse_task`` like any task file): 2 sources (mysql-01,
mysql-02) x 4 schemas (shard_1..shard_4) x 4 tables (t_1, t_2, t_3, tmp_events), with

- block-allow-list: ``do-dbs: [shard_*]`` and ``ignore-tables: shard_*.tmp_*``;
- routes: schema route shard_* -> merged, table route shard_*.t_* -> merged.orders with
  extract-table (c_table), extract-schema (c_schema) and extract-source (c_source);
- binlog event filter: Ignore ``delete`` on shard_*.t_3, and a schema-level sql-pattern rule
  (Ignore CREATE/DROP PROCEDURE: never true for a row, but walked for every row like DM does);
- column mapping: ``partition id`` on ``id`` (instance 1 or 2, schema prefix shard_, table
  prefix t_);
- expression filter: ``insert-value-expr: amount < 0`` on each of the 12 shard_N.t_M tables.

Data: ``rows`` row changes (60% insert / 30% update / 10% delete; 10% of rows on the
blocked tmp_events, the rest evenly on t_1..t_3; 5% of row images with a negative amount)
with 6 columns: id int, name str, amount Decimal, created datetime, flag int, note str
(sometimes NULL), grouped into transactions of 1-5 rows of one source, as the binlog
reader delivers them (``RowChange`` in a ``Txn``). Generated (seed 7) before anything is
timed; the interpreter's GC is frozen over them (``gc.freeze``) so collections scan the
rows a window allocates, not the whole data set.

Engines, each timed with ``time.perf_counter`` over every transaction, best of 3, pinned to
one CPU (``sched_setaffinity``, restored afterwards):

- iterate_only: walk the transactions and copy every row image (``dict(row)``), which
  touches each value: the cost of just iterating the rows.
- shardflow_rules: the syncer's own row path, ``RowPath.jobs(txn, safe=False)``, on a
  ``Syncer`` per source built without a state store and with a stand-in for the downstream
  catalog (``_Catalog``: the target table's shape comes from the rules instead of
  information_schema). So it runs the real ``_plan`` (block/allow list, route, column
  mapping plan, extract values, expression filter compile; cached per table shape) and, per
  row, binlog event filter action, expression filter, column mapping, extract columns and
  the ``RowJob`` that carries the mapped row. Each repetition starts from a freshly parsed
  task (cold rule caches, like a new worker). No shard DDL gating (no lock is active).

The result is checked: the rows kept equal what the data implies (rows not on tmp_*, not
a delete on t_3, not an insert with amount < 0), and a few mapped rows are compared with
values computed by hand (partition id bits, extract columns, target table).

``ratios``: shardflow_rules rows/s ÷ iterate_only rows/s (the share of the bare iteration
speed the rule chain keeps; 1.0 would be free).

    python -m bench.rules [--rows N] [--profile]    # one part alone, or a cProfile of it
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import logging
import os
import random
import time
from decimal import Decimal

from bench.common import machine, ratio
from dm_core.binlog.txn import RowChange, Txn
from dm_core.config.task import TaskConfig, parse_task
from dm_core.position import Position
from dm_core.sync.row_path import RowPath
from dm_core.sync.syncer import Syncer
from dm_core.target import TargetTable

log = logging.getLogger("bench.rules")

SOURCES = {"mysql-01": 1, "mysql-02": 2}       # source id -> partition id instance id
SCHEMAS = [f"shard_{i}" for i in range(1, 5)]
TABLES = ["t_1", "t_2", "t_3", "tmp_events"]
TABLE_WEIGHTS = [30, 30, 30, 10]
COLUMNS = ("id", "name", "amount", "created", "flag", "note")
EXTRACT_COLUMNS = ("c_table", "c_schema", "c_source")
TARGET = ("merged", "orders")
REPEAT = 3
SPOT_CHECK_TXNS = 5000          # per source: each of their rows alone, dropped or mapped as expected
SEED = 7

_EXPR_RULES = [f"neg_amount_{s}_{t}" for s in SCHEMAS for t in TABLES if t.startswith("t_")]

TASK_YAML = """\
name: bench_rules
task-mode: incremental
shard-mode: pessimistic
target-database: {host: 127.0.0.1, port: 4000, user: root, password: ""}

mysql-instances:
""" + "".join(f"""\
  - source-id: {sid}
    meta: {{binlog-name: mysql-bin.000001, binlog-pos: 4}}
    block-allow-list: shards
    route-rules: [merge-schema, merge-table]
    filter-rules: [keep-t3-rows, no-procedures]
    column-mapping-rules: [partition-id-{n}]
    expression-filters: [{", ".join(_EXPR_RULES)}]
""" for sid, n in SOURCES.items()) + """
block-allow-list:
  shards:
    do-dbs: ["shard_*"]
    ignore-tables:
      - db-name: "shard_*"
        tbl-name: "tmp_*"

routes:
  merge-schema:
    schema-pattern: "shard_*"
    target-schema: "merged"
  merge-table:
    schema-pattern: "shard_*"
    table-pattern: "t_*"
    target-schema: "merged"
    target-table: "orders"
    extract-table: {table-regexp: "t_(.*)", target-column: "c_table"}
    extract-schema: {schema-regexp: "shard_(.*)", target-column: "c_schema"}
    extract-source: {source-regexp: "mysql-(.*)", target-column: "c_source"}

filters:
  keep-t3-rows:
    schema-pattern: "shard_*"
    table-pattern: "t_3"
    events: ["delete"]
    action: Ignore
  no-procedures:
    schema-pattern: "shard_*"
    sql-pattern: ["^DROP\\\\s+PROCEDURE", "^CREATE\\\\s+PROCEDURE"]
    action: Ignore

column-mappings:
""" + "".join(f"""\
  partition-id-{n}:
    schema-pattern: "shard_*"
    table-pattern: "t_*"
    expression: "partition id"
    source-column: "id"
    target-column: "id"
    arguments: ["{n}", "shard_", "t_"]
""" for n in SOURCES.values()) + """
expression-filter:
""" + "".join(f"""\
  neg_amount_{s}_{t}:
    schema: "{s}"
    table: "{t}"
    insert-value-expr: "amount < 0"
""" for s in SCHEMAS for t in TABLES if t.startswith("t_"))


def parse() -> TaskConfig:
    return parse_task(TASK_YAML, "<bench>")


# ---- data ---------------------------------------------------------------------------------
def generate(rows: int, seed: int = SEED) -> dict[str, list[Txn]]:
    """``rows`` row changes as transactions per source id (deterministic for a seed).

    Values come from small pools (amounts, timestamps, notes) so 500k rows stay a few
    hundred MB; an UPDATE's new image shares the unchanged values with the old one.
    """
    rng = random.Random(seed)
    base = datetime.datetime(2024, 1, 1)
    created_pool = [base + datetime.timedelta(seconds=rng.randrange(86400 * 365), microseconds=rng.randrange(10**6))
                    for _ in range(4096)]
    amount_pool = [Decimal(rng.randrange(1, 10**7)) / 100 for _ in range(4096)]
    negative_pool = [-a for a in amount_pool[:512]]
    note_pool = [None] + [f"note {i}: " + "x" * rng.randrange(0, 40) for i in range(255)]
    tables = [(sid, s, t) for sid in SOURCES for s in SCHEMAS for t in TABLES]
    next_id = {k: 1 for k in tables}
    out: dict[str, list[Txn]] = {sid: [] for sid in SOURCES}
    pos = {sid: 4 for sid in SOURCES}
    sids = list(SOURCES)

    def amount():
        return rng.choice(negative_pool) if rng.random() < 0.05 else rng.choice(amount_pool)

    def image(i: int) -> dict:
        return {"id": i, "name": f"customer-{i}", "amount": amount(), "created": rng.choice(created_pool),
                "flag": rng.randrange(2), "note": rng.choice(note_pool)}

    made = 0
    while made < rows:
        sid = rng.choice(sids)
        changes = []
        for _ in range(min(rng.randint(1, 5), rows - made)):
            schema, table = rng.choice(SCHEMAS), rng.choices(TABLES, TABLE_WEIGHTS)[0]
            key = (sid, schema, table)
            r = rng.random()
            if r < 0.6 or next_id[key] == 1:
                i = next_id[key]
                next_id[key] += 1
                changes.append(RowChange("insert", schema, table, None, image(i)))
            elif r < 0.9:
                before = image(rng.randrange(1, next_id[key]))
                after = {**before, "amount": amount(), "flag": 1 - before["flag"], "note": rng.choice(note_pool)}
                changes.append(RowChange("update", schema, table, before, after))
            else:
                changes.append(RowChange("delete", schema, table, image(rng.randrange(1, next_id[key])), None))
        pos[sid] += 100 * len(changes)
        out[sid].append(Txn(Position("mysql-bin.000001", pos[sid]), changes, timestamp=1_700_000_000 + made))
        made += len(changes)
    return out


def expected(data: dict[str, list[Txn]]) -> dict:
    """What the task's rules must do to ``data``, worked out from the rows themselves."""
    n = {"rows": 0, "insert": 0, "update": 0, "delete": 0, "block_allow": 0, "binlog_filter": 0,
         "expression_filter": 0, "kept": 0}
    for txns in data.values():
        for txn in txns:
            for ch in txn.rows:
                n["rows"] += 1
                n[ch.op] += 1
                if ch.table.startswith("tmp_"):
                    n["block_allow"] += 1
                elif ch.op == "delete" and ch.table == "t_3":
                    n["binlog_filter"] += 1
                elif ch.op == "insert" and ch.after["amount"] < 0:
                    n["expression_filter"] += 1
                else:
                    n["kept"] += 1
    n["filtered"] = n["rows"] - n["kept"]
    return n


# ---- the syncer without servers -------------------------------------------------------------
class _Catalog:
    """Stands in for ``TargetCatalog``: the merged target's shape, from the rules, no query."""

    def __init__(self, rules):
        self.rules = rules
        self._cache: dict[tuple[str, str], TargetTable] = {}

    def get(self, schema: str, table: str) -> TargetTable:
        k = (schema.lower(), table.lower())
        got = self._cache.get(k)
        if got is None:
            extra = tuple(self.rules.router.extract_columns("shard_1", "t_1")) if k == TARGET else ()
            got = self._cache[k] = TargetTable(schema, table, COLUMNS + extra, ("id",), True, True)
        return got

    def forget(self, schema: str, table: str) -> None:
        self._cache.pop((schema.lower(), table.lower()), None)


def syncers(task: TaskConfig) -> dict[str, RowPath]:
    """The row path of each source's syncer (dm_core/sync/row_path.py), with a catalog that
    needs no database (no state store either)."""
    out = {}
    for sid in SOURCES:
        rows = Syncer(task, sid, store=None).rows
        rows.use_catalog(_Catalog(rows.rules))
        out[sid] = rows
    return out


# ---- engines --------------------------------------------------------------------------------
def iterate_only(data: dict[str, list[Txn]]) -> int:
    """Copy every row image: the floor under any per-row work. Returns the row changes seen."""
    n = 0
    for txns in data.values():
        for txn in txns:
            for ch in txn.rows:
                if ch.before is not None:
                    dict(ch.before)
                if ch.after is not None:
                    dict(ch.after)
                n += 1
    return n


def shardflow_rules(data: dict[str, list[Txn]], by_source: dict[str, RowPath]) -> int:
    """The syncer's row path over every transaction. Returns the row jobs produced (rows kept)."""
    kept = 0
    for sid, txns in data.items():
        jobs = by_source[sid].jobs
        for txn in txns:
            kept += len(jobs(txn, False))
    return kept


def build_plans(by_source: dict[str, RowPath]) -> int:
    """``RowPath.plan`` for every table of every source, on cold caches. Returns the plans built."""
    n = 0
    for sid, s in by_source.items():
        for schema in SCHEMAS:
            for table in TABLES:
                s.plan(RowChange("insert", schema, table, None, dict.fromkeys(COLUMNS)))
                n += 1
    return n


@contextlib.contextmanager
def one_core():
    """Pin this process to one CPU for the block (restored afterwards: children inherit it)."""
    if not hasattr(os, "sched_setaffinity"):
        yield None
        return
    before = os.sched_getaffinity(0)
    cpu = max(before)
    os.sched_setaffinity(0, {cpu})
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, before)


def _best(fn, prepare=None) -> tuple[float, object]:
    """Best wall time of ``REPEAT`` runs of ``fn(*prepare())`` (``prepare`` untimed)."""
    best, result = None, None
    for _ in range(REPEAT):
        args = prepare() if prepare else ()
        gc.collect()
        t0 = time.perf_counter()
        result = fn(*args)
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    return best, result


# ---- correctness ----------------------------------------------------------------------------
def _pid(source_id: str, schema: str, table: str, i: int) -> int:
    return SOURCES[source_id] << 59 | int(schema.rsplit("_", 1)[1]) << 52 | int(table.rsplit("_", 1)[1]) << 44 | i


def check(data: dict[str, list[Txn]]) -> dict:
    """Run every row once more (untimed) and compare with ``expected``; then each row of the first
    ``SPOT_CHECK_TXNS`` transactions of a source alone: dropped when the data says so, and the
    first insert and update compared with their mapped images worked out by hand."""
    want = expected(data)
    by_source = syncers(parse())
    kept = shardflow_rules(data, by_source)
    assert kept == want["kept"], f"rules kept {kept} rows, the data implies {want['kept']}"
    seen = {"insert": False, "update": False, "negative_insert": False, "t3_delete": False, "blocked": False}
    for sid, txns in data.items():
        s = by_source[sid]
        for txn in txns[:SPOT_CHECK_TXNS]:
            for ch in txn.rows:
                jobs = s.jobs(Txn(txn.end, [ch]), False)
                if ch.table.startswith("tmp_"):
                    assert jobs == [], ch
                    seen["blocked"] = True
                elif ch.op == "delete" and ch.table == "t_3":
                    assert jobs == [], ch
                    seen["t3_delete"] = True
                elif ch.op == "insert" and ch.after["amount"] < 0:
                    assert jobs == [], ch
                    seen["negative_insert"] = True
                elif ch.op in ("insert", "update") and not seen[ch.op]:
                    (job,) = jobs
                    assert (job.op, job.target.schema, job.target.table) == (ch.op, *TARGET), job
                    extract = {"c_table": ch.table[2:], "c_schema": ch.schema[6:], "c_source": sid[6:]}
                    for img, got in ((ch.before, job.before), (ch.after, job.after)):
                        if img is None:
                            assert got is None
                            continue
                        assert got == {**img, "id": _pid(sid, ch.schema, ch.table, img["id"]), **extract}, (img, got)
                        assert got["id"] >> 44 == _pid(sid, ch.schema, ch.table, 0) >> 44
                    seen[ch.op] = True
    assert all(seen.values()), f"data too small to check every rule: {seen}"
    return want


# ---- the benchmark --------------------------------------------------------------------------
def run(rows: int) -> dict:
    log.info("--- rules: generating %s row changes", f"{rows:,}")
    data = generate(rows)
    want = check(data)
    gc.collect()
    gc.freeze()
    try:
        with one_core() as cpu:
            log.info("--- iterate_only")
            it_s, it_n = _best(iterate_only, lambda: (data,))
            plan_s, plans = _best(build_plans, lambda: (syncers(parse()),))
            log.info("--- shardflow_rules")
            sf_s, kept = _best(shardflow_rules, lambda: (data, syncers(parse())))
    finally:
        gc.unfreeze()
    assert it_n == want["rows"] and kept == want["kept"], (it_n, kept, want)
    iterate = {"seconds": round(it_s, 4), "rows_per_s": round(rows / it_s, 1)}
    rules = {"seconds": round(sf_s, 4), "rows_per_s": round(rows / sf_s, 1), "kept": kept,
             "filtered": rows - kept, "rows_ok": True,
             "filtered_by": {k: want[k] for k in ("block_allow", "binlog_filter", "expression_filter")}}
    n_txns = sum(len(t) for t in data.values())
    return {
        "data": {"rows": rows, "transactions": n_txns, "sources": len(SOURCES),
                 "tables": len(SOURCES) * len(SCHEMAS) * len(TABLES),
                 "layout": f"{len(SOURCES)} sources x {len(SCHEMAS)} schemas x {len(TABLES)} tables",
                 "ops": {k: want[k] for k in ("insert", "update", "delete")}, "cpu": cpu, "repeat": REPEAT,
                 "plans": plans, "plan_seconds": round(plan_s, 5)},
        "results": {"iterate_only": iterate, "shardflow_rules": rules},
        "ratios": {"vs_iterate_only": ratio(rules["rows_per_s"], iterate["rows_per_s"])},
        "machine": machine(),
    }


def _main(argv=None) -> int:
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m bench.rules", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--profile", action="store_true", help="cProfile one shardflow_rules pass (top 15 by tottime)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[bench] %(message)s")
    if not args.profile:
        print(json.dumps(run(args.rows), indent=2, default=str))
        return 0
    import cProfile
    import pstats

    data = generate(args.rows)
    by_source = syncers(parse())
    prof = cProfile.Profile()
    prof.runcall(shardflow_rules, data, by_source)
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
