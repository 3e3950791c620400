"""`safe-mode-duration` on an incremental task's first start (dm_core/sync/safe_mode.py, case 3),
on real servers: the task starts from `meta`, a position *before* rows the user already copied
downstream (as after a dump that kept running while the upstream was written), so there is no
exit point. DM runs such a start in safe mode for `safe-mode-duration` (default twice
`checkpoint-flush-interval`): the replay of those rows converges. With `0s` it does not, and the
first duplicate key pauses the source. After the duration, changes are written normally."""

import pytest
import yaml

from dm_core.config.task import parse_task
from dm_core.db import connect, master_position, qi, qt
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.syncer import Syncer

from .helpers import drop_schemas, register, target_database

pytestmark = pytest.mark.integration


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _run(ep, *stmts) -> list:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            out = []
            for s in stmts:
                cur.execute(s)
                out = list(cur.fetchall())
            return out
    finally:
        conn.close()


@pytest.fixture
def scene(stack, uniq):
    up, down = stack["up1"], stack["down"]
    db, name, sid = f"smd{uniq}", f"smd{uniq}", f"smd-{uniq}"
    _run(up, f"CREATE DATABASE {qi(db)}", f"CREATE TABLE {qt(db, 't')} (id int PRIMARY KEY, v int)")
    _run(down, f"CREATE DATABASE {qi(db)}", f"CREATE TABLE {qt(db, 't')} (id int PRIMARY KEY, v int)")
    conn = connect(up)
    f, p, _ = master_position(conn)
    conn.close()
    # written after `meta`, and already downstream (the user's copy saw them)
    _run(up, f"INSERT INTO {qt(db, 't')} VALUES (1, 10), (2, 20), (3, 30)", f"UPDATE {qt(db, 't')} SET v = v + 1 WHERE id = 1")
    _run(down, f"INSERT INTO {qt(db, 't')} VALUES (1, 11), (2, 20), (3, 30)")
    store = StateStore()

    def task(duration: str | None):
        doc = {"name": name, "task-mode": "incremental", "target-database": target_database(down),
               "mysql-instances": [{"source-id": sid, "block-allow-list": "ba", "syncer-config-name": "s",
                                    "meta": {"binlog-name": f, "binlog-pos": int(p)}}],
               "block-allow-list": {"ba": {"do-dbs": [db]}},
               "syncers": {"s": {"worker-count": 2} | ({"safe-mode-duration": duration} if duration else {})}}
        text = yaml.safe_dump(doc, sort_keys=False)
        register(store, {sid: up}, name, text)
        return parse_task(text, "task.yaml")

    yield task, store, sid, db
    reset_task(store, name)
    store.close()
    drop_schemas(up, [db])
    drop_schemas(down, [db])


def _rows(ep, db):
    return sorted(_run(ep, f"SELECT id, v FROM {qt(db, 't')}"))


def test_the_first_start_replays_in_safe_mode_for_the_duration(scene, stack):
    task, store, sid, db = scene
    t = task(None)
    assert t.instance(sid).syncer.safe_mode_duration == 60  # DM's default: 2 x checkpoint-flush-interval 30s
    clock = Clock()
    s = Syncer(t, sid, store, clock=clock)
    r = s.run_window()
    assert not r.paused and r.safe_mode and r.rows == 4, r
    assert _rows(stack["down"], db) == _rows(stack["up1"], db)

    clock.now += 59  # still inside the duration: safe mode
    _run(stack["up1"], f"UPDATE {qt(db, 't')} SET v = v + 1 WHERE id = 2")
    assert s.run_window().safe_mode

    clock.now += 2   # past it: changes are written as they are
    _run(stack["up1"], f"INSERT INTO {qt(db, 't')} VALUES (4, 40)", f"UPDATE {qt(db, 't')} SET v = v + 1 WHERE id = 3")
    r = s.run_window()
    assert not r.paused and not r.safe_mode and r.rows == 2, r
    assert _rows(stack["down"], db) == _rows(stack["up1"], db)

    # a new start (a new process) has an exit point now, at its checkpoint: nothing to replay, no timer
    r = Syncer(t, sid, store, clock=clock).run_window()
    assert not r.paused and not r.safe_mode


def test_zero_duration_writes_the_replay_as_it_is_and_pauses_on_the_first_duplicate(scene, stack):
    """DM: the duplicate key pauses the source; a resume refuses to replay without safe mode."""
    task, store, sid, db = scene
    t = task("0s")
    r = Syncer(t, sid, store).run_window()
    assert r.paused and "Duplicate entry" in r.paused and not r.safe_mode, r
    st = store.source_state(t.name, sid)
    assert st["error_code"] == 50011 and st["binlog_pos"] == t.instance(sid).meta.binlog_pos, st
    assert _rows(stack["down"], db) == [(1, 11), (2, 20), (3, 30)]
    store.request_sources(t.name, [sid], "running", all_sources=[sid], clear_error=True)  # resume-task
    r = Syncer(t, sid, store).run_window()
    assert r.paused and "is set to 0s" in r.paused, r
