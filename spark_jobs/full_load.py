"""spark-submit entry point of the full phase: copy every allowed upstream table into the merged
target tables in key chunks, applying routing / column mapping / extract columns as Spark
expressions. Each chunk lands exactly once and is recorded after it is committed, so a
killed job, rerun, loads only the rest (dm_core/full/loader.py and chunk_writer.py say how).

Write paths (``--write-mode``): ``load`` (default) writes each row once -- Spark hands the
chunk's rows to a Python executor as Arrow batches (``mapInArrow``) which streams them into
the target with ``LOAD DATA LOCAL INFILE ... REPLACE|IGNORE`` and the chunk marker in one
transaction (dm_core/full/load_data.py). ``staging`` keeps rows in the JVM -- Spark's JDBC
writer with rewriteBatchedStatements fills a per-chunk staging table downstream, then one
server-side ``REPLACE|INSERT IGNORE|INSERT INTO target SELECT`` merges it (every row written
twice); ``rows`` ships rows to Python executors and writes them with pymysql executemany.
``load`` falls back to ``staging`` when the downstream refuses LOAD DATA LOCAL
(``local_infile`` off, as MySQL 8 ships) and, on TiDB, for keyless tables (TiDB may commit
a LOAD DATA in pieces, and only a key makes a replayed piece harmless).
The first chunk of a job pays ~4 s of JVM warm-up (JIT, codegen, driver classes).

Concurrency: ``loaders.pool-size`` of a source = how many of its tables load at once; inside
a table, chunks run ``max(1, spark cores // tables loading)`` at a time.

Arguments name the task; passwords never appear on the command line: sources and the target
come from the state store (SHARDFLOW_STATE_DSN in the environment).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
log = logging.getLogger("shardflow.full_load")


def prepare_process() -> None:
    """What the driver process needs before any job: the project importable (spark-submit puts
    only spark_jobs/ on the path) and the process zone UTC (Python datetimes from Spark use the
    process zone: keep wall clocks). Called by ``main`` and by the job host, never at import."""
    os.environ["TZ"] = "UTC"
    time.tzset()
    if PROJECT_ROOT not in sys.path:
        sys.path.insert(0, PROJECT_ROOT)


def _parse_arguments(argv=None):
    p = argparse.ArgumentParser(description="shardflow full load (Spark)")
    p.add_argument("--task", required=True, help="task name (its file is registered in the state store)")
    p.add_argument("--chunk-rows", type=int, default=None,
                   help="rows per chunk (default: the instance's mydumper `rows`, else $SHARDFLOW_CHUNK_ROWS, else "
                        "about mydumper `chunk-filesize` MB, 64 by default: dm_core/full/chunking.chunk_rows)")
    p.add_argument("--write-batch", type=int, default=10_000, help="rows per JDBC batch / executemany call")
    p.add_argument("--write-mode", choices=("load", "staging", "rows"),
                   default=os.environ.get("SHARDFLOW_WRITE_MODE", "load"))
    p.add_argument("--read", choices=("auto", "jdbc"), default="auto",
                   help="auto: each chunk's rows as LOAD DATA text made by the upstream (text_rows.py), Spark's JDBC "
                        "source for tables text cannot carry (spatial columns); jdbc: every table through the JDBC "
                        "source (the slower path, kept as a fallback)")
    p.add_argument("--write-turns", choices=("auto", "on", "off"), default=os.environ.get("SHARDFLOW_WRITE_TURNS", "auto"),
                   help="at most --table-writers chunks at a time load into a table, the others spooled first "
                        "(auto: MariaDB downstream and an AUTO_INCREMENT column, where concurrent loads into one "
                        "table contend; dm_core/full/load_data.py)")
    p.add_argument("--table-writers", type=int, default=int(os.environ.get("SHARDFLOW_TABLE_WRITERS") or 0) or None,
                   help="chunks loading into one table at once where --write-turns applies (default 2)")
    p.add_argument("--report", help="write a JSON report (chunks skipped / adopted / loaded per table) to this file")
    args = p.parse_args(argv)
    # argparse checks choices on the command line only, not defaults taken from the environment
    for dest, var in (("write_mode", "SHARDFLOW_WRITE_MODE"), ("write_turns", "SHARDFLOW_WRITE_TURNS")):
        allowed = next(a.choices for a in p._actions if a.dest == dest)
        if getattr(args, dest) not in allowed:
            p.error(f"{var}={getattr(args, dest)!r} is not one of {', '.join(allowed)}")
    return args


def _jdbc_url(ep, *, write: bool = False, lenient: bool = False) -> str:
    # jdbc:mysql:// so Spark's MySQL dialect quotes identifiers with backticks (FIELD-NOTES).
    url = (f"jdbc:mysql://{ep.host}:{ep.port}/?tinyInt1isBit=false&useUnicode=true&characterEncoding=utf8"
           "&sessionVariables=time_zone='+00:00'" + (",sql_mode=''" if lenient else ""))
    return url + ("&rewriteBatchedStatements=true" if write else "&useCursorFetch=true")


def _props(ep, **extra) -> dict:
    from dm_core.tls import jdbc_properties

    return {"user": ep.user, "password": ep.password, "driver": "org.mariadb.jdbc.Driver",
            **jdbc_properties(ep.tls), **extra}


def _transformed(df, st, task):
    """Routing + column mapping + extract columns as Spark expressions; each mapping kind
    gives its own Spark SQL (dm_core/rules/column_mapping.py), beside its Python rewrite."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    plan = task.rules_for(st.source_id).column_mapper.plan(st.schema, st.table, st.columns)
    cols = {c: F.col(qcol(c)) for c in st.columns}
    for t in (plan.transforms if plan else []):
        if not hasattr(t, "spark_sql"):
            raise ValueError(f"column mapping of {st.schema}.{st.table}: {type(t).__name__} has no Spark form")
        is_string = isinstance(df.schema[t.reads].dataType, StringType)
        cols[t.column] = F.expr(t.spark_sql(qcol(t.reads), is_string, f"`{st.schema}`.`{st.table}`.`{t.reads}`"))
    out = [cols[c].alias(c) for c in st.columns]
    out += [F.lit(v).alias(k) for k, v in st.extract.items()]
    return df.select(*out)


def qcol(name: str) -> str:
    """A column name quoted for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def _rows_writer(target_ep, meta, st, columns, verb, plan_id, chunk_id, task_name, batch):
    """Runs on an executor (--write-mode rows): the chunk's rows + marker, one transaction."""

    def write(rows):
        from dm_core.db import connect
        from dm_core.full.chunk_writer import write_rows
        from dm_core.full.reconnect import marking

        with marking():
            conn = connect(target_ep, autocommit=False, downstream=True)
            try:
                with conn.cursor() as cur:
                    cur.execute("SET SESSION time_zone = '+00:00'")
                got = write_rows(conn, meta, st, columns, verb, plan_id, chunk_id, task_name, rows, batch)
            finally:
                conn.close()
        yield got

    return write


def _write_chunk(target_ep, meta, st, columns, verb, plan_id, chunk_id, task_name, drifted, types, items,
                 encoder=None, turn=None, enclosed=False, charset="utf8mb4", snapshot=None):
    """On an executor: ``items`` through one LOAD DATA into the target plus the chunk's marker,
    one transaction (dm_core/full/load_data.py). ``enclosed``: the text path's lines (quoted
    strings); ``charset``: how LOAD DATA reads them (load_data.statement); ``snapshot``: the
    dict the read fills with its binlog position, for the marker (snapshot_read.py). Returns
    the stage timings as a dict."""
    from dm_core.db import connect_native
    from dm_core import faults
    from dm_core.full import chunk_writer, load_data
    from dm_core.full.extract import lenient

    conn = connect_native(target_ep, local_infile=True)
    try:
        conn.autocommit(False)
        if drifted:
            lenient(conn)

        def marker(rows):
            faults.hit("full.before_chunk_merge")
            with conn.cursor() as cur:
                chunk_writer.insert_marker(cur, meta, plan_id, chunk_id, task_name, st.source_id,
                                           f"{st.schema}.{st.table}", rows, snapshot)

        sql = load_data.statement(st.target_schema, st.target_table, columns, verb, types, enclosed=enclosed,
                                  charset=charset)
        try:
            stats = load_data.load_chunk(conn, sql, items, marker, encoder=encoder, duplicates_fail=verb == "INSERT",
                                         turn=turn)
        except Exception as e:
            code = (getattr(e, "args", ()) or (None,))[0]
            if code in chunk_writer.RETRYABLE:  # the driver reads the chunk again
                raise RuntimeError(f"{RETRY_MARK} {e}") from None
            raise
        faults.hit("full.after_chunk_commit")   # committed; `errno:2013`: the client never heard so
    finally:
        conn.close()
    return vars(stats)


def _arrow_writer(target_ep, meta, st, columns, verb, plan_id, chunk_id, task_name, drifted, types, turn,
                  same_bytes=False):
    """mapInArrow function (the JDBC path): the chunk's Arrow batches, encoded on the executor;
    ``same_bytes``: every value is in its column's charset already (text as stored, extract.py)."""

    def write(batches):
        import pyarrow as pa

        from dm_core.full.reconnect import marking

        with marking():
            got = _write_chunk(target_ep, meta, st, columns, verb, plan_id, chunk_id, task_name, drifted, types,
                               batches, turn=turn, charset="binary" if same_bytes else "utf8mb4")
        yield pa.record_batch({k: [v] for k, v in got.items()})

    return write


def _text_writer(up_ep, query, target_ep, meta, st, columns, verb, plan_id, chunk_id, task_name, drifted, types,
                 turn, same_bytes=False, at_snapshot=False):
    """mapPartitions function (the text path): the executor reads the chunk's ready lines from
    the upstream (dm_core/full/text_rows.py) and pipes them into LOAD DATA untouched;
    ``at_snapshot``: in a consistent snapshot whose binlog position the marker records."""

    def write(chunk_ids):
        for _ in chunk_ids:  # read to the end: a Python worker that leaves input unread exits after the task
            pass             # instead of serving the next one (a new process and imports per chunk, ~0.2 s)
        from dm_core.db import connect_native
        from dm_core.full import text_rows
        from dm_core.full.reconnect import marking

        with marking():
            up = connect_native(up_ep, downstream=False)
            snap = {} if at_snapshot else None
            try:
                got = _write_chunk(target_ep, meta, st, columns, verb, plan_id, chunk_id, task_name, drifted, types,
                                   text_rows.read_lines(up, query, snap), text_rows.as_text, turn=turn, enclosed=True,
                                   charset="binary" if same_bytes else "utf8mb4", snapshot=snap)
            finally:
                up.close()
        yield got

    return write


def _text_to_staging(up_ep, query, target_ep, meta, staging, columns, types, drifted, same_bytes):
    """mapPartitions function (the staging path of a keyless table): the chunk's lines, read in
    a consistent snapshot (snapshot_read.py), through LOAD DATA into its staging table; yields
    the rows and the snapshot's binlog position for the merge's marker. The staging table is
    emptied first, so a retried task or a server that commits LOAD DATA in pieces (TiDB) adds
    no row twice."""

    def write(chunk_ids):
        for _ in chunk_ids:  # read to the end (see _text_writer)
            pass
        from dm_core.full.reconnect import marking

        with marking():
            got = _stage_chunk(up_ep, query, target_ep, meta, staging, columns, types, drifted, same_bytes)
        yield got

    return write


def _stage_chunk(up_ep, query, target_ep, meta, staging, columns, types, drifted, same_bytes) -> dict:
    """On an executor: see ``_text_to_staging``."""
    from dm_core.db import connect_native, qt
    from dm_core.full import load_data, text_rows
    from dm_core.full.extract import lenient

    up = connect_native(up_ep, downstream=False)
    snap: dict = {}
    try:
        conn = connect_native(target_ep, local_infile=True)
        try:
            with conn.cursor() as cur:   # a retried task (or a load committed in pieces) left rows
                cur.execute(f"DELETE FROM {qt(meta, staging)}")
            conn.autocommit(False)
            if drifted:
                lenient(conn)
            sql = load_data.statement(meta, staging, columns, "INSERT", types, enclosed=True,
                                      charset="binary" if same_bytes else "utf8mb4")
            stats = load_data.load_chunk(conn, sql, text_rows.read_lines(up, query, snap), encoder=text_rows.as_text)
        finally:
            conn.close()
    finally:
        up.close()
    return {"rows": stats.rows, "snapshot": snap}


RETRY_MARK = "[shardflow: retry chunk]"


class _Turns:
    """Which target tables take at most ``writers`` chunks at a time (``--write-turns``): under
    ``auto``, those that can have several chunks in flight (several source tables routed into
    them, or several chunks of one table at once) on a MariaDB downstream, with an
    AUTO_INCREMENT column -- asked downstream once per table. Any other table streams its
    chunks without spooling."""

    def __init__(self, setting: str, mariadb: bool, shared: set, writers: int | None = None):
        from dm_core.full.load_data import TABLE_WRITERS

        self.setting, self.mariadb, self.shared = setting, mariadb, shared
        self.writers = max(1, writers or TABLE_WRITERS)
        self.lock, self.known = threading.Lock(), {}

    def of(self, target_ep, schema: str, table: str) -> tuple[str, ...] | None:
        from dm_core.full.load_data import turn_names

        if self.setting == "off" or (self.setting == "auto" and (not self.mariadb or (schema, table) not in self.shared)):
            return None
        with self.lock:
            if (schema, table) not in self.known:
                self.known[schema, table] = self.setting == "on" or _has_auto_increment(target_ep, schema, table)
                if self.known[schema, table]:
                    log.info("%s.%s loads at most %d chunk(s) at a time, the others spooled first (%s)", schema, table,
                             self.writers, "--write-turns on" if self.setting == "on"
                             else "MariaDB and an AUTO_INCREMENT column: concurrent loads into it contend")
            return turn_names(schema, table, self.writers) if self.known[schema, table] else None


def _has_auto_increment(target_ep, schema: str, table: str) -> bool:
    from dm_core.db import connect

    down = connect(target_ep, downstream=True)
    try:
        with down.cursor() as cur:
            cur.execute("SELECT 1 FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
                        "AND extra LIKE %s LIMIT 1", (schema, table, "%auto_increment%"))
            return cur.fetchone() is not None
    finally:
        down.close()


class _Stages:
    """Executor seconds per stage of the load path, summed over every chunk of one job (the
    report's ``stages``: where the time went)."""

    def __init__(self):
        self.lock, self.total = threading.Lock(), {}

    def add(self, got: dict) -> None:
        with self.lock:
            for k, v in got.items():
                self.total[k] = self.total.get(k, 0) + v

    @contextlib.contextmanager
    def timed(self, name: str):
        """Driver seconds of a step, added under ``name``."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.add({name: time.monotonic() - t0})


def _lander(spark, task, st, up_ep, target_ep, args):
    """``land(plan_id, chunk) -> rows`` for dm_core.full.loader: read, transform, write, merge."""
    from dm_core.db import connect, qt
    from dm_core import faults
    from dm_core.full import chunk_writer, reconnect, snapshot_read, text_rows
    from dm_core.full.extract import chunk_query, conversion_loss, lenient
    from dm_core.full.phase import chunk_shape

    verb = chunk_writer.verb(task.instance(st.source_id).loader.on_duplicate_logical)
    meta = task.meta_schema
    dump_where = task.instance(st.source_id).mydumper.where

    mode = args.write_mode
    if mode == "load" and (not args.load_data_ok or (args.tidb and not st.key)):
        mode = "staging"

    def land(plan_id, chunk):
        # DDL may run upstream while the load runs: each chunk reads the columns the
        # upstream and the target have at that moment, and is read again if the table
        # changed under it (dm_core/full/phase.py says why the result converges). A chunk
        # whose LOAD DATA deadlocked with another shard's chunk (rolled back) is read again, and
        # one cut off by a server that went away once it is back (dm_core/full/reconnect.py).
        patience = reconnect.Patience()
        attempt, lost = 0, False
        while True:
            try:
                shape = chunk_shape(task, st, up_ep, target_ep)
            except Exception as e:
                if reconnect.marked(e) and patience.again(st.name, chunk.chunk_id, e):
                    continue
                raise _concise(e) from None
            if shape.table is None:
                log.warning("%s chunk %d: the upstream table is gone (dropped during the load); nothing to load",
                            st.name, chunk.chunk_id)
                return 0
            if lost:   # the server is back: did the chunk land before the connection went?
                done = _marked_meanwhile(plan_id, chunk)
                if done is not None:
                    return done
            try:
                return _land(plan_id, chunk, shape)
            except Exception as e:
                if reconnect.marked(e) and patience.again(st.name, chunk.chunk_id, e):
                    lost = True
                    continue
                attempt += 1
                if attempt < 4 and RETRY_MARK in str(e):
                    log.warning("%s chunk %d: deadlock or lock wait timeout downstream (rolled back); loading it again",
                                st.name, chunk.chunk_id)
                    time.sleep(0.2 * attempt)
                    continue
                if attempt < 3 and chunk_shape(task, st, up_ep, target_ep).signature != shape.signature:
                    log.warning("%s chunk %d: the upstream table changed while it was read; reading it again",
                                st.name, chunk.chunk_id)
                    continue
                raise _concise(e) from None

    def _marked_meanwhile(plan_id, chunk):
        """A connection lost while the chunk's COMMIT was under way: the server may have committed
        it (rows and marker) without the client hearing so. Its marker says; loading it again would
        collide with that marker. None: not landed, or the server cannot say (then the load that
        follows fails on the lost connection again and waits)."""
        try:
            conn = connect(target_ep, downstream=True)
        except Exception:   # noqa: BLE001 - still away: the next try asks again
            return None
        try:
            rows = chunk_writer.marked_chunks(conn, meta, plan_id).get(chunk.chunk_id)
        except Exception:   # noqa: BLE001
            return None
        finally:
            conn.close()
        if rows is None:
            return None
        log.info("%s chunk %d: it had landed (%d rows) when the connection was lost: its marker says so",
                 st.name, chunk.chunk_id, rows)
        return rows

    checked = {}  # shape signature -> partition id check done (once per table definition)
    check_lock = threading.Lock()

    def _line_query(now, chunk, signature):
        """The chunk's text-path query, or None (a column the text path cannot carry)."""
        plan = task.rules_for(st.source_id).column_mapper.plan(now.schema, now.table, now.columns)
        transforms = plan.transforms if plan else []
        up = connect(up_ep)
        try:
            with check_lock:
                if signature not in checked:
                    checked[signature] = text_rows.partition_id_violation(up, now, transforms)
            if checked[signature]:
                raise ValueError(checked[signature])
            return text_rows.line_query(now, transforms, up.literal, chunk.where, dump_where)
        finally:
            up.close()

    def _report(chunk, t0, got, how=""):
        args.stages.add(got)
        log.info("%s chunk %d: %d rows loaded in %.2fs (executor: read %.2fs, encode %.2fs, write %.2fs, "
                 "wait for a turn of the table %.2fs, load %.2fs, commit %.2fs)%s%s", st.name, chunk.chunk_id, got["rows"],
                 time.monotonic() - t0, got["read"], got["encode"], got["write"], got["wait"], got["load"],
                 got["finish"], ", spooled while another chunk loaded" if got.get("spooled") else "", how)
        return got["rows"]

    def _land(plan_id, chunk, shape):
        spark.sparkContext.setJobDescription(f"{st.name} chunk {chunk.chunk_id}")
        now = shape.table
        types = dict(zip(now.columns, now.column_types or []))
        query = _line_query(now, chunk, shape.signature) if mode == "load" and args.read == "auto" else None
        turn = args.turns.of(target_ep, st.target_schema, st.target_table) if mode == "load" else None
        if query is not None:
            t0 = time.monotonic()
            fn = _text_writer(up_ep, query, target_ep, meta, st, text_rows.columns_of(now), verb, plan_id,
                              chunk.chunk_id, task.name, shape.drifted, types, turn, shape.same_bytes,
                              snapshot_read.wanted(st, chunk.where))
            (got,) = spark.sparkContext.parallelize([chunk.chunk_id], 1).mapPartitions(fn).collect()
            return _report(chunk, t0, got, "; text read as binary (already in the columns' character sets)"
                           if shape.same_bytes else "; text read as utf8mb4")
        up = connect(up_ep)
        try:
            lost = conversion_loss(up, now, chunk.where, dump_where)
        finally:
            up.close()
        if lost:
            raise ValueError(lost)
        df = spark.session.read.jdbc(_jdbc_url(up_ep), chunk_query(now, chunk.where, dump_where),
                             properties=_props(up_ep, fetchsize="10000"))
        df = _transformed(df, now, task)
        if mode == "load":
            t0 = time.monotonic()
            fn = _arrow_writer(target_ep, meta, st, df.columns, verb, plan_id, chunk.chunk_id, task.name, shape.drifted,
                               types, turn, shape.same_bytes)
            (got,) = df.mapInArrow(fn, "rows long, read double, encode double, write double, wait double, load double, "
                                       "finish double, spooled long").collect()
            return _report(chunk, t0, got.asDict())
        if mode == "rows":
            fn = _rows_writer(target_ep, meta, st, df.columns, verb, plan_id, chunk.chunk_id, task.name, args.write_batch)
            return sum(df.rdd.mapPartitions(fn).collect())
        staging = chunk_writer.staging_name(plan_id, chunk.chunk_id)
        # a keyless table (TiDB's path for them) is read at a recorded binlog position, so the
        # sync's catch-up takes over from it exactly (dm_core/full/snapshot_read.py)
        at_snapshot = not st.key and args.load_data_ok and snapshot_read.wanted(st, chunk.where)
        text_query = _line_query(now, chunk, shape.signature) if at_snapshot else None
        columns = text_rows.columns_of(now) if text_query is not None else df.columns
        down = connect(target_ep, downstream=True)
        try:
            t0 = time.monotonic()
            snap = None
            chunk_writer.create_staging(down, meta, staging, st.target_schema, st.target_table, columns)
            if text_query is not None:
                fn = _text_to_staging(up_ep, text_query, target_ep, meta, staging, columns, types, shape.drifted,
                                      shape.same_bytes)
                (got,) = spark.sparkContext.parallelize([chunk.chunk_id], 1).mapPartitions(fn).collect()
                snap = got["snapshot"]
            else:
                df.write.jdbc(_jdbc_url(target_ep, write=True, lenient=shape.drifted), qt(meta, staging), mode="append",
                              properties=_props(target_ep, batchsize=str(args.write_batch)))
            faults.hit("full.before_chunk_merge")
            t1 = time.monotonic()
            if shape.drifted:
                lenient(down)
            down.autocommit(False)
            n = chunk_writer.merge(down, meta, staging, st, columns, verb, plan_id, chunk.chunk_id, task.name,
                                   snapshot=snap)
        except BaseException:
            _drop_quietly(target_ep, meta, staging)  # a failed chunk leaves no staging table behind
            raise
        else:
            down.autocommit(True)
            chunk_writer.drop_staging(down, meta, staging)
        finally:
            down.close()
        log.info("%s chunk %d: %d rows staged in %.2fs, merged in %.2fs", st.name, chunk.chunk_id, n, t1 - t0,
                 time.monotonic() - t1)
        return n

    return land


def _drop_quietly(target_ep, meta, staging) -> None:
    from dm_core.db import connect
    from dm_core.full import chunk_writer

    try:
        conn = connect(target_ep, downstream=True)
        try:
            chunk_writer.drop_staging(conn, meta, staging)
        finally:
            conn.close()
    except Exception as e:  # the rerun drops it anyway; the chunk's own error matters more
        log.warning("could not drop staging table %s.%s: %s", meta, staging, e)


def _concise(e: Exception) -> Exception:
    """A Spark failure as its root cause's message, not pages of JVM stack (other errors as is)."""
    java = getattr(e, "java_exception", None)
    if java is None:
        return e
    while java.getCause() is not None:
        java = java.getCause()
    return RuntimeError(str(java.toString()).strip()[:2000])


class _Peak:
    """Counts how many tables of one source load at once (the report shows the peak)."""

    def __init__(self):
        self.lock, self.now, self.peak = threading.Lock(), 0, 0

    def __enter__(self):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def __exit__(self, *exc):
        with self.lock:
            self.now -= 1


def _warm_up(sc) -> None:
    """One task per core that imports what the load's tasks import: the executors' Python
    workers (a process each, reused by later tasks) start and import dm_core from the shipped
    archive while the driver discovers tables and plans chunks, instead of in the first
    chunk's time (about 1.5 s on an idle 2-core machine, 4.5 s on a busy one)."""

    def imports(_):
        import MySQLdb  # noqa: F401

        from dm_core.full import load_data, small_tables  # noqa: F401
        return []

    try:
        sc.setJobDescription("warm up the executors' Python")
        n = sc.defaultParallelism
        sc.parallelize(range(n), n).mapPartitions(imports).collect()
    except Exception as e:  # only a head start: the load's own tasks start workers anyway
        log.warning("warming up the executors failed (the load goes on): %s", e)


def _small_tables(spark, task, store, per_source, target_ep, args):
    """Tables that fit in one chunk, copied in one pass (dm_core/full/small_tables.py): their
    results, and ``per_source`` with only the tables left for the per-table path."""
    from dm_core.full import chunk_writer, small_tables
    from dm_core.state.store import StateStore

    if args.write_mode != "load" or not args.load_data_ok or args.read != "auto":
        return [], per_source
    results, rest = [], []
    t0 = time.monotonic()
    cores = spark.sparkContext.defaultParallelism
    copied = jobs = 0
    clock = args.stages.timed
    with StateStore(store.dsn) as own:
        for sid, pool, tables in per_source:
            left = [t for t in tables if args.tidb and not t[0].key]  # TiDB, keyless: the staging path
            with clock("small tables: plan"):
                prepared = small_tables.prepare(task, own, [t for t in tables if not (args.tidb and not t[0].key)],
                                                target_ep)
            results += prepared.done
            left += prepared.rest
            verb = chunk_writer.verb(task.instance(sid).loader.on_duplicate_logical)
            by_name = {st.name: (st, ep, n) for st, ep, n, _ in prepared.todo}
            for todo in small_tables.batches(prepared.todo, cores):
                with clock("small tables: shape, query"):
                    batch, other = small_tables.specs(task, todo, target_ep, verb=verb,
                                                      turn_of=lambda schema, table: args.turns.of(target_ep, schema,
                                                                                                  table))
                left += other
                if not batch:
                    continue
                spark.sparkContext.setJobDescription(f"{len(batch)} small tables of {sid}")
                t1 = time.monotonic()
                with clock("small tables: copy (Spark jobs)"):
                    got = spark.sparkContext.parallelize(batch, min(len(batch), cores)).mapPartitions(
                        small_tables.copy_specs(target_ep)).collect()
                with clock("small tables: record"):
                    landed, failed = small_tables.record(task, own, batch, got)
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


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def main(argv=None) -> int:
    """spark-submit's entry: the job in a Spark application of its own."""
    prepare_process()
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    args = _parse_arguments(argv)
    started = time.monotonic()
    # the SparkContext and the executors' Python start while this thread reads the task and
    # discovers tables: both wait on other processes, and together they were ~5 s of start-up
    session = _Starting(f"shardflow-full-{args.task}")
    try:
        return _load(args, session, started)
    finally:
        session.stop()


def run_on(spark, argv) -> int:
    """The job on a Spark application that is already running (``spark``: a LazySession, the
    job host's: spark_jobs/job_host.py), which it leaves running. The caller ran
    ``prepare_process``."""
    return _load(_parse_arguments(argv), _Ready(spark), time.monotonic())


class _Ready:
    """A session that is already up, as ``_Starting`` hands one out (kept at the end)."""

    def __init__(self, spark):
        self._spark = spark

    def get(self):
        return self._spark

    def stop(self) -> None:
        pass


class _Starting:
    """The job's LazySession, built on a thread of its own, which then warms the executors up
    (``_warm_up``); ``get()`` waits for the session, not for the warm-up."""

    def __init__(self, app: str):
        from concurrent.futures import Future

        self._session: Future = Future()
        threading.Thread(target=self._start, args=(app,), name="spark-start", daemon=True).start()

    def _start(self, app: str) -> None:
        from spark_jobs.spark_session import LazySession

        try:
            spark = LazySession(app)
        except BaseException as e:  # get() raises it in the main thread
            self._session.set_exception(e)
            return
        self._session.set_result(spark)
        _warm_up(spark.sparkContext)

    def get(self):  # a spark_jobs.spark_session.LazySession
        return self._session.result()

    def stop(self) -> None:
        try:
            spark = self._session.result()
        except Exception:  # it never started: nothing to stop
            return
        spark.stop()


def _load(args, session: _Starting, started: float) -> int:
    from dm_core.config.task import parse_task
    from dm_core.db import connect
    from dm_core.full import chunk_writer
    from dm_core.full.chunking import chunk_rows
    from dm_core.full.discover import discover
    from dm_core.full.loader import TableResult, load_table
    from dm_core.sources import source_endpoint, target_endpoint
    from dm_core.state.store import StateStore

    args.stages = _Stages()
    store = StateStore()
    got = store.get_task(args.task)
    if got is None:
        raise SystemExit(f"task {args.task!r} is not registered in the state store; run the full DAG's prepare step first")
    task = parse_task(got[0], f"<state store: {args.task}>")
    target_ep = target_endpoint(task, load=True)   # foreign_key_checks=0, as DM's loader
    # probed in every write mode: the staging path reads keyless tables through LOAD DATA too
    from dm_core.full.load_data import load_data_allowed

    args.load_data_ok, args.tidb, mariadb = load_data_allowed(target_ep)
    if args.write_mode == "load" and not args.load_data_ok:
        log.warning("the downstream refuses LOAD DATA LOCAL INFILE (local_infile is OFF): loading through staging "
                    "tables, which writes every row twice; SET GLOBAL local_infile = ON downstream for the faster path")
    down = connect(target_ep, downstream=True)
    try:
        chunk_writer.ensure_meta(down, task.meta_schema)
    finally:
        down.close()
    per_source = []  # (source id, pool-size, [(table, endpoint, chunk rows)])
    for inst in task.mysql_instances:
        ep = source_endpoint(store, inst.source_id)
        conn = connect(ep)
        try:
            tables = discover(conn, inst.source_id, task.rules_for(inst.source_id))
        finally:
            conn.close()
        fallback = int(os.environ.get("SHARDFLOW_CHUNK_ROWS") or 0)
        per_source.append((inst.source_id, max(1, int(inst.loader.pool_size)),
                           [(st, ep, chunk_rows(st, inst.mydumper.rows, inst.mydumper.chunk_filesize, args.chunk_rows,
                                                fallback)) for st in tables]))
    t_found = time.monotonic()
    spark = session.get()
    log.info("start-up: task read and %d tables discovered in %.1fs, Spark ready at %.1fs",
             sum(len(jobs) for _, _, jobs in per_source), t_found - started, time.monotonic() - started)
    tables_at_once = max(1, sum(min(pool, len(jobs)) for _, pool, jobs in per_source))
    per_table = max(1, spark.sparkContext.defaultParallelism // tables_at_once)
    routed = Counter((st.target_schema, st.target_table) for _, _, jobs in per_source for st, _, _ in jobs)
    args.turns = _Turns(args.write_turns, mariadb, {t for t, n in routed.items() if n > 1 or per_table > 1},
                        args.table_writers)
    t0 = time.monotonic()
    small_results, per_source = _small_tables(spark, task, store, per_source, target_ep, args)
    if small_results:  # the rest share the cores among fewer tables
        tables_at_once = max(1, sum(min(pool, len(jobs)) for _, pool, jobs in per_source))
        per_table = max(1, spark.sparkContext.defaultParallelism // tables_at_once)
    peaks = {sid: _Peak() for sid, _, _ in per_source}

    def one(st, ep, chunk_rows) -> TableResult:
        with peaks[st.source_id]:
            try:
                with StateStore(store.dsn) as own:
                    return load_table(task, st, ep, target_ep, own, _lander(spark, task, st, ep, target_ep, args),
                                      chunk_rows=chunk_rows, parallel=per_table)
            except Exception as e:  # planning / bookkeeping failures: name the table, keep the others going
                log.exception("%s failed", st.name)
                return TableResult(st.name, error=f"{st.name}: {e}")

    # one pool per source: loaders.pool-size is how many of its tables load at once (DM: per worker)
    pools = [ThreadPoolExecutor(max_workers=min(pool, max(1, len(jobs))), thread_name_prefix=f"load-{sid}")
             for sid, pool, jobs in per_source]
    try:
        futs = [ex.submit(one, *job) for ex, (_, _, jobs) in zip(pools, per_source) for job in jobs]
        results = small_results + [f.result() for f in futs]
    finally:
        for ex in pools:
            ex.shutdown()
    seconds = time.monotonic() - t0
    rows = sum(r.rows for r in results)
    log.info("full load of %s: %d rows in %d chunks in %.1fs (%.0f rows/s, write mode %s)", task.name, rows,
             sum(len(r.loaded) for r in results), seconds, rows / seconds if seconds else 0, args.write_mode)
    if args.report:
        with open(args.report, "w") as f:
            json.dump({"task": task.name, "write_mode": args.write_mode, "seconds": round(seconds, 3), "rows": rows,
                       "start_up_seconds": round(t0 - started, 3),
                       "pool_peak": {sid: p.peak for sid, p in peaks.items()},
                       "stages": {k: round(v, 3) for k, v in args.stages.total.items()},
                       "tables": {r.name: vars(r) for r in results}}, f, indent=1, default=str)
    store.close()
    failed = [r.error for r in results if r.error]
    if failed:
        from dm_core.errors import ErrorCode

        log.error("full load of %s failed in %d table(s):\n  %s\nworkaround: %s", task.name, len(failed),
                  "\n  ".join(failed), ErrorCode.FULL_LOAD_FAILED.workaround)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
