"""Lag as a user sees it: a row written upstream, timed until a reader sees it downstream, with
the incremental phase running under `airflow standalone` (one poke-mode sensor per source).

Two loads, each with probes (one single-row transaction at a time on a probe table, the
downstream polled every few milliseconds for it):
- idle: nothing else is written; ``IDLE_PROBES`` probes, a random 0.5-2 s apart;
- load: ``RATE`` single-row transactions per second on another table of the same source for
  ``LOAD_SECONDS``, a probe every 0.25 s.

Baseline, in the same run: the same task synced by a ``SyncSession`` stepped in this process
with the sensor's poke interval (the syncer without Airflow). ``ratios`` = Airflow's p99 ÷ the
baseline's p99 per load; the targets are absolute (p99 < 1 s at 1k txn/s, < 5 s idle) and are
reported as such, never asserted.

Needs the local stack (`make stack-up`); starts `airflow standalone` (scripts/airflow.sh) if it
is not running, and leaves it as it found it.
"""

from __future__ import annotations

import logging
import os
import random
import subprocess
import threading
import time
from pathlib import Path

import pymysql
import yaml

from bench.common import ROOT, Stack, bench_schema, execute, percentile, query, work_dir
from dm_core.db import Endpoint, qt

log = logging.getLogger("bench.airflow_lag")

SCHEMA, TARGET = "bench_lag", "bench_lag_down"
TASK_NAME, SOURCE_ID = "bench_lag", "bench-lag-src"
IDLE_PROBES = 20
LOAD_SECONDS = 60.0
RATE = 1000.0
PROBE_EVERY = 0.1
WRITERS = 2                     # writer threads sharing the rate (one Python thread tops out near it)
SEEN_TIMEOUT = 120.0            # a probe not seen after this long fails the part


def _conn(ep: Endpoint):
    return pymysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password, autocommit=True)


def _files(stack: Stack) -> tuple[Path, Path]:
    d = work_dir() / "airflow_lag"
    d.mkdir(exist_ok=True)
    src = d / "source.yaml"  # a source file takes no ${ENV}: readable by this user only
    src.touch(mode=0o600)
    src.write_text(yaml.safe_dump({"source-id": SOURCE_ID, "enable-gtid": False,
                                   "from": {"host": stack.up1.host, "port": stack.up1.port, "user": stack.up1.user,
                                            "password": stack.up1.password}}))
    task = d / f"{TASK_NAME}.yaml"
    task.write_text(yaml.safe_dump({
        "name": TASK_NAME, "task-mode": "all",
        "target-database": {"host": stack.down.host, "port": stack.down.port, "user": stack.down.user,
                            "password": "${SHARDFLOW_STACK_PASSWORD}"},
        "mysql-instances": [{"source-id": SOURCE_ID, "block-allow-list": "ba", "route-rules": ["to-target"]}],
        "block-allow-list": {"ba": {"do-dbs": [SCHEMA]}},
        "routes": {"to-target": {"schema-pattern": SCHEMA, "target-schema": TARGET}},
    }, sort_keys=False))
    return src, task


def _fresh_tables(stack: Stack) -> None:
    execute(stack.up1, f"DROP DATABASE IF EXISTS {bench_schema(SCHEMA)}", f"CREATE DATABASE {bench_schema(SCHEMA)}",
            f"CREATE TABLE {qt(SCHEMA, 'probe')} (id int PRIMARY KEY, sent double NOT NULL)",
            f"CREATE TABLE {qt(SCHEMA, 'load')} (id bigint AUTO_INCREMENT PRIMARY KEY, v int NOT NULL, "
            "pad varchar(64) NOT NULL)")
    execute(stack.down, f"DROP DATABASE IF EXISTS {bench_schema(TARGET)}")


class Probe:
    """One probe row at a time: insert upstream, poll downstream until it is there."""

    def __init__(self, stack: Stack, first_id: int):
        self.up, self.down = _conn(stack.up1), _conn(stack.down)
        self.next_id = first_id

    def once(self) -> float:
        pid, self.next_id = self.next_id, self.next_id + 1
        with self.up.cursor() as cur:
            cur.execute(f"INSERT INTO {qt(SCHEMA, 'probe')} (id, sent) VALUES (%s, %s)", (pid, time.time()))
        sent = time.monotonic()
        deadline = sent + SEEN_TIMEOUT
        with self.down.cursor() as cur:
            while True:
                try:
                    cur.execute(f"SELECT 1 FROM {qt(TARGET, 'probe')} WHERE id = %s", (pid,))
                    if cur.fetchone():
                        return time.monotonic() - sent
                except pymysql.err.ProgrammingError:  # the target table is not there yet
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"probe {pid} not seen downstream after {SEEN_TIMEOUT:.0f}s")
                time.sleep(0.005)

    def close(self) -> None:
        self.up.close()
        self.down.close()


def _writer(up: Endpoint, rate: float, stop: threading.Event, count: list, errors: list) -> None:
    try:
        conn = _conn(up)
        t0, n = time.monotonic(), 0
        with conn.cursor() as cur:
            while not stop.is_set():
                cur.execute(f"INSERT INTO {qt(SCHEMA, 'load')} (v, pad) VALUES (%s, %s)", (n, "x" * 48))
                n += 1
                count[0] += 1
                ahead = t0 + n / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
        conn.close()
    except BaseException as e:  # reported by the caller
        errors.append(e)


def measure(stack: Stack, first_id: int) -> dict:
    """Idle and loaded probes against whatever syncs the task now."""
    probe = Probe(stack, first_id)
    try:
        idle = []
        for _ in range(IDLE_PROBES):
            time.sleep(random.uniform(0.5, 2.0))
            idle.append(probe.once())
        stop, count, errors = threading.Event(), [0], []
        writers = [threading.Thread(target=_writer, args=(stack.up1, RATE / WRITERS, stop, count, errors), daemon=True)
                   for _ in range(WRITERS)]
        loaded = []
        t0 = time.monotonic()
        for w in writers:
            w.start()
        try:
            while time.monotonic() - t0 < LOAD_SECONDS and not errors:
                loaded.append(probe.once())
                time.sleep(PROBE_EVERY)
        finally:
            stop.set()
            for w in writers:
                w.join()
        if errors:
            raise RuntimeError(f"the load writer failed: {errors[0]!r}")
        rate = count[0] / (time.monotonic() - t0)
    finally:
        probe.close()
    return {"idle": _stats(idle), "load": {**_stats(loaded), "achieved_rate_txn_per_s": round(rate, 1)},
            "next_id": probe.next_id}


def _stats(lags: list[float]) -> dict:
    return {"probes": len(lags), "p50_s": round(percentile(lags, 50), 3), "p99_s": round(percentile(lags, 99), 3),
            "max_s": round(max(lags), 3)}


def _rows_equal(stack: Stack) -> bool:
    sql = "SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('#', id, v, pad))), 0) FROM {}"
    deadline = time.monotonic() + SEEN_TIMEOUT
    want = query(stack.up1, sql.format(qt(SCHEMA, "load")))
    while time.monotonic() < deadline:
        if query(stack.down, sql.format(qt(TARGET, "load"))) == want:
            return True
        time.sleep(0.5)
    return False


# ---- the two syncers ------------------------------------------------------------------------
def _env() -> dict:
    from bench.common import _stack_sh_env

    env = {**os.environ, **_stack_sh_env(), **{k: v for k, v in os.environ.items() if k.startswith("SHARDFLOW_")}}
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env['PATH']}"
    env["PYTHONPATH"] = str(ROOT)
    return env


def _dmctl(*args: str, timeout: float = 900) -> str:
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "dmctl"), *args], env=_env(), capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"dmctl {' '.join(args)} exited {r.returncode}: {r.stderr.strip()[-800:]}")
    return r.stdout


def _airflow(cmd: str) -> bool:
    r = subprocess.run([str(ROOT / "scripts" / "airflow.sh"), cmd], env=_env(), capture_output=True, text=True,
                       timeout=600)
    if cmd == "up" and r.returncode != 0:
        raise RuntimeError(f"airflow standalone did not start: {(r.stdout + r.stderr)[-800:]}")
    return r.returncode == 0


def through_airflow(stack: Stack, src: Path, task: Path) -> dict:
    _dmctl("operate-source", "create", str(src))
    _dmctl("start-task", str(task), "--remove-meta")
    _dmctl("query-status", TASK_NAME, "--wait-synced", "900")
    try:
        out = measure(stack, 1)
        out["rows_ok"] = _rows_equal(stack)
    finally:
        _dmctl("stop-task", TASK_NAME)
    return out


def in_process(stack: Stack, task_file: Path, first_id: int) -> dict:
    """The baseline: the stopped task started again in the store only, synced by a SyncSession
    stepped here with the sensor's poke interval (no Airflow anywhere)."""
    from dm_core.config.task import load_task_file
    from dm_core.state import StateStore
    from dm_core.sync.session import POKE_INTERVAL, SyncSession

    os.environ.setdefault("SHARDFLOW_STACK_PASSWORD", stack.down.password)  # the file's ${ENV}
    task = load_task_file(str(task_file))
    stop, errors = threading.Event(), []

    def loop():
        try:
            with StateStore() as store:
                sess = SyncSession(task, SOURCE_ID, store)
                while not stop.is_set():
                    if sess.step().state == "stopped":
                        return
                    time.sleep(POKE_INTERVAL)
        except BaseException as e:  # reported below
            errors.append(e)

    with StateStore() as store:
        store.start_task(TASK_NAME, task_file.read_text())
    t = threading.Thread(target=loop, name="bench-lag-session", daemon=True)
    t.start()
    try:
        out = measure(stack, first_id)
        out["rows_ok"] = _rows_equal(stack)
    finally:
        stop.set()
        t.join()
        with StateStore() as store:
            store.stop_task(TASK_NAME)
    if errors:
        raise RuntimeError(f"the in-process session failed: {errors[0]!r}")
    return out


def run(stack: Stack) -> dict:
    src, task = _files(stack)
    _fresh_tables(stack)
    started = not _airflow("status")
    if started:
        _airflow("up")
    try:
        airflow = through_airflow(stack, src, task)
    finally:
        if started:
            _airflow("down")
    log.info("lag through Airflow: %s", airflow)
    base = in_process(stack, task, airflow.pop("next_id"))
    base.pop("next_id")
    ratios = {f"{k}_p99_vs_in_process": round(airflow[k]["p99_s"] / base[k]["p99_s"], 2) if base[k]["p99_s"] else None
              for k in ("idle", "load")}
    targets = {"load_p99_under_1s": airflow["load"]["p99_s"] < 1.0, "idle_p99_under_5s": airflow["idle"]["p99_s"] < 5.0}
    return {"data": {"rate_txn_per_s": RATE, "load_seconds": LOAD_SECONDS, "idle_probes": IDLE_PROBES,
                     "poke_mode": "poke"},
            "results": {"airflow": airflow, "in_process": base}, "ratios": ratios, "targets": targets}
