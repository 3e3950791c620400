"""Validation while replication runs, on real servers: real syncers apply the binlog in a
background thread (as the sensors do) while the upstream keeps writing. Rows in flight must
never be reported as differences (chunks re-checked after catch-up, rows re-checked by key); a
row damaged downstream still is, by its key."""

import subprocess
import threading
import time
from pathlib import Path

import pytest

from dm_core.db import connect
from dm_core.sync.syncer import Syncer
from dm_core.validate.compare import validate_task
from dm_core.validate.result import render
from dm_core.validate.settings import settings_for

from .shard_helpers import SourceSpec, query, run, setup_shards, teardown

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


class Background:
    """Upstream writers and one syncing thread per source, until stopped."""

    def __init__(self, setup):
        self.setup, self.stop, self.errors, self.written = setup, threading.Event(), [], 0
        self.threads = [threading.Thread(target=self._sync, args=(sid,)) for sid in setup.sources] + \
                       [threading.Thread(target=self._write)]

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
                s = Syncer(self.setup.task, sid, store, budget_events=300)
                while not self.stop.is_set():
                    r = s.run_window()
                    assert not r.paused, r.paused
                    time.sleep(0.2)
        except BaseException as e:
            self.errors.append(e)

    def _write(self):
        """Inserts and updates on every shard (ids above 1000 are never damaged by the test)."""
        try:
            conns = {sh: connect(sh.ep) for sh in self.setup.shards}
            i = 0
            while not self.stop.is_set():
                for sh, c in conns.items():
                    with c.cursor() as cur:
                        cur.execute(f"INSERT INTO {sh.q} (name, amount) VALUES (%s, %s)", (f"live-{i}", i))
                        cur.execute(f"UPDATE {sh.q} SET amount = amount + 1 WHERE id > 20 ORDER BY id DESC LIMIT 2")
                    self.written += 1
                i += 1
                time.sleep(0.02)
            for c in conns.values():
                c.close()
        except BaseException as e:
            self.errors.append(e)


@pytest.fixture
def syncing(stack, uniq, tmp_path):
    p = f"vw{uniq}"
    specs = [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1"], ["t_1", "t_2"], 1),
             SourceSpec(f"b-{uniq}", stack["up2"], [f"{p}_1"], ["t_1"], 2)]
    setup = setup_shards(uniq, specs, stack["down"], tmp_path, prefix=p, rows=20)
    yield setup
    teardown(setup)


def _settings(task):
    s = settings_for(task)
    s.recheck.row_error_delay, s.recheck.check_interval = 120, 0.5
    return s


def test_rows_in_flight_are_not_differences_and_damage_is_named(syncing):
    with Background(syncing) as bg:
        time.sleep(3)
        for _ in range(2):
            r = validate_task(syncing.task, syncing.store, settings=_settings(syncing.task), chunk_rows=8)
            t = r.tables[0]
            assert t.differences == [] and t.pending == [], render(r)
        assert bg.written > 50, "the upstream writer hardly wrote: the test proved nothing"
        assert t.upstream_rows > 3 * 20 and t.buckets > 3, render(r)    # key chunks, checksummed while rows move

        # damage two rows no writer touches (ids <= 20 of the first shard): found while writes go on
        rows = query(syncing.down, f"SELECT id FROM `{syncing.tdb}`.`t` ORDER BY id")
        bad, gone = rows[2][0], rows[5][0]
        run(syncing.down, f"UPDATE `{syncing.tdb}`.`t` SET name = 'corrupted' WHERE id = {bad}",
            f"DELETE FROM `{syncing.tdb}`.`t` WHERE id = {gone}")
        r = validate_task(syncing.task, syncing.store, settings=_settings(syncing.task), chunk_rows=8)
        t = r.tables[0]
        assert sorted((d.kind, int(d.key["id"])) for d in t.differences) == sorted([("changed", bad), ("missing", gone)]), \
            render(r)
        assert t.pending == []


def test_a_cancelled_validation_stops_waiting_for_replication(syncing):
    """Nothing syncs here, so the sources stay behind a row written now: the wait for them ends
    at its deadline, or at once when the validation is cancelled (its task stopped)."""
    from dm_core.db import connect
    from dm_core.sources import source_endpoint
    from dm_core.errors import Cancelled
    from dm_core.validate.recheck import SyncWaiter

    sh = syncing.shards[0]
    run(sh.ep, f"INSERT INTO {sh.q} (name, amount) VALUES ('behind', 1)")
    ups = {i.source_id: connect(source_endpoint(syncing.store, i.source_id)) for i in syncing.task.mysql_instances}
    try:
        waiter = SyncWaiter(syncing.task, syncing.store, ups, poll=0.1)
        assert "did not catch up in time" in waiter.catch_up(time.monotonic() + 0.5)
        waiter = SyncWaiter(syncing.task, syncing.store, ups, poll=0.1, stop=lambda: True)
        t0 = time.monotonic()
        with pytest.raises(Cancelled):
            waiter.catch_up(time.monotonic() + 120)
        assert time.monotonic() - t0 < 10
    finally:
        for c in ups.values():
            c.close()


def test_a_postgres_restart_before_the_result_is_recorded_is_waited_out(syncing, monkeypatch):
    """The validation job (spark_jobs/validate.py, in process: it starts no Spark) compares,
    then Postgres restarts (`scripts/stack.sh pg-bounce`) before it records its result: it waits
    for the store and records it, rather than failing for Airflow to compare everything again."""
    from spark_jobs import validate as job

    monkeypatch.setenv("SHARDFLOW_FAULTS", "validate.before_record=sleep:3")
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(rc=job._run(job._parse_arguments(
        ["--task", syncing.name, "--run-id", "r-bounce"]))))
    t.start()
    deadline = time.monotonic() + 60
    while syncing.store.validation(syncing.name, "r-bounce") is None:   # marked running: it compares now
        assert time.monotonic() < deadline and t.is_alive(), out
        time.sleep(0.1)
    bounce = subprocess.run([str(ROOT / "scripts" / "stack.sh"), "pg-bounce", "3"], capture_output=True, text=True)
    assert bounce.returncode == 0, bounce.stdout + bounce.stderr
    t.join(120)
    assert out.get("rc") == 0, out
    syncing.store.reconnect()   # the test's own connection went with the restart
    got = syncing.store.validation(syncing.name, "r-bounce")
    assert got["status"] == "equal" and got["finished_at"], got
    assert sum(t["upstream_rows"] for t in got["tables"]) >= 60, got
