"""Small tables in one pass: tables that fit in one chunk each, copied by a few Spark jobs.

Why: a table of the full load costs fixed work however few rows it has -- its plan and
progress rows in the state store, connections to read its shape and build its query, one
Spark job, two connections on the executor. Measured on 2 cores (other work running): 200
tables of 20 rows took 29 s, 146 ms a table. Sharded fleets often have hundreds of small
tables beside a few big ones, and DM's mydumper/myloader take them in a second.

Protocol; each table still lands exactly once, as a one-chunk table of loader.py does:

1. driver, in a thread one batch ahead of the copies (``_ahead``), one connection per source,
   one downstream, one to the state store: ``prepare`` takes each table of the batch whose
   estimated rows are under half a chunk, and its persisted plan
   (plan_store.py; computed from the real rows, so a wrong estimate only sends a table back
   to the per-table path); a table whose plan has one chunk is small. Its chunk is skipped
   when recorded, adopted when its marker is committed downstream (chunk_writer.py), else
   copied: ``specs`` reads its shape (extract.chunk_shape, the columns
   of the batch's tables in one query per side) and builds its line query (text_rows.py).
2. ``copy_specs`` (on executors: a Spark job per batch of specs, its partitions spread
   over the cores, each partition's tables on THREADS_PER_TASK threads): one upstream
   connection per source and one downstream connection per thread; each table is one
   ``LOAD DATA`` plus its marker, one transaction
   (load_data.load_chunk, which also takes one of a merged table's write turns). A failing table
   is rolled back and reported, the thread goes on with the next one.
3. ``record`` (driver, after each batch): every landed table's chunk is recorded
   (``full_chunk``), with the loader's fault points around it. A table that failed in the
   batch (DDL changed it while it was read, a deadlock) goes back to the per-table path,
   which reads its shape again and retries as loader.py does.

``load`` runs these steps for the Spark job, batch after batch.

A kill at any step converges: before a table's commit nothing of it is downstream; after
it, its marker is, and the rerun adopts it in step 1 instead of loading it again.
Tables that need the Spark JDBC path (FLOAT/DOUBLE, spatial; text_rows.py) or another
write mode stay on the per-table path.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from dm_core import faults
from dm_core.db import Endpoint, connect
from dm_core.full import chunk_writer, extract, snapshot_read, text_rows, user_targets
from dm_core.full.extract import partition_id_columns
from dm_core.full.chunking import plan_chunks_many
from dm_core.full.loader import TableResult, binlog_end
from dm_core.full.plan_store import PlanStore, epoch_of

log = logging.getLogger("shardflow.full")

BATCH_PER_CORE = 128  # tables per executor task of one Spark job: progress is recorded per job
THREADS_PER_TASK = 2  # tables copied at once by one executor task (copy_specs)


@dataclass
class Spec:
    """One small table's copy, as an executor needs it (no connection, no task object)."""

    name: str              # source:schema.table, as TableResult names it
    source_id: str
    schema: str
    table: str
    up_ep: Endpoint
    query: str             # the text path's line query (text_rows.line_query)
    sql: str               # the LOAD DATA statement (load_data.statement, enclosed)
    plan_id: str
    task: str
    meta: str              # the downstream meta schema (markers)
    drifted: bool          # lenient writes (extract.ChunkShape)
    duplicates_fail: bool  # on-duplicate-logical error
    turn: tuple[str, ...] | None = None
    snapshot: bool = False  # read at a recorded binlog position (snapshot_read.py)


@dataclass
class Prepared:
    todo: list = field(default_factory=list)         # (st, ep, chunk rows, plan_id): small, to copy
    done: list = field(default_factory=list)         # TableResult of tables recorded or adopted
    rest: list = field(default_factory=list)         # (st, ep, chunk rows) for the per-table path


def prepare(task, store, tables, target_ep) -> Prepared:
    """Step 1's bookkeeping over ``tables`` [(st, up endpoint, chunk rows)] of one source:
    which are small, which of those are recorded or adopted, which remain to copy."""
    out = Prepared()
    candidates = [(st, ep, n) for st, ep, n in tables if st.rows_estimate * 2 <= n]
    out.rest = [(st, ep, n) for st, ep, n in tables if st.rows_estimate * 2 > n]
    if not candidates:
        return out
    ups: dict = {}
    down = connect(target_ep, downstream=True)
    try:
        with PlanStore(store.dsn) as plans:
            epoch = epoch_of(store.source_state(task.name, candidates[0][0].source_id))
            done = store.done_chunks_of(task.name, candidates[0][0].source_id)
            adoptable = []
            rows_of = {(st.schema, st.table): (ep, n) for st, ep, n in candidates}

            def compute_many(sts):   # one source: one endpoint
                ep = rows_of[sts[0].schema, sts[0].table][0]
                up = ups.get(_key(ep)) or ups.setdefault(_key(ep), connect(ep))
                return plan_chunks_many(up, [(st, rows_of[st.schema, st.table][1]) for st in sts])

            got = plans.get_or_create_many(task.name, candidates[0][0].source_id, [c[0] for c in candidates], epoch,
                                           compute_many, lambda st: bool(done.get((st.schema, st.table))))
            for st, ep, n in candidates:
                recorded = done.get((st.schema, st.table), set())
                if got[st.schema, st.table] is None:
                    out.rest.append((st, ep, n))   # a plan of another snapshot: the per-table path says so
                    continue
                plan_id, chunks = got[st.schema, st.table]
                if len(chunks) != 1:
                    out.rest.append((st, ep, n))
                elif recorded:
                    out.done.append(TableResult(st.name, plan_id=plan_id, chunks=1, skipped=[0]))
                else:
                    adoptable.append((st, ep, n, plan_id))
            marked = chunk_writer.marked_chunks_of(down, task.meta_schema, [a[3] for a in adoptable])
            by = binlog_end(task, candidates[0][1]) if any(0 in marked.get(a[3], {}) for a in adoptable) else None
            adopted = []
            for st, ep, n, plan_id in adoptable:
                if 0 in marked.get(plan_id, {}):
                    adopted.append((st.schema, st.table, 0, marked[plan_id][0]))
                    out.done.append(TableResult(st.name, plan_id=plan_id, chunks=1, adopted=[0]))
                else:
                    out.todo.append((st, ep, n, plan_id))
            if adopted:   # a batch committed downstream but not recorded: its tables in one transaction
                store.mark_chunks_done(task.name, candidates[0][0].source_id, adopted, read_by=by)
    finally:
        down.close()
        for c in ups.values():
            c.close()
    return out


def specs(task, todo, target_ep, *, verb: str, turn_of) -> tuple[list, list]:
    """Step 1's reading, just before a batch is copied: each table's shape now and line query.
    Returns (specs, tables for the per-table path: the JDBC path, a dropped table, DM's
    partition-id error). ``turn_of(schema, table)``: the target's write turns or None; ``verb``:
    the SQL verb of on-duplicate-logical (chunk_writer.verb)."""
    from dm_core.full import load_data

    out, rest = [], []
    if not todo:
        return out, rest
    ups: dict = {}
    down = connect(target_ep, downstream=True)
    try:
        by_ep: dict = {}
        for st, ep, n, plan_id in todo:
            by_ep.setdefault(_key(ep), (ep, []))[1].append(st)
        up_cols = {}
        for k, (ep, sts) in by_ep.items():
            ups[k] = connect(ep)
            up_cols.update(extract.columns_of_tables(ups[k], [(st.schema, st.table) for st in sts]))
        down_cols = extract.columns_of_tables(down, [(st.target_schema, st.target_table) for st, *_ in todo])
        user_made = user_targets.of_task(down, task.meta_schema, task.name)
        for st, ep, n, plan_id in todo:
            up = ups[_key(ep)]
            known = (up_cols[st.schema, st.table], down_cols[st.target_schema, st.target_table])
            shape = extract.chunk_shape(up, down, st, partition_id_columns(task, st), known=known,
                                        user_made=(st.target_schema.lower(), st.target_table.lower()) in user_made)
            now = shape.table
            query = None
            if now is not None:
                plan = task.rules_for(st.source_id).column_mapper.plan(now.schema, now.table, now.columns)
                transforms = plan.transforms if plan else []
                if not text_rows.partition_id_violation(up, now, transforms):
                    dump_where = task.instance(st.source_id).mydumper.where
                    query = text_rows.line_query(now, transforms, up.literal, "1=1", dump_where)
            if query is None:
                rest.append((st, ep, n))
                continue
            columns = text_rows.columns_of(now)
            types = dict(zip(now.columns, now.column_types or []))
            sql = load_data.statement(st.target_schema, st.target_table, columns, verb, types, enclosed=True,
                                      charset="binary" if shape.same_bytes else "utf8mb4")
            out.append(Spec(st.name, st.source_id, st.schema, st.table, ep, query, sql, plan_id, task.name,
                            task.meta_schema, shape.drifted, verb == "INSERT", turn_of(st.target_schema, st.target_table),
                            snapshot_read.wanted(st, snapshot_read.WHOLE_TABLE)))
    finally:
        down.close()
        for c in ups.values():
            c.close()
    return out, rest


def _key(ep: Endpoint) -> tuple:
    return ep.host, int(ep.port), ep.user


def batches(specs: list, cores: int) -> list[list]:
    """The tables to copy in groups of ``BATCH_PER_CORE`` per core: one Spark job each.

    >>> [len(b) for b in batches(list(range(150)), 2)]
    [150]
    """
    size = max(1, BATCH_PER_CORE * max(1, cores))
    return [specs[i:i + size] for i in range(0, len(specs), size)]


def copy_specs(target_ep: Endpoint, threads: int = THREADS_PER_TASK):
    """Step 2: the ``mapPartitions`` function of one batch (runs on an executor): its specs
    on ``threads`` threads, each with connections of its own. Why threads: a small table's
    copy is mostly waiting for the two servers (a query, a LOAD DATA, a commit)."""

    def run(specs):
        from concurrent.futures import ThreadPoolExecutor

        specs = list(specs)
        if threads <= 1 or len(specs) < 2:
            yield from _copy(specs, target_ep)
            return
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="small-tables") as ex:
            for got in ex.map(lambda part: list(_copy(part, target_ep)), [specs[i::threads] for i in range(threads)]):
                yield from got

    return run


def _copy(specs, target_ep: Endpoint):
    """Copy ``specs`` one after another on one upstream and one downstream connection."""
    from dm_core.db import connect_native
    from dm_core.full import load_data
    from dm_core.full.extract import lenient

    ups: dict = {}
    downs: dict = {}   # drifted? -> connection (a lenient session stays lenient)

    def down_conn(drifted: bool):
        if drifted not in downs:
            c = connect_native(target_ep, local_infile=True)
            c.autocommit(False)
            if drifted:
                lenient(c)
            downs[drifted] = c
        return downs[drifted]

    try:
        for s in specs:
            t0 = time.monotonic()
            key = _key(s.up_ep)
            try:
                faults.hit("full.small_table")
                if key not in ups:
                    ups[key] = connect_native(s.up_ep, downstream=False)
                conn = down_conn(s.drifted)

                snap = {} if s.snapshot else None

                def marker(rows):
                    faults.hit("full.before_chunk_merge")
                    with conn.cursor() as c:
                        chunk_writer.insert_marker(c, s.meta, chunk_writer.Mark(s.plan_id, 0, s.task, s.source_id,
                                                                                 f"{s.schema}.{s.table}"), rows, snap)

                stats = load_data.load_chunk(conn, s.sql, text_rows.read_lines(ups[key], s.query, snap), marker,
                                             encoder=text_rows.as_text,
                                             duplicates_fail=s.duplicates_fail, turn=s.turn, spool=True)
                yield {"name": s.name, "rows": stats.rows, "seconds": time.monotonic() - t0, "error": None}
            except Exception as e:  # this table goes back to the per-table path; the others go on
                for pool, k in ((ups, key), (downs, s.drifted)):
                    bad = pool.pop(k, None)  # a connection left mid-result or mid-statement is not reused
                    if bad is not None:
                        try:
                            bad.close()
                        except Exception:
                            pass
                yield {"name": s.name, "rows": 0, "seconds": time.monotonic() - t0, "error": f"{type(e).__name__}: {e}"}
    finally:
        for c in [*ups.values(), *downs.values()]:
            try:
                c.close()
            except Exception:
                pass


def record(task, store, specs: list, results: list[dict]) -> tuple[list[TableResult], list[Spec]]:
    """Step 3: record the tables a batch landed, one state-store transaction per source (500
    tables, one transaction each, took 0.5-1 s); returns their results and the specs that
    failed (for the per-table path)."""
    by_name = {s.name: s for s in specs}
    failed: list[Spec] = []
    ok: dict[str, list] = {}   # source id -> [(spec, result)] landed downstream
    for r in results:
        s = by_name[r["name"]]
        if r["error"]:
            log.warning("%s: the one-pass copy of small tables failed for it (%s); loading it on its own",
                        s.name, r["error"])
            failed.append(s)
            continue
        faults.hit("full.after_chunk_merge")
        ok.setdefault(s.source_id, []).append((s, r))
    landed = []
    for sid, group in ok.items():
        end = binlog_end(task, group[0][0].up_ep)   # the upstream's binlog end once the batch was committed
        store.mark_chunks_done(task.name, sid, [(s.schema, s.table, 0, r["rows"]) for s, r in group], read_by=end)
        for s, r in group:
            landed.append(TableResult(s.name, plan_id=s.plan_id, chunks=1, loaded=[0], rows=r["rows"]))
            log.info("%s chunk 0: %d rows loaded in %.2fs (in the one pass of small tables)", s.name, r["rows"],
                     r.get("seconds") or 0.0)
            faults.hit("full.after_chunk_write")
    missing = set(by_name) - {r["name"] for r in results}
    failed += [by_name[n] for n in sorted(missing)]   # cannot happen (every spec yields); never lose one
    return landed, failed


def _ahead(groups: list, work):
    """``work(group)`` of each group, the next one done in a thread while the caller copies this one.

    Why: planning a batch (one ``MIN/MAX/COUNT`` per table upstream, its plan rows in the state
    store) and reading its shapes (queries to both servers) took about 2.5 s per 256 tables, and
    copying it is a Spark job of about the same length; one after the other they were a third of
    the pass at 10,000 tables. A batch is now planned and shaped one batch (a second or two)
    before its copy rather than just before: a table altered in between is met as one altered
    just after its shape was read, as before (a query that no longer fits fails the table's
    copy, and the per-table path loads it)."""
    from concurrent.futures import ThreadPoolExecutor

    if not groups:
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="small-tables-ahead") as ahead:
        nxt = ahead.submit(work, groups[0])
        for i in range(len(groups)):
            got = nxt.result()
            if i + 1 < len(groups):
                nxt = ahead.submit(work, groups[i + 1])
            yield got


def load(spark, task, store, per_source, target_ep, settings):
    """The Spark job's pass over the tables that fit in one chunk, on the job's Spark session
    (``spark``) with its land.LoadSettings: their results, and ``per_source`` ((source id,
    pool-size, [(table, endpoint, chunk rows)])) with only the tables left for the per-table
    path (loader.py)."""
    from dm_core.state.store import StateStore

    if settings.write_mode != "load" or not settings.load_data_ok or settings.read != "auto":
        return [], per_source
    results, rest = [], []
    t0 = time.monotonic()
    cores = spark.sparkContext.defaultParallelism
    copied = jobs = 0
    clock = settings.stages.timed
    # two state-store sessions: the ahead thread plans while this one records
    with StateStore(store.dsn) as own, StateStore(store.dsn) as planner:
        for sid, pool, tables in per_source:
            left = [t for t in tables if settings.tidb and not t[0].key]  # TiDB, keyless: the staging path
            verb = chunk_writer.verb(task.instance(sid).loader.on_duplicate_logical)

            def plan_and_shape(group, verb=verb):
                with clock("small tables: plan (beside the copies)"):
                    prepared = prepare(task, planner, group, target_ep)
                with clock("small tables: shape, query (beside the copies)"):
                    batch, other = specs(task, prepared.todo, target_ep, verb=verb,
                                         turn_of=lambda schema, table: settings.turns.of(target_ep, schema, table))
                return prepared, batch, other

            mine = [t for t in tables if not (settings.tidb and not t[0].key)]
            for prepared, batch, other in _ahead(batches(mine, cores), plan_and_shape):
                results += prepared.done
                left += prepared.rest + other
                if not batch:
                    continue
                by_name = {st.name: (st, ep, n) for st, ep, n, _ in prepared.todo}
                settings.check_cancelled()
                spark.sparkContext.setJobDescription(f"{len(batch)} small tables of {sid}")
                t1 = time.monotonic()
                with clock("small tables: copy (Spark jobs)"):
                    got = spark.sparkContext.parallelize(batch, min(len(batch), cores)).mapPartitions(
                        copy_specs(target_ep)).collect()
                with clock("small tables: record"):
                    landed, failed = record(task, own, batch, got)
                log.info("%s: %d small tables copied in %.2fs (%d rows; executors %.2fs)", sid, len(landed),
                         time.monotonic() - t1, sum(r["rows"] for r in got), sum(r["seconds"] for r in got))
                results += landed
                left += [by_name[s.name] for s in failed]
                copied += len(landed)
                jobs += 1
            rest.append((sid, pool, left))
    if results:
        log.info("%d small tables copied in one pass (%d Spark jobs), %d recorded before, in %.1fs; %d tables load "
                 "chunk by chunk", copied, jobs, len(results) - copied, time.monotonic() - t0,
                 sum(len(t) for _, _, t in rest))
    return results, rest
