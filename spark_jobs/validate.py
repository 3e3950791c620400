"""spark-submit entry point of the scheduled validation (DAG ``dm_<task>_validate``).

For every target table of the task (dm_core/validate/plan.py), in parallel ``worker-count``
tables at a time:

1. every upstream shard and the downstream table are split into key chunks
   (dm_core/full/chunking.py, as the full load does) and read by Spark's JDBC reader, one
   partition per chunk, all chunks in parallel;
2. executors turn each row into a record (dm_core/validate/rows.py: route, column mapping,
   extract columns, filters' flags, key, digest) and Spark sums the digests per key-hash
   bucket on each side;
3. the driver compares the bucket checksums; for buckets that differ it collects their
   records, and dm_core/validate/check.py names, filters and re-checks the differing rows
   against replication in flight (recheck.py).

The result (result.py) goes to the state store as the run ``--run-id``: marked ``running``
at the start, rewritten with the tables done so far every ``meta-flush-interval``, and
final at the end; the DAG's next task publishes it (XCom, task log, Variable). Exit code
1 only when the validation itself failed; differences are a result, not a failure here.

Arguments name the task; passwords never appear on the command line: sources and the target
come from the state store (SHARDFLOW_STATE_DSN in the environment).
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

os.environ["TZ"] = "UTC"  # Python datetimes from Spark use the process zone: keep wall clocks
time.tzset()
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PROJECT_ROOT)

from spark_jobs.spark_session import create_session, stop_quickly  # noqa: E402 (after the path above)
log = logging.getLogger("shardflow.validate")
_MASK = (1 << 64) - 1


def _parse_arguments(argv=None):
    p = argparse.ArgumentParser(description="shardflow validation (Spark)")
    p.add_argument("--task", required=True, help="task name (its file is registered in the state store)")
    p.add_argument("--run-id", required=True, help="id the result is stored under (the DAG run id)")
    p.add_argument("--mode", choices=("full", "fast", ""), default="", help="override the task file's mode")
    p.add_argument("--tables", default="", help="only these target tables (schema.table, comma separated): the "
                   "re-sync's comparison; empty: every table of the task")
    p.add_argument("--chunk-rows", type=int, default=int(os.environ.get("SHARDFLOW_VALIDATE_CHUNK_ROWS", 200_000)),
                   help="rows per key chunk read by one Spark task")
    return p.parse_args(argv)


def _jdbc_url(ep) -> str:
    # jdbc:mysql:// so Spark's MySQL dialect quotes identifiers with backticks (FIELD-NOTES).
    return (f"jdbc:mysql://{ep.host}:{ep.port}/?tinyInt1isBit=false&useUnicode=true&characterEncoding=utf8"
            "&sessionVariables=time_zone='+00:00'&useCursorFetch=true")


def _records(maker):
    """Executor side: Spark rows of one chunk → validation records."""

    def fn(rows):
        for r in rows:
            yield maker.record(tuple(r))

    return fn


def _read(spark, ep, st, chunks, maker, columns=None):
    """One RDD of records over all chunks of one table (a partition per chunk)."""
    from dm_core.full.extract import chunk_query

    if columns is not None:  # the downstream: read the target columns in plan order, typed safely
        types = dict(zip(st.columns, st.column_types))
        st = type(st)(**{**vars(st), "columns": list(columns), "column_types": [types.get(c, "") for c in columns]})
    props = {"user": ep.user, "password": ep.password, "driver": "org.mariadb.jdbc.Driver", "fetchsize": "10000"}
    if not chunks:
        return spark.sparkContext.emptyRDD()
    # one DataFrame, one partition per chunk predicate: the schema is resolved once per table
    df = spark.read.jdbc(_jdbc_url(ep), chunk_query(st, "1=1"), predicates=[c.where for c in chunks],
                         properties=props)
    return df.rdd.mapPartitions(_records(maker))


def _tally(rdd):
    from dm_core.validate.diff import Tally

    t = Tally()
    agg = rdd.map(lambda r: (r.bucket, (1, r.digest))) \
        .reduceByKey(lambda a, b: (a[0] + b[0], (a[1] + b[1]) & _MASK)).collect()
    for b, (n, s) in agg:
        t.merge(b, n, s)
    return t


def _validate_table(spark, task, store_dsn, plan, chunks, settings):
    """One target table on Spark; connections for the re-check are the thread's own."""
    from pyspark import StorageLevel

    from dm_core.db import connect
    from dm_core.sources import source_endpoint, target_endpoint
    from dm_core.state.store import StateStore
    from dm_core.validate.check import RecheckContext, check_table
    from dm_core.validate.recheck import SyncWaiter

    t0 = time.monotonic()
    spark.sparkContext.setJobDescription(f"validate {plan.name}")
    with StateStore(store_dsn) as store:
        eps = {i.source_id: source_endpoint(store, i.source_id) for i in task.mysql_instances}
        down_ep = target_endpoint(task)
        ups = [_read(spark, eps[s.table.source_id], s.table, chunks[s.origin], s.maker) for s in plan.shards]
        up = spark.sparkContext.union(ups).persist(StorageLevel.MEMORY_AND_DISK)
        dn = (_read(spark, down_ep, plan.down, chunks[""], plan.down_maker, plan.columns) if plan.down
              else spark.sparkContext.emptyRDD()).persist(StorageLevel.MEMORY_AND_DISK)
        conns = {sid: connect(ep) for sid, ep in eps.items()}
        down = connect(down_ep, downstream=True)
        try:
            up_t, dn_t = _tally(up), _tally(dn)

            def sample(buckets, limit):
                keep = spark.sparkContext.broadcast(set(buckets))
                return (up.filter(lambda r: r.bucket in keep.value).take(limit),
                        dn.filter(lambda r: r.bucket in keep.value).take(limit))

            ctx = RecheckContext(conns, down, SyncWaiter(task, store, conns))
            n_chunks = sum(len(chunks[s.origin]) for s in plan.shards) + len(chunks.get("", []))
            return check_table(plan, up_t, dn_t, sample, ctx, settings, chunks=n_chunks, started=t0)
        finally:
            up.unpersist()
            dn.unpersist()
            for c in [*conns.values(), down]:
                c.close()


def _plan_chunks(task, store, plans, chunk_rows: int) -> dict:
    """origin ('' for the downstream) → key chunks, per table plan name."""
    from dm_core.db import connect
    from dm_core.full.chunking import plan_chunks
    from dm_core.sources import source_endpoint, target_endpoint

    conns = {i.source_id: connect(source_endpoint(store, i.source_id)) for i in task.mysql_instances}
    down = connect(target_endpoint(task), downstream=True)
    try:
        out = {}
        for p in plans:
            c = {s.origin: plan_chunks(conns[s.table.source_id], s.table, chunk_rows) for s in p.shards}
            c[""] = plan_chunks(down, p.down, chunk_rows) if p.down else []
            out[p.name] = c
        return out
    finally:
        for x in [*conns.values(), down]:
            x.close()


def _run(args) -> int:
    from dm_core.config.task import parse_task
    from dm_core.db import connect
    from dm_core.sources import source_endpoint, target_endpoint
    from dm_core.state.store import StateStore
    from dm_core.validate.compare import checkpoints
    from dm_core.validate.plan import plan_task
    from dm_core.validate.result import TableResult, ValidationResult, render
    from dm_core.validate.settings import settings_for

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    store = StateStore()
    got = store.get_task(args.task)
    if got is None:
        raise SystemExit(f"task {args.task!r} is not registered in the state store; start it with `dmctl start-task`")
    task = parse_task(got[0], f"<state store: {args.task}>")
    settings = settings_for(task)
    mode = args.mode or settings.mode
    res = ValidationResult(task.name, args.run_id, mode, "spark", dt.datetime.now(dt.timezone.utc).isoformat(),
                           checkpoints=checkpoints(store, task.name))
    store.put_validation(task.name, args.run_id, "running", res.to_dict(), finished=False)
    lock = threading.Lock()
    try:
        conns = {i.source_id: connect(source_endpoint(store, i.source_id)) for i in task.mysql_instances}
        down = connect(target_endpoint(task), downstream=True)
        try:
            plans = plan_task(task, conns, down, mode=mode)
            only = [t.strip() for t in args.tables.split(",") if t.strip()]
            if only:
                unknown = sorted(set(only) - {p.name for p in plans})
                if unknown:
                    raise ValueError(f"--tables: {', '.join(unknown)} not a target table of task {task.name}")
                plans = [p for p in plans if p.name in only]
        finally:
            for c in [*conns.values(), down]:
                c.close()
        chunks = _plan_chunks(task, store, plans, args.chunk_rows)
        spark = create_session(f"shardflow-validate-{task.name}")
        last_flush = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, settings.worker_count), thread_name_prefix="validate") as ex:
            futs = {ex.submit(_validate_table, spark, task, store.dsn, p, chunks[p.name], settings): p for p in plans}
            for f in as_completed(futs):
                p = futs[f]
                try:
                    t = f.result()
                except Exception as e:  # one table's failure is its result; the others go on
                    log.exception("validating %s failed", p.name)
                    t = TableResult(p.name, [s.origin for s in p.shards], error=f"{type(e).__name__}: {e}")
                with lock:
                    res.tables.append(t)
                log.info("%s: %s, %d upstream rows, %d differing, %.1fs", t.target, t.status.upper(), t.upstream_rows,
                         t.differing_rows(), t.seconds)
                if time.monotonic() - last_flush >= settings.meta_flush_interval:
                    store.put_validation(task.name, args.run_id, "running", res.to_dict(), finished=False)
                    last_flush = time.monotonic()
        stop_quickly(spark)
    except Exception as e:
        log.exception("validation of %s failed", task.name)
        res.error = f"{type(e).__name__}: {e}"
    res.tables.sort(key=lambda t: t.target)
    res.finished_at = dt.datetime.now(dt.timezone.utc).isoformat()
    store.put_validation(task.name, args.run_id, res.status, res.to_dict(), finished=True)
    log.info("validation of %s (run %s):\n%s", task.name, args.run_id, render(res))
    store.close()
    return 1 if res.error else 0


if __name__ == "__main__":
    sys.exit(_run(_parse_arguments()))
