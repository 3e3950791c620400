"""Full copy: the Spark full phase vs mydumper+myloader vs the servers' own file copy.

Data: ``rows`` rows spread evenly over 2 sources × 2 schemas × 2 tables with 6 columns.
Source 1 holds bench_full_01/02, source 2 bench_full_03/04
(distinct names, so the baselines can load every table into the downstream side by side),
tables t_01/t_02. Seeded server-side from the SEQUENCE engine with the binlog off for the
session; reused by later runs when the row count and layout version match.

Engines, each timed from nothing downstream to every row committed downstream:
- mydumper_myloader (baseline A): mydumper, 4 threads, both sources at once into a local
  directory, then myloader, 4 threads per dump, both at once.
- outfile_load_data (baseline B, the raw limit): per table ``SELECT … INTO OUTFILE`` on the
  upstream server + ``LOAD DATA INFILE`` on the downstream server (one machine, so the path
  is shared), 4 tables at a time. No client touches a row.
- raw_merge (baseline C, the merge's raw limit): the job shardflow does, by the servers alone:
  per shard ``SELECT id | <partition id bits>, … INTO OUTFILE`` (the ids shardflow's task
  gives), then ``LOAD DATA INFILE`` into the one merged table (bigint AUTO_INCREMENT id, as
  shardflow creates it), 2 loads at a time (``MERGE_STREAMS``). ``merge_vs_raw_merge_limit``
  judges the merge against it; ``vs_myloader`` stays what a user compares.
- shardflow: the task's full phase as the full DAG runs it: ``prepare`` (low watermarks +
  merged target table), ``spark-submit spark_jobs/full_load.py --task`` on local[2],
  ``finish``. Unlike the baselines it also merges the 8 tables into one and rewrites ids
  (``partition id``): that is the job it exists for. On MariaDB that job has a floor of its
  own: every insert into a table with an AUTO_INCREMENT column latches the table's root page,
  so concurrent loads into one merged table contend (the full load gives such a table two
  chunks at a time, the others spooled: dm_core/full/load_data.py).
- shardflow_copy: the same phase doing the baselines' job -- the 8 tables copied as 8 tables,
  no routing or column mapping -- so its ratios compare like with like.
- shardflow_host, shardflow_copy_host: the same two jobs sent to a job host (dm_core/jobhost)
  started before the clock, as the Airflow operator sends them when the machine's host runs:
  the copy itself, without spark-submit's start-up (JVM, SparkContext, executors' Python). A
  fresh host for each, so each is the host's first job (its JVM code as cold as a submit's).
  ``host_merge_vs_raw_merge_limit`` and ``host_copy_vs_raw_limit`` judge them.

``ratios``: shardflow rows/s ÷ the baseline's rows/s (1.0 = as fast; > 1 faster);
``copy_*``: the same for shardflow_copy.

Peak RSS (``peak_rss_mb``): the client processes' trees (spark-submit's JVM, driver and executor
Pythons; mydumper and myloader); the raw limits have no client. ``peak_rss_mb_by_kind``: each
kind's own peak in shardflow's tree (java, python driver, python executors). ``--one-table-rows N``
(bench/run.py) puts every row in one table of source 1 and runs shardflow's engines only: the
full phase's memory must not grow with a table's size.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pymysql.converters import escape_string

from bench.common import (
    JDBC_JAR, ROOT, VENV_BIN, ServerCPU, Skipped, Stack, TreeRSS, bench_schema, drop_schemas, execute, figures,
    finish, guarded, median_run, python_env, query, ratio, run_logged, work_dir,
)
from dm_core.db import Endpoint, connect, qt
from dm_core.spark_options import driver_java_options

log = logging.getLogger("bench.full")

LAYOUT_VERSION = "v1"
SOURCES = [("bench-src-1", ["bench_full_01", "bench_full_02"]), ("bench-src-2", ["bench_full_03", "bench_full_04"])]
TABLES = ["t_01", "t_02"]
PREFIX = "bench_full"        # upstream schemas bench_full_NN (and the downstream copies of A and B)
TARGET_DB = "bench_merged"   # shardflow's merged target bench_merged.t
TASK_NAME = "bench_full"
THREADS = 4

_DDL = """CREATE TABLE {t} (
  id int NOT NULL AUTO_INCREMENT,
  k int NOT NULL,
  name varchar(64) NULL,
  amount decimal(12,2) NOT NULL,
  created_at datetime NOT NULL,
  note varchar(120) NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""

_FILL = """INSERT INTO {t} (id, k, name, amount, created_at, note)
SELECT seq, (seq * 7919) % 1000003, IF(seq % 5 = 0, NULL, CONCAT('name-', seq)), (seq % 100000) / 100,
       TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND, REPEAT(CHAR(97 + seq % 26), 20 + seq % 61)
FROM {s}.seq_{a}_to_{b}"""

# Bytes of the rows as tab-separated text (what INTO OUTFILE writes): the logical payload,
# one figure for every engine's MB/s. NULL is "\N"; 5 tabs + a newline per row.
_TEXT_BYTES = ("SELECT COALESCE(SUM(LENGTH(id) + LENGTH(k) + IFNULL(LENGTH(name), 2) + LENGTH(amount) "
               "+ LENGTH(created_at) + LENGTH(note) + 6), 0) FROM {t}")


@dataclass(frozen=True)
class Shard:
    source_id: str
    ep: Endpoint
    schema: str
    table: str
    rows: int


def layout(stack: Stack, rows: int, one_table: bool = False) -> list[Shard]:
    """The shards of the data set: 8 tables over 2 sources, or (``one_table``) every row in one
    table of source 1 (how memory grows with a table's size)."""
    if one_table:
        sid, schemas = SOURCES[0]
        return [Shard(sid, stack.up1, schemas[0], TABLES[0], rows)]
    specs = [(sid, ep, s, t) for (sid, schemas), ep in zip(SOURCES, stack.ups) for s in schemas for t in TABLES]
    base, extra = divmod(rows, len(specs))
    return [Shard(sid, ep, s, t, base + (1 if i < extra else 0)) for i, (sid, ep, s, t) in enumerate(specs)]


# ---- data -------------------------------------------------------------------------------------
def _comment(sh: Shard) -> str:
    return f"shardflow-bench full {LAYOUT_VERSION} rows={sh.rows}"


def _seeded(sh: Shard) -> int | None:
    """Text bytes of the shard if it already holds this layout's data, else None."""
    got = query(sh.ep, "SELECT table_comment FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                (sh.schema, sh.table))
    if not got or not got[0][0].startswith(_comment(sh) + " bytes="):
        return None
    if query(sh.ep, f"SELECT COUNT(*) FROM {qt(sh.schema, sh.table)}")[0][0] != sh.rows:
        return None
    return int(got[0][0].rsplit("bytes=", 1)[1])


def _seed_one(sh: Shard) -> int:
    t = qt(sh.schema, sh.table)
    conn = connect(sh.ep)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")  # a snapshot to copy, not changes to replicate
            cur.execute(f"DROP TABLE IF EXISTS {t}")
            cur.execute(_DDL.format(t=t))
            step = 250_000
            for a in range(1, sh.rows + 1, step):
                cur.execute(_FILL.format(t=t, s=bench_schema(sh.schema), a=a, b=min(sh.rows, a + step - 1)))
            cur.execute(_TEXT_BYTES.format(t=t))
            nbytes = int(cur.fetchone()[0])
            cur.execute(f"ALTER TABLE {t} COMMENT = %s", (f"{_comment(sh)} bytes={nbytes}",))
    finally:
        conn.close()
    return nbytes


def _tables_upstream(stack: Stack) -> int:
    return sum(query(ep, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema LIKE %s",
                     (PREFIX + r"\_%",))[0][0] for ep in stack.ups)


def seed(stack: Stack, rows: int, one_table: bool = False) -> dict:
    shards = layout(stack, rows, one_table)
    t0 = time.monotonic()
    have = [_seeded(sh) for sh in shards]
    if all(b is not None for b in have) and _tables_upstream(stack) == len(shards):
        return {"rows": rows, "bytes": sum(have), "seeded": "reused", "seconds": round(time.monotonic() - t0, 1)}
    log.info("seeding %d rows upstream (%d tables)", rows, len(shards))
    for ep in stack.ups:
        drop_schemas(ep, PREFIX + "_")
    for ep in stack.ups:
        schemas = sorted({sh.schema for sh in shards if sh.ep == ep})
        if schemas:
            execute(ep, *[f"CREATE DATABASE {bench_schema(s)}" for s in schemas], session=("SET SESSION sql_log_bin = 0",))
    with ThreadPoolExecutor(max_workers=4) as ex:
        nbytes = sum(ex.map(_seed_one, shards))
    return {"rows": rows, "bytes": nbytes, "seeded": "created", "seconds": round(time.monotonic() - t0, 1)}


def _servers(stack: Stack) -> ServerCPU:
    """CPU-seconds of the three servers over an engine's run (the engines' figures' ``cpu_seconds``)."""
    return ServerCPU({"upstream 1": stack.up1.port, "upstream 2": stack.up2.port, "downstream": stack.down.port})


def _cpu(servers: ServerCPU, rss: "TreeRSS | None" = None, before: dict | None = None) -> dict:
    """CPU-seconds by server and client kind; ``before``: the clients' by kind when the clock
    started (a job host's start-up), left out."""
    clients = rss.cpu_by_kind() if rss is not None else {}
    out = {**servers.seconds, **{k: round(v - (before or {}).get(k, 0.0), 1) for k, v in clients.items()}}
    out["total"] = round(sum(out.values()), 1)
    return out


def _reset_downstream(stack: Stack) -> None:
    drop_schemas(stack.down, PREFIX + "_")
    execute(stack.down, f"DROP DATABASE IF EXISTS {bench_schema(TARGET_DB)}")
    _settle(stack.down)


def _settle(ep: Endpoint, limit_s: float = 120) -> None:
    """Let the downstream finish the previous engine's work (dirty pages of the gigabyte it
    wrote, purge of what was dropped) before the next one is timed: every engine starts
    from a quiet server. Flushes eagerly while it waits, then restores the setting."""
    pct = query(ep, "SELECT @@GLOBAL.innodb_max_dirty_pages_pct")[0][0]
    execute(ep, "SET GLOBAL innodb_max_dirty_pages_pct = 0")
    try:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            status = dict(query(ep, "SHOW GLOBAL STATUS WHERE Variable_name IN "
                                    "('Innodb_buffer_pool_pages_dirty', 'Innodb_buffer_pool_pages_total')"))
            history = query(ep, "SELECT `count` FROM information_schema.innodb_metrics "
                                "WHERE name = 'trx_rseg_history_len'")
            dirty = int(status.get("Innodb_buffer_pool_pages_dirty", 0))
            if dirty * 100 <= int(status.get("Innodb_buffer_pool_pages_total", 1)) and (not history
                                                                                      or history[0][0] < 1000):
                return
            time.sleep(0.5)
        log.warning("the downstream was still busy after %.0fs (dirty pages, purge); timing anyway", limit_s)
    finally:
        execute(ep, f"SET GLOBAL innodb_max_dirty_pages_pct = {float(pct)}")


def _downstream_rows(stack: Stack, shards: list[Shard]) -> int:
    return sum(query(stack.down, f"SELECT COUNT(*) FROM {qt(sh.schema, sh.table)}")[0][0] for sh in shards)


def _check_rows(what: str, got: int, want: int) -> bool:
    if got != want:
        log.warning("WARNING: %s left %d rows downstream, the upstream holds %d", what, got, want)
    return got == want


# ---- baseline A: mydumper + myloader -----------------------------------------------------------
def _defaults_file(path: Path, ep: Endpoint) -> Path:
    """Credentials for mydumper/myloader in a 0600 file, never on the command line."""
    path.write_text(f"[client]\nuser={ep.user}\npassword={ep.password}\n")
    os.chmod(path, 0o600)
    return path


DUMP_TIMEOUT_S = 600   # a 10M-row dump takes ~10 s here


def _once_more_if(error: str, start, what: str, before_again=lambda: None) -> tuple[float, bool]:
    """Run the processes ``start()`` launches to their end; when one fails with ``error`` in its
    message, kill them all and run them once more from the start (``before_again`` first).
    Returns (seconds of the attempt that finished, whether it was the second)."""
    for attempt in (1, 2):
        t0 = time.monotonic()
        procs = start()
        try:
            for p in procs:
                finish(p, what)
            return time.monotonic() - t0, attempt == 2
        except RuntimeError as e:
            for p in procs:
                p.kill()
                p.wait()
            if attempt == 2 or error not in str(e):
                raise
            log.warning("%s failed (%s); running it again from the start: %s", what, error, e)
            before_again()
    raise AssertionError("unreachable")


def run_mydumper(stack: Stack, rows: int, nbytes: int) -> dict:
    tools = {t: shutil.which(t) for t in ("mydumper", "myloader")}
    missing = [t for t, p in tools.items() if not p]
    if missing:
        raise Skipped(f"{' and '.join(missing)} not installed (Debian package `mydumper`)")
    shards = layout(stack, rows)
    _reset_downstream(stack)
    wd = work_dir() / "mydumper"
    shutil.rmtree(wd, ignore_errors=True)
    wd.mkdir()
    logf = wd / "mydumper.log"
    ups = [(ep, _defaults_file(wd / f"up{i}.cnf", ep), wd / f"dump{i}") for i, ep in enumerate(stack.ups, 1)]
    down_cnf = _defaults_file(wd / "down.cnf", stack.down)
    try:
        with TreeRSS() as rss, _servers(stack) as servers:
            # mydumper 0.10 now and then hangs for good on a futex with its connection idle (seen
            # 2026-11-26): the dump runs again once rather than the bench waiting an hour
            t_dump, _ = _once_more_if(
                "timed out", lambda: [run_logged([tools["mydumper"], f"--defaults-file={cnf}", "-h", ep.host,
                                                  "-P", str(ep.port), "-t", str(THREADS), "-r", "100000",
                                                  "--trx-consistency-only", "-x", rf"^{PREFIX}_[0-9]+\.", "-o",
                                                  str(out), "-v", "1"], logf, rss=rss, timeout=DUMP_TIMEOUT_S)
                                      for ep, cnf, out in ups],
                "mydumper", before_again=lambda: [shutil.rmtree(out, ignore_errors=True) for _, _, out in ups])
            # myloader 0.10 gives up on a deadlock between its own threads (seen 2026-11-27): the
            # load runs again once (-o drops what it wrote)
            t_load, retried = _once_more_if(
                "Deadlock", lambda: [run_logged([tools["myloader"], f"--defaults-file={down_cnf}", "-h",
                                                 stack.down.host, "-P", str(stack.down.port), "-t", str(THREADS),
                                                 "-o", "-d", str(out), "-v", "1"], logf, rss=rss)
                                     for _, _, out in ups],
                "myloader")
            seconds = t_dump + t_load
        dump_bytes = sum(f.stat().st_size for _, _, out in ups for f in out.iterdir())
        got = _downstream_rows(stack, shards)
        return figures(got, nbytes, seconds, rss.peak, dump_seconds=round(t_dump, 3), cpu_seconds=_cpu(servers, rss),
                       load_seconds=round(seconds - t_dump, 3), dump_bytes=dump_bytes, load_retried=retried,
                       rows_ok=_check_rows("mydumper+myloader", got, rows),
                       how=f"mydumper -t {THREADS} -r 100000 per source (both at once), then myloader -t {THREADS} "
                           "per dump (both at once); peak RSS of the client processes only")
    finally:
        shutil.rmtree(wd, ignore_errors=True)


# ---- baseline B: INTO OUTFILE + LOAD DATA INFILE ------------------------------------------------
def _server_copy(stack: Stack, shards: list[Shard], name: str, create: list[str], copy) -> tuple[float, int, ServerCPU]:
    """The raw limits' frame: the ``create`` statements downstream, then ``copy(shard, path, up
    cursor, down cursor)`` for every shard, THREADS at a time, with ``path`` in a fresh directory
    the servers share (INTO OUTFILE writes there, LOAD DATA INFILE reads). Returns (seconds,
    bytes of the files, the servers' CPU)."""
    wd = work_dir() / name
    shutil.rmtree(wd, ignore_errors=True)
    wd.mkdir()
    os.chmod(wd, 0o777)  # the servers write and read here

    def one(sh: Shard) -> None:
        up, down = connect(sh.ep), connect(stack.down)
        try:
            with up.cursor() as ucur, down.cursor() as dcur:
                copy(sh, escape_string(str(wd / f"{sh.source_id}.{sh.schema}.{sh.table}.tsv")), ucur, dcur)
            down.commit()
        finally:
            up.close()
            down.close()

    try:
        with _servers(stack) as servers:
            t0 = time.monotonic()
            execute(stack.down, *create)
            with ThreadPoolExecutor(max_workers=THREADS) as ex:
                list(ex.map(one, shards))
            seconds = time.monotonic() - t0
        return seconds, sum(f.stat().st_size for f in wd.iterdir()), servers
    finally:
        shutil.rmtree(wd, ignore_errors=True)


def run_outfile(stack: Stack, rows: int, nbytes: int) -> dict:
    shards = layout(stack, rows)
    _reset_downstream(stack)

    def copy(sh: Shard, path: str, ucur, dcur) -> None:
        t = qt(sh.schema, sh.table)
        ucur.execute(f"SHOW CREATE TABLE {t}")
        dcur.execute(f"USE {bench_schema(sh.schema)}")
        dcur.execute(ucur.fetchone()[1])
        ucur.execute(f"SELECT * INTO OUTFILE '{path}' CHARACTER SET utf8mb4 FROM {t}")
        dcur.execute(f"LOAD DATA INFILE '{path}' INTO TABLE {t} CHARACTER SET utf8mb4")

    seconds, file_bytes, servers = _server_copy(
        stack, shards, "outfile", [f"CREATE DATABASE {bench_schema(s)}" for s in sorted({sh.schema for sh in shards})],
        copy)
    got = _downstream_rows(stack, shards)
    return figures(got, nbytes, seconds, None, file_bytes=file_bytes, cpu_seconds=_cpu(servers),
                   rows_ok=_check_rows("INTO OUTFILE + LOAD DATA", got, rows),
                   how=f"per table SELECT INTO OUTFILE upstream + LOAD DATA INFILE downstream, {THREADS} tables at a time; "
                       "all work happens inside the servers (no client RSS to report)")


# ---- baseline C: the merge's own limit ---------------------------------------------------------
MERGE_STREAMS = 2   # LOAD DATA streams into the one merged table at a time (the full load's turns)


def run_raw_merge(stack: Stack, rows: int, nbytes: int, one_table: bool = False) -> dict:
    """The merge's raw limit: every shard ``SELECT … INTO OUTFILE`` upstream with its ids already
    rewritten (the partition id shardflow's task gives them), then ``LOAD DATA INFILE`` into the
    one merged table (AUTO_INCREMENT id, as shardflow creates it), ``MERGE_STREAMS`` loads at once
    while up to ``THREADS`` shards export."""
    from dm_core.rules.column_mapping import partition_or_value

    shards = layout(stack, rows, one_table)
    _reset_downstream(stack)
    target = qt(TARGET_DB, "t")
    instance = {sid: i for i, (sid, _) in enumerate(SOURCES, 1)}
    turns = threading.Semaphore(MERGE_STREAMS)
    waited = []

    def copy(sh: Shard, path: str, ucur, dcur) -> None:
        high = partition_or_value([str(instance[sh.source_id]), PREFIX + "_", "t_"], sh.schema, sh.table)
        ucur.execute(f"SELECT id | {int(high)}, k, name, amount, created_at, note INTO OUTFILE '{path}' "
                     f"CHARACTER SET utf8mb4 FROM {qt(sh.schema, sh.table)}")
        t = time.monotonic()
        with turns:
            waited.append(time.monotonic() - t)
            dcur.execute(f"LOAD DATA INFILE '{path}' INTO TABLE {target} CHARACTER SET utf8mb4")

    seconds, file_bytes, servers = _server_copy(
        stack, shards, "raw-merge",
        [f"CREATE DATABASE {bench_schema(TARGET_DB)}",
         _DDL.format(t=target).replace("id int NOT NULL AUTO_INCREMENT", "id bigint NOT NULL AUTO_INCREMENT")], copy)
    got = query(stack.down, f"SELECT COUNT(*) FROM {target}")[0][0]
    return figures(got, nbytes, seconds, None, file_bytes=file_bytes, cpu_seconds=_cpu(servers),
                   load_wait_seconds=round(sum(waited), 1), rows_ok=_check_rows("raw merge", got, rows),
                   how=f"per shard SELECT id | partition bits, ... INTO OUTFILE upstream ({THREADS} at a time), then "
                       f"LOAD DATA INFILE into the one merged table {TARGET_DB}.t (bigint AUTO_INCREMENT id), "
                       f"{MERGE_STREAMS} loads at a time; all work inside the servers (no client RSS to report)")


# ---- shardflow --------------------------------------------------------------------------------
def _parse_task():
    try:
        return importlib.import_module("dm_core.config.task").parse_task
    except (ImportError, AttributeError) as e:
        raise Skipped(f"the task parser is not available yet (dm_core/config/task.py parse_task): {e}") from None


def task_yaml(stack: Stack, name: str = TASK_NAME, merged: bool = True, one_table: bool = False) -> str:
    """The bench's task: every shard merged into TARGET_DB.t with partition id, or (``merged``
    false) each table copied under its own name, as the baselines do. ``one_table``: source 1 only."""
    import yaml

    from tests.integration.helpers import shard_task_yaml

    text = shard_task_yaml(name, stack.down, [(sid, i) for i, (sid, _) in enumerate(SOURCES[:1] if one_table else SOURCES, 1)],
                           PREFIX, TARGET_DB, mode="full")
    if merged:
        return text
    task = yaml.safe_load(text)
    for key in ("routes", "column-mappings"):
        task.pop(key)
    for inst in task["mysql-instances"]:
        inst.pop("route-rules")
        inst.pop("column-mapping-rules")
    return yaml.safe_dump(task, sort_keys=False)


def full_load_cmd(name: str, env: dict) -> list[str]:
    """spark-submit of the full phase of task ``name`` as the full DAG runs it (report in work_dir)."""
    return [str(VENV_BIN / "spark-submit"), "--master", os.environ.get("SHARDFLOW_BENCH_MASTER", "local[2]"),
            "--jars", JDBC_JAR, "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.driver.extraJavaOptions={driver_java_options()}",
            "--conf", f"spark.pyspark.python={env['PYSPARK_PYTHON']}",
            "--conf", f"spark.pyspark.driver.python={env['PYSPARK_DRIVER_PYTHON']}",
            str(ROOT / "spark_jobs" / "full_load.py"), "--task", name, "--report", str(work_dir() / "full-report.json")]


def load_on_host(host_dir: Path, name: str, report: Path, logf: Path) -> None:
    """The load of task ``name`` as the Airflow operator runs it when the machine's job host is
    up (dm_core/jobhost); its log lines into ``logf``."""
    from dm_core.jobhost import client, wire

    with open(logf, "a") as out:
        rc = client.run("full_load", ["--task", name, "--report", str(report)], env=client.shardflow_env(),
                        on_line=lambda line: out.write(line + "\n"), path=wire.socket_path(host_dir))
    if rc:
        raise RuntimeError(f"full_load on the job host exited {rc}: see {logf}")


def run_shardflow(stack: Stack, rows: int, nbytes: int, one_table: bool = False, *, merged: bool = True,
                  on_host: bool = False, timeout: float = 3600) -> dict:
    """``on_host``: the load goes to a job host started just before the clock (its start-up, and
    the CPU that took, not counted; its first job, so the JVM's code is as cold as a submit's)."""
    parse_task = _parse_task()
    from dm_core.full.phase import finish as finish_phase, prepare
    from dm_core.jobhost import service
    from dm_core.state import StateStore
    from tests.integration.helpers import register

    _reset_downstream(stack)
    name = TASK_NAME if merged else TASK_NAME + "_copy"
    text = task_yaml(stack, name, merged, one_table)
    sources = SOURCES[:1] if one_table else SOURCES
    task = parse_task(text, f"<bench {name}>")
    logf = work_dir() / "spark-full.log"
    logf.unlink(missing_ok=True)
    env = python_env()
    cmd = full_load_cmd(name, env)
    with StateStore(stack.state_dsn) as store:
        register(store, {sid: ep for (sid, _), ep in zip(sources, stack.ups)}, name, text)
        host_dir = work_dir() / "job-host-full"
        try:
            with TreeRSS() as rss:
                started = {}
                if on_host:
                    service.stop(host_dir)   # a fresh host: its first job
                    rss.watch(service.start(host_dir, master=os.environ.get("SHARDFLOW_BENCH_MASTER", "local[2]")))
                    time.sleep(3 * rss.interval)   # sampled: what its start-up cost is left out
                    started = rss.cpu_by_kind()
                with _servers(stack) as servers:
                    t0 = time.monotonic()
                    prepare(task, store)
                    t1 = time.monotonic()
                    if on_host:
                        load_on_host(host_dir, name, work_dir() / "full-report.json", logf)
                    else:
                        finish(run_logged(cmd, logf, env=env, cwd=work_dir(), rss=rss, timeout=timeout),
                               "spark-submit full_load.py")
                    t2 = time.monotonic()
                    out = finish_phase(task, store)
                    seconds = time.monotonic() - t0
                    time.sleep(2 * rss.interval)   # the host's processes live on: one more sample of their CPU
        finally:
            if on_host:
                service.stop(host_dir)
        loaded = sum(v["rows_loaded"] for v in out.values())
        store.set_task_status(name, "stopped")  # leave nothing registered that looks live
        for sid, _ in sources:
            store.disable_source(sid)
    got = (query(stack.down, f"SELECT COUNT(*) FROM {qt(TARGET_DB, 't')}")[0][0] if merged
           else _downstream_rows(stack, layout(stack, rows, one_table)))
    report = json.loads((work_dir() / "full-report.json").read_text())
    return figures(got, nbytes, seconds, rss.peak, prepare_seconds=round(t1 - t0, 3),
                   cpu_seconds=_cpu(servers, rss, before=started),
                   peak_rss_mb_by_kind=rss.peak_mb_by_kind(),
                   load_seconds=report["seconds"], write_mode=report["write_mode"],
                   executor_stage_seconds=report.get("stages", {}),
                   spark_seconds=round(t2 - t1, 3), finish_seconds=round(seconds - (t2 - t0), 3),
                   rows_recorded_by_chunks=loaded, rows_ok=_check_rows("shardflow", got, rows),
                   spark_log=str(logf),
                   how=("prepare() + full_load on a job host started before the clock (dm_core/jobhost), its first "
                        "job + finish(), " if on_host else
                        "prepare() + spark-submit --master local[2] spark_jobs/full_load.py + finish(), ")
                       + (f"routed into {TARGET_DB}.t with partition id" if merged
                          else "each table copied as itself (the baselines' job)")
                       + ("; peak RSS of the host's process tree (JVM + Python workers)" if on_host else
                          "; peak RSS of spark-submit's process tree (JVM + Python workers)"))


# ---- the part ---------------------------------------------------------------------------------
ROUNDS = 3


def run(stack: Stack, rows: int, one_table: bool = False, rounds: int = ROUNDS) -> dict:
    """The part; ``one_table``: every row in one upstream table (source 1), shardflow only unless
    SHARDFLOW_BENCH_FULL_ENGINES chooses, to see whether memory grows with a table's size.

    The engines alternate ``rounds`` times and each reports its median run: on 2 cores the same
    engine moves by up to a third between runs (the downstream's CPU for the same rows by a
    quarter), so one run of each judges the noise more than the engines."""
    data = seed(stack, rows, one_table)
    log.info("full: %s rows, %.1f MB of text, data %s", f"{rows:,}", data["bytes"] / 1e6, data["seeded"])
    engines = {
        "mydumper_myloader": ("baseline A: mydumper + myloader", run_mydumper, {}),
        "outfile_load_data": ("baseline B: INTO OUTFILE + LOAD DATA INFILE", run_outfile, {}),
        "raw_merge": ("baseline C: INTO OUTFILE + LOAD DATA INFILE into the one merged table", run_raw_merge,
                      {"one_table": one_table}),
        "shardflow": ("shardflow: Spark full phase", run_shardflow, {"one_table": one_table}),
        "shardflow_copy": ("shardflow: Spark full phase, tables copied as themselves", run_shardflow,
                           {"merged": False, "one_table": one_table}),
        "shardflow_host": ("shardflow: the full phase on a job host started before", run_shardflow,
                           {"one_table": one_table, "on_host": True}),
        "shardflow_copy_host": ("shardflow: tables copied as themselves, on a job host started before", run_shardflow,
                                {"merged": False, "one_table": one_table, "on_host": True}),
    }
    # SHARDFLOW_BENCH_FULL_ENGINES=shardflow_copy,mydumper_myloader: a subset, while working on one
    chosen = [e for e in os.environ.get("SHARDFLOW_BENCH_FULL_ENGINES", "").split(",") if e] or (
        ["shardflow", "shardflow_copy"] if one_table else list(engines))
    runs: dict[str, list[dict]] = {k: [] for k in engines if k in chosen}
    for n in range(1, rounds + 1):
        for k, (title, fn, kw) in engines.items():
            if k in runs:
                runs[k].append(guarded(f"{title} (round {n}/{rounds})", fn, stack, rows, data["bytes"], **kw))
    res = {k: ((median_run(runs[k]) if rounds > 1 else runs[k][0]) if k in runs else {"skipped": "not chosen"})
           for k in engines}
    try:
        _reset_downstream(stack)
    except Exception as e:  # the figures are taken; leftovers are dropped by the next run
        log.warning("could not drop the downstream copies: %s", e)
    judged = {  # ratio name: (shardflow's engine, baseline)
        "vs_myloader": ("shardflow", "mydumper_myloader"),
        "vs_raw_limit": ("shardflow", "outfile_load_data"),
        "merge_vs_raw_merge_limit": ("shardflow", "raw_merge"),
        "copy_vs_myloader": ("shardflow_copy", "mydumper_myloader"),
        "copy_vs_raw_limit": ("shardflow_copy", "outfile_load_data"),
        "host_merge_vs_raw_merge_limit": ("shardflow_host", "raw_merge"),
        "host_copy_vs_raw_limit": ("shardflow_copy_host", "outfile_load_data"),
    }
    shards = layout(stack, rows, one_table)
    return {
        "data": {**data, "layout": ("1 table (source 1), 6 columns" if one_table
                                    else "2 sources x 2 schemas x 2 tables, 6 columns"),
                 "upstream_tables": [f"{sh.source_id}:{sh.schema}.{sh.table}" for sh in shards],
                 "rounds": rounds},
        "results": res,
        "ratios": {name: ratio(res[a].get("rows_per_s"), res[b].get("rows_per_s")) for name, (a, b) in judged.items()},
        # each round's own ratio, for how often a target is met, not only whether the medians meet it
        "ratios_by_round": {name: [ratio(x.get("rows_per_s"), y.get("rows_per_s"))
                                   for x, y in zip(runs.get(a, []), runs.get(b, []))]
                            for name, (a, b) in judged.items() if rounds > 1},
    }
