"""spark-submit entry point of the full phase: read every allowed upstream table in parallel
primary-key chunks over JDBC, apply routing / column mapping / extract columns as Spark
expressions, and write the merged target tables. Each chunk is written idempotently
(REPLACE, or INSERT IGNORE for on-duplicate-logical=ignore) and recorded in the state store
only after its rows are committed downstream, so a killed job, rerun, loads only the rest.

Arguments name the task; passwords never appear on the command line: sources and the target
come from the state store (SHARDFLOW_STATE_DSN in the environment).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

os.environ["TZ"] = "UTC"  # Python datetimes from Spark use the process zone: keep wall clocks
time.tzset()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

JDBC_JAR = os.environ.get("SHARDFLOW_JDBC_JAR", "/usr/share/java/mariadb-java-client.jar")
log = logging.getLogger("shardflow.full_load")


def _parse_arguments(argv=None):
    p = argparse.ArgumentParser(description="shardflow full load (Spark)")
    p.add_argument("--task", required=True, help="task name (its file is registered in the state store)")
    p.add_argument("--chunk-rows", type=int, default=int(os.environ.get("SHARDFLOW_CHUNK_ROWS", 200_000)))
    p.add_argument("--write-batch", type=int, default=2000)
    return p.parse_args(argv)


def _create_spark_session(app: str):
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.appName(app)
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
         .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
         .config("spark.executorEnv.TZ", "UTC")
         .config("spark.scheduler.mode", "FAIR")
         .config("spark.ui.enabled", "false"))
    if "spark.jars" not in (os.environ.get("PYSPARK_SUBMIT_ARGS") or ""):
        b = b.config("spark.jars", JDBC_JAR)
    return b.getOrCreate()


def _jdbc_url(ep) -> str:
    # jdbc:mysql:// so Spark's MySQL dialect quotes identifiers with backticks (FIELD-NOTES).
    return (f"jdbc:mysql://{ep.host}:{ep.port}/?tinyInt1isBit=false&useUnicode=true&characterEncoding=utf8"
            "&sessionVariables=time_zone='+00:00'&useCursorFetch=true")


def _transformed(df, st, task):
    """Routing + column mapping + extract columns as Spark expressions."""
    from pyspark.sql import functions as F

    plan = task.rules_for(st.source_id).column_mapper.plan(st.schema, st.table, st.columns)
    cols = {c: F.col(f"`{c}`") for c in st.columns}
    for t in (plan.transforms if plan else []):
        kind = type(t).__name__
        # DM reads the source column and writes the target column (usually the same one)
        c = F.col(f"`{getattr(t, 'source_column', None) or t.column}`")
        if kind == "PartitionId":
            limit = 1 << t.id_bits
            msg = f"partition id: {st.schema}.{st.table}.{t.column} value out of range [0, {limit})"
            cols[t.column] = F.when((c < 0) | (c >= F.lit(limit)), F.raise_error(F.lit(msg))) \
                .otherwise(c.cast("long").bitwiseOR(F.lit(t.or_value)))
        elif kind == "AddPrefix":
            cols[t.column] = F.concat(F.lit(t.prefix), c.cast("string"))
        elif kind == "AddSuffix":
            cols[t.column] = F.concat(c.cast("string"), F.lit(t.suffix))
    out = [cols[c].alias(c) for c in st.columns]
    out += [F.lit(v).alias(k) for k, v in st.extract.items()]
    return df.select(*out)


def _writer(target_ep, state_dsn, task_name, st, chunk_ids, columns, verb, batch):
    """Runs on executors: write one partition (= one chunk), then record it done."""
    project_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def write(rows):
        if project_root not in sys.path:  # executors import dm_core from the project
            sys.path.insert(0, project_root)
        from pyspark import TaskContext

        from dm_core.db import connect, qi, qt
        from dm_core.state.store import StateStore

        chunk_id = chunk_ids[TaskContext.get().partitionId()]
        sql = (f"{verb} INTO {qt(st.target_schema, st.target_table)} ({', '.join(qi(c) for c in columns)}) "
               f"VALUES ({', '.join(['%s'] * len(columns))})")
        conn = connect(target_ep, autocommit=False, downstream=True)
        n = 0
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION time_zone = '+00:00'")
                buf = []
                for r in rows:
                    buf.append(tuple(bytes(v) if isinstance(v, bytearray) else v for v in r))
                    if len(buf) >= batch:
                        cur.executemany(sql, buf)
                        conn.commit()
                        n += len(buf)
                        buf = []
                if buf:
                    cur.executemany(sql, buf)
                    n += len(buf)
                conn.commit()
        finally:
            conn.close()
        with StateStore(state_dsn) as store:
            store.mark_chunk_done(task_name, st.source_id, st.schema, st.table, chunk_id, n)

    return write


def _load_table(spark, task, store, st, up_ep, target_ep, args) -> int:
    from dm_core.db import connect, qt
    from dm_core.full.discover import chunk_table
    from dm_core.state.store import StateStore

    conn = connect(up_ep)
    try:
        chunks = chunk_table(conn, st, args.chunk_rows)
    finally:
        conn.close()
    with StateStore(store.dsn) as own:  # one connection per thread: tables load concurrently
        done = own.done_chunks(task.name, st.source_id, st.schema, st.table)
    todo = [c for c in chunks if c.chunk_id not in done]
    if not todo:
        log.info("%s: all %d chunks already loaded", st.name, len(chunks))
        return 0
    spark.sparkContext.setJobDescription(f"load {st.name} ({len(todo)}/{len(chunks)} chunks)")
    df = spark.read.jdbc(
        _jdbc_url(up_ep), qt(st.schema, st.table), predicates=[c.where for c in todo],
        properties={"user": up_ep.user, "password": up_ep.password, "driver": "org.mariadb.jdbc.Driver",
                    "fetchsize": "10000"},
    )
    df = _transformed(df, st, task)
    verb = {"ignore": "INSERT IGNORE", "error": "INSERT"}.get(task.instance(st.source_id).loader.on_duplicate_logical, "REPLACE")
    df.rdd.foreachPartition(_writer(target_ep, store.dsn, task.name, st, [c.chunk_id for c in todo],
                                    df.columns, verb, args.write_batch))
    return len(todo)


def _run(args) -> int:
    from dm_core.config.task import parse_task
    from dm_core.db import connect
    from dm_core.full.discover import discover
    from dm_core.sources import source_endpoint, target_endpoint
    from dm_core.state.store import StateStore

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    store = StateStore()
    got = store.get_task(args.task)
    if got is None:
        raise SystemExit(f"task {args.task!r} is not registered in the state store; run the full DAG's prepare step first")
    task = parse_task(got[0], f"<state store: {args.task}>")
    target_ep = target_endpoint(task)
    spark = _create_spark_session(f"shardflow-full-{task.name}")
    jobs = []
    for inst in task.mysql_instances:
        ep = source_endpoint(store, inst.source_id)
        conn = connect(ep)
        try:
            tables = discover(conn, inst.source_id, task.rules_for(inst.source_id))
        finally:
            conn.close()
        jobs += [(st, ep) for st in tables]
    pool = max(1, min(4, int(task.mysql_instances[0].loader.pool_size) if task.mysql_instances else 4))
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=pool) as ex:
        futs = [ex.submit(_load_table, spark, task, store, st, ep, target_ep, args) for st, ep in jobs]
        loaded = sum(f.result() for f in futs)
    totals = store.chunk_totals(task.name)
    log.info("full load of %s done in %.1fs: %d chunks loaded now; rows per source: %s",
             task.name, time.monotonic() - t0, loaded, totals)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_run(_parse_arguments()))
