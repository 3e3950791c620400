"""The whole migration through real Airflow (standalone) and real Spark, driven by dmctl as a
user would: operate-source create → start-task → writes upstream while it runs →
query-status --wait-synced → validate (downstream == union of shards after routing + mapping)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import textwrap
from pathlib import Path

import pytest

from dm_core.db import connect, qt

from .conftest import airflow_env

from ..integration.helpers import drop_schemas, make_shards, shard_task_yaml
from ..integration.shard_helpers import run as _run

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def _env(stack) -> dict:
    return airflow_env(stack)


def dmctl(stack, *args, check=True, timeout=900) -> subprocess.CompletedProcess:
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "dmctl"), *args], env=_env(stack), capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        pytest.fail(f"dmctl {' '.join(args)} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def _count(ep, tdb, name) -> int:
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {qt(tdb, 't')} WHERE name = %s", (name,))
        n = cur.fetchone()[0]
    conn.close()
    return n


def _metric(stack, name: str, **labels) -> float | None:
    """One series of /shardflow/metrics on the Airflow API server (what Prometheus scrapes)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(stack["env"]["SHARDFLOW_AIRFLOW_URL"] + "/shardflow/metrics", timeout=30) as r:
        text = r.read().decode()
    want = {k: str(v) for k, v in labels.items()}
    found = [s.value for f in text_string_to_metric_families(text) for s in f.samples
             if s.name == name and want.items() <= s.labels.items()]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def _columns(ep, tdb) -> list[str]:
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 't' "
                    "ORDER BY ORDINAL_POSITION", (tdb,))
        out = [str(r[0]) for r in cur.fetchall()]
    conn.close()
    return out


def _wait_for(fn, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(2)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


def _api(stack):
    from dm_core.cli.airflow_api import AirflowAPI

    home = Path(stack["env"]["AIRFLOW_HOME"])
    pw = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
    return AirflowAPI(url=stack["env"]["SHARDFLOW_AIRFLOW_URL"], user="admin", password=pw)


def _task_processes(airflow_home: str) -> list[int]:
    """This stack's Airflow task processes (children of LocalExecutor workers: `airflow worker --
    <ti uuid>`): only descendants of this stack's `airflow standalone`. Other stacks on the
    machine (CI, other checkouts) run their own Airflow, which this test must not kill. (Their
    /proc/PID/environ cannot tell: setproctitle writes the process title over it.)"""
    import psutil

    root = int((Path(airflow_home) / "standalone.pid").read_text())
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if re.match(r"airflow worker -- [0-9a-f]{8}-", " ".join(p.info["cmdline"] or ())):
            try:
                if any(a.pid == root for a in p.parents()):
                    out.append(p.info["pid"])
            except psutil.NoSuchProcess:
                pass
    return out


def _write_while_killing_sensors(stack, schemas, seconds: float, ddl_shards=()) -> tuple[int, int]:
    """Write on up1 and SIGKILL every sensor process every half second; halfway, run an
    ALTER on every shard in ``ddl_shards`` (a shard DDL lock taken while sensors die)."""
    stop = threading.Event()
    errors: list[BaseException] = []
    written = [0]

    def writer():
        try:
            conn = connect(stack["up1"])
            i = 0
            with conn.cursor() as cur:
                while not stop.is_set():
                    s = schemas[i % len(schemas)]
                    cur.execute(f"INSERT INTO {qt(s, 't_2')} (name, amount) VALUES (%s, %s)", ("during-kills", i))
                    cur.execute(f"UPDATE {qt(s, 't_1')} SET amount = amount + 1 WHERE MOD(id, 50) = %s", (i % 50,))
                    cur.execute(f"DELETE FROM {qt(s, 't_2')} WHERE MOD(id, 97) = %s LIMIT 1", (i % 97,))
                    i += 1
                    written[0] = i
                    time.sleep(0.01)
            conn.close()
        except BaseException as e:  # surfaced by the test below
            errors.append(e)

    def ddl():
        try:
            time.sleep(seconds / 2)
            for ep, s, t in ddl_shards:
                conn = connect(ep)
                with conn.cursor() as cur:
                    cur.execute(f"ALTER TABLE {qt(s, t)} ADD INDEX idx_amount (amount)")
                conn.close()
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=writer)
    t.start()
    d = threading.Thread(target=ddl)
    d.start()
    kills = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            for pid in _task_processes(stack["env"]["AIRFLOW_HOME"]):
                try:
                    os.kill(pid, signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pass
            time.sleep(0.5)
    finally:
        stop.set()
        t.join()
        d.join()
    assert not errors, f"the upstream writer failed: {errors[0]!r}"
    return kills, written[0]


def _source_file(tmp_path: Path, sid: str, ep) -> str:
    p = tmp_path / f"{sid}.yaml"
    p.write_text(textwrap.dedent(f"""\
        source-id: {sid}
        enable-gtid: false
        from:
          host: {ep.host}
          port: {ep.port}
          user: {ep.user}
          password: "{ep.password}"
        """))
    return str(p)


def test_full_then_incremental_merge_equals_union_of_shards(stack, airflow, uniq, tmp_path):
    prefix, tdb, name = f"e2{uniq}", f"e2t{uniq}", f"e2e{uniq}"
    schemas = [f"{prefix}_1", f"{prefix}_2"]
    make_shards(stack["up1"], schemas, ["t_1", "t_2"], rows=3000)
    make_shards(stack["up2"], schemas[:1], ["t_1", "t_2", "t_3"], rows=2000)
    sources = {f"e1-{uniq}": stack["up1"], f"e2-{uniq}": stack["up2"]}
    files = [_source_file(tmp_path, sid, ep) for sid, ep in sources.items()]
    task_file = tmp_path / f"{name}.yaml"
    task_file.write_text(shard_task_yaml(name, stack["down"], [(s, i + 1) for i, s in enumerate(sources)], prefix, tdb))
    installed = ROOT / "config" / "tasks" / f"{name}.yaml"
    try:
        out = dmctl(stack, "operate-source", "create", *files)
        assert f"source e1-{uniq}: created" in out.stdout
        shown = dmctl(stack, "operate-source", "show").stdout
        assert f"e1-{uniq}" in shown and stack["up1"].password not in shown
        dmctl(stack, "start-task", str(task_file), "--remove-meta")
        # writes while the pipeline runs (some land in the dump, some only in the binlog)
        for ep, ss in ((stack["up1"], schemas), (stack["up2"], schemas[:1])):
            conn = connect(ep)
            with conn.cursor() as cur:
                for s in ss:
                    cur.executemany(f"INSERT INTO {qt(s, 't_1')} (name, amount) VALUES (%s, %s)", [("live", i) for i in range(200)])
                    cur.execute(f"UPDATE {qt(s, 't_1')} SET name = 'changed' WHERE id % 10 = 1")
                    cur.execute(f"DELETE FROM {qt(s, 't_1')} WHERE id % 10 = 2")
            conn.close()
        r = dmctl(stack, "query-status", name, "--wait-synced", "900", check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        v = dmctl(stack, "validate", name, check=False)
        assert v.returncode == 0, v.stdout + v.stderr
        assert "EQUALS" in v.stdout
        status = dmctl(stack, "query-status", name).stdout
        assert '"stage": "sync"' in status and stack["down"].password not in status
        for sid in sources:   # the metrics of the running migration, as Prometheus reads them
            me = {"task": name, "source_id": sid}
            assert _metric(stack, "dm_worker_task_state", **me) == 2
            assert _metric(stack, "dm_loader_progress", **me) == 1
            assert _metric(stack, "lightning_chunks", state="finished", **me) == \
                _metric(stack, "lightning_chunks", state="estimated", **me) > 0

        # shard DDL (pessimistic): the same ALTER on every shard of both sources, rows between
        shards = [(stack["up1"], s, t) for s in schemas for t in ("t_1", "t_2")] + \
                 [(stack["up2"], schemas[0], t) for t in ("t_1", "t_2", "t_3")]
        for i, (ep, s, t) in enumerate(shards):
            conn = connect(ep)
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {qt(s, t)} (name, amount) VALUES ('before-ddl', %s)", (i,))
                cur.execute(f"ALTER TABLE {qt(s, t)} ADD COLUMN note varchar(32) NULL")
                cur.execute(f"INSERT INTO {qt(s, t)} (name, amount, note) VALUES ('after-ddl', %s, 'n')", (i,))
            conn.close()
        r = dmctl(stack, "query-status", name, "--wait-synced", "600", check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "note" in _columns(stack["down"], tdb), "the shard DDL reached the downstream"
        assert _count(stack["down"], tdb, "after-ddl") == len(shards)
        for sid, ep in sources.items():   # two rows per shard came through the binlog; the owner ran the DDL
            n = sum(1 for x in shards if x[0] is ep)
            assert _metric(stack, "dm_syncer_finished_jobs_total", type="insert", task=name, source_id=sid) >= 2 * n
        assert sum(_metric(stack, "dm_syncer_finished_jobs_total", type="ddl", task=name, source_id=sid)
                   for sid in sources) >= 1
        v = dmctl(stack, "validate", name, check=False)
        assert v.returncode == 0, v.stdout + v.stderr

        # SIGKILL the sensors' task processes again and again while the upstream keeps writing:
        # retries resume from the checkpoint in safe mode, and the result must still be exact.
        kills, written = _write_while_killing_sensors(stack, schemas, seconds=30, ddl_shards=shards)
        assert kills > 0, "no sensor process was found to kill"
        assert written > 100, "the upstream writer hardly wrote anything"
        r = dmctl(stack, "query-status", name, "--wait-synced", "600", check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        v = dmctl(stack, "validate", name, check=False)
        assert v.returncode == 0, f"after {kills} SIGKILLs:\n" + v.stdout + v.stderr
        conn = connect(stack["down"])
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
                        "AND TABLE_NAME = 't' AND INDEX_NAME = 'idx_amount'", (tdb,))
            assert cur.fetchone()[0] == 1, "the shard DDL taken during the SIGKILLs reached the downstream"
        conn.close()

        # A lock stuck on a source that has not run the DDL (yet): dmctl and the coordinator's
        # Variable show it; the operator releases it from the unlock DAG (Params, as in the UI);
        # when the late source runs the DDL it skips it (the downstream has it already).
        e1, e2 = list(sources)
        up1_shards = [x for x in shards if x[0] is stack["up1"]]
        for i, (ep, s, t) in enumerate(up1_shards):
            _run(ep, f"ALTER TABLE {qt(s, t)} ADD COLUMN late_col int NULL",
                 f"INSERT INTO {qt(s, t)} (name, amount, late_col) VALUES ('stuck', {i}, 1)")
        lock = _wait_for(lambda: next((lk for lk in json.loads(dmctl(stack, "shard-ddl-lock", name).stdout)["locks"]
                                       if lk["waiting_for"] == [e2] and "late_col" in " ".join(lk["ddls"])), None),
                         300, "a lock waiting for the second source")
        assert lock["owner"] == e1 and lock["reported"] == [e1] and lock["waiting_since"]
        assert _metric(stack, "dm_master_ddl_state_number", task=name, type="Un-synced") == 1
        assert _metric(stack, "dm_syncer_shard_lock_resolving", task=name, source_id=e1) == 1
        api = _api(stack)
        mirrored = _wait_for(lambda: lock["lock_id"] in (api.variable(f"shardflow_{name}_ddl_locks") or ""), 120,
                             "the coordinator's Variable to show the lock")
        assert mirrored
        run = api.trigger(f"dm_{name}_shard_ddl_unlock", {"lock_id": lock["lock_id"], "owner": e1, "action": "exec",
                                                          "force_remove": False})
        state = _wait_for(lambda: (api.run(f"dm_{name}_shard_ddl_unlock", run["dag_run_id"]) or {}).get("state")
                          in ("success", "failed") and api.run(f"dm_{name}_shard_ddl_unlock", run["dag_run_id"]),
                          300, "the unlock DAG run to finish")["state"]
        assert state == "success"
        r = dmctl(stack, "query-status", name, "--wait-synced", "600", check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "late_col" in _columns(stack["down"], tdb)
        assert _count(stack["down"], tdb, "stuck") == len(up1_shards)
        for i, (ep, s, t) in enumerate(x for x in shards if x[0] is stack["up2"]):
            _run(ep, f"ALTER TABLE {qt(s, t)} ADD COLUMN late_col int NULL",
                 f"INSERT INTO {qt(s, t)} (name, amount, late_col) VALUES ('late', {i}, 2)")
        r = dmctl(stack, "query-status", name, "--wait-synced", "600", check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(dmctl(stack, "shard-ddl-lock", name).stdout)["locks"] == []
        v = dmctl(stack, "validate", name, check=False)
        assert v.returncode == 0, v.stdout + v.stderr

        # pause: nothing is applied; resume: it catches up
        dmctl(stack, "pause-task", name)
        time.sleep(5)  # let a poke that started before the pause finish its window
        conn = connect(stack["up1"])
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {qt(schemas[0], 't_2')} (name, amount) VALUES ('while-paused', 1)")
        conn.close()
        time.sleep(10)
        assert _count(stack["down"], tdb, "while-paused") == 0
        assert _metric(stack, "dm_worker_task_state", task=name, source_id=e1) == 3   # DM's Paused
        dmctl(stack, "resume-task", name)
        r = dmctl(stack, "query-status", name, "--wait-synced", "300", check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        assert _count(stack["down"], tdb, "while-paused") == 1

        # stop: the incremental DAG run ends
        dmctl(stack, "stop-task", name)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            phases = json.loads(dmctl(stack, "query-status", name).stdout)["tasks"][0]["phases"]
            if phases.get("incremental") == "success":
                break
            time.sleep(3)
        assert phases.get("incremental") == "success", phases
    finally:
        dmctl(stack, "stop-task", name, check=False)
        installed.unlink(missing_ok=True)
        drop_schemas(stack["up1"], schemas)
        drop_schemas(stack["up2"], schemas)
        drop_schemas(stack["down"], [tdb])


def test_start_task_names_the_folder_it_put_the_file_in_when_airflow_never_loads_the_dags(stack, airflow, uniq,
                                                                                          tmp_path):
    """dmctl and Airflow reading different task folders (SHARDFLOW_TASKS_DIR set for one only):
    start-task waits for the DAGs, then says where it put the file and what to set."""
    db, name, sid = f"nd{uniq}", f"nd{uniq}", f"nd-{uniq}"
    elsewhere = tmp_path / "not-read-by-airflow"
    src = _source_file(tmp_path, sid, stack["up1"])
    task_file = tmp_path / f"{name}.yaml"
    task_file.write_text(shard_task_yaml(name, stack["down"], [(sid, 1)], db, f"{db}t", shard_mode=""))
    env = dict(_env(stack), SHARDFLOW_TASKS_DIR=str(elsewhere))
    dmctl(stack, "operate-source", "create", src)
    try:
        r = subprocess.run([str(ROOT / ".venv" / "bin" / "dmctl"), "start-task", str(task_file), "--wait-dags", "3"],
                           env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"Airflow has not loaded dm_{name}_precheck" in r.stderr, r.stderr
        assert f"dmctl put the task file into {elsewhere}" in r.stderr and "SHARDFLOW_TASKS_DIR" in r.stderr, r.stderr
        assert (elsewhere / f"{name}.yaml").exists()
    finally:
        dmctl(stack, "stop-task", name, check=False)
        dmctl(stack, "operate-source", "stop", src, check=False)
