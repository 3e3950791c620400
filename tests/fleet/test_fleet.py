"""The fleet test (`make test-fleet`: scripts/test_fleet.sh brings up 16 upstream servers and Airflow
with the CeleryExecutor and 2 workers, runs this, and stops what it started).

One sharded task over every server of the fleet (tests/fleet/workload.py: 2 shard tables and a
probe table per server, routed into one target schema), driven by dmctl as a user would:

1. start-task: precheck, the Spark full load, then the incremental DAG's 16 sensors, which must
   spread over both Celery workers; wait until synced.
2. idle: probes only, for IDLE_S; the memory of every sync process is sampled.
3. load: RATE transactions a second on every server for LOAD_S, with the shard DDL (ADD COLUMN
   on all 32 shards) at DDL_AT and worker 1 killed (SIGKILL, with its task processes) at KILL_AT.
   Every source that ran on it must hold its fence again, on worker 2, within RESUME_LIMIT_S.
4. writes stop; wait until synced; the downstream must equal the union of the shards, row for
   row (nothing lost, nothing applied twice, the DDL's column everywhere).

It reports (printed, and written to bench/results/fleet-<time>.json): lag as a probe row sees it
(written upstream → seen downstream; p50/p99/max) idle, under load before the DDL, and overall;
how long the shard DDL took; how long each moved source took to resume; memory per syncing
source (the Celery pool process supervising it + the task process: RSS, PSS, USS) idle and
under load, and each worker's own cost.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from dm_core.db import connect, qt
from dm_core.state import StateStore
from dm_core.state.lifecycle import sensor_task_id

from ..e2e.test_migration_through_airflow import _api, dmctl
from . import workload as wl

ROOT = Path(__file__).resolve().parents[2]
CELERY = str(ROOT / "scripts" / "airflow_celery.sh")

RATE = float(os.environ.get("SHARDFLOW_FLEET_RATE", "100"))   # transactions per second per server
IDLE_S = 30.0
LOAD_S = 210.0
DDL_AT = 60.0
KILL_AT = 110.0
STEADY = (10.0, DDL_AT)          # the window of the load whose lag is the steady state's
RESUME_LIMIT_S = 60.0


def _env(stack) -> dict:
    from ..e2e.conftest import airflow_env

    return airflow_env(stack)


def _celery(stack, *args) -> str:
    r = subprocess.run([CELERY, *args], env=_env(stack), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"airflow_celery.sh {' '.join(args)}: {r.stdout}{r.stderr}"
    return r.stdout


class Placement:
    """Which worker runs which source's sensor, and what its processes cost in memory: the
    task instance's pid (the task process) under a worker's process tree; its parent is the
    Celery pool process that supervises it."""

    def __init__(self, stack, fleet: wl.Fleet, name: str):
        self.stack, self.fleet, self.name = stack, fleet, name
        self.api = _api(stack)

    def _tis(self) -> dict[str, dict]:
        runs = [r for r in self.api.runs(f"dm_{self.name}_incremental", 5) if r.get("state") == "running"]
        if not runs:
            return {}
        return {t["task_id"]: t for t in self.api.task_instances(f"dm_{self.name}_incremental", runs[0]["dag_run_id"])}

    def workers(self) -> dict[int, set[int]]:
        out = {}
        for n in (1, 2):
            r = subprocess.run([CELERY, "pids", str(n)], env=_env(self.stack), capture_output=True, text=True)
            out[n] = {int(p) for p in r.stdout.split()} if r.returncode == 0 else set()
        return out

    def where(self) -> dict[str, int | None]:
        """source id → the worker whose tree holds its running sensor's process (None: none)."""
        tis, trees = self._tis(), self.workers()
        out = {}
        for i in self.fleet.servers:
            sid = self.fleet.source_id(i)
            ti = tis.get(sensor_task_id(sid)) or {}
            pid = ti.get("pid") if ti.get("state") == "running" else None
            out[sid] = next((n for n, pids in trees.items() if pid in pids), None)
        return out

    def memory(self) -> dict:
        """Per syncing source: its task process + the pool process supervising it (MB)."""
        import psutil

        tis, trees = self._tis(), self.workers()
        per_source, busy, cpu = [], set(), {}
        for i in self.fleet.servers:
            ti = tis.get(sensor_task_id(self.fleet.source_id(i))) or {}
            pid = ti.get("pid")
            if ti.get("state") != "running" or not any(pid in t for t in trees.values()):
                continue
            try:
                task = psutil.Process(pid)
                procs = [task.parent(), task, *task.children(recursive=True)]
                mems = [p.memory_full_info() for p in procs]
                cpu[pid] = sum(sum(p.cpu_times()[:2]) for p in procs)
            except psutil.Error:
                continue
            busy.update(p.pid for p in procs)
            per_source.append({k: sum(getattr(m, k) for m in mems) / 2**20 for k in ("rss", "pss", "uss")})
        workers = {}
        for n, pids in trees.items():
            idle = []
            for pid in pids - busy:
                try:
                    idle.append(psutil.Process(pid).memory_full_info())
                except psutil.Error:
                    continue
            workers[n] = {"processes": len(idle), **{k: round(sum(getattr(m, k) for m in idle) / 2**20)
                                                      for k in ("rss", "pss", "uss")}}
        return {"sources": len(per_source), "at": time.time(), "cpu_s": cpu,
                "per_source_mb": {k: {"mean": round(sum(s[k] for s in per_source) / len(per_source), 1),
                                      "max": round(max(s[k] for s in per_source), 1)} for k in ("rss", "pss", "uss")}
                if per_source else {},
                "worker_without_tasks_mb": workers}


def cpu_share(a: dict, b: dict) -> dict:
    """Per syncing source between two ``Placement.memory`` samples: its processes' CPU time over
    the wall time, as a percentage of one core (the same task processes in both)."""
    pids = set(a["cpu_s"]) & set(b["cpu_s"])
    shares = [100.0 * (b["cpu_s"][p] - a["cpu_s"][p]) / (b["at"] - a["at"]) for p in pids]
    return {"sources": len(shares), "seconds": round(b["at"] - a["at"]),
            "mean_pct": round(sum(shares) / len(shares), 1) if shares else None,
            "max_pct": round(max(shares), 1) if shares else None}


def servers_memory(stack) -> dict:
    """What the rest costs (MB, RSS and PSS): each Airflow component with its children, and the
    fleet's upstream servers."""
    import psutil

    home = Path(_env(stack)["AIRFLOW_HOME"]) / "celery"
    out = {}
    for name in ("scheduler", "dag-processor", "triggerer", "api-server"):
        try:
            root = psutil.Process(int((home / f"{name}.pid").read_text()))
            mems = [p.memory_full_info() for p in (root, *root.children(recursive=True))]
        except (OSError, ValueError, psutil.Error):
            continue
        out[name] = {k: round(sum(getattr(m, k) for m in mems) / 2**20) for k in ("rss", "pss")}
    ups = []
    for pidf in sorted(Path(os.environ.get("SHARDFLOW_FLEET_DIR", ROOT / ".fleet")).glob("up*/mariadbd.pid")):
        try:
            ups.append(psutil.Process(int(pidf.read_text())).memory_info().rss / 2**20)
        except (OSError, ValueError, psutil.Error):
            continue
    if ups:
        out["upstream_mariadbd_rss"] = {"servers": len(ups), "mean": round(sum(ups) / len(ups)), "max": round(max(ups))}
    return out


class Resumes(threading.Thread):
    """From the kill on: when each moved source's fence is held again (a live sync process) and
    when its first probe written after the kill is seen downstream."""

    def __init__(self, stack, name: str, fleet: wl.Fleet, moved: list[str], killed_at: float,
                 watcher: wl.ProbeWatcher):
        super().__init__(name="resumes", daemon=True)
        self.stack, self.name, self.fleet, self.moved, self.killed_at = stack, name, fleet, moved, killed_at
        self.watcher = watcher
        self.fence: dict[str, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        with StateStore(self.stack["state_dsn"]) as store:
            lost = set()
            while not self.stop.is_set() and len(self.fence) < len(self.moved):
                held = set(store.held_sources(self.name, self.moved))
                now = time.time()
                lost |= set(self.moved) - held
                for sid in self.moved:
                    # first seen without its fence (the old process gone), then with it again
                    if sid in lost and sid in held and sid not in self.fence:
                        self.fence[sid] = now - self.killed_at
                self.stop.wait(0.5)

    def through(self) -> dict[str, float | None]:
        """Seconds from the kill until a probe written after it was seen downstream, per source."""
        index = {self.fleet.source_id(i): i for i in self.fleet.servers}
        out = {}
        for sid in self.moved:
            seen = [sent + lag for s, sent, lag in self.watcher.seen if s == index[sid] and sent > self.killed_at]
            out[sid] = round(min(seen) - self.killed_at, 1) if seen else None
        return out


def _lag(xs: list[float]) -> dict:
    return {"probes": len(xs), **{k: (round(v, 3) if v is not None else None) for k, v in
                                  (("p50", wl.percentile(xs, 50)), ("p99", wl.percentile(xs, 99)),
                                   ("max", max(xs) if xs else None))}}


def _ddl_downstream(stack, fleet: wl.Fleet) -> bool:
    """The shard DDL ran downstream: the merged table has its column."""
    conn = connect(stack["down"])
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 't' "
                        "AND COLUMN_NAME = 'note'", (fleet.target,))
            return bool(cur.fetchone()[0])
    finally:
        conn.close()


def _wait(fn, timeout: float, what: str, every: float = 2.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture
def fleet_task(stack, tmp_path):
    uniq = uuid.uuid4().hex[:6]
    fleet = wl.Fleet.from_env(f"fl{uniq}", f"flt{uniq}")
    name = fleet.prefix
    wl.prepare(fleet)
    files = wl.source_files(fleet, tmp_path / "sources")
    task_file = tmp_path / f"{name}.yaml"
    task_file.write_text(wl.task_yaml(fleet, name, stack["down"]))
    dmctl(stack, "operate-source", "create", *files)
    try:
        yield fleet, name, str(task_file)
    finally:
        dmctl(stack, "stop-task", name, check=False)
        for i in fleet.servers:
            dmctl(stack, "operate-source", "stop", fleet.source_id(i), check=False)
        tasks_dir = Path(os.environ.get("SHARDFLOW_TASKS_DIR") or ROOT / "config" / "tasks")
        (tasks_dir / f"{name}.yaml").unlink(missing_ok=True)
        wl.drop(fleet, stack["down"])


def test_sixteen_sources_on_two_celery_workers_one_killed(stack, fleet_task):
    fleet, name, task_file = fleet_task
    report: dict = {"sources": len(fleet.endpoints), "rate_per_source": RATE, "workers": 2}
    t = time.monotonic()
    dmctl(stack, "start-task", task_file, "--remove-meta")
    dmctl(stack, "query-status", name, "--wait-synced", "900", timeout=1200)
    report["start_to_synced_s"] = round(time.monotonic() - t, 1)
    place = Placement(stack, fleet, name)
    where = _wait(lambda: (w := place.where()) and None not in w.values() and w, 180, "every sensor on a worker")
    report["placement_before"] = {n: sum(1 for v in where.values() if v == n) for n in (1, 2)}
    assert set(where.values()) == {1, 2}, f"the sensors did not spread over both workers: {where}"

    watcher = wl.ProbeWatcher(stack["down"], fleet.target)
    watcher.start()
    # 2. idle: probes only
    idle = [wl.Writer(fleet, i, 0, watcher=watcher) for i in fleet.servers]
    for w in idle:
        w.start()
    time.sleep(5)
    idle_first = place.memory()
    time.sleep(IDLE_S - 5)
    report["memory_idle"] = place.memory()
    report["cpu_idle"] = cpu_share(idle_first, report["memory_idle"])
    for w in idle:
        w.stop.set()
    for w in idle:
        w.join()
    report["lag_idle_s"] = _lag(watcher.lags())

    # 3. load, the shard DDL, a worker killed
    load_t0 = time.time()
    writers = [wl.Writer(fleet, i, RATE, ddl_after=DDL_AT, watcher=watcher, seed=1) for i in fleet.servers]
    for w in writers:
        w.start()
    samples, resumes, ddl_resolved = [], None, None
    while (elapsed := time.time() - load_t0) < LOAD_S:
        if resumes is None and elapsed >= KILL_AT:
            where = place.where()
            moved = sorted(s for s, n in where.items() if n == 1)
            report["placement_at_kill"] = {n: sum(1 for v in where.values() if v == n) for n in (1, 2)}
            _celery(stack, "kill-worker", "1")
            killed_at = time.time()     # (the script's last step is the kill)
            resumes = Resumes(stack, name, fleet, moved, killed_at, watcher)
            resumes.start()
        if ddl_resolved is None and all(w.stats.ddl_done_at for w in writers) and _ddl_downstream(stack, fleet):
            ddl_resolved = time.time() - max(w.stats.ddl_done_at for w in writers)
        if elapsed >= 20 and len(samples) < (elapsed - 20) // 20 + 1 and resumes is None:
            samples.append(place.memory())
            if len(samples) == 3:
                report["servers_memory_load"] = servers_memory(stack)
        time.sleep(1)
    for w in writers:
        w.stop.set()
    for w in writers:
        w.join()
    load_s = time.time() - load_t0
    txns = sum(w.stats.txns for w in writers)
    report["load"] = {"seconds": round(load_s), "transactions": txns, "txn_per_s": round(txns / load_s)}
    assert not [e for w in writers for e in w.stats.errors], [e for w in writers for e in w.stats.errors]
    assert resumes is not None, "the load ended before the kill"
    resumes.join(timeout=max(0.0, RESUME_LIMIT_S * 3 - (time.time() - resumes.killed_at)))
    resumes.stop.set()

    # 4. the end: synced, and the downstream is the union of the shards
    dmctl(stack, "query-status", name, "--wait-synced", "900", timeout=1200)
    time.sleep(3)
    watcher.stop.set()
    watcher.join()
    steady = watcher.lags(load_t0 + STEADY[0], load_t0 + STEADY[1])
    report["lag_load_steady_s"] = _lag(steady)
    report["lag_load_all_s"] = _lag(watcher.lags(load_t0, load_t0 + load_s))
    survivors = {i for i in fleet.servers if fleet.source_id(i) not in resumes.moved}
    report["lag_after_kill_survivors_s"] = _lag(watcher.lags(resumes.killed_at, resumes.killed_at + 60, survivors))
    report["shard_ddl_resolved_s"] = round(ddl_resolved, 1) if ddl_resolved is not None else None
    report["memory_load"] = [{k: v for k, v in m.items() if k != "cpu_s"} for m in samples]
    report["cpu_load"] = cpu_share(samples[0], samples[-1]) if len(samples) > 1 else None
    report["moved"] = {"sources": len(resumes.moved), "fence_held_again_s": {k: round(v, 1) for k, v in
                                                                             sorted(resumes.fence.items())},
                       "first_probe_through_s": resumes.through()}
    after = place.where()
    report["placement_after"] = {str(n): sum(1 for v in after.values() if v == n) for n in (1, 2, None)}
    diff = wl.union_difference(fleet, stack["down"])
    report["union"] = diff
    _publish(report)

    assert resumes.moved, "worker 1 ran no sensor when it was killed"
    late = {s: resumes.fence.get(s) for s in resumes.moved if (resumes.fence.get(s) or 1e9) > RESUME_LIMIT_S}
    assert not late, f"sources that did not resume within {RESUME_LIMIT_S:.0f}s of the kill: {late}"
    assert all(after[s] == 2 for s in resumes.moved), f"moved sources not on worker 2: {after}"
    for target, d in diff.items():
        assert d["missing"] == d["extra"] == d["differ"] == 0, f"{fleet.target}.{target} != union of shards: {d}"
    conn = connect(stack["down"])
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {qt(fleet.target, 't')} WHERE note <> ''")
        assert cur.fetchone()[0] > 0, "no row downstream carries the column the shard DDL added"
    conn.close()


def _publish(report: dict) -> None:
    out = ROOT / "bench" / "results" / f"fleet-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    mem_i, mem_l = report["memory_idle"].get("per_source_mb", {}), [m.get("per_source_mb", {}) for m in
                                                                     report["memory_load"]]

    def mb(m, k):
        return f"{m[k]['mean']:.0f} (max {m[k]['max']:.0f})" if m else "?"

    moved = report["moved"]
    fences = list(moved["fence_held_again_s"].values())
    probes = [v for v in moved["first_probe_through_s"].values() if v is not None]
    lines = [
        f"fleet: {report['sources']} sources on 2 Celery workers, {report['rate_per_source']:.0f} txn/s per source "
        f"({report['load']['txn_per_s']} txn/s written in all); start-task to synced {report['start_to_synced_s']} s",
        f"placement: before {report['placement_before']}, at the kill {report['placement_at_kill']}, "
        f"after {report['placement_after']}",
        f"lag idle: {report['lag_idle_s']}",
        f"lag under load (steady, before the DDL): {report['lag_load_steady_s']}",
        f"lag under load (all of it, DDL and kill included): {report['lag_load_all_s']}",
        f"lag of the surviving worker's sources, 60 s after the kill: {report['lag_after_kill_survivors_s']}",
        f"shard DDL over {2 * report['sources']} shards resolved {report['shard_ddl_resolved_s']} s after the last ALTER",
        f"worker 1 killed: {moved['sources']} sources moved; fence held again after "
        f"{min(fences, default=0):.1f}-{max(fences, default=0):.1f} s; first probe through after "
        f"{min(probes, default=0):.1f}-{max(probes, default=0):.1f} s",
        f"memory per syncing source idle (MB): RSS {mb(mem_i, 'rss')}, PSS {mb(mem_i, 'pss')}, USS {mb(mem_i, 'uss')}",
        *[f"memory per syncing source under load #{n + 1} (MB): RSS {mb(m, 'rss')}, PSS {mb(m, 'pss')}, "
          f"USS {mb(m, 'uss')}" for n, m in enumerate(mem_l)],
        f"each worker without its tasks (MB): {report['memory_idle'].get('worker_without_tasks_mb')}",
        f"CPU per syncing source (% of one core): idle {report['cpu_idle']}, under load {report['cpu_load']}",
        f"Airflow's components and the upstreams under load (MB): {report.get('servers_memory_load')}",
        f"union check: {json.dumps({k: {x: v[x] for x in ('rows', 'missing', 'extra', 'differ')} for k, v in report['union'].items()})}",
        f"(all of it: {out.relative_to(ROOT)})",
    ]
    print("\n" + "\n".join(f"[fleet] {x}" for x in lines))
