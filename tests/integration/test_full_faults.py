"""A server killed while a task runs, with no one acting afterwards: during the full load the
load carries on once the server is back (before: the full phase failed and waited for
`dmctl start-task`); during sync the source retries from its checkpoint until it is back.

The downstream here is a private MariaDB, killed with SIGKILL in the middle of the load and
started again 3 s later; the load runs in a spark-submit of its own (chunks slowed by a fault
point so that the kill lands mid-load). Rows downstream must equal upstream, each once."""

import signal
import subprocess
import threading
import time

import pytest

from dm_core.db import Endpoint, connect, qi, qt
from dm_core.full.phase import prepare
from dm_core.state import StateStore
from dm_core.validate.compare import compare_task, render

from .mariadb_fixture import free_port, private_port, start_mariadb
from .test_full_support import (PhaseStep, cleanup, drop, execute, register, run_load, spark_env, submit_cmd,
                                task_yaml)

pytestmark = pytest.mark.integration
ROWS = 40_000


def _landed(ep: Endpoint, tdb: str) -> int:
    try:
        conn = connect(ep)
    except Exception:   # the server is away
        return -1
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {qt(tdb, 't')}")
            return cur.fetchone()[0]
    except Exception:
        return -1
    finally:
        conn.close()


def test_downstream_killed_mid_load_the_load_finishes_by_itself(stack, uniq, tmp_path):
    schema, tdb, name, sid = f"fk{uniq}", f"fkt{uniq}", f"fk{uniq}", f"fk-{uniq}"
    up = stack["up1"]
    db = start_mariadb(tmp_path, free_port(private_port(i) for i in range(0, 4)), 73, log_bin=False,
                       extra_args=["--local-infile=1"])
    down = db.endpoint()
    execute(up, f"CREATE DATABASE {qi(schema)}",
            f"CREATE TABLE {qt(schema, 't')} (id int PRIMARY KEY, v varchar(40), n bigint)",
            f"INSERT INTO {qt(schema, 't')} SELECT seq, CONCAT('row-', seq), seq * 7 FROM {schema}.seq_1_to_{ROWS}")
    text = task_yaml(name, down, [(sid, schema)], tdb)
    store = StateStore()
    try:
        task = register(store, name, text, {sid: up})
        prepare(task, store)
        env = spark_env({"SHARDFLOW_FAULTS": "full.before_chunk_merge=sleep:0.25", "SHARDFLOW_FULL_RECONNECT_S": "120"})
        log = tmp_path / "load.log"
        with open(log, "w") as out:
            job = subprocess.Popen(submit_cmd(name, "--chunk-rows", "2000"), env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + 180
            while _landed(down, tdb) < 4000 and job.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert job.poll() is None, "the load ended before the kill: " + log.read_text()[-3000:]
            landed = _landed(down, tdb)
            assert 0 < landed < ROWS, f"{landed} rows landed before the kill"
            db.proc.send_signal(signal.SIGKILL)
            db.proc.wait()
            time.sleep(3)
            db.start()
            rc = job.wait(timeout=300)
        said = log.read_text()
        assert rc == 0, said[-5000:]
        assert "a server went away" in said and "loading the chunk again" in said, said[-5000:]
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
    finally:
        cleanup(store, name, text)
        store.close()
        drop(up, schema)
        db.stop()


def test_a_chunk_committed_unheard_is_not_loaded_again(stack, uniq, tmp_path):
    """The connection goes while a chunk's COMMIT is under way and the server commits it unheard
    (fault point full.after_chunk_commit=errno:2013 after every chunk's commit): the load asks
    the chunk's marker once the server answers, counts the chunk as landed, and finishes with
    every row once (before, the retry's marker collided with the committed one: 1062)."""
    schema, tdb, name, sid = f"fu{uniq}", f"fut{uniq}", f"fu{uniq}", f"fu-{uniq}"
    up, down = stack["up1"], stack["down"]
    execute(up, f"CREATE DATABASE {qi(schema)}",
            f"CREATE TABLE {qt(schema, 't')} (id int PRIMARY KEY, v varchar(40), n bigint)",
            f"INSERT INTO {qt(schema, 't')} SELECT seq, CONCAT('row-', seq), seq * 7 FROM {schema}.seq_1_to_6000")
    text = task_yaml(name, down, [(sid, schema)], tdb)
    store = StateStore()
    try:
        task = register(store, name, text, {sid: up})
        prepare(task, store)
        r = run_load(name, "--chunk-rows", "2000", env={"SHARDFLOW_FAULTS": "full.after_chunk_commit=errno:2013",
                                                        "SHARDFLOW_FULL_RECONNECT_S": "60"})
        assert r.returncode == 0, (r.stdout + r.stderr)[-5000:]
        assert (r.stdout + r.stderr).count("it had landed") == 3, (r.stdout + r.stderr)[-3000:]
        assert _landed(down, tdb) == 6000
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
    finally:
        cleanup(store, name, text)
        store.close()
        drop(up, schema)
        drop(down, tdb)


def _writer(ep_of, schema: str, stop: threading.Event, errors: list) -> threading.Thread:
    """Writes on the upstream until ``stop``, on a new connection after each one lost: inserts,
    updates and deletes (a statement cut off by a kill may or may not have committed; the
    check compares with what the upstream holds at the end)."""

    def run():
        i, conn = 0, None
        while not stop.is_set():
            try:
                if conn is None:
                    conn = connect(ep_of())
                with conn.cursor() as cur:
                    cur.execute(f"INSERT INTO {qt(schema, 't')} (v, n) VALUES (%s, %s)", (f"w{i}", i))
                    cur.execute(f"UPDATE {qt(schema, 't')} SET n = n + 1 WHERE id %% 17 = %s", (i % 17,))
                    cur.execute(f"DELETE FROM {qt(schema, 't')} WHERE id %% 101 = %s LIMIT 1", (i % 101,))
                i += 1
                time.sleep(0.005)
            except Exception as e:  # noqa: BLE001 - the server is away: try again on a new connection
                conn = None
                if "Access denied" in str(e):
                    errors.append(e)
                    return
                time.sleep(0.2)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_upstream_and_downstream_killed_during_sync_converge_by_themselves(stack, uniq, tmp_path):
    """SIGKILL of the upstream, then of the downstream, each started again 2 s later, while rows
    are written: the source retries from its checkpoint (safe mode) and ends equal, no one
    acting."""
    from dm_core.full.phase import finish
    from dm_core.sync.session import Clocks, SyncSession

    schema, tdb, name, sid = f"sk{uniq}", f"skt{uniq}", f"sk{uniq}", f"sk-{uniq}"
    upd = start_mariadb(tmp_path / "up", free_port(private_port(i) for i in range(0, 4)), 74)
    downd = start_mariadb(tmp_path / "down", free_port(private_port(i) for i in range(0, 4)), 75, log_bin=False,
                          extra_args=["--local-infile=1"])
    up, down = upd.endpoint(), downd.endpoint()
    execute(up, f"CREATE DATABASE {qi(schema)}",
            f"CREATE TABLE {qt(schema, 't')} (id int AUTO_INCREMENT PRIMARY KEY, v varchar(40), n bigint)",
            f"INSERT INTO {qt(schema, 't')} (v, n) SELECT CONCAT('row-', seq), seq FROM {schema}.seq_1_to_2000")
    text = task_yaml(name, down, [(sid, schema)], tdb).replace("task-mode: full", "task-mode: all")
    store = StateStore()
    stop, errors = threading.Event(), []
    try:
        task = register(store, name, text, {sid: up})
        prepare(task, store)
        r = run_load(name)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        finish(task, store)
        # the retries' backoff (2, 4, 8 ... s) on a clock 8 times as fast: the same tries in the same
        # order, without minutes of waiting on a busy machine
        sess = SyncSession(task, sid, store, clocks=Clocks(sleep=lambda s: time.sleep(s / 8)))
        writer = _writer(lambda: up, schema, stop, errors)
        for victim in (upd, downd):
            for _ in range(3):
                sess.step()
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait()
            for _ in range(2):
                sess.step()          # meets the dead server: a transient error, retried
            time.sleep(2)
            victim.start()
            for _ in range(3):
                sess.step()
        stop.set()
        writer.join(timeout=30)
        assert not errors, errors
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and sess.step().state != "caught_up":
            pass
        assert store.source_state(name, sid)["stage"] != "paused", store.source_state(name, sid)["error"]
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
    finally:
        stop.set()
        cleanup(store, name, text)
        store.close()
        upd.stop()
        downd.stop()


@pytest.mark.parametrize("step", ["prepare", "finish"])
def test_an_upstream_down_while_the_phase_prepares_or_finishes_is_waited_for(stack, uniq, tmp_path, caplog, step):
    """The upstream (a private MariaDB) is down when the full phase prepares, or finishes: the
    step says a server went away, waits, and runs again once it is back (before: the full DAG
    failed and waited for `dmctl start-task`)."""
    schema, tdb, name, sid = f"fw{uniq}", f"fwt{uniq}", f"fw{uniq}", f"fw-{uniq}"
    db = start_mariadb(tmp_path, free_port(private_port(i) for i in range(4, 8)), 74)
    db.sql(f"CREATE DATABASE {qi(schema)}", f"CREATE TABLE {qt(schema, 't')} (id int PRIMARY KEY, v varchar(40))",
           f"INSERT INTO {qt(schema, 't')} VALUES (1, 'a'), (2, 'b')")
    text = task_yaml(name, stack["down"], [(sid, schema)], tdb).replace("task-mode: full", "task-mode: all")
    store = StateStore()
    caplog.set_level("WARNING", logger="shardflow.full")
    try:
        task = register(store, name, text, {sid: db.endpoint()})
        if step == "finish":
            prepare(task, store)
        db.proc.send_signal(signal.SIGKILL)
        db.proc.wait()
        run = PhaseStep(step, task, store)
        run.wait_for(lambda: "a server went away" in caplog.text)
        db.start()
        got = run.result()
        assert f"the full phase of {name} {step}" in caplog.text and "running it again in" in caplog.text, caplog.text
        state = store.source_state(name, sid)
        if step == "prepare":
            assert got["created"] == [f"{tdb}.t"] and state["low_file"], (got, state)
        else:
            assert got[sid]["high_watermark"] and state["stage"] == "sync", (got, state)
    finally:
        if db.proc.poll() is not None:
            db.start()
        cleanup(store, name, text)
        store.close()
        drop(stack["down"], tdb)
        db.stop()
