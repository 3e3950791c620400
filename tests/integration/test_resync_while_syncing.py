"""Re-sync while replication runs, on real servers: sync sessions apply the binlog in
background threads (as the sensors do) while the upstream keeps writing, and a re-sync
rewrites downstream rows under the sync hold (dm_core/resync). Nothing may be lost or
applied twice: after the writers stop and the sources catch up, the downstream equals the
union of the shards, checked by the validation."""

import subprocess
import threading
import time
from pathlib import Path

import pytest

from dm_core.db import connect
from dm_core.resync import hold
from dm_core.resync.choose import keys_of
from dm_core.resync.run import run_resync
from dm_core.position import Position
from dm_core.sync.session import Clocks, Pacing, SyncSession
from dm_core.validate.compare import validate_task
from dm_core.validate.result import render
from dm_core.validate.settings import settings_for

from .shard_helpers import SourceSpec, query, run, setup_shards, teardown

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


class Background:
    """Upstream writers and one sync session per source (the sensor's loop), until stopped."""

    def __init__(self, setup, write=True):
        self.setup, self.stop, self.errors, self.written = setup, threading.Event(), [], 0
        self.states: dict[str, set] = {sid: set() for sid in setup.sources}
        self.threads = [threading.Thread(target=self._sync, args=(sid,)) for sid in setup.sources]
        self.writing = threading.Event()
        if write:
            self.writing.set()
            self.threads.append(threading.Thread(target=self._write))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)
        assert not self.errors, self.errors[0]

    def _sync(self, sid):
        from dm_core.state import StateStore

        try:
            with StateStore(self.setup.store.dsn) as store:
                sess = SyncSession(self.setup.task, sid, store, pacing=Pacing(rest_seconds=0.2, step_seconds=2, window_seconds=2))
                while not self.stop.is_set():
                    out = sess.step()
                    self.states[sid].add(out.state)
                    assert out.state != "paused", out.messages
                    time.sleep(0.1)
        except BaseException as e:
            self.errors.append(e)

    def _write(self):
        """Inserts, updates and deletes of rows of its own on every shard (the rows the test
        damages stay still, so validation can confirm them); the re-sync of every row
        rewrites the writer's rows too."""
        try:
            conns = {sh: connect(sh.ep) for sh in self.setup.shards}
            i = 0
            while not self.stop.is_set() and self.writing.is_set():
                for sh, c in conns.items():
                    with c.cursor() as cur:
                        cur.execute(f"INSERT INTO {sh.q} (name, amount) VALUES (%s, %s)", (f"live-{i}", i))
                        cur.execute(f"UPDATE {sh.q} SET amount = amount + 1 WHERE name LIKE 'live-%%' "
                                    "ORDER BY id DESC LIMIT 2")
                        if i % 5 == 4:
                            cur.execute(f"DELETE FROM {sh.q} WHERE name LIKE 'live-%%' ORDER BY id LIMIT 1")
                    self.written += 1
                i += 1
                time.sleep(0.05)
            for c in conns.values():
                c.close()
        except BaseException as e:
            self.errors.append(e)


@pytest.fixture
def syncing(stack, uniq, tmp_path):
    p = f"rs{uniq}"
    specs = [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1"], ["t_1", "t_2"], 1),
             SourceSpec(f"b-{uniq}", stack["up2"], [f"{p}_1"], ["t_1"], 2)]
    setup = setup_shards(uniq, specs, stack["down"], tmp_path, prefix=p, rows=20)
    yield setup
    teardown(setup)


def _settings(task):
    s = settings_for(task)
    s.recheck.row_error_delay, s.recheck.check_interval = 120, 0.5
    return s


def _caught_up(setup, timeout=120):
    """Wait until every source's checkpoint passes its upstream's position now."""
    from dm_core.db import master_position

    want = {}
    for spec in setup.specs:
        c = connect(spec.ep)
        f, p, _ = master_position(c)
        c.close()
        want[spec.sid] = Position(f, p)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = {s["source_id"]: s for s in setup.store.all_source_states(setup.name)}
        if all(st[sid]["binlog_file"] and Position(st[sid]["binlog_file"], st[sid]["binlog_pos"]).key() >= w.key()
               for sid, w in want.items()):
            return
        time.sleep(0.3)
    raise AssertionError(f"sources did not catch up: {setup.store.all_source_states(setup.name)}")


def test_damaged_rows_are_repaired_while_writes_go_on(syncing):
    t = f"`{syncing.tdb}`.`t`"
    with Background(syncing) as bg:
        time.sleep(3)
        rows = query(syncing.down, f"SELECT id FROM {t} ORDER BY id")
        bad, gone = rows[2][0], rows[5][0]
        run(syncing.down, f"UPDATE {t} SET name = 'corrupted' WHERE id = {bad}", f"DELETE FROM {t} WHERE id = {gone}",
            f"INSERT INTO {t} (id, name, amount) VALUES (7, 'stray', 0)")   # no shard maps to id 7
        found = validate_task(syncing.task, syncing.store, settings=_settings(syncing.task))
        diffs = sorted((d.kind, int(d.key["id"])) for d in found.tables[0].differences)
        assert diffs == sorted([("changed", bad), ("missing", gone), ("extra", 7)]), render(found)

        keys, again = keys_of(found.to_dict())
        assert again == []
        res = run_resync(syncing.task, syncing.store, "r1", keys)
        assert res.ok, res.render()
        assert set(res.held) == set(syncing.sources), res.render()   # both live syncers held
        [tr] = res.tables
        assert (tr.keys, tr.written) == (3, 2) and tr.deleted >= 2, res.render()
        assert all("held" in s for s in bg.states.values()), bg.states
        assert hold.active(syncing.store, syncing.name) is None   # released

        # every row of the table rewritten while the writer updates and deletes them
        everything = [{"id": str(r[0])} for r in query(syncing.down, f"SELECT id FROM {t}")]
        res = run_resync(syncing.task, syncing.store, "r2", {f"{syncing.tdb}.t": everything})
        assert res.ok and res.tables[0].keys == len(everything) > 60, res.render()
        time.sleep(2)
        bg.writing.clear()
        time.sleep(0.5)
        _caught_up(syncing)
        assert bg.written > 50, "the upstream writer hardly wrote: the test proved nothing"
    again = validate_task(syncing.task, syncing.store, settings=_settings(syncing.task))
    assert again.status == "equal", render(again)
    # the safe-mode exit point was raised past every read of the re-sync
    for st in syncing.store.all_source_states(syncing.name):
        assert st["safe_exit_file"], st


def test_a_held_source_applies_nothing_and_a_dead_resync_is_broken(syncing):
    t = f"`{syncing.tdb}`.`t`"
    sid = syncing.sources[0]
    sess = SyncSession(syncing.task, sid, syncing.store, clocks=Clocks(sleep=lambda s: None))
    assert sess.step().state in ("sync", "caught_up")
    before = query(syncing.down, f"SELECT COUNT(*) FROM {t}")[0][0]
    hold.request(syncing.store, syncing.name, "dead-run", lease=2)
    sh = syncing.of(sid)[0]
    run(sh.ep, f"INSERT INTO {sh.q} (name, amount) VALUES ('during-hold', 1)")
    out = sess.step()
    assert out.state == "held" and "dead-run" in out.messages[0][1], out.messages
    assert hold.active(syncing.store, syncing.name).acks[sid].startswith("(")
    assert query(syncing.down, f"SELECT COUNT(*) FROM {t}")[0][0] == before   # nothing applied while held
    # a second re-sync is refused while the first one's lease runs
    with pytest.raises(Exception, match="holds the sync"):
        hold.request(syncing.store, syncing.name, "other-run")
    time.sleep(2.5)   # the re-sync "died": its lease runs out
    assert not hold.renew(syncing.store, syncing.name, "dead-run")
    out = sess.step()
    assert out.state in ("sync", "caught_up"), out.messages
    assert query(syncing.down, f"SELECT COUNT(*) FROM {t} WHERE name = 'during-hold'")[0][0] == 1
    assert hold.active(syncing.store, syncing.name) is None   # broken: no longer holds anyone
    hold.request(syncing.store, syncing.name, "other-run")     # and a new re-sync may take it
    hold.release(syncing.store, syncing.name, "other-run")


def test_a_postgres_restart_under_a_resync_is_waited_out_and_the_run_finishes(syncing):
    """Postgres stopped for 3 s (`scripts/stack.sh pg-bounce`) once the sync is held, before the
    re-sync's first write: the run waits for the store, renews its hold, repairs and releases;
    the syncers wait it out too, and the downstream ends equal to the upstream."""
    t = f"`{syncing.tdb}`.`t`"
    lines = []

    def log(line):
        lines.append(line)
        if line.startswith("sync held for the re-sync"):   # the sources hold; nothing written yet
            bounce = subprocess.run([str(ROOT / "scripts" / "stack.sh"), "pg-bounce", "3"], capture_output=True,
                                    text=True)
            assert bounce.returncode == 0, bounce.stdout + bounce.stderr

    with Background(syncing) as bg:
        time.sleep(3)
        rows = query(syncing.down, f"SELECT id FROM {t} ORDER BY id")
        bad, gone = rows[2][0], rows[5][0]
        run(syncing.down, f"UPDATE {t} SET name = 'corrupted' WHERE id = {bad}", f"DELETE FROM {t} WHERE id = {gone}")
        res = run_resync(syncing.task, syncing.store, "r-bounce", {f"{syncing.tdb}.t": [{"id": str(bad)},
                                                                                       {"id": str(gone)}]}, log=log)
        assert res.ok, res.render() + "\n" + "\n".join(lines)
        assert [tr.written for tr in res.tables] == [2], res.render()
        text = "\n".join(lines)
        assert "the state store is unreachable while re-sync run r-bounce renews its hold" in text, text
        assert "the state store is back after" in text, text
        assert hold.active(syncing.store, syncing.name) is None   # released once the store was back
        bg.writing.clear()
        time.sleep(0.5)
        _caught_up(syncing)
    again = validate_task(syncing.task, syncing.store, settings=_settings(syncing.task))
    assert again.status == "equal", render(again)
