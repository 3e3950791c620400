"""spark-submit entry point of the scheduled validation (DAG ``dm_<task>_validate``) and of the
re-sync's comparison (``--tables``).

The work is the servers': every upstream shard and the downstream table checksum their own
rows per key chunk (dm_core/validate/compare.py: COUNT + SUM(CRC32(row image)) in SQL, the
shards' routes and column mappings in their own SQL), and only the rows of chunks whose sums
differ are read. This driver schedules those queries on threads over a few connections per
server; it starts no SparkSession: moving rows through executors is what made validation
slower than the full copy.

The result (dm_core/validate/result.py) goes to the state store as the run ``--run-id``:
marked ``running`` at the start, rewritten with the tables done so far every
``meta-flush-interval``, and final at the end; the DAG's next task publishes it (XCom, task
log, Variable). Exit code 1 only when the validation itself failed; differences are a result,
not a failure here. Exit code 75 (``SERVERS_AWAY_EXIT``) when it failed only because a server
stayed away, or the state store did while it recorded the result: the operator has Airflow run
it again with backoff.

Arguments name the task; passwords never appear on the command line: sources and the target
come from the state store (SHARDFLOW_STATE_DSN in the environment).
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import sys
import time

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

log = logging.getLogger("shardflow.validate")


def _parse_arguments(argv=None):
    p = argparse.ArgumentParser(description="shardflow validation (server-side chunk checksums)")
    p.add_argument("--task", required=True, help="task name (its file is registered in the state store)")
    p.add_argument("--run-id", required=True, help="id the result is stored under (the DAG run id)")
    p.add_argument("--mode", choices=("full", "fast", ""), default="", help="override the task file's mode")
    p.add_argument("--tables", default="", help="only these target tables (schema.table, comma separated): the "
                   "re-sync's comparison; empty: every table of the task")
    p.add_argument("--chunk-rows", type=int, default=0,
                   help="rows per key chunk checksummed by one query (default $SHARDFLOW_VALIDATE_CHUNK_ROWS or 20,000)")
    return p.parse_args(argv)


def _run(args) -> int:
    from dm_core import faults
    from dm_core.config.task import parse_task
    from dm_core.errors import ErrorCode, ShardflowError
    from dm_core.full.reconnect import SERVERS_AWAY_EXIT
    from dm_core.jobhost import runner
    from dm_core.state.outage import riding_out
    from dm_core.state.store import StateStore
    from dm_core.validate.compare import UnknownTables, checkpoints, validate_task
    from dm_core.validate.result import ValidationResult, render
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
    last_flush = [time.monotonic()]

    def record(status: str, r, finished: bool) -> None:
        """The result so far into the store, waiting out a Postgres restart (a rerun would
        compare every table again)."""
        faults.hit("validate.before_record")
        riding_out(store, lambda: store.put_validation(task.name, args.run_id, status, r.to_dict(), finished=finished),
                   what=f"validation run {args.run_id} records its result", log=log.warning)

    def flush(r) -> None:
        t = r.tables[-1]
        log.info("%s: %s, %d upstream rows, %d differing, %.1fs", t.target, t.status.upper(), t.upstream_rows,
                 t.differing_rows(), t.seconds)
        if time.monotonic() - last_flush[0] >= settings.meta_flush_interval:
            record("running", r, False)
            last_flush[0] = time.monotonic()

    only = [t.strip() for t in args.tables.split(",") if t.strip()]
    try:
        validate_task(task, store, mode=mode, settings=settings, tables=only or None, chunk_rows=args.chunk_rows or None,
                      result=res, on_table=flush, stop=runner.CANCELLED.is_set)   # set on the job host only
    except UnknownTables as e:
        res.error = f"ValueError: --tables: {e}"
    except Exception:  # noqa: BLE001 - stored in the result (validate_task set res.error)
        log.exception("validation of %s failed", task.name)
    res.finished_at = res.finished_at or dt.datetime.now(dt.timezone.utc).isoformat()
    try:
        record(res.status, res, True)
    except ShardflowError as e:
        if e.code != ErrorCode.STATE_STORE_UNREACHABLE:
            raise
        log.warning("validation of %s could not record its result: %s; a later try compares again", task.name, e)
        return SERVERS_AWAY_EXIT
    log.info("validation of %s (run %s):\n%s", task.name, args.run_id, render(res))
    store.close()
    if res.servers_away:   # the operator has Airflow run it again with backoff (shardflow_airflow/retry.py)
        log.warning("validation of %s stopped because a server it needs is away; a later try compares again",
                    task.name)
        return SERVERS_AWAY_EXIT
    return 1 if res.error else 0


def run_on(spark, argv) -> int:
    """The job on the job host (spark_jobs/job_host.py): it needs no SparkContext, only the
    host's running interpreter, which spares it the JVM's and Python's start-up."""
    return _run(_parse_arguments(argv))


def main(argv=None) -> int:
    """spark-submit's entry, which puts only spark_jobs/ on the path: the project made
    importable first (never at import: the job host imports this module)."""
    if PROJECT_ROOT not in sys.path:
        sys.path.insert(0, PROJECT_ROOT)
    from spark_jobs import launcher_watch

    launcher_watch.start(log)   # a killed spark-submit takes this driver with it
    return _run(_parse_arguments(argv))


if __name__ == "__main__":
    sys.exit(main())
