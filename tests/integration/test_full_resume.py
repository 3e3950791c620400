"""Resume of the full load: after SIGKILL mid-load, or a hard exit at a named fault point,
a rerun loads only the chunks not yet done and the target ends equal to the upstream union,
nothing lost, nothing duplicated (a keyless table included, whose duplicates would show)."""

import logging
import os
import signal
import subprocess
import time
from pathlib import Path

import psycopg2
import pytest

from dm_core.db import qt
from dm_core.faults import EXIT_CODE
from dm_core.full.phase import prepare
from dm_core.state import StateStore
from dm_core.state.schema import SCHEMA
from dm_core.validate.compare import compare_task, render

from .test_full_support import (PhaseStep, cleanup, drop, execute, read_report, register, run_load, spark_env, staging_leftovers,
                                submit_cmd, task_yaml)

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def shards(stack, uniq):
    """ik: integer key (40 chunks of 100), ck: composite key (20 chunks), nk: keyless with
    duplicate rows (one chunk)."""
    schema = f"rs{uniq}"
    up = stack["up1"]
    execute(up, f"CREATE DATABASE {schema}",
            f"CREATE TABLE {qt(schema, 'ik')} (id int NOT NULL PRIMARY KEY, v varchar(20))",
            f"INSERT INTO {qt(schema, 'ik')} SELECT seq, CONCAT('v', seq) FROM {schema}.seq_1_to_4000",
            f"CREATE TABLE {qt(schema, 'ck')} (a int NOT NULL, b varchar(10) NOT NULL, v int, PRIMARY KEY (a, b))",
            f"INSERT INTO {qt(schema, 'ck')} SELECT seq % 13, CONCAT('b', seq), seq FROM {schema}.seq_1_to_2000",
            f"CREATE TABLE {qt(schema, 'nk')} (a int, b varchar(10))",
            f"INSERT INTO {qt(schema, 'nk')} SELECT seq % 5, IF(seq % 2, 'x', NULL) FROM {schema}.seq_1_to_1500")
    yield schema
    drop(up, schema)


@pytest.fixture
def task_of(stack, uniq):
    store = StateStore()
    made = []

    def make(schema):
        name, sid, tdb = f"rs{uniq}", f"rs-{uniq}", f"rst{uniq}"
        text = task_yaml(name, stack["down"], [(sid, schema)], tdb)
        task = register(store, name, text, {sid: stack["up1"]})
        prepare(task, store)
        made.append((name, text, tdb))
        return task

    yield make, store
    for name, text, tdb in made:
        cleanup(store, name, text)
        drop(stack["down"], tdb)
    store.close()


def _done(dsn, task) -> dict[str, set[int]]:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT source_id, schema_name, table_name, chunk_id FROM {SCHEMA}.full_chunk WHERE task = %s", (task,))
        out: dict[str, set[int]] = {}
        for sid, s, t, c in cur.fetchall():
            out.setdefault(f"{sid}:{s}.{t}", set()).add(c)
        return out


def _rerun_beside_a_held_fence(task, store, stack, done_before, rep) -> None:
    """The rerun while the task's load fence is still held (here by the test, as by a stopped
    load still ending): it says it waits and writes nothing until the fence is free."""
    holder = StateStore(store.dsn, migrate=False)
    assert holder.hold_full_load(task.name)
    out = rep.with_suffix(".log")
    with open(out, "w") as f:
        p = subprocess.Popen(submit_cmd(task.name, "--chunk-rows", "100", "--report", str(rep)), env=spark_env(),
                             stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while "another full load of task" not in out.read_text():
            assert p.poll() is None, f"the rerun ended (rc {p.returncode}) without waiting: {out.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "the rerun neither waited nor ended within 300 s"
            time.sleep(0.2)
        assert _done(stack["state_dsn"], task.name) == done_before, "the rerun wrote while the fence was held"
    finally:
        holder.close()
    try:
        assert p.wait(600) == 0, out.read_text()[-5000:]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert f"the other full load of task {task.name} ended after" in out.read_text()


def _rerun_loads_only_the_rest(task, store, stack, done_before, tmp_path, *, adopted_expected=False, fenced=False):
    rep = tmp_path / "rerun.json"
    if fenced:
        _rerun_beside_a_held_fence(task, store, stack, done_before, rep)
    else:
        r = run_load(task.name, "--chunk-rows", "100", "--report", str(rep))
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    report = read_report(rep)
    adopted = 0
    for name, t in report["tables"].items():
        before = done_before.get(name, set())
        assert set(t["skipped"]) == before, name
        assert not set(t["loaded"]) & before, f"{name}: a finished chunk was loaded again"
        assert set(t["loaded"]) | set(t["adopted"]) | before == set(range(t["chunks"])), name
        adopted += len(t["adopted"])
    assert adopted or not adopted_expected, "a chunk committed downstream but not recorded must be adopted"
    diffs = compare_task(task, store)
    assert len(diffs) == 3 and all(d.equal for d in diffs), render(diffs)
    assert not staging_leftovers(stack["down"], task.meta_schema, [t["plan_id"] for t in report["tables"].values()])
    return report


def _slowed_load(task: str, stack, log, *args: str) -> subprocess.Popen:
    """The load under a spark-submit of its own, each chunk slowed a little so that what a
    test does to it (a kill, a restart) lands mid-load, not after it; its output goes to ``log``."""
    with open(log, "w") as f:
        return subprocess.Popen(submit_cmd(task, "--chunk-rows", "100", *args), start_new_session=True, stdout=f,
                                stderr=subprocess.STDOUT,
                                env=spark_env({"SHARDFLOW_FAULTS": "full.before_chunk_merge=sleep:0.3"}))


def _wait_for_chunks(p: subprocess.Popen, task: str, stack, log, n: int) -> None:
    deadline = time.monotonic() + 300
    while sum(map(len, _done(stack["state_dsn"], task).values())) < n:
        assert p.poll() is None, f"the load ended (rc {p.returncode}) before {n} chunks: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "no progress within 300 s"
        time.sleep(0.2)


def _group_ended(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def _take_the_fence_away(dsn: str, task: str) -> StateStore:
    """Break the connection on which the running load holds its fence (as a Postgres restart
    does) and take the fence at once, before the load's watch can take it again; the holder."""
    from dm_core.state.schema import FULL_FENCE_LOCK_CLASS
    from dm_core.state.store import _fence_key

    holder = StateStore(dsn, migrate=False)
    with holder.tx() as cur:   # the terminate waits until the backend has ended
        cur.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND classid::bigint = %s AND objid::bigint = %s", (FULL_FENCE_LOCK_CLASS, _fence_key(task, "")))
        assert cur.fetchall() == [(True,)]
    assert holder.hold_full_load(task), "the load's fence was not free once its backend had ended"
    return holder


@pytest.mark.parametrize("turns, kill", [("auto", "group"), ("on", "jvm"), ("auto", "fence")])
def test_killed_mid_load_then_rerun_loads_only_the_rest(stack, shards, task_of, tmp_path, turns, kill):
    """``turns``: auto (these tables stream their chunks) and on (each table's chunks take its
    write turn: one streams under it while the others spool, dm_core/full/load_data.py).
    ``kill``: the job's whole process group, or spark-submit's JVM alone, as Airflow stops a
    task (SparkSubmitHook.on_kill): the Python driver it launched must end with it
    (spark_jobs/launcher_watch.py; it lived on as an orphan), and a rerun started while the load
    fence is held waits (dm_core/full/fence.py); or ``fence``: the fence's connection breaks and
    another load takes the fence meanwhile, so the job must stop by itself."""
    make, store = task_of
    task = make(shards)
    log = tmp_path / "killed.log"
    p = _slowed_load(task.name, stack, log, "--write-turns", turns)
    try:
        _wait_for_chunks(p, task.name, stack, log, 8)
        if kill == "fence":
            holder = _take_the_fence_away(stack["state_dsn"], task.name)
            try:
                rc = p.wait(120)
                assert rc != 0, "the load ran to its end after it lost its fence"
                out = log.read_text()
                assert f"the full load of task {task.name} lost its fence" in out and \
                    "lost the task's full-load fence to another full load" in out, out[-5000:]
                stopped_at = _done(stack["state_dsn"], task.name)
                time.sleep(1)
                assert _done(stack["state_dsn"], task.name) == stopped_at
            finally:
                holder.close()
    finally:
        if p.poll() is None:
            if kill == "jvm":
                p.kill()
            else:
                os.killpg(p.pid, signal.SIGKILL)  # spark-submit's JVM, its Python driver and workers at once
        p.wait()
    ended = _group_ended(p.pid, 15)
    if not ended:
        os.killpg(p.pid, signal.SIGKILL)
    assert ended, "the job's driver or workers outlived spark-submit by 15 s: " + log.read_text()[-3000:]
    done_before = _done(stack["state_dsn"], task.name)
    assert sum(map(len, done_before.values())) < 61, "everything was loaded before the kill"
    _rerun_loads_only_the_rest(task, store, stack, done_before, tmp_path, fenced=kill == "jvm")


def test_a_state_store_restart_mid_load_is_waited_out_and_the_load_goes_on(stack, shards, task_of, tmp_path):
    """Postgres stopped for 4 s mid-load (`scripts/stack.sh pg-bounce`): the job waits for it,
    then loads what is not recorded, adopting a chunk committed but cut off before its record;
    it ends 0 and the target equals the upstream."""
    make, store = task_of
    task = make(shards)
    log = tmp_path / "bounce.log"
    p = _slowed_load(task.name, stack, log)
    try:
        _wait_for_chunks(p, task.name, stack, log, 8)
        bounce = subprocess.run([str(ROOT / "scripts" / "stack.sh"), "pg-bounce", "4"], capture_output=True, text=True)
        assert bounce.returncode == 0, bounce.stdout + bounce.stderr
        assert p.wait(300) == 0, log.read_text()[-5000:]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    out = log.read_text()
    assert "the state store is unreachable" in out and "the state store is back after" in out, out[-5000:]
    store.reconnect()
    assert sum(map(len, _done(stack["state_dsn"], task.name).values())) == 61
    diffs = compare_task(task, store)
    assert len(diffs) == 3 and all(d.equal for d in diffs), render(diffs)


@pytest.mark.parametrize("step, point", [("prepare", "upstream.list_tables"), ("finish", "full.before_high_watermark")])
def test_a_state_store_restart_while_the_phase_prepares_or_finishes_is_waited_out(stack, shards, uniq, monkeypatch,
                                                                                   caplog, step, point):
    """Postgres restarts while the full phase prepares (its low watermark recorded, its tables
    being listed) or finishes (before its high watermark): the step waits for the store and runs
    again from the top, rather than failing the full DAG for a `start-task` to resume."""
    from dm_core import faults

    store = StateStore()
    name, sid, tdb = f"rp{uniq}", f"rp-{uniq}", f"rpt{uniq}"
    text = task_yaml(name, stack["down"], [(sid, shards)], tdb).replace("task-mode: full", "task-mode: all")
    task = register(store, name, text, {sid: stack["up1"]})
    try:
        if step == "finish":
            prepare(task, store)
        monkeypatch.setattr(faults, "_hits", {})
        monkeypatch.setenv("SHARDFLOW_FAULTS", f"{point}=sleep:2")
        caplog.set_level(logging.WARNING, logger="shardflow.full")
        run = PhaseStep(step, task, store)
        run.wait_for(lambda: faults._hits.get(point))   # the step sleeps at its point, the store's connection open
        bounce = subprocess.run([str(ROOT / "scripts" / "stack.sh"), "pg-bounce", "2"], capture_output=True, text=True)
        assert bounce.returncode == 0, bounce.stdout + bounce.stderr
        got = run.result()
        assert faults._hits[point] >= 2, "the step ran again after the store came back"
        logged = caplog.text
        assert f"the state store is unreachable while the full phase of {name} {step}" in logged, logged
        assert "the state store is back after" in logged, logged
        state = store.source_state(name, sid)
        if step == "prepare":
            assert sorted(got["created"]) == [f"{tdb}.{t}" for t in ("ck", "ik", "nk")], got
            assert state["low_file"] and state["stage"] == "full", state
        else:
            assert got[sid]["high_watermark"] and state["high_file"] and state["stage"] == "sync", (got, state)
    finally:
        store.reconnect()
        cleanup(store, name, text)
        drop(stack["down"], tdb)
        store.close()


def test_hard_exit_after_n_chunk_writes_then_rerun(stack, shards, task_of, tmp_path):
    make, store = task_of
    task = make(shards)
    r = run_load(task.name, "--chunk-rows", "100", env={"SHARDFLOW_FAULTS": "full.after_chunk_write=5"})
    assert r.returncode == EXIT_CODE and "full.after_chunk_write: exiting hard" in r.stdout + r.stderr, r.stderr[-3000:]
    done_before = _done(stack["state_dsn"], task.name)
    assert 5 <= sum(map(len, done_before.values())) < 61
    _rerun_loads_only_the_rest(task, store, stack, done_before, tmp_path)


def test_chunk_committed_but_not_recorded_is_adopted_not_duplicated(stack, uniq, task_of, tmp_path):
    """The keyless table is one chunk: kill right after its merge commits, before the state
    store records it. Loading it again would double every row; the marker prevents that."""
    make, store = task_of
    schema = f"rk{uniq}"
    execute(stack["up1"], f"CREATE DATABASE {schema}", f"CREATE TABLE {qt(schema, 'nk')} (a int, b varchar(10))",
            f"INSERT INTO {qt(schema, 'nk')} SELECT seq % 5, IF(seq % 2, 'x', NULL) FROM {schema}.seq_1_to_1500")
    try:
        task = make(schema)
        r = run_load(task.name, env={"SHARDFLOW_FAULTS": "full.after_chunk_merge=1"})
        assert r.returncode == EXIT_CODE, r.stderr[-3000:]
        assert _done(stack["state_dsn"], task.name) == {}
        rep = tmp_path / "rerun.json"
        r = run_load(task.name, "--report", str(rep))
        assert r.returncode == 0, r.stderr[-5000:]
        (t,) = read_report(rep)["tables"].values()
        assert t["adopted"] == [0] and t["loaded"] == []
        diffs = compare_task(task, store)
        assert len(diffs) == 1 and diffs[0].equal and diffs[0].downstream_rows == 1500, render(diffs)
    finally:
        drop(stack["up1"], schema)
