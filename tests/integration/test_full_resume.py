"""Resume of the full load: after SIGKILL mid-load, or a hard exit at a named fault point,
a rerun loads only the chunks not yet done and the target ends equal to the upstream union,
nothing lost, nothing duplicated (a keyless table included, whose duplicates would show)."""

import os
import signal
import subprocess
import time

import psycopg2
import pytest

from dm_core.db import qt
from dm_core.faults import EXIT_CODE
from dm_core.full.phase import prepare
from dm_core.state import StateStore
from dm_core.state.schema import SCHEMA
from dm_core.validate.compare import compare_task, render

from .test_full_support import (cleanup, drop, execute, read_report, register, run_load, spark_env, staging_leftovers,
                                submit_cmd, task_yaml)

pytestmark = pytest.mark.integration


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


def _rerun_loads_only_the_rest(task, store, stack, done_before, tmp_path, *, adopted_expected=False):
    rep = tmp_path / "rerun.json"
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


@pytest.mark.parametrize("turns", ["auto", "on"])
def test_sigkill_mid_load_then_rerun_loads_only_the_rest(stack, shards, task_of, tmp_path, turns):
    """``turns``: auto (these tables stream their chunks) and on (each table's chunks take its
    write turn: one streams under it while the others spool, dm_core/full/load_data.py)."""
    make, store = task_of
    task = make(shards)
    # slow every chunk down a little so the kill lands mid-load, not after it
    p = subprocess.Popen(submit_cmd(task.name, "--chunk-rows", "100", "--write-turns", turns), start_new_session=True,
                         env=spark_env({"SHARDFLOW_FAULTS": "full.before_chunk_merge=sleep:0.3"}),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while sum(map(len, _done(stack["state_dsn"], task.name).values())) < 8:
            assert p.poll() is None, f"the load ended (rc {p.returncode}) before it could be killed"
            assert time.monotonic() < deadline, "no progress within 300 s"
            time.sleep(0.2)
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # spark-submit's JVM and its Python driver, as an Airflow kill does
        p.wait()
    time.sleep(1)
    done_before = _done(stack["state_dsn"], task.name)
    assert sum(map(len, done_before.values())) < 61, "everything was loaded before the kill"
    time.sleep(1)
    assert _done(stack["state_dsn"], task.name) == done_before, "something still runs after the kill"
    _rerun_loads_only_the_rest(task, store, stack, done_before, tmp_path)


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
