"""Many small tables: the full phase's per-table cost against mydumper+myloader.

Data: ``tables`` tables (default 500) of ``rows`` rows each (default 200), the full part's
6-column row, half on each source (schemas bench_small_01 / bench_small_02). Seeded
server-side with the binlog off; reused while the layout matches.

Engines, each timed from nothing downstream to every row committed downstream:
- mydumper_myloader: mydumper -t 4 per source (both at once), then myloader -t 4 per dump;
- shardflow: prepare() + spark-submit spark_jobs/full_load.py + finish(), every table copied
  as itself (what the baseline does): the small tables' one pass (dm_core/full/small_tables.py);
- shardflow_host: the same load sent to a job host (dm_core/jobhost) started before the clock
  starts, as the full DAG does when the machine's host runs; shardflow_host_again: the host's
  second job (what every DAG run after the first gets).

At this size a copy is all fixed costs (process and Spark start-up, per-table planning,
connections, statements), which is what this part measures; the full part measures
throughput. ``ratios.vs_myloader``: shardflow on the job host, rows/s ÷ mydumper+myloader rows/s;
``spark_submit_vs_myloader`` the same with a spark-submit of its own.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

from bench import full
from bench.common import (
    JDBC_JAR, ROOT, VENV_BIN, Skipped, Stack, TreeRSS, bench_schema, drop_schemas, execute, figures, finish, guarded,
    python_env, query, ratio, run_logged, work_dir,
)
from dm_core.db import connect, qt
from dm_core.spark_options import driver_java_options

log = logging.getLogger("bench.small")

PREFIX = "bench_small"
SOURCES = [("bench-small-1", f"{PREFIX}_01"), ("bench-small-2", f"{PREFIX}_02")]
TASK_NAME = "bench_small"
LAYOUT_VERSION = "v1"


def _tables(count: int) -> list[tuple[int, str, str]]:
    """(source index, schema, table) of every table."""
    half = count // 2
    return [(i, schema, f"t_{j:04d}") for i, (_, schema) in enumerate(SOURCES)
            for j in range(half + (count % 2 if i == 0 else 0))]


def seed(stack: Stack, count: int, rows: int) -> dict:
    t0 = time.monotonic()
    mark = f"shardflow-bench small {LAYOUT_VERSION} tables={count} rows={rows}"
    have = [query(ep, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s AND table_comment = %s",
                  (schema, mark))[0][0] for ep, (_, schema) in zip(stack.ups, SOURCES)]
    want = [sum(1 for i, _, _ in _tables(count) if i == n) for n in range(len(SOURCES))]
    if have == want:
        return {"tables": count, "rows": count * rows, "seeded": "reused", "seconds": round(time.monotonic() - t0, 1)}
    for ep in stack.ups:
        drop_schemas(ep, PREFIX + "_")
    for ep, (_, schema) in zip(stack.ups, SOURCES):
        execute(ep, f"CREATE DATABASE {bench_schema(schema)}", session=("SET SESSION sql_log_bin = 0",))

    def one(spec):
        i, schema, table = spec
        t = qt(schema, table)
        conn = connect(stack.ups[i])
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin = 0")
                cur.execute(full._DDL.format(t=t) + " COMMENT = %s", (mark,))
                cur.execute(full._FILL.format(t=t, s=bench_schema(schema), a=1, b=rows))
        finally:
            conn.close()

    with ThreadPoolExecutor(max_workers=4) as ex:
        list(ex.map(one, _tables(count)))
    return {"tables": count, "rows": count * rows, "seeded": "created", "seconds": round(time.monotonic() - t0, 1)}


def _reset_downstream(stack: Stack) -> None:
    drop_schemas(stack.down, PREFIX + "_")
    full._settle(stack.down)


def _downstream_rows(stack: Stack, schemas: list[str] | None = None) -> int:
    total = 0
    for schema in schemas or [s for _, s in SOURCES]:
        names = [r[0] for r in query(stack.down, "SELECT table_name FROM information_schema.tables "
                                                 "WHERE table_schema = %s", (schema,))]
        for k in range(0, len(names), 500):   # a UNION ALL of thousands of tables is one query too many
            counts = " UNION ALL ".join(f"SELECT COUNT(*) AS c FROM {qt(schema, n)}" for n in names[k:k + 500])
            total += int(query(stack.down, f"SELECT SUM(c) FROM ({counts}) AS x")[0][0] or 0)
    return total


def run_mydumper(stack: Stack, count: int, rows: int) -> dict:
    _reset_downstream(stack)
    return mydumper_copy(stack, PREFIX, [s for _, s in SOURCES], count * rows)


def mydumper_copy(stack: Stack, prefix: str, schemas: list[str], want_rows: int) -> dict:
    """mydumper of every `{prefix}_N` schema of each source (both at once), then myloader of
    each dump into the downstream (which must not hold them yet), timed from start to end."""
    tools = {t: shutil.which(t) for t in ("mydumper", "myloader")}
    if not all(tools.values()):
        raise Skipped("mydumper/myloader not installed (Debian package `mydumper`)")
    wd = work_dir() / f"{prefix}-mydumper"
    shutil.rmtree(wd, ignore_errors=True)
    wd.mkdir()
    logf = wd / "mydumper.log"
    ups = [(ep, full._defaults_file(wd / f"up{i}.cnf", ep), wd / f"dump{i}") for i, ep in enumerate(stack.ups, 1)]
    down_cnf = full._defaults_file(wd / "down.cnf", stack.down)
    try:
        with TreeRSS() as rss, full._servers(stack) as servers:
            t0 = time.monotonic()
            for p in [run_logged([tools["mydumper"], f"--defaults-file={cnf}", "-h", ep.host, "-P", str(ep.port),
                                  "-t", str(full.THREADS), "--trx-consistency-only", "-x", rf"^{prefix}_[0-9]+\.",
                                  "-o", str(out), "-v", "1"], logf, rss=rss) for ep, cnf, out in ups]:
                finish(p, "mydumper")
            for p in [run_logged([tools["myloader"], f"--defaults-file={down_cnf}", "-h", stack.down.host,
                                  "-P", str(stack.down.port), "-t", str(full.THREADS), "-o", "-d", str(out), "-v", "1"],
                                 logf, rss=rss) for _, _, out in ups]:
                finish(p, "myloader")
            seconds = time.monotonic() - t0
        got = _downstream_rows(stack, schemas)
        return figures(got, 0, seconds, rss.peak, cpu_seconds=full._cpu(servers, rss),
                       rows_ok=full._check_rows("mydumper+myloader", got, want_rows),
                       how=f"mydumper -t {full.THREADS} per source (both at once), then myloader -t {full.THREADS} per dump")
    finally:
        shutil.rmtree(wd, ignore_errors=True)


def task_yaml(stack: Stack) -> str:
    import yaml

    from tests.integration.helpers import target_database

    return yaml.safe_dump({
        "name": TASK_NAME, "task-mode": "full", "target-database": target_database(stack.down),
        "mysql-instances": [{"source-id": sid, "block-allow-list": "ba"} for sid, _ in SOURCES],
        "block-allow-list": {"ba": {"do-dbs": [f"~^{PREFIX}_[0-9]+$"]}}}, sort_keys=False)


def _submit_command(report) -> tuple[list[str], dict]:
    env = python_env()
    return [str(VENV_BIN / "spark-submit"), "--master", os.environ.get("SHARDFLOW_BENCH_MASTER", "local[2]"),
            "--jars", JDBC_JAR, "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.driver.extraJavaOptions={driver_java_options()}",
            "--conf", f"spark.pyspark.python={env['PYSPARK_PYTHON']}",
            "--conf", f"spark.pyspark.driver.python={env['PYSPARK_DRIVER_PYTHON']}",
            str(ROOT / "spark_jobs" / "full_load.py"), "--task", TASK_NAME, "--report", str(report)], env


def run_shardflow(stack: Stack, count: int, rows: int, host_dir=None, label: str = "submit") -> dict:
    """``host_dir``: a running job host's directory (the load goes there), None: spark-submit."""
    from dm_core.config.task import parse_task
    from dm_core.full.phase import finish as finish_phase, prepare
    from dm_core.jobhost import service
    from dm_core.state import StateStore
    from tests.integration.helpers import register

    _reset_downstream(stack)
    text = task_yaml(stack)
    task = parse_task(text, f"<bench {TASK_NAME}>")
    logf = work_dir() / f"spark-small-{label}.log"
    logf.unlink(missing_ok=True)
    report = work_dir() / "small-report.json"
    cmd, env = _submit_command(report)
    with StateStore(stack.state_dsn) as store:
        register(store, {sid: ep for (sid, _), ep in zip(SOURCES, stack.ups)}, TASK_NAME, text)
        with TreeRSS() as rss, full._servers(stack) as servers:
            if host_dir is not None:
                rss.watch(service.start(host_dir))   # running already: its start-up is not timed
            t0 = time.monotonic()
            prepare(task, store)
            t1 = time.monotonic()
            if host_dir is None:
                finish(run_logged(cmd, logf, env=env, cwd=work_dir(), rss=rss, timeout=3600), "spark-submit full_load.py")
            else:
                full.load_on_host(host_dir, TASK_NAME, report, logf)
            t2 = time.monotonic()
            finish_phase(task, store)
            seconds = time.monotonic() - t0
        store.set_task_status(TASK_NAME, "stopped")
        for sid, _ in SOURCES:
            store.disable_source(sid)
    got = _downstream_rows(stack)
    rep = json.loads(report.read_text())
    one_pass = [line for line in logf.read_text().splitlines() if "small tables copied in one pass" in line]
    how = ("prepare() + spark-submit --master local[2] spark_jobs/full_load.py + finish()" if host_dir is None else
           "prepare() + full_load on the running job host (dm_core/jobhost) + finish()")
    return figures(got, 0, seconds, rss.peak, cpu_seconds=full._cpu(servers, rss), prepare_seconds=round(t1 - t0, 3),
                   spark_seconds=round(t2 - t1, 3), load_seconds=rep["seconds"],
                   start_up_seconds=rep.get("start_up_seconds"), stages=rep.get("stages"),
                   finish_seconds=round(seconds - (t2 - t0), 3),
                   one_pass=one_pass[-1].split(": ", 1)[-1] if one_pass else None,
                   rows_ok=full._check_rows("shardflow", got, count * rows), spark_log=str(logf),
                   how=how + ", each table copied as itself")


def _host_runs(stack: Stack, count: int, rows: int) -> dict:
    """The first job of a host started just before (start-up untimed), then a second job on it."""
    from dm_core.jobhost import service

    host_dir = work_dir() / "job-host"
    try:
        first = guarded("shardflow: full_load on a job host started before", run_shardflow, stack, count, rows,
                        host_dir, "host")
        again = guarded("shardflow: full_load on the job host, its second job", run_shardflow, stack, count, rows,
                        host_dir, "host-again")
    finally:
        service.stop(host_dir)
    return {"shardflow_host": first, "shardflow_host_again": again}


def run(stack: Stack, count: int, rows: int) -> dict:
    data = seed(stack, count, rows)
    log.info("small tables: %d tables of %d rows, data %s", count, rows, data["seeded"])
    res = {
        "mydumper_myloader": guarded("baseline: mydumper + myloader", run_mydumper, stack, count, rows),
        "shardflow": guarded("shardflow: spark-submit of the full phase (small tables in one pass)", run_shardflow,
                             stack, count, rows),
        **_host_runs(stack, count, rows),
    }
    try:
        _reset_downstream(stack)
    except Exception as e:  # the figures are taken; leftovers are dropped by the next run
        log.warning("could not drop the downstream copies: %s", e)
    return {"data": {**data, "layout": f"2 sources x 1 schema x {count // 2} tables, 6 columns"},
            "results": res,
            "ratios": {"vs_myloader": ratio(res["shardflow_host"].get("rows_per_s"),
                                            res["mydumper_myloader"].get("rows_per_s")),
                       "vs_myloader_second_job": ratio(res["shardflow_host_again"].get("rows_per_s"),
                                                       res["mydumper_myloader"].get("rows_per_s")),
                       "spark_submit_vs_myloader": ratio(res["shardflow"].get("rows_per_s"),
                                                         res["mydumper_myloader"].get("rows_per_s")),
                       "host_vs_spark_submit": ratio(res["shardflow_host"].get("rows_per_s"),
                                                     res["shardflow"].get("rows_per_s"))}}
