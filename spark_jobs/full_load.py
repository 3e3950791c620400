"""The full phase's Spark job (spark-submit, or the job host: spark_jobs/job_host.py): copy
every allowed upstream table into the merged target tables in key chunks. A thin driver: it
reads the task, discovers the tables and hands each table to dm_core/full/loader.py and each
chunk to dm_core/full/land.py, whose writers run on the executors (dm_core/full/write.py);
dm_core/full/__init__.py lists the stages. Each chunk lands exactly once and is recorded
after it is committed, so a killed job, rerun, loads only the rest.

Write paths (``--write-mode``): ``load`` (default) writes each row once -- an executor
streams the chunk into the target with ``LOAD DATA LOCAL INFILE ... REPLACE|IGNORE`` and the
chunk marker in one transaction (dm_core/full/load_data.py), its rows read by the default
text reader (dm_core/full/read.py). ``staging`` keeps rows in the JVM -- Spark's JDBC
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
    # before the Spark session's thread starts: a dataclass reads sys.modules["typing"] without
    # the import lock, so a class defined while another thread is importing typing met it half
    # made ("partially initialized module 'typing' has no attribute 'ClassVar'") and the job died
    import typing  # noqa: F401
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

        from dm_core.full import load_data, small_tables, write  # noqa: F401
        return []

    try:
        sc.setJobDescription("warm up the executors' Python")
        n = sc.defaultParallelism
        sc.parallelize(range(n), n).mapPartitions(imports).collect()
    except Exception as e:  # only a head start: the load's own tasks start workers anyway
        log.warning("warming up the executors failed (the load goes on): %s", e)


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def main(argv=None) -> int:
    """spark-submit's entry: the job in a Spark application of its own."""
    prepare_process()
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    args = _parse_arguments(argv)
    started = time.monotonic()
    from spark_jobs import launcher_watch

    launcher_watch.start(log)   # a killed spark-submit takes this driver with it
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
    """The job, under the task's full-load fence (dm_core/full/fence.py): a stopped run's job
    still ending is waited for, never written beside."""
    from dm_core.full import fence
    from dm_core.jobhost import runner
    from dm_core.full import reconnect
    from dm_core.state.outage import one_line, store_away
    from dm_core.state.store import StateStore

    store = StateStore()
    try:
        with fence.held(store.dsn, args.task, log, cancelled=runner.CANCELLED.is_set,
                        on_lost=lambda: session.get().sparkContext.cancelAllJobs()) as hold:
            for again in range(OUTAGE_PASSES + 1):
                try:
                    rc, outage = _load_held(args, session, started, store, hold)
                except Exception as e:
                    if not store_away(e):
                        if not reconnect.away_for_good(e):
                            raise
                        log.error("full load of %s stopped: a server is away (%s); Airflow runs the load again with "
                                  "backoff, from the chunks recorded; `dmctl stop-task %s` or `pause-task` ends the "
                                  "tries", args.task, one_line(e), args.task)
                        return reconnect.SERVERS_AWAY_EXIT
                    rc, outage = 1, e
                if outage is None or _stop_why(hold):
                    return rc
                if again == OUTAGE_PASSES:   # a store that answers, then fails again (connections refused)
                    log.error("full load of %s: the state store went away %d times during the load: it stops; a "
                              "rerun loads the chunks not recorded (the last error: %s)", args.task, again + 1, outage)
                    return rc
                if not _store_back(store, args.task, outage, hold):
                    return rc
            return 1   # not reached: the last pass returns
    finally:
        store.close()


OUTAGE_PASSES = 5   # how many times the load goes on after the state store went away


def _store_back(store, task: str, outage, hold) -> bool:
    """The state store went away mid-load (a Postgres restart): wait for it, up to
    SHARDFLOW_STORE_OUTAGE_S, and for the fence to be held again, then the load goes on. A
    chunk cut off mid-record is adopted (its marker is committed downstream), one cut off
    mid-land is landed again: nothing doubles."""
    from dm_core.full.fence import CHECK_S
    from dm_core.state.outage import STORE_OUTAGE_S, one_line, reconnect_within

    log.warning("full load of %s: the state store is unreachable (%s); waiting for it for up to %.0fs, then the "
                "load goes on from the chunks recorded", task, one_line(outage), STORE_OUTAGE_S)
    waited = reconnect_within(store, STORE_OUTAGE_S, stop=lambda: _stop_why(hold) is not None)
    if _stop_why(hold):
        log.error("full load of %s: %s while it waited for the state store", task, _stop_why(hold))
        return False
    if waited is None:
        log.error("full load of %s: the state store stayed unreachable for %.0fs: the load stops; a rerun loads the "
                  "chunks not recorded", task, STORE_OUTAGE_S)
        return False
    if not hold.wait_held(2 * CHECK_S + 15):   # the fence's watch takes it again at its next look
        log.error("full load of %s: the state store is back but the load's fence is not held again: the load stops "
                  "so that it never writes beside another; a rerun loads the chunks not recorded", task)
        return False
    log.warning("full load of %s: the state store is back after %.0fs: loading the chunks not recorded yet", task,
                waited)
    return True


def _stop_why(hold) -> str | None:
    """Why the job must start nothing more, or None: its task was stopped (the job host's
    cancel), or it lost its fence to another load (dm_core/full/fence.py)."""
    from dm_core.jobhost import runner

    if hold.lost.is_set():
        return "the job lost the task's full-load fence to another full load, which loads it instead"
    if runner.CANCELLED.is_set():
        return "the job was cancelled (its task was stopped)"
    return None


def _load_held(args, session: _Starting, started: float, store, hold) -> int:
    from dm_core.full import compiled_lines, reconnect, small_tables
    from dm_core.full.land import LoadSettings, Stages
    from dm_core.full.load_data import load_data_allowed
    from dm_core.full.turns import Turns

    task, target_ep = _task_and_target(store, args.task)
    # probed in every write mode: the staging path reads keyless tables through LOAD DATA too
    load_data_ok, tidb, mariadb = load_data_allowed(target_ep)
    if args.write_mode == "load" and not load_data_ok:
        log.warning("the downstream refuses LOAD DATA LOCAL INFILE (local_infile is OFF): loading through staging "
                    "tables, which writes every row twice; SET GLOBAL local_infile = ON downstream for the faster path")
    per_source = _discovered(task, store, args.chunk_rows)
    t_found = time.monotonic()
    spark = session.get()
    log.info("start-up: task read and %d tables discovered in %.1fs, Spark ready at %.1fs",
             sum(len(jobs) for _, _, jobs in per_source), t_found - started, time.monotonic() - started)
    # what the executors on this machine use; a cluster's workers without the build read in Python
    log.info("upstream lines are read %s", "in C (dm_core/full/compiled_lines.py)" if compiled_lines.module()
             else f"in Python: {compiled_lines.reason()}")
    per_table = _chunks_at_once(spark, per_source)
    routed = Counter((st.target_schema, st.target_table) for _, _, jobs in per_source for st, _, _ in jobs)
    turns = Turns(args.write_turns, mariadb, {t for t, n in routed.items() if n > 1 or per_table > 1},
                  args.table_writers)
    settings = LoadSettings(args.write_mode, args.read, args.write_batch, load_data_ok, tidb, turns, Stages(),
                            cancelled=lambda: _stop_why(hold))
    t0 = time.monotonic()
    small_results, per_source = small_tables.load(spark, task, store, per_source, target_ep, settings)
    if small_results:  # the rest share the cores among fewer tables
        per_table = _chunks_at_once(spark, per_source)
    peaks = {sid: _Peak() for sid, _, _ in per_source}
    results = small_results + _load_tables(spark, task, store, per_source, target_ep, settings, per_table, peaks)
    seconds = time.monotonic() - t0
    rows = sum(r.rows for r in results)
    log.info("full load of %s: %d rows in %d chunks in %.1fs (%.0f rows/s, write mode %s)", task.name, rows,
             sum(len(r.loaded) for r in results), seconds, rows / seconds if seconds else 0, args.write_mode)
    if args.report:
        with open(args.report, "w") as f:
            json.dump({"task": task.name, "write_mode": args.write_mode, "seconds": round(seconds, 3), "rows": rows,
                       "start_up_seconds": round(t0 - started, 3),
                       "pool_peak": {sid: p.peak for sid, p in peaks.items()},
                       "stages": {k: round(v, 3) for k, v in settings.stages.total.items()},
                       "tables": {r.name: vars(r) for r in results}}, f, indent=1, default=str)
    failed = [r.error for r in results if r.error]
    outage = next((r.error for r in results if r.store_outage), None)
    if outage is not None:   # waited for, then loaded again (_load): not the load's failure
        return 1, outage
    if reconnect.only_servers_away(*results):
        log.error("full load of %s stopped: a server stayed away longer than the load waits for it "
                  "(SHARDFLOW_FULL_RECONNECT_S) in %d table(s):\n  %s\nAirflow runs the load again with backoff, "
                  "from the chunks recorded; `dmctl resume-task %s` runs it now, `dmctl stop-task %s` or `pause-task` "
                  "ends the tries", task.name, len(failed), "\n  ".join(failed), task.name, task.name)
        return reconnect.SERVERS_AWAY_EXIT, None
    if failed:
        from dm_core.errors import ErrorCode

        log.error("full load of %s failed in %d table(s):\n  %s\nworkaround: %s", task.name, len(failed),
                  "\n  ".join(failed), ErrorCode.FULL_LOAD_FAILED.workaround)
        return 1, None
    return 0, None


def _task_and_target(store, name: str):
    """The registered task and its target endpoint, with the meta schema and marker table made."""
    from dm_core.config.task import parse_task
    from dm_core.db import connect
    from dm_core.full import chunk_writer
    from dm_core.sources import target_endpoint

    got = store.get_task(name)
    if got is None:
        raise SystemExit(f"task {name!r} is not registered in the state store; run the full DAG's prepare step first")
    task = parse_task(got[0], f"<state store: {name}>")
    target_ep = target_endpoint(task, load=True)   # foreign_key_checks=0, as DM's loader
    down = connect(target_ep, downstream=True)
    try:
        chunk_writer.ensure_meta(down, task.meta_schema)
    finally:
        down.close()
    return task, target_ep


def _discovered(task, store, override: int | None) -> list:
    """(source id, pool-size, [(table, endpoint, chunk rows)]) of every source of the task."""
    from dm_core.db import connect
    from dm_core.full.chunking import chunk_rows
    from dm_core.full.discover import discover
    from dm_core.sources import source_endpoint

    per_source = []
    for inst in task.mysql_instances:
        ep = source_endpoint(store, inst.source_id)
        conn = connect(ep)
        try:
            tables = discover(conn, inst.source_id, task.rules_for(inst.source_id))
        finally:
            conn.close()
        fallback = int(os.environ.get("SHARDFLOW_CHUNK_ROWS") or 0)
        per_source.append((inst.source_id, max(1, int(inst.loader.pool_size)),
                           [(st, ep, chunk_rows(st, inst.mydumper.rows, inst.mydumper.chunk_filesize, override,
                                                fallback)) for st in tables]))
    return per_source


def _chunks_at_once(spark, per_source) -> int:
    """Chunks of one table at a time: the cores shared among the tables loading at once."""
    tables_at_once = max(1, sum(min(pool, len(jobs)) for _, pool, jobs in per_source))
    return max(1, spark.sparkContext.defaultParallelism // tables_at_once)


def _load_tables(spark, task, store, per_source, target_ep, settings, per_table: int, peaks: dict) -> list:
    """Every table chunk by chunk (dm_core/full/loader.py), ``pool-size`` tables of a source at once."""
    from dm_core.full.land import Lander
    from dm_core.full import reconnect
    from dm_core.full.loader import TableResult, load_table
    from dm_core.state.outage import store_away
    from dm_core.state.store import StateStore

    def one(st, ep, chunk_rows) -> TableResult:
        why = settings.cancelled()
        if why:   # start no more tables
            return TableResult(st.name, error=f"{st.name}: not loaded: {why}")
        with peaks[st.source_id]:
            try:
                with StateStore(store.dsn) as own:
                    return load_table(task, st, ep, target_ep, own, Lander(spark, task, st, ep, target_ep, settings),
                                      chunk_rows=chunk_rows, parallel=per_table)
            except Exception as e:  # planning / bookkeeping failures: name the table, keep the others going
                if store_away(e):   # waited for and loaded again (_load)
                    return TableResult(st.name, error=f"{st.name}: {e}", store_outage=True)
                log.exception("%s failed", st.name)
                return TableResult(st.name, error=f"{st.name}: {e}", server_away=reconnect.away_for_good(e))

    # one pool per source: loaders.pool-size is how many of its tables load at once (DM: per worker)
    pools = [ThreadPoolExecutor(max_workers=min(pool, max(1, len(jobs))), thread_name_prefix=f"load-{sid}")
             for sid, pool, jobs in per_source]
    try:
        futs = [ex.submit(one, *job) for ex, (_, _, jobs) in zip(pools, per_source) for job in jobs]
        return [f.result() for f in futs]
    finally:
        for ex in pools:
            ex.shutdown()


if __name__ == "__main__":
    sys.exit(main())
