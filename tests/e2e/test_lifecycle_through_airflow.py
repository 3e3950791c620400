"""The task lifecycle through real Airflow (standalone) and real Spark, driven by dmctl only:
stop then start again and again with rows and shard DDL flowing, a source paused on a
permanent downstream error and then stopped, `-s` pause/resume/stop/start of one source
while the other syncs, and `airflow standalone` killed mid-sync. One migration (one Spark
full load) serves every test; each test leaves it running and synced.

The task file's target password is `${SHARDFLOW_STACK_PASSWORD}` (as in the demo): the
commands that need no credentials run without that variable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from dm_core.db import connect, qt
from dm_core.state import StateStore

from ..integration.helpers import drop_schemas, make_shards, shard_task_yaml
from .test_migration_through_airflow import ROOT, _api, _columns, _env, _source_file, _task_processes, _wait_for
from .test_migration_through_airflow import dmctl

pytestmark = pytest.mark.e2e
PHASES = ("precheck", "full", "incremental")


class Mig:
    """The migration every test of this module works on."""

    def __init__(self, stack, name, file, tdb, shards, sources):
        self.stack, self.name, self.file, self.tdb, self.shards, self.sources = stack, name, file, tdb, shards, sources
        self.e1, self.e2 = list(sources)

    def dags(self):
        return {p: f"dm_{self.name}_{p}" for p in PHASES}

    def shards_of(self, sid):
        return [x for x in self.shards if x[0] is self.sources[sid]]

    def nocred(self, *args, check=True, timeout=900):
        """dmctl in a shell without the task file's ${SHARDFLOW_STACK_PASSWORD}."""
        env = _env(self.stack)
        env.pop("SHARDFLOW_STACK_PASSWORD", None)
        r = subprocess.run([str(ROOT / ".venv" / "bin" / "dmctl"), *args], env=env, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            pytest.fail(f"dmctl {' '.join(args)} (no credentials) exited {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def status(self, *sources) -> dict:
        args = [x for s in sources for x in ("-s", s)]
        return json.loads(self.nocred("query-status", self.name, *args).stdout)["tasks"][0]

    def source_status(self, sid) -> dict:
        return next(s for s in self.status()["sources"] if s["source"] == sid)

    def synced(self, *sources, timeout=600):
        args = [x for s in sources for x in ("-s", s)]
        r = dmctl(self.stack, "query-status", self.name, *args, "--wait-synced", str(timeout), check=False,
                  timeout=timeout + 300)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr
        return r

    def validate(self):
        v = dmctl(self.stack, "validate", self.name, check=False)
        assert v.returncode == 0 and "EQUALS" in v.stdout, v.stdout + v.stderr

    def write(self, tag, shards=None, n=3):
        for ep, s, t in shards or self.shards:
            conn = connect(ep)
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {qt(s, t)} (name, amount) VALUES (%s, %s)", [(tag, i) for i in range(n)])
                cur.execute(f"UPDATE {qt(s, t)} SET amount = amount + 1 WHERE name = %s AND amount = 0", (tag,))
            conn.close()

    def downstream(self, sql, *args):
        conn = connect(self.stack["down"])
        with conn.cursor() as cur:
            cur.execute(sql, args)
            rows = cur.fetchall()
        conn.close()
        return rows

    def count(self, tag, table="t"):
        return self.downstream(f"SELECT COUNT(*) FROM {qt(self.tdb, table)} WHERE name = %s", tag)[0][0]

    def active_runs(self, api):
        return {d: [r["dag_run_id"] for r in api.active_runs(d)] for d in self.dags().values() if api.active_runs(d)}


@pytest.fixture(scope="module")
def mig(stack, airflow, tmp_path_factory):
    import uuid

    uniq = uuid.uuid4().hex[:8]
    tmp = tmp_path_factory.mktemp("lifecycle")
    prefix, tdb, name = f"lf{uniq}", f"lft{uniq}", f"lf{uniq}"
    schemas = [f"{prefix}_1", f"{prefix}_2"]
    make_shards(stack["up1"], schemas, ["t_1", "t_2"], rows=100)
    make_shards(stack["up2"], schemas[:1], ["t_1", "t_2"], rows=100)
    sources = {f"f1-{uniq}": stack["up1"], f"f2-{uniq}": stack["up2"]}
    files = [_source_file(tmp, sid, ep) for sid, ep in sources.items()]
    text = shard_task_yaml(name, stack["down"], [(s, i + 1) for i, s in enumerate(sources)], prefix, tdb)
    text = text.replace(f"password: {stack['down'].password}", 'password: "${SHARDFLOW_STACK_PASSWORD}"')
    assert "${SHARDFLOW_STACK_PASSWORD}" in text
    task_file = tmp / f"{name}.yaml"
    task_file.write_text(text)
    shards = [(stack["up1"], s, t) for s in schemas for t in ("t_1", "t_2")] + \
             [(stack["up2"], schemas[0], t) for t in ("t_1", "t_2")]
    m = Mig(stack, name, str(task_file), tdb, shards, sources)
    try:
        dmctl(stack, "operate-source", "create", *files)
        dmctl(stack, "start-task", str(task_file), "--remove-meta")
        m.write("during-full")
        m.synced(timeout=900)
        m.validate()
        yield m
    finally:
        dmctl(stack, "stop-task", name, check=False)
        (ROOT / "config" / "tasks" / f"{name}.yaml").unlink(missing_ok=True)
        drop_schemas(stack["up1"], schemas)
        drop_schemas(stack["up2"], schemas)
        drop_schemas(stack["down"], [tdb])


@pytest.fixture(autouse=True)
def leaves_it_running(mig, stack):
    """Each test starts on a running, synced migration: after a failed test, put it back (fix
    the downstream table test 2 breaks, stop, start) so the next test does not fail with it."""
    yield
    shown = mig.status()
    if shown["status"] == "running" and not {s["status"] for s in shown["sources"]} & {"paused", "stopped"}:
        return
    ep, schema, _ = mig.shards_of(mig.e1)[0]
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'solo'",
                    (schema,))
        upstream_solo = cur.fetchone()[0]
    conn.close()
    if upstream_solo:
        mig.downstream(f"CREATE TABLE IF NOT EXISTS {qt(mig.tdb, 'solo')} (id int PRIMARY KEY, name varchar(20))")
    dmctl(stack, "stop-task", mig.name, check=False)
    dmctl(stack, "start-task", mig.file, check=False)
    mig.synced()


def test_stop_then_start_five_times_resumes_sync_without_a_new_full_phase(mig, stack):
    api = _api(stack)
    dags = mig.dags()
    assert len(api.runs(dags["full"], 50)) == 1
    starts = len(api.runs(dags["precheck"], 50))
    for cycle in range(5):
        mig.write(f"c{cycle}")
        if cycle in (1, 3):  # a shard DDL on every shard of both sources, rows after it; then stop at once
            for i, (ep, s, t) in enumerate(mig.shards):
                conn = connect(ep)
                with conn.cursor() as cur:
                    cur.execute(f"ALTER TABLE {qt(s, t)} ADD COLUMN x{cycle} int NULL")
                    cur.execute(f"INSERT INTO {qt(s, t)} (name, amount, x{cycle}) VALUES (%s, %s, 1)",
                                (f"ddl{cycle}", i))
                conn.close()
        no_wait = cycle in (2, 4)  # the move of the report: stop (not waiting) and start at once
        r = dmctl(stack, "stop-task", mig.name, *(["--no-wait"] if no_wait else []))
        assert "stopped" in r.stdout
        if not no_wait:  # stop returned: nothing of the task runs any more
            assert mig.active_runs(api) == {}
            assert {s["status"] for s in mig.status()["sources"]} == {"stopped"}
        assert api.dag(f"dm_{mig.name}_validate")["is_paused"], "a stopped task's scheduled validation is paused"
        mig.write(f"s{cycle}")  # written while stopped
        r = dmctl(stack, "start-task", mig.file)
        assert not api.dag(f"dm_{mig.name}_validate")["is_paused"]
        assert "incremental from the checkpoints" in r.stdout and "no new dump" in r.stdout, r.stdout
        mig.synced()
    assert len(api.runs(dags["full"], 50)) == 1, "the full phase ran again"
    assert len(api.runs(dags["precheck"], 50)) == starts + 5, "every start runs the precheck"
    incs = api.runs(dags["incremental"], 50)
    assert incs[0]["state"] == "running" and {r["state"] for r in incs[1:]} == {"success"}
    cols = _columns(stack["down"], mig.tdb)
    assert "x1" in cols and "x3" in cols
    for cycle in range(5):
        assert mig.count(f"c{cycle}") == 3 * len(mig.shards) and mig.count(f"s{cycle}") == 3 * len(mig.shards)
    assert mig.count("ddl1") == len(mig.shards) and mig.count("ddl3") == len(mig.shards)
    mig.validate()


def _pause_on_downstream_error(mig, stack):
    ep, schema, _ = mig.shards_of(mig.e1)[0]
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {qt(schema, 'solo')} (id int PRIMARY KEY, name varchar(20))")
    conn.close()
    mig.synced()
    mig.downstream(f"DROP TABLE {qt(mig.tdb, 'solo')}")  # gone downstream: its next DDL fails there for good
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute(f"ALTER TABLE {qt(schema, 'solo')} ADD COLUMN c int NULL")
        cur.execute(f"INSERT INTO {qt(schema, 'solo')} (id, name, c) VALUES (1, 'after-alter', 1)")
    conn.close()
    t0 = time.monotonic()
    st = _wait_for(lambda: (lambda s: s if s["status"] == "paused" else None)(mig.source_status(mig.e1)), 300,
                   f"query-status to show {mig.e1} paused")
    print(f"pause visible in query-status {time.monotonic() - t0:.1f}s after the statement")
    return st


def test_a_source_paused_on_a_downstream_error_then_stop_ends_everything(mig, stack):
    api = _api(stack)
    st = _pause_on_downstream_error(mig, stack)
    assert "solo" in st["message"] and "doesn't exist" in st["message"] and st["error_position"] in st["message"]
    # running, or waiting on an Airflow retry (apache/airflow#71172 fails reschedule sensors now and then)
    assert mig.source_status(mig.e2)["status"] in ("running", "waiting")
    mig.write("other-source", mig.shards_of(mig.e2))
    mig.synced(mig.e2)  # the other source keeps syncing
    r = dmctl(stack, "query-status", mig.name, "--wait-synced", "60", check=False)
    assert r.returncode == 2 and f"source {mig.e1} cannot sync: paused on an error" in r.stderr, r.stderr

    # resume without a fix: the statement is retried once and the source pauses again with the same report
    with StateStore() as store:
        with store.tx() as cur:
            cur.execute("SELECT now()")
            resumed_at = cur.fetchone()[0]
        mig.nocred("resume-task", mig.name, "-s", mig.e1)  # clears the error: only a new failure sets it again

        def paused_again():
            row = store.source_state(mig.name, mig.e1)
            return row if row["error"] and row["updated_at"] > resumed_at else None

        again = _wait_for(paused_again, 300, "the retried statement to pause the source again")
    assert (again["error"], again["error_pos"]) == (st["error"], st["error_position"])
    assert mig.source_status(mig.e1)["status"] == "paused"

    t0 = time.monotonic()
    r = mig.nocred("stop-task", mig.name)
    took = time.monotonic() - t0
    print(f"stop-task of a task with a source paused on an error returned after {took:.1f}s")
    assert "stopped" in r.stdout
    assert mig.active_runs(api) == {}, "stop-task returned while runs were active"
    inc = api.runs(mig.dags()["incremental"], 1)[0]
    states = {ti["task_id"]: ti["state"] for ti in api.task_instances(mig.dags()["incremental"], inc["dag_run_id"])}
    assert not {"running", "up_for_reschedule", "up_for_retry", "queued", "scheduled"} & set(states.values()), states
    shown = mig.status()
    assert shown["status"] == "stopped" and {s["status"] for s in shown["sources"]} == {"stopped"}
    assert "paused on an error" in next(s for s in shown["sources"] if s["source"] == mig.e1)["message"]

    mig.downstream(f"CREATE TABLE {qt(mig.tdb, 'solo')} (id int PRIMARY KEY, name varchar(20))")  # the fix
    dmctl(stack, "start-task", mig.file)
    mig.synced()
    assert mig.count("after-alter", "solo") == 1
    mig.validate()


def test_one_source_paused_resumed_stopped_and_started_while_the_other_syncs(mig, stack):
    e1, e2 = mig.e1, mig.e2
    r = mig.nocred("pause-task", mig.name, "-s", e1)
    assert f"source(s) {e1} paused" in r.stdout
    mig.write("while-e1-paused")
    mig.synced(e2)
    time.sleep(10)  # a poke of e1 that began before the pause has ended its window by now
    n1 = 3 * len(mig.shards_of(e1))
    assert mig.count("while-e1-paused") == 3 * len(mig.shards_of(e2)), "only the other source applied its rows"
    shown = {s["source"]: s for s in mig.status()["sources"]}
    assert shown[e1]["status"] == "paused" and "pause-task" in shown[e1]["message"]
    # running, or waiting on an Airflow retry (apache/airflow#71172 fails reschedule sensors now and then)
    assert shown[e2]["status"] in ("running", "waiting"), shown[e2]
    r = mig.nocred("query-status", mig.name, "--wait-synced", "60", check=False)
    assert r.returncode == 2 and f"source {e1} cannot sync" in r.stderr
    mig.nocred("resume-task", mig.name, "-s", e1)
    mig.synced()
    assert mig.count("while-e1-paused") == n1 + 3 * len(mig.shards_of(e2))

    r = mig.nocred("stop-task", mig.name, "-s", e1)
    assert f"source(s) {e1} stopped" in r.stdout
    api = _api(stack)
    dag = mig.dags()["incremental"]
    run = api.active_runs(dag)
    assert run, "the other source's run goes on"
    sensor = f"sync_{e1}".replace("-", "_")
    states = {ti["task_id"]: ti["state"] for ti in api.task_instances(dag, run[-1]["dag_run_id"])}
    assert states[sensor] == "success", states
    # the race CI met: the sensor saw the stop and ended itself between dmctl's listing of the
    # task instances and its PATCH (Airflow answers 409); ending an ended sensor is no error
    api.end_task(dag, run[-1]["dag_run_id"], sensor, "success", "stopped twice")
    mig.write("while-e1-stopped")
    mig.synced(e2)
    assert mig.source_status(e1)["status"] == "stopped"
    assert mig.count("while-e1-stopped") == 3 * len(mig.shards_of(e2))
    r = dmctl(stack, "start-task", "-s", e1, mig.file)
    assert "started again" in r.stdout
    mig.synced()
    assert mig.count("while-e1-stopped") == 3 * len(mig.shards)
    assert mig.nocred("shard-ddl-lock", mig.name).returncode == 0
    mig.validate()


def test_airflow_killed_mid_sync_resumes_every_source_from_its_checkpoint(mig, stack):
    """Also: while Airflow is down, the task's file where Airflow reads it is changed (a route to
    another table, as a git-sync of the DAG folder would): the sensors that start again run with
    the file of the last start-task, and their logs say what differs and how to apply it."""
    env = _env(stack)
    home = Path(stack["env"]["AIRFLOW_HOME"])
    installed = ROOT / "config" / "tasks" / f"{mig.name}.yaml"
    started = installed.read_text()
    assert "target-table: t\n" in started, started
    stop = threading.Event()
    errors = []

    def writer():
        i = 0
        try:
            while not stop.is_set():
                mig.write(f"restart-{i}", n=2)
                i += 1
                time.sleep(0.5)
        except BaseException as e:  # surfaced below
            errors.append(e)

    t = threading.Thread(target=writer)
    t.start()
    try:
        # mid-sync: the writer's rows are arriving downstream
        _wait_for(lambda: mig.count("restart-1") == 2 * len(mig.shards), 120, "the writer's rows to sync")
        pid = int((home / "standalone.pid").read_text())
        victims = _task_processes(str(home))
        os.killpg(pid, signal.SIGKILL)  # scheduler, executor, API server, dag-processor, triggerer
        for p in victims:  # sensor processes run in their own process groups
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shown = _wait_for(lambda: (lambda st: st if st.get("airflow_error") else None)(mig.status()), 60,
                          "query-status to say Airflow cannot be asked")
        assert all("Airflow could not be asked" in s["message"] for s in shown["sources"]), shown
        installed.write_text(started.replace("target-table: t\n", "target-table: t_moved\n"))
        r = subprocess.run([str(ROOT / "scripts" / "airflow.sh"), "up"], env=env, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        time.sleep(5)   # the writer goes on while the new scheduler starts
    finally:
        stop.set()
        t.join()
    try:
        assert not errors, f"the upstream writer failed: {errors[0]!r}"
        mig.synced(timeout=900)  # no manual step: every source resumed from its checkpoint
        assert {s["status"] for s in mig.status()["sources"]} <= {"running", "waiting"}  # (see above)
        mig.validate()
        assert not mig.downstream("SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND "
                                  "TABLE_NAME = 't_moved'", mig.tdb)
        logs = "\n".join(f.read_text(errors="replace") for f in (home / "logs").rglob("*") if f.is_file()
                         and f"dm_{mig.name}_incremental" in str(f))
        assert f"{installed} differs in routes: it is not applied" in logs and \
            f"dmctl start-task {installed}" in logs, logs[-3000:]
    finally:
        installed.write_text(started)


def test_validation_stop_pauses_its_schedule_and_ends_its_run_then_start_resumes_both(mig, stack):
    """DM's `validation stop` / `validation start`: what `validation start` starts (a run of the
    scheduled dm_<task>_validate) `validation stop` stops, with the schedule; start resumes both."""
    api = _api(stack)
    dag = f"dm_{mig.name}_validate"
    started = dmctl(stack, "validation", "start", mig.name)
    run_id = started.stdout.split("run ", 1)[1].split(" of ", 1)[0]
    stopped = dmctl(stack, "validation", "stop", mig.name)
    assert "validation stopped" in stopped.stdout and f"{dag} paused" in stopped.stdout, stopped.stdout
    assert api.dag(dag)["is_paused"] and api.active_runs(dag) == []
    state = api.run(dag, run_id)["state"]
    assert state == "failed" or (state == "success" and run_id not in stopped.stdout), (state, stopped.stdout)
    r = dmctl(stack, "validation", "start", mig.name, "--wait-result", "900", check=False)
    assert r.returncode == 0 and "EQUAL" in r.stdout, r.stdout + r.stderr
    assert not api.dag(dag)["is_paused"], "validation start resumes the schedule"


PAUSED_ROWS, PAUSED_CHUNK = 100_000, 500   # 400 chunks: a load that lasts well past the pause's latency


def test_pause_during_the_full_phase_stops_the_load_and_resume_loads_only_the_rest(mig, stack, tmp_path):
    """DM's pause-task stops its load unit and resume-task continues it: the full DAG's run ends,
    its Spark job stops (on the job host it is cancelled), the chunks it loaded stay, and resume
    runs the full phase again from them, then the sync; the downstream ends equal to the shards."""
    import uuid

    import yaml

    uniq = uuid.uuid4().hex[:8]
    prefix, tdb, name, sid = f"pf{uniq}", f"pft{uniq}", f"pf{uniq}", f"pf1-{uniq}"
    schemas = [f"{prefix}_1", f"{prefix}_2"]
    make_shards(stack["up1"], schemas, ["t_1"])
    conn = connect(stack["up1"])
    with conn.cursor() as cur:
        for s in schemas:
            cur.execute(f"INSERT INTO {qt(s, 't_1')} (name, amount) SELECT CONCAT('r', seq), seq % 1000 "
                        f"FROM {qt(s, f'seq_1_to_{PAUSED_ROWS}')}")
    conn.close()
    task = yaml.safe_load(shard_task_yaml(name, stack["down"], [(sid, 1)], prefix, tdb))
    task["mysql-instances"][0]["mydumper"] = {"rows": PAUSED_CHUNK}
    task_file = tmp_path / f"{name}.yaml"
    task_file.write_text(yaml.safe_dump(task, sort_keys=False))
    total = 2 * PAUSED_ROWS // PAUSED_CHUNK
    store = StateStore()

    def recorded() -> int:
        return sum(len(store.done_chunks(name, sid, s, "t_1")) for s in schemas)

    api = _api(stack)
    try:
        dmctl(stack, "operate-source", "create", _source_file(tmp_path, sid, stack["up1"]))
        dmctl(stack, "start-task", str(task_file), "--remove-meta")
        _wait_for(lambda: recorded() >= 10, 600, "the full load recorded 10 chunks")
        r = dmctl(stack, "pause-task", name)
        assert "the full phase is paused" in r.stdout and "its Spark job has stopped" in r.stdout, r.stdout
        at_pause = recorded()
        assert not store.full_load_held(name), "pause-task returned while the load's job still held its fence"
        last, still = at_pause, 0
        while still < 5:   # the task process ends within seconds, its job soon after: the count stops
            time.sleep(1)
            now = recorded()
            still, last = (still + 1, now) if now == last else (0, now)
        print(f"the pause stopped the load at {last} of {total} chunks")
        assert last < total, f"the load ran to its end ({last} of {total} chunks): the pause did not stop it"
        assert last == at_pause, f"{last - at_pause} chunk(s) were recorded after pause-task returned"
        assert not api.active_runs(f"dm_{name}_full") and json.loads(
            dmctl(stack, "query-status", name).stdout)["tasks"][0]["status"] == "paused"

        r = dmctl(stack, "resume-task", name)
        assert "the full phase goes on from the chunks loaded" in r.stdout, r.stdout
        r = dmctl(stack, "query-status", name, "--wait-synced", "600", check=False, timeout=900)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr
        assert recorded() == total
        assert len(api.runs(f"dm_{name}_full", 10)) == 2
        assert mig.downstream(f"SELECT COUNT(*) FROM {qt(tdb, 't')}")[0][0] == 2 * PAUSED_ROWS
        v = dmctl(stack, "validate", name, check=False)
        assert v.returncode == 0 and "EQUALS" in v.stdout, v.stdout + v.stderr
    finally:
        dmctl(stack, "stop-task", name, check=False)
        (ROOT / "config" / "tasks" / f"{name}.yaml").unlink(missing_ok=True)
        drop_schemas(stack["up1"], schemas)
        drop_schemas(stack["down"], [tdb])
        store.close()
