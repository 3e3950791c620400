"""Incremental: the shardflow syncer vs decoding alone, a naive applier and MariaDB's replica.

Workload (bench/inc_workload.py; one source, up1): narrow and wide (30 columns, JSON, BLOB) shard
tables, written before anything is measured, between two ``SHOW MASTER STATUS`` positions
[start, end): ``events`` single-row autocommit transactions (60% INSERT / 30% UPDATE / 10%
DELETE, one in five on the wide tables) plus one 1000-row transaction per 10,000 events.
``--inc-events`` sizes it: the default, 1,000,000, is 1.1M row events and lasts 30 s or more
per engine here; 50,000 is the quick size for development.
Every engine replays the same binlog range into empty tables and is timed until the
range is applied; rows/s always divides the workload's row count (others writing to up1
at the same time only add events every engine must skip).

Engines:
- decode_only: ``OracleBinlogWindow`` (mysql-replication) over [start, end), rows counted, nothing
  applied: what the library the issue names reads per second (over the first ``DECODE_MAX_ROWS``).
- naive: the same reader, one autocommit statement per row (INSERT / UPDATE / DELETE by id)
  into the merged tables; only up to ``NAIVE_MAX_EVENTS`` events (it takes minutes past that).
- replica_single / replica_parallel: a private MariaDB replica (port 3340-3349, own datadir,
  ``replicate_wild_do_table=bench_inc.%``) started at ``start`` with ``START SLAVE UNTIL
  end``, timed until Exec_Master_Log_Pos reaches ``end``; parallel = 4 optimistic threads.
  replica_single and shardflow (tuned) run ``ROUNDS`` times, alternately, and each reports its
  median run (``rounds_seconds`` lists them all): the ratio is of two medians of one run.
  The replica keeps the shards apart (it has no routing); it applies the same row events.
- shardflow: ``Syncer.run_until()`` (windows back to back) from a checkpoint at ``start`` until the
  checkpoint passes ``end`` (the sensor's window budget), merging the shards into
  bench_inc.t and bench_inc.w downstream (DM routes ``t_*`` → ``t``, ``w_*`` → ``w``, shard-mode
  pessimistic), in a process of its own (spawned, as a sensor's task process is): its peak RSS
  (``VmHWM``) is the sync's memory. ``shardflow`` runs with the tuned syncer settings,
  ``shardflow_defaults`` with a task file that sets none (shardflow's defaults: DM's, but batch
  1000, ``compact`` and ``multiple-rows`` on), ``shardflow_dm_defaults`` with DM's own
  (``DM_DEFAULTS``).

Peak RSS (``peak_rss_mb``): the sync process for shardflow; the replica's mariadbd for the
replica (sampled); this process for decode_only (``VmHWM`` after a reset).

Each applier's result is checked against the union of the upstream shards (row count +
summed CRC32 checksum).

Lag: see ``measure_lag``; ``ratios`` = shardflow rows/s ÷ each baseline's rows/s.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pymysql
from pymysql.converters import escape_string

from bench.common import (
    ServerCPU, Skipped, Stack, TreeRSS, bench_schema, execute, figures, guarded, median_run, percentile, ratio, settle, work_dir,
)
from bench.inc_workload import (
    BIG_ROWS, FAMILIES, SCHEMA, SHARD_TABLES, WIDE_EVERY, Workload, binlog_bytes, checksum, fresh_table, raw_conn, write_workload,
)
from dm_core.db import Endpoint, connect, qi, qt
from dm_core.position import Position
from dm_core.reset import reset_task

log = logging.getLogger("bench.incremental")

NAIVE_SCHEMA = "bench_inc_naive"
SOURCE_ID = "bench-inc-src"
TASK_NAME = "bench_inc"
REPLICA_PORTS = range(3340, 3350)
REPLICA_THREADS = 4
LAG_SECONDS = 8.0               # length of the steady-load phase that measures lag


def _client_server_id(k: int) -> int:
    return 0x6E000000 + (os.getpid() % 0xFFFF) * 8 + k


def _verify(what: str, got: tuple[int, int], want: tuple[int, int]) -> bool:
    if got != want:
        log.warning("WARNING: %s: downstream (rows, checksum) %s != upstream %s", what, got, want)
    return got == want


# ---- decode only / naive ------------------------------------------------------------------------
def _window(up: Endpoint, start: Position, end: Position, k: int):
    from tests.oracle_binlog import OracleBinlogWindow

    return OracleBinlogWindow(up, start, end, server_id=_client_server_id(k), budget_events=1 << 62, budget_seconds=1e9)


def reset_peak_rss() -> None:
    """Start this process's peak RSS (VmHWM) afresh at its current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_rss() -> int:
    """This process's peak RSS in bytes since the start or the last ``reset_peak_rss``."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


# A sensor's window: SourceSyncSensor's poke budget (10 s) bounds it; the event count does not
# (dm_core/sync/syncer.py WINDOW_EVENTS)
SENSOR_WINDOW_SECONDS = 10.0
DECODE_MAX_ROWS = 200_000   # decode-only reads a prefix this long: it is a rate, and mysql-replication is slow


def run_decode(up: Endpoint, w: dict, nbytes: int | None) -> dict:
    seen = other = 0
    reset_peak_rss()
    t0 = time.monotonic()
    reader = iter(_window(up, w["start"], w["end"], 1))
    for txn in reader:
        for ch in txn.rows:
            if ch.schema == SCHEMA and ch.table in SHARD_TABLES:
                seen += 1
            else:
                other += 1
        if seen >= DECODE_MAX_ROWS:
            break
    seconds = time.monotonic() - t0
    reader.close()
    if seen != w["rows"] and seen < DECODE_MAX_ROWS:
        log.warning("WARNING: decode saw %d row events of %s's shards, the workload wrote %d", seen, SCHEMA, w["rows"])
    return figures(seen, None, seconds, peak_rss(), row_events_seen=seen, other_row_events=other,
                   how=f"tests.oracle_binlog.OracleBinlogWindow (mysql-replication, freeze_schema) over [start, end), at "
                       f"most the first {DECODE_MAX_ROWS:,} row events, rows counted; peak RSS of the bench process "
                       "(its own workload state included)")


NAIVE_MAX_EVENTS = 200_000   # past this the naive applier alone takes minutes


def run_naive(up: Endpoint, down: Endpoint, w: dict, nbytes: int | None) -> dict:
    """The narrow family only (pymysql has no literal for a SET value), checked against its shards."""
    if w["transactions"] > NAIVE_MAX_EVENTS:
        raise Skipped(f"run only up to {NAIVE_MAX_EVENTS:,} events (--inc-events): it takes minutes past that")
    narrow = FAMILIES[0]
    fresh_table(down, NAIVE_SCHEMA, [narrow.merged])
    t = qt(NAIVE_SCHEMA, narrow.merged)
    want = checksum(up, SCHEMA, narrow.shards)
    conn = connect(down, autocommit=True, downstream=True)
    n = 0
    sql: dict[tuple, str] = {}
    settle(up, down)
    t0 = time.monotonic()
    try:
        with conn.cursor() as cur:
            for txn in _window(up, w["start"], w["end"], 2):
                for ch in txn.rows:
                    if ch.schema != SCHEMA or ch.table not in narrow.shards:
                        continue
                    row = ch.after if ch.after is not None else ch.before
                    key = (ch.op, tuple(row))  # every shard goes to the merged table
                    s = sql.get(key)
                    if s is None:
                        cols = list(row)
                        if ch.op == "insert":
                            s = f"INSERT INTO {t} ({', '.join(map(qi, cols))}) VALUES ({', '.join(['%s'] * len(cols))})"
                        elif ch.op == "update":
                            s = f"UPDATE {t} SET {', '.join(qi(c) + ' = %s' for c in cols)} WHERE `id` = %s"
                        else:
                            s = f"DELETE FROM {t} WHERE `id` = %s"
                        sql[key] = s
                    if ch.op == "insert":
                        cur.execute(s, list(ch.after.values()))
                    elif ch.op == "update":
                        cur.execute(s, [*ch.after.values(), ch.before["id"]])
                    else:
                        cur.execute(s, [ch.before["id"]])
                    n += 1
        seconds = time.monotonic() - t0
    finally:
        conn.close()
    ok = _verify("naive", checksum(down, NAIVE_SCHEMA, [narrow.merged]), want)
    execute(down, f"DROP DATABASE IF EXISTS {bench_schema(NAIVE_SCHEMA)}")
    return figures(n, nbytes, seconds, with_rss=False, statements=n, rows_ok=ok,
                   how="OracleBinlogWindow + one autocommit pymysql statement per row (INSERT / UPDATE / DELETE by id), "
                       "narrow rows only (rows/s divides those)")


# ---- MariaDB's replica --------------------------------------------------------------------------
def _free_port() -> int:
    for p in REPLICA_PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
                return p
            except OSError:
                continue
    raise Skipped(f"no free port in {REPLICA_PORTS.start}-{REPLICA_PORTS.stop - 1} for the private replica")


class PrivateReplica:
    """A throwaway MariaDB replica: own datadir under the bench work dir, killed on exit."""

    def __init__(self):
        self.dir: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.ep: Endpoint | None = None

    def __enter__(self) -> "PrivateReplica":
        tools = {t: shutil.which(t) or (f"/usr/sbin/{t}" if os.path.exists(f"/usr/sbin/{t}") else None)
                 for t in ("mariadb-install-db", "mariadbd")}
        if not all(tools.values()):
            raise Skipped("mariadb-install-db / mariadbd not installed (Debian package `mariadb-server`)")
        port = _free_port()
        self.dir = work_dir() / f"replica-{port}"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir()
        user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        (self.dir / "tmp").mkdir(exist_ok=True)   # its own: a starting mariadbd empties its tmpdir of #sql* files
        r = subprocess.run([tools["mariadb-install-db"], "--no-defaults", f"--datadir={self.dir / 'data'}",
                            f"--user={user}", "--auth-root-authentication-method=normal", f"--tmpdir={self.dir / 'tmp'}"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {r.stdout[-500:]} {r.stderr[-500:]}")
        err = self.dir / "error.log"
        # Same durability settings as the stack's downstream, so applying costs the same.
        self.proc = subprocess.Popen(
            [tools["mariadbd"], "--no-defaults", f"--datadir={self.dir / 'data'}", f"--tmpdir={self.dir / 'tmp'}",
             f"--port={port}",
             f"--socket={self.dir / 'mariadbd.sock'}", f"--pid-file={self.dir / 'mariadbd.pid'}",
             "--bind-address=127.0.0.1", f"--user={user}", "--server-id=900", "--skip-slave-start",
             f"--replicate-wild-do-table={SCHEMA}.%", f"--log-error={err}", "--innodb-buffer-pool-size=256M",
             "--innodb-flush-log-at-trx-commit=2", "--character-set-server=utf8mb4",
             "--collation-server=utf8mb4_general_ci", f"--relay-log={self.dir / 'relay-bin'}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.ep = Endpoint("127.0.0.1", port, "root", "", name="bench replica")
        deadline = time.monotonic() + 60
        while True:
            try:
                connect(self.ep).close()
                break
            except Exception:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    tail = err.read_text(errors="replace")[-1500:] if err.exists() else ""
                    self.__exit__()
                    raise RuntimeError(f"the private replica did not start on port {port}:\n{tail}") from None
                time.sleep(0.2)
        log.info("private replica up on 127.0.0.1:%d (%s)", port, self.dir)
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


def run_replica(rep: PrivateReplica, up: Endpoint, w: dict, nbytes: int | None, want: tuple[int, int],
                *, parallel: bool, timeout: float = 1800) -> dict:
    r = rep.ep
    start, end = w["start"], w["end"]
    execute(r, "STOP SLAVE", "RESET SLAVE ALL")
    fresh_table(r, SCHEMA, SHARD_TABLES)
    threads = REPLICA_THREADS if parallel else 0
    execute(r, f"SET GLOBAL slave_parallel_threads = {threads}",
            f"SET GLOBAL slave_parallel_mode = '{'optimistic' if parallel else 'conservative'}'",
            f"CHANGE MASTER TO MASTER_HOST = '{escape_string(up.host)}', MASTER_PORT = {int(up.port)}, "
            f"MASTER_USER = '{escape_string(up.user)}', MASTER_PASSWORD = '{escape_string(up.password)}', "
            f"MASTER_LOG_FILE = '{escape_string(start.file)}', MASTER_LOG_POS = {int(start.pos)}, MASTER_USE_GTID = no")
    settle(up, r)
    conn = connect(r)
    rss = TreeRSS()
    rss.watch(rep.proc.pid)
    servers = ServerCPU({"upstream": up.port}, {"replica": rep.proc.pid})
    try:
        with rss, servers, conn.cursor(pymysql.cursors.DictCursor) as cur:
            t0 = time.monotonic()
            cur.execute(f"START SLAVE UNTIL MASTER_LOG_FILE = '{escape_string(end.file)}', MASTER_LOG_POS = {int(end.pos)}")
            while True:
                cur.execute("SHOW SLAVE STATUS")
                st = cur.fetchone()
                if st and st["Relay_Master_Log_File"] and \
                        Position(st["Relay_Master_Log_File"], int(st["Exec_Master_Log_Pos"])).key() >= end.key():
                    break
                if st and (st["Last_SQL_Errno"] or st["Last_IO_Errno"]):
                    raise RuntimeError(f"replica stopped: IO {st['Last_IO_Errno']} {st['Last_IO_Error']}; "
                                       f"SQL {st['Last_SQL_Errno']} {st['Last_SQL_Error']}")
                if time.monotonic() - t0 > timeout:
                    raise RuntimeError(f"replica did not reach {end} in {timeout:.0f}s")
                time.sleep(0.02)
            seconds = time.monotonic() - t0
            cur.execute("STOP SLAVE")
    finally:
        conn.close()
    ok = _verify("replica", checksum(r, SCHEMA, SHARD_TABLES), want)
    mode = f"slave_parallel_threads={threads}" + (", slave_parallel_mode=optimistic" if parallel else "")
    return figures(w["rows"], nbytes, seconds, rss.peak, rows_ok=ok,
                   cpu_seconds=servers.seconds,
                   how=f"private MariaDB replica, {mode}, START SLAVE UNTIL end; timed to Exec_Master_Log_Pos >= end; "
                       "peak RSS of its mariadbd (buffer pool 256M), sampled")


# ---- shardflow --------------------------------------------------------------------------------
# The syncer settings shardflow is measured with (docs/operations.md: "Tuning the syncer"); the runs with
# shardflow's defaults (none set) and DM's (worker-count 16, batch 100, no compact / multiple-rows) are
# reported beside it.
TUNED = {"worker-count": 8, "batch": 1000, "compact": True, "multiple-rows": True}
DM_DEFAULTS = {"batch": 100, "compact": False, "multiple-rows": False}


def task_yaml(down: Endpoint, syncer: dict | None = None) -> str:
    import yaml

    from tests.integration.helpers import target_database

    inst = {"source-id": SOURCE_ID, "block-allow-list": "ba"}
    task = {"name": TASK_NAME, "task-mode": "incremental", "shard-mode": "pessimistic",
            "target-database": target_database(down), "mysql-instances": [inst],
            "block-allow-list": {"ba": {"do-dbs": [SCHEMA]}},
            "routes": {f"merge-{f.merged}": {"schema-pattern": SCHEMA, "table-pattern": f"{f.prefix}_*",
                                             "target-schema": SCHEMA, "target-table": f.merged} for f in FAMILIES}}
    inst["route-rules"] = list(task["routes"])
    if syncer:
        inst["syncer-config-name"] = "bench"
        task["syncers"] = {"bench": dict(syncer)}
    return yaml.safe_dump(task, sort_keys=False)


def _checkpoint(store) -> Position | None:
    st = store.source_state(TASK_NAME, SOURCE_ID)
    return Position(st["binlog_file"], int(st["binlog_pos"])) if st["binlog_file"] else None


def catch_up(stack: Stack, text: str, end: Position, budget_events: int | None, budget_seconds: float,
             timeout: float) -> dict:
    """Run the task's Syncer windows back to back until its checkpoint passes ``end``; runs in a
    process of its own (``run_shardflow``), which it measures: seconds, windows, peak RSS."""
    import logging as _logging

    from dm_core.config.task import parse_task
    from dm_core.state import StateStore
    from dm_core.sync.syncer import Syncer

    _logging.getLogger("shardflow").setLevel(_logging.WARNING)
    task = parse_task(text, f"<bench {TASK_NAME}>")
    with StateStore(stack.state_dsn) as store:
        engine = Syncer(task, SOURCE_ID, store, budget_seconds=budget_seconds,
                        **({"budget_events": budget_events} if budget_events else {}))
        settle(stack.up1, stack.down)
        reset_peak_rss()
        t0 = time.monotonic()
        counted = []
        with ServerCPU({}, {"sync": os.getpid()}) as own:   # every thread of this process
            while True:
                res = engine.run_until(t0 + timeout, on_window=counted.append)
                if res.paused or res.state != "sync":
                    raise RuntimeError(f"the syncer stopped ({res.state}): {res.paused}")
                cp = _checkpoint(store)
                if cp is not None and cp.key() >= end.key():
                    break
                if time.monotonic() - t0 > timeout:
                    raise RuntimeError(f"the syncer did not reach {end} in {timeout:.0f}s (checkpoint {cp})")
        from dm_core.binlog import compiled
        # what the sync ran on: a build older than a .pyx (edited while the bench ran) leaves it pure
        # Python, a third slower, and that run measures the fallback, not the syncer as shipped
        return {"seconds": time.monotonic() - t0, "windows": len(counted), "peak_rss": peak_rss(),
                "cpu": own.seconds["sync"], "compiled": compiled.reason if not compiled.active else "yes"}


def start_task_at(store, up: Endpoint, text: str, start: Position) -> None:
    """The bench's source and task registered afresh, the task running from a clean checkpoint at
    ``start``: its exit point at it, so the run is not in safe mode for its first safe-mode-duration
    seconds (dm_core/sync/safe_mode.py: a start with no exit point is)."""
    store.put_source(SOURCE_ID, {"source-id": SOURCE_ID, "host": up.host, "port": up.port, "user": up.user},
                     up.password)
    reset_task(store, TASK_NAME)
    store.put_task(TASK_NAME, text, "running")
    store.update_source_state(TASK_NAME, SOURCE_ID, binlog_file=start.file, binlog_pos=start.pos, stage="sync",
                              safe_exit_file=start.file, safe_exit_pos=start.pos)


def run_shardflow(stack: Stack, w: dict, nbytes: int | None, want: tuple[int, int], wl: Workload,
                  *, budget_events: int | None = None, budget_seconds: float = SENSOR_WINDOW_SECONDS, lag: bool = True,
                  timeout: float = 1800, syncer: dict | None = None) -> dict:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from dm_core.state import StateStore
    from dm_core.sync.syncer import Syncer

    try:
        from dm_core.config.task import parse_task
    except ImportError as e:
        raise Skipped(f"the task parser is not available yet (dm_core/config/task.py parse_task): {e}") from None
    up, down = stack.up1, stack.down
    fresh_table(down, SCHEMA)
    text = task_yaml(down, syncer)
    task = parse_task(text, f"<bench {TASK_NAME}>")
    start, end = w["start"], w["end"]
    with StateStore(stack.state_dsn) as store:
        start_task_at(store, up, text, start)
        # the sync in a fresh process, as a sensor's task runs it: its memory is the sync's alone
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex, \
                ServerCPU({"upstream": up.port, "downstream": down.port}) as servers:
            run = ex.submit(catch_up, stack, text, end, budget_events, budget_seconds, timeout).result()
        seconds = run["seconds"]
        if run["compiled"] != "yes":
            log.warning("this shardflow run used the pure-Python reader: %s", run["compiled"])
        ok = _verify("shardflow", checksum(down, SCHEMA), want)
        out = figures(w["rows"], nbytes, seconds, run["peak_rss"], windows=run["windows"],
                      transactions_per_s=round(w["transactions"] / seconds, 1), rows_ok=ok,
                      batch=int(task.instance(SOURCE_ID).syncer.batch), syncer=syncer or "defaults",
                      compiled=run["compiled"],
                      cpu_seconds={"sync": run["cpu"], **servers.seconds},
                      how=f"Syncer.run_until() (windows of {budget_seconds:.0f}s{f' or {budget_events} events' if budget_events else ''}) from a "
                          "checkpoint at start until the checkpoint passes end, in a spawned process; peak RSS: its VmHWM")
        if lag:
            engine = Syncer(task, SOURCE_ID, store, budget_seconds=budget_seconds,
                            **({"budget_events": budget_events} if budget_events else {}))
            rate = min(2000.0, max(20.0, 0.5 * w["transactions"] / seconds))
            count = int(min(max(100, w["transactions"] // 5), max(100, rate * LAG_SECONDS)))
            out["lag"] = guarded("shardflow: lag under steady load", measure_lag, up, down, store, engine, wl, rate, count)
        store.set_task_status(TASK_NAME, "stopped")  # leave nothing registered that looks live
        store.disable_source(SOURCE_ID)
    execute(down, f"DROP DATABASE IF EXISTS {bench_schema(SCHEMA)}")
    return out


def measure_lag(up: Endpoint, down: Endpoint, store, syncer, wl: Workload, rate: float, count: int) -> dict:
    """Replication lag under a steady load at half the syncer's catch-up rate.

    How it is measured: after the catch-up, a writer thread commits ``count`` more
    single-row transactions (same 60/30/10 mix) at ``rate`` per second. After each commit
    it records the wall-clock time the commit returned (the upstream commit time; the
    binlog header's own timestamp has one-second resolution, too coarse) and the binlog
    position right after it (SHOW MASTER STATUS). Meanwhile the syncer runs windows back to
    back, as a sensor poke does while there is work. When a window returns, every recorded
    transaction at or before its durable checkpoint counts as applied at that instant:
    lag = window end − commit time. So lag is measured per window (a transaction applied
    early in a window is charged until the window ends) and excludes the Airflow sensor's
    poke interval and scheduling delay, which a deployment adds on top.
    """
    commits: list[tuple[tuple[int, int], float]] = []
    failed: list[BaseException] = []

    def writer() -> None:
        try:
            conn = raw_conn(up)
            try:
                with conn.cursor() as cur:
                    t0 = time.monotonic()
                    for i in range(count):
                        delay = t0 + i / rate - time.monotonic()
                        if delay > 0:
                            time.sleep(delay)
                        cur.execute(wl.single())
                        t = time.time()
                        cur.execute("SHOW MASTER STATUS")
                        f, p = cur.fetchone()[:2]
                        commits.append((Position(f, int(p)).key(), t))
            finally:
                conn.close()
        except BaseException as e:  # reported by the main thread
            failed.append(e)

    th = threading.Thread(target=writer, name="bench-lag-writer", daemon=True)
    lags: list[float] = []
    windows = 0
    i = 0
    t0 = time.monotonic()
    th.start()
    while True:
        alive = th.is_alive()
        res = syncer.run_window()
        windows += 1
        now = time.time()
        if res.paused or res.state != "sync":
            raise RuntimeError(f"the syncer stopped ({res.state}): {res.paused}")
        cp = _checkpoint(store)
        while i < len(commits) and cp is not None and commits[i][0] <= cp.key():
            lags.append(now - commits[i][1])
            i += 1
        if failed:
            raise RuntimeError(f"the lag writer failed: {failed[0]}")
        if not alive and i >= len(commits):
            break
        if time.monotonic() - t0 > LAG_SECONDS * 10 + 60:
            raise RuntimeError(f"the syncer did not catch up with the steady load ({i}/{count} transactions applied)")
        if res.rows == 0:
            time.sleep(0.005)
    th.join()
    want = checksum(up, SCHEMA, SHARD_TABLES)
    return {
        "p50_s": round(percentile(lags, 50), 4) if lags else None,
        "p99_s": round(percentile(lags, 99), 4) if lags else None,
        "max_s": round(max(lags), 4) if lags else None,
        "transactions": len(lags), "target_rate_txn_per_s": round(rate, 1),
        "achieved_rate_txn_per_s": round(count / (time.monotonic() - t0), 1), "windows": windows,
        "rows_ok": _verify("shardflow after the lag phase", checksum(down, SCHEMA), want),
        "how": "steady single-row writes at half the catch-up rate (max 2000/s); per transaction: end of the first "
               "window whose checkpoint covers it − the time its upstream commit returned",
    }


# ---- the part ---------------------------------------------------------------------------------
ROUNDS = 3


def run(stack: Stack, events: int) -> dict:
    up = stack.up1
    wl = Workload()
    log.info("incremental: writing %s single-row transactions to %s on %s", f"{events:,}", ", ".join(SHARD_TABLES), up)
    w = write_workload(up, events, wl)
    want = checksum(up, SCHEMA, SHARD_TABLES)
    nbytes = binlog_bytes(up, w["start"], w["end"])
    log.info("workload: %d rows in %d transactions, binlog %s → %s (%s bytes), written in %.1fs",
             w["rows"], w["transactions"], w["start"], w["end"], nbytes, w["write_seconds"])
    res = {
        "decode_only": guarded("baseline: decode only", run_decode, up, w, nbytes),
        "naive": guarded("baseline: naive one statement per row", run_naive, up, stack.down, w, nbytes),
    }
    # the defaults first: the tuned run's lag phase writes past `end`, which a later replay would include
    defaults = guarded("shardflow: Syncer windows, default syncer settings", run_shardflow,
                       stack, w, nbytes, want, wl, lag=False)
    dm_defaults = guarded("shardflow: Syncer windows, DM's default syncer settings",
                          run_shardflow, stack, w, nbytes, want, wl, lag=False, syncer=DM_DEFAULTS)
    try:
        with PrivateReplica() as rep:  # killed on the way out, whatever happens
            res["replica_parallel"] = guarded(f"baseline: MariaDB replica, {REPLICA_THREADS} optimistic threads",
                                              run_replica, rep, up, w, nbytes, want, parallel=True)
            # the headline pair alternates ROUNDS times and each reports its median run: one run
            # of either is 1-2 s, which a page flush or a scheduler hiccup moves by 20%
            singles, tuned = [], []
            for n in range(1, ROUNDS + 1):
                singles.append(guarded(f"baseline: MariaDB replica, single thread (round {n}/{ROUNDS})",
                                       run_replica, rep, up, w, nbytes, want, parallel=False))
                tuned.append(guarded(f"shardflow: Syncer windows (round {n}/{ROUNDS})", run_shardflow,
                                     stack, w, nbytes, want, wl, syncer=TUNED, lag=n == ROUNDS))
            res["replica_single"] = median_run(singles)
            res["shardflow"] = median_run(tuned)
    except Exception as e:  # it did not start: both replica baselines are n/a
        log.error("the private replica did not start: %s", e)
        res["replica_single"] = {"rows_per_s": None, "seconds": None, "error": str(e)}
        res["replica_parallel"] = dict(res["replica_single"])
        res["shardflow"] = guarded("shardflow: Syncer windows", run_shardflow, stack, w, nbytes, want, wl, syncer=TUNED)
    res["shardflow_defaults"] = defaults
    res["shardflow_dm_defaults"] = dm_defaults
    sf = res["shardflow"].get("rows_per_s")
    workload = {**w, "start": str(w["start"]), "end": str(w["end"]), "binlog_bytes": nbytes,
                "mix": "single-row autocommit: 60% insert / 30% update (25% of them on 10 hot keys) / 10% delete, "
                       f"one in {WIDE_EVERY} on the wide tables (30 columns, JSON, BLOB); plus "
                       f"{w['big_transactions']} x {BIG_ROWS}-row transactions (insert/update alternately)"}
    return {
        "workload": workload,
        "results": res,
        "lag": res["shardflow"].pop("lag", None),
        "ratios": {name: ratio(sf, res[key].get("rows_per_s")) for name, key in (
            ("vs_decode_only", "decode_only"), ("vs_naive", "naive"),
            ("vs_replica_single", "replica_single"), ("vs_replica_parallel", "replica_parallel"))}
        | {"dm_defaults_vs_replica_single": ratio(res["shardflow_dm_defaults"].get("rows_per_s"),
                                                  res["replica_single"].get("rows_per_s")),
           "dm_defaults_vs_tuned": ratio(res["shardflow_dm_defaults"].get("rows_per_s"), sf),
           "defaults_vs_tuned": ratio(res["shardflow_defaults"].get("rows_per_s"), sf)},
    }
