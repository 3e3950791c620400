"""The lifecycle in the state store and at the start of a sync window, on real servers
(the Airflow side is in tests/e2e/test_lifecycle_through_airflow.py): a stop beats a pause
on an error, a run of an earlier start applies nothing, `-s` pauses one source while the
other syncs, resuming a source paused on an error retries its statement once, and the
fence keeps two syncers of one source apart; a pause asked while a long window runs ends it."""

import dataclasses
import threading
import time

import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.syncer import Syncer

from .helpers import drop_schemas, make_shards, register, shard_task_yaml

pytestmark = pytest.mark.integration


@pytest.fixture
def scenario(stack, uniq):
    prefix, tdb, name = f"lc{uniq}", f"lct{uniq}", f"lc{uniq}"
    schemas = [f"{prefix}_1"]
    make_shards(stack["up1"], schemas, ["t_1"], rows=5)
    make_shards(stack["up2"], schemas, ["t_1"], rows=5)
    sources = {f"l1-{uniq}": stack["up1"], f"l2-{uniq}": stack["up2"]}
    text = shard_task_yaml(name, stack["down"], [(sid, i + 1) for i, sid in enumerate(sources)], prefix, tdb)
    task = parse_task(text, "test.yaml")
    store = StateStore()
    register(store, sources, name, text)
    prepare(task, store)
    finish(task, store)
    for sid in sources:  # caught up: later windows see only what the test writes
        _sync(task, store, sid)
    yield task, store, list(sources), schemas[0], tdb, text
    reset_task(store, name)
    store.close()
    drop_schemas(stack["up1"], schemas)
    drop_schemas(stack["up2"], schemas)
    drop_schemas(stack["down"], [tdb])


def _sync(task, store, sid, generation=None, windows=20):
    r = Syncer(task, sid, store, budget_events=500, generation=generation).run_until(float("inf"), max_windows=windows)
    assert r.state != "sync" or r.paused or r.caught_up, f"{sid} did not catch up"
    return r


def _insert(ep, schema, table, name):
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {qt(schema, table)} (name, amount) VALUES (%s, 1)", (name,))
    conn.close()


def _downstream_count(ep, tdb, table, name) -> int:
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {qt(tdb, table)} WHERE name = %s", (name,))
        n = cur.fetchone()[0]
    conn.close()
    return n


def _run(ep, *stmts):
    conn = connect(ep)
    with conn.cursor() as cur:
        for s in stmts:
            cur.execute(s)
    conn.close()


def _pause_on_a_downstream_error(stack, task, store, sid, schema, tdb):
    """An unsharded table whose downstream copy is gone: its ALTER fails downstream (DDL_EXEC_FAILED)."""
    _run(stack["up1"], f"CREATE TABLE {qt(schema, 'solo')} (id int PRIMARY KEY, name varchar(20))")
    assert _sync(task, store, sid).state == "sync"
    _run(stack["down"], f"DROP TABLE {qt(tdb, 'solo')}")
    _run(stack["up1"], f"ALTER TABLE {qt(schema, 'solo')} ADD COLUMN c int NULL",
         f"INSERT INTO {qt(schema, 'solo')} (id, name, c) VALUES (1, 'after-alter', 1)")
    r = _sync(task, store, sid)
    assert r.state == "paused" and r.paused and "solo" in r.paused, r
    return store.source_state(task.name, sid)


def test_transitions_in_the_store(scenario):
    task, store, (s1, s2), *_, text = scenario
    g0 = store.task_info(task.name)["generation"]
    g1 = store.start_task(task.name, text)
    assert g1 == g0 + 1 and store.task_info(task.name)["status"] == "running"
    both = [s1, s2]
    assert store.request_sources(task.name, [s1], "paused", all_sources=both) == "running"
    assert store.request_sources(task.name, [s2], "paused", all_sources=both) == "paused"  # every source paused
    assert store.request_sources(task.name, [s1], "running", all_sources=both) == "running"
    assert {s["source_id"]: s["requested"] for s in store.all_source_states(task.name)} == {s1: "running", s2: "paused"}
    g2 = store.stop_task(task.name)
    assert g2 == g1 + 1 and store.task_info(task.name)["status"] == "stopped"
    assert store.request_sources(task.name, [s1], "running", all_sources=both) == "stopped"  # only start-task starts
    st = store.source_state(task.name, s1)
    assert st["binlog_file"] and st["high_file"], "a stop keeps checkpoints and watermarks"
    g3 = store.start_task(task.name, text)
    assert g3 == g2 + 1
    assert {s["requested"] for s in store.all_source_states(task.name)} == {"running"}


def test_start_time_is_one_starts_and_refused_over_shard_ddl_state(scenario):
    """`start-task --start-time` writes the time for the sources it starts; the next start-task
    forgets it; a task with shard DDL state takes one only with --remove-meta (the groups'
    positions would contradict the new start)."""
    from dm_core.start import refuse_start_time_with_shard_state
    from dm_core.errors import ErrorCode, ShardflowError

    task, store, (s1, s2), *_, text = scenario
    store.start_task(task.name, text)
    store.set_start_time(task.name, [s1], "2021-10-21 00:01:00")
    assert {s["source_id"]: s["start_time"] for s in store.all_source_states(task.name)} == \
        {s1: "2021-10-21 00:01:00", s2: None}
    store.start_task(task.name, text)
    assert {s["start_time"] for s in store.all_source_states(task.name)} == {None}
    with pytest.raises(ShardflowError) as e:   # both sources synced: their sharding groups are tracked
        refuse_start_time_with_shard_state(store, task)
    assert e.value.code is ErrorCode.CONFIG_INVALID and f"sources {s1}, {s2}" in str(e.value), e.value
    assert "--remove-meta" in str(e.value)
    for sid in (s1, s2):   # as --remove-meta leaves them (reset_task): nothing tracked, nothing to contradict
        store.update_source_state(task.name, sid, shard_groups=None)
    refuse_start_time_with_shard_state(store, task)


def test_a_stop_beats_a_pause_on_an_error(scenario, stack):
    task, store, (s1, _), schema, tdb, _ = scenario
    _pause_on_a_downstream_error(stack, task, store, s1, schema, tdb)
    assert Syncer(task, s1, store).run_window().state == "paused"
    store.stop_task(task.name)
    assert Syncer(task, s1, store).run_window().state == "stopped"


def test_a_run_of_an_earlier_start_applies_nothing(scenario, stack):
    task, store, (s1, _), schema, tdb, text = scenario
    old = store.task_info(task.name)["generation"]
    new = store.start_task(task.name, text)  # start-task flipped the status back to running at once
    _insert(stack["up1"], schema, "t_1", "late")
    assert _sync(task, store, s1, generation=old).state == "stopped"
    assert _downstream_count(stack["down"], tdb, "t", "late") == 0
    assert _sync(task, store, s1, generation=new).state == "sync"
    assert _downstream_count(stack["down"], tdb, "t", "late") == 1


def test_pausing_one_source_leaves_the_other_syncing(scenario, stack):
    task, store, (s1, s2), schema, tdb, _ = scenario
    store.request_sources(task.name, [s1], "paused", all_sources=[s1, s2])
    _insert(stack["up1"], schema, "t_1", "from-1")
    _insert(stack["up2"], schema, "t_1", "from-2")
    assert _sync(task, store, s1).state == "paused"
    assert _sync(task, store, s2).state == "sync"
    assert _downstream_count(stack["down"], tdb, "t", "from-1") == 0
    assert _downstream_count(stack["down"], tdb, "t", "from-2") == 1
    store.request_sources(task.name, [s1], "running", all_sources=[s1, s2], clear_error=True)
    assert _sync(task, store, s1).state == "sync"
    assert _downstream_count(stack["down"], tdb, "t", "from-1") == 1


def test_a_pause_ends_a_running_window_within_the_poll(scenario, stack, monkeypatch):
    """A window reads for up to its budget (a sensor's: 10 s); `dmctl pause-task -s` asked while
    it runs ends it after the transaction at hand, within the poll: what it applied is
    checkpointed and nothing past it is, and the resumed source applies the rest once."""
    from dm_core import faults
    from dm_core.sync import syncer as syncer_module

    task, store, (s1, s2), schema, tdb, _ = scenario
    conn = connect(stack["up1"])
    with conn.cursor() as cur:
        for i in range(120):   # one transaction each
            cur.execute(f"INSERT INTO {qt(schema, 't_1')} (name, amount) VALUES (%s, 1)", (f"long-{i}",))
    conn.close()
    monkeypatch.setattr(syncer_module, "LIFECYCLE_POLL_SECONDS", 0.2)
    monkeypatch.setenv("SHARDFLOW_FAULTS", "sync.after_batch_apply=sleep:0.05")  # 120 batches: 6 s or more
    faults._hits.clear()
    syncer = Syncer(task, s1, store, budget_seconds=600)
    syncer.syncer_cfg = dataclasses.replace(syncer.syncer_cfg, batch=1, worker_count=1)   # a batch a transaction
    other = StateStore()
    pause = threading.Timer(1.0, other.request_sources, (task.name, [s1], "paused"), {"all_sources": [s1, s2]})
    pause.start()
    try:
        first = syncer.run_window()
    finally:
        pause.join()
        other.close()
    assert first.state == "sync" and not first.caught_up and 0 < first.rows < 120, first
    conn = connect(stack["down"])
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {qt(tdb, 't')} WHERE name LIKE 'long-%%'")
        done = cur.fetchone()[0]
    conn.close()
    assert done == first.rows, "the checkpoint is where the applied rows end"
    assert syncer.run_window().state == "paused"
    monkeypatch.delenv("SHARDFLOW_FAULTS")
    store.request_sources(task.name, [s1], "running", all_sources=[s1, s2])
    assert _sync(task, store, s1).state == "sync"
    conn = connect(stack["down"])
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*), COUNT(DISTINCT name) FROM {qt(tdb, 't')} WHERE name LIKE 'long-%%'")
        assert cur.fetchone() == (120, 120)
    conn.close()


def test_resume_retries_the_failed_statement_once_then_pauses_with_the_same_report(scenario, stack):
    task, store, (s1, s2), schema, tdb, _ = scenario
    first = _pause_on_a_downstream_error(stack, task, store, s1, schema, tdb)
    assert first["error_code"] == 50003 and "solo" in first["error"]
    # resume without fixing: one retry, the same report
    store.request_sources(task.name, [s1], "running", all_sources=[s1, s2], clear_error=True)
    assert store.source_state(task.name, s1)["error"] is None
    r = _sync(task, store, s1)
    again = store.source_state(task.name, s1)
    assert r.state == "paused"
    assert (again["error"], again["error_pos"], again["error_code"]) == (first["error"], first["error_pos"], 50003)
    # no further retries until the operator acts
    assert Syncer(task, s1, store).run_window().state == "paused"
    assert store.source_state(task.name, s1)["updated_at"] == again["updated_at"]
    # fixed downstream, resumed: the statement runs and the rows after it follow
    _run(stack["down"], f"CREATE TABLE {qt(tdb, 'solo')} (id int PRIMARY KEY, name varchar(20))")
    store.request_sources(task.name, [s1], "running", all_sources=[s1, s2], clear_error=True)
    assert _sync(task, store, s1).state == "sync"
    assert _downstream_count(stack["down"], tdb, "solo", "after-alter") == 1


def test_the_fence_keeps_two_syncers_of_one_source_apart(scenario):
    task, store, (s1, s2), *_ = scenario
    first, second = StateStore(store.dsn), StateStore(store.dsn)
    try:
        assert first.hold_source(task.name, s1)
        assert not second.hold_source(task.name, s1), "a second poke of the same source must wait"
        assert second.hold_source(task.name, s2), "another source is not held back"
        assert store.held_sources(task.name, [s1, s2]) == {s1, s2}
        first.close()  # the process died: its connection closes, the fence is free (once the server noticed)
        deadline = time.monotonic() + 30
        while store.held_sources(task.name, [s1, s2]) != {s2} and time.monotonic() < deadline:
            time.sleep(0.1)
        assert store.held_sources(task.name, [s1, s2]) == {s2}
        assert second.hold_source(task.name, s1)
    finally:
        second.close()
        if not first._conn.closed:
            first.close()


def _steps_until(sess, state, n=20):
    for _ in range(n):
        out = sess.step()
        if out.state == state:
            return out
    pytest.fail(f"the session never reached {state!r} (last: {out.state!r}: {out.messages})")


def test_a_long_lived_session_syncs_rests_while_paused_fences_a_twin_and_ends_on_stop(scenario, stack):
    """What the poke-mode sensor relies on: one SyncSession per process, steps back to back."""
    from dm_core.sync.session import Clocks, Pacing, SyncSession

    task, store, (s1, s2), schema, tdb, _ = scenario
    rests = []
    sess = SyncSession(task, s1, store, pacing=Pacing(record_seconds=0), clocks=Clocks(sleep=rests.append))
    _insert(stack["up1"], schema, "t_1", "sess-a")
    _steps_until(sess, "caught_up")
    assert _downstream_count(stack["down"], tdb, "t", "sess-a") == 1
    assert sum(w["rows"] for w in store.windows(task.name)[s1]) >= 1, "the windows are recorded for the UI"

    with StateStore() as other:  # a second process of the same source (a killed poke not dead yet)
        twin = SyncSession(task, s1, other, clocks=Clocks(sleep=rests.append))
        first = twin.step()
        assert first.state == "fenced" and "another process still syncs" in first.messages[0][1]
        assert twin.step().state == "fenced"

    store.request_sources(task.name, [s1], "paused", all_sources=[s1, s2])
    _insert(stack["up1"], schema, "t_1", "sess-b")
    n_rests = len(rests)
    out = sess.step()
    assert out.state == "paused" and out.messages, "a pause is said once in the task log"
    assert sess.step().messages == [], "and not again at every step"
    assert len(rests) == n_rests + 2, "a paused session rests between steps"
    assert _downstream_count(stack["down"], tdb, "t", "sess-b") == 0

    store.request_sources(task.name, [s1], "running", all_sources=[s1, s2])
    _steps_until(sess, "caught_up")
    assert _downstream_count(stack["down"], tdb, "t", "sess-b") == 1

    store.request_sources(task.name, [s1], "stopped", all_sources=[s1, s2])
    assert sess.step().state == "stopped"
