"""DM's `retry_cancel` case (pingcap/tiflow dm/tests/retry_cancel: only `run.sh.todo` at the vendored
commit, DM took it out of its runs; its conf/ is vendored unchanged, the statements are our own, as
its data/ files: `retry_cancel`.`t1` on upstream 1 and `t2` on upstream 2, four rows each before the
task, four more each later).

DM's failpoint `retryableError` answers every downstream statement holding a mark with error 1213
(deadlock), an error DM retries. DM's case checks that a unit retrying it can be stopped at once
(stop-task within 3 s) and converges once the error is gone. shardflow's fault point action
``errno:1213`` (dm_core/faults.py) is the same error at every hit, so each stage's own retry and
classification of 1213 run as against a real server. What an error that will not go away must do
in shardflow: be retried a bounded number of times, each retry said, then pause the source naming
the error; a resume or a stop works at any moment, and nothing is lost or applied twice.

1. full phase (DM: `CREATE DATABASE` of the load unit, then its checkpoint `UPDATE`): every chunk's
   commit, which writes the loader's marker (shardflow's load checkpoint downstream), fails with 1213:
   the chunk is loaded again three times, each said in the job's log, then the job fails naming the
   table, the chunk and the error, with nothing loaded and no chunk recorded; without the error a
   start again loads every row once;
2. incremental (DM: `REPLACE INTO retry_cancel...` of the syncer): rows written while no source
   syncs, then every commit of a batch downstream fails with 1213: each source says each retry
   (attempt n of 8, from its checkpoint) and then pauses with code 50012 naming 1213, the
   checkpoint unmoved, nothing applied; query-status shows the pause and the error;
   resume-task while the error stays: the same retries and the same pause again (not silently
   retried forever, not dropped);
3. a stop-task during a retry's backoff (up to a minute between two retries) ends the source's
   step at once, as DM's retry watches its context (DM: stop-task within 3 s);
4. without the error, start-task: every row lands once, both tables equal upstream.

Not ported: relay (`enable-relay` is warned), DM's log lines (the retries are checked in what
the source says and records), DM's worker kills (restarts are new sessions here).
"""

import json
import threading
import time

import pytest


from .harness import (checked_prepare, dm_case, dmctl, register_sources, run_sql, start_task, stop_task,
                      table_rows)

pytestmark = pytest.mark.integration

DB = "retry_cancel"
S1, S2 = "mysql-replica-01", "mysql-replica-02"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB], "up2": [DB], "down": [DB, "dm_meta"]}) as got:
        yield got


def _prepare(stack) -> None:
    for ep, t in ((stack["up1"], "t1"), (stack["up2"], "t2")):
        run_sql(ep, f"CREATE DATABASE {DB}", f"USE {DB}",
                f"CREATE TABLE {t} (id BIGINT PRIMARY KEY, uid BIGINT) DEFAULT CHARSET=utf8mb4",
                f"INSERT INTO {t} (id, uid) VALUES (1, 101), (2, 102)", f"INSERT INTO {t} (id, uid) VALUES (3, 103), (4, 104)")


def _increment(stack) -> None:
    for ep, t in ((stack["up1"], "t1"), (stack["up2"], "t2")):
        run_sql(ep, f"USE {DB}", f"INSERT INTO {t} (id, uid) VALUES (5, 105), (6, 106)",
                f"INSERT INTO {t} (id, uid) VALUES (7, 107), (8, 108)")


def _equal(stack) -> None:
    for ep, t in ((stack["up1"], "t1"), (stack["up2"], "t2")):
        assert table_rows(stack["down"], DB, t, ["id", "uid"]) == table_rows(ep, DB, t, ["id", "uid"]), t


def _status(name: str) -> dict:
    rc, out, err = dmctl("query-status", name)
    assert rc == 0, out + err
    return {s["source"]: s for s in json.loads(out)["tasks"][0]["sources"]}


def test_full_phase_error_that_stays_fails_the_load_naming_it(case, stack, tmp_path):
    """Part 1: the load's commits fail with 1213 every time."""
    from tests.integration.test_full_support import run_load

    files, store = case
    _prepare(stack)
    register_sources(files)
    task = checked_prepare(files, store)
    r = run_load(task.name, env={"SHARDFLOW_FAULTS": "full.before_chunk_merge=errno:1213"})
    log = r.stdout + r.stderr
    assert r.returncode != 0, log[-3000:]
    assert "injected server error 1213" in log, log[-3000:]
    for t in ("t1", "t2"):
        assert f"{DB}.{t} chunk 0" in log and log.count(f"{DB}.{t} chunk 0: deadlock or lock wait timeout") == 3, \
            log[-3000:]
    assert "Rerun the full DAG" in log, log[-3000:]            # FULL_LOAD_FAILED's workaround
    assert run_sql(stack["down"], f"SELECT COUNT(*) FROM {DB}.t1") == [(0,)]
    assert store.chunk_totals(task.name) in ({}, {S1: 0, S2: 0}), store.chunk_totals(task.name)

    # the error is gone: a start again loads every row once
    stop_task(task.name)
    _, sync = start_task(files.task_file, store)
    _equal(stack)
    _increment(stack)
    sync.settle()
    _equal(stack)


def _retry_until_paused(session, retries: int) -> list:
    """Steps of one source until it pauses: what each said."""
    said = []
    for _ in range(retries + 3):
        out = session.step()
        said.append((out.state, "\n".join(m for _, m in out.messages)))
        if out.state == "paused":
            return said
    pytest.fail(f"never paused: {said}")


def test_incremental_error_that_stays_pauses_then_resume_and_stop_work(case, stack, tmp_path, monkeypatch):
    """Parts 2-4."""
    from dm_core.sync.session import TRANSIENT_RETRIES

    files, store = case
    _prepare(stack)
    register_sources(files)
    task, sync = start_task(files.task_file, store)
    _equal(stack)
    before = {s["source_id"]: (s["binlog_file"], s["binlog_pos"]) for s in store.all_source_states(task.name)}

    # 2. rows written, every commit downstream refused with 1213
    _increment(stack)
    monkeypatch.setenv("SHARDFLOW_FAULTS", "sync.apply.before_commit=errno:1213")
    out = sync.sessions[S1].step()
    assert out.state == "retrying", out
    st = _status(task.name)[S1]           # query-status says it retries, and why
    assert st["status"] == "running" and st["message"].startswith("retrying from its checkpoint"), st
    assert "transient error (attempt 1 of 8; next try in 2s)" in st["message"] and "1213" in st["message"], st
    sync.sessions[S1].failures = 0        # counted again from the first below
    for sid, sess in sync.sessions.items():
        said = _retry_until_paused(sess, TRANSIENT_RETRIES)
        assert [s for s, _ in said] == ["retrying"] * TRANSIENT_RETRIES + ["paused"], said
        for n, (_, text) in enumerate(said[:-1], 1):
            assert f"transient error (attempt {n} of {TRANSIENT_RETRIES}), retrying from the last checkpoint" in text
            assert "1213" in text, text
        assert "[code=50012:sync]" in said[-1][1] and "injected server error 1213" in said[-1][1], said[-1]
    st = _status(task.name)
    for sid in (S1, S2):
        assert st[sid]["status"] == "paused" and "1213" in st[sid]["error"], st[sid]
        assert "failed 9 times in a row with transient errors" in st[sid]["error"], st[sid]
        assert "resume-task" in st[sid]["message"], st[sid]
    after = {s["source_id"]: (s["binlog_file"], s["binlog_pos"]) for s in store.all_source_states(task.name)}
    assert after == before
    assert run_sql(stack["down"], f"SELECT COUNT(*) FROM {DB}.t1") == [(4,)]

    # resume-task while the error stays: the same retries, the same pause
    rc, out, err = dmctl("resume-task", task.name)
    assert rc == 0, out + err
    said = _retry_until_paused(sync.sessions[S1], TRANSIENT_RETRIES)
    assert [s for s, _ in said] == ["retrying"] * TRANSIENT_RETRIES + ["paused"], said
    assert _status(task.name)[S1]["status"] == "paused"

    # 3. a stop-task during a retry's backoff ends the step at once
    sess = sync.sessions[S2]
    sess._sleep = time.sleep
    sess.failures = 4                 # the fifth retry in a row waits 32 s before it runs
    rc, out, err = dmctl("resume-task", task.name, "-s", S2)
    assert rc == 0, out + err
    timer = threading.Timer(1.0, lambda: stop_task(task.name))
    timer.start()
    t0 = time.monotonic()
    out = sess.step()
    took = time.monotonic() - t0
    timer.join()
    assert out.state == "retrying" and took < 5, (out.state, took)
    assert sess.step().state == "stopped"

    # 4. without the error, start again: every row once
    monkeypatch.delenv("SHARDFLOW_FAULTS")
    _, sync = start_task(files.task_file, store)
    _equal(stack)
    assert run_sql(stack["down"], f"SELECT COUNT(*) FROM {DB}.t1") == [(8,)]

    # an error that goes away: one retry shown, then the source runs and the error is gone
    _increment_more(stack)
    monkeypatch.setenv("SHARDFLOW_FAULTS", "sync.apply.before_commit=errno:1213")
    assert sync.sessions[S1].step().state == "retrying"
    assert "attempt 1 of 8" in _status(task.name)[S1]["error"]
    monkeypatch.delenv("SHARDFLOW_FAULTS")
    sync.settle()
    st = _status(task.name)[S1]
    assert st["error"] is None and not st["message"].startswith("retrying"), st
    _equal(stack)


def _increment_more(stack) -> None:
    for ep, t in ((stack["up1"], "t1"), (stack["up2"], "t2")):
        run_sql(ep, f"USE {DB}", f"INSERT INTO {t} (id, uid) VALUES (9, 109)", f"UPDATE {t} SET uid = uid + 1000")
