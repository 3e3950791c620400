"""Issue 5's acceptance scenario on real servers: a random workload on several sources (hot
keys, primary-key updates, deletes and re-inserts of the same key, NULLs, unicode, rows of
hundreds of KB, long transactions) while every source's syncer process is SIGKILLed at
random moments, the downstream server is stopped for a while, and an upstream rotates its
binlog. Afterwards every source is run without faults until caught up, and the downstream
must equal the union of the shards after routing and partition-id mapping, exactly.

The syncers run as separate processes (``shard_helpers`` runner, one per source, the way
the sensors' pokes run); a killed runner is started again, as Airflow retries a sensor.
The downstream is a private MariaDB so that it can be stopped without disturbing the stack.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from dm_core.db import connect, qi, qt
from dm_core.reset import reset_task

from .mariadb_fixture import free_port, private_port, start_mariadb
from .shard_helpers import SourceSpec, assert_union, converge, run, setup_shards, source_states, spawn

pytestmark = pytest.mark.integration

UNICODE = ["naïve café", "数据迁移", "Ünïcödé ✓", "emoji 🚀🔥", "", None]


@pytest.fixture
def chaos(stack, uniq, tmp_path):
    down = start_mariadb(tmp_path / "down", free_port(private_port(i) for i in range(0, 4)), 71, log_bin=False)
    p = f"cx{uniq}"
    specs = [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1", f"{p}_2"], ["t_1", "t_2"], 1),
             SourceSpec(f"b-{uniq}", stack["up2"], [f"{p}_1", f"{p}_2"], ["t_1"], 2),
             SourceSpec(f"c-{uniq}", stack["up1"], [f"{p}_3"], ["t_1", "t_2"], 3)]
    setup = setup_shards(uniq, specs, down.endpoint(name="down"), tmp_path, prefix=p, rows=40,
                         extra_cols=", note mediumtext NULL, tag varchar(32) NULL")
    yield setup, down
    down.stop()  # private: nothing to drop downstream
    reset_task(setup.store, setup.name)
    setup.store.close()
    for spec in specs:
        run(spec.ep, *[f"DROP DATABASE IF EXISTS {qi(s)}" for s in spec.schemas])


def _workload(shards, seed: int, stop: threading.Event, errors: list) -> None:
    """Random changes on the shards of one upstream server until ``stop``."""
    rnd = random.Random(seed)
    try:
        conn = connect(shards[0].ep, autocommit=False)
        with conn.cursor() as cur:
            while not stop.is_set():
                sh = rnd.choice(shards)
                q = sh.q
                k = rnd.randint(1, 60)
                roll = rnd.random()
                if roll < 0.3:  # insert, sometimes a large row
                    note = "x" * rnd.randint(100_000, 300_000) if rnd.random() < 0.03 else rnd.choice(UNICODE)
                    cur.execute(f"INSERT INTO {q} (name, amount, note, tag) VALUES (%s, %s, %s, %s)",
                                (rnd.choice(UNICODE), rnd.randint(-5, 500), note, rnd.choice(UNICODE)))
                elif roll < 0.55:  # hot keys
                    cur.execute(f"UPDATE {q} SET amount = amount + 1, tag = %s WHERE id IN (1, 2, 3)",
                                (rnd.choice(UNICODE),))
                elif roll < 0.65:  # primary-key update (skip when the new key is taken)
                    cur.execute(f"UPDATE IGNORE {q} SET id = id + 100000 WHERE id = %s", (k,))
                elif roll < 0.8:  # delete and re-insert the same key in one transaction
                    cur.execute(f"DELETE FROM {q} WHERE id = %s", (k,))
                    cur.execute(f"INSERT INTO {q} (id, name, amount, note) VALUES (%s, %s, %s, NULL)",
                                (k, rnd.choice(UNICODE), k))
                elif roll < 0.9:
                    cur.execute(f"DELETE FROM {q} WHERE id = %s", (rnd.randint(1, 200),))
                elif roll < 0.97:  # NULLs
                    cur.execute(f"UPDATE {q} SET name = NULL, note = NULL WHERE id = %s", (k,))
                else:  # a long transaction
                    first = None
                    for i in range(300):
                        cur.execute(f"INSERT INTO {q} (name, amount, tag) VALUES (%s, %s, %s)",
                                    (f"long-{i}", i, rnd.choice(UNICODE)))
                        first = first or cur.lastrowid
                    cur.execute(f"UPDATE {q} SET amount = amount + 1 WHERE id >= %s AND name LIKE 'long-%%'",
                                (first,))
                conn.commit()
                time.sleep(rnd.random() * 0.01)
        conn.close()
    except BaseException as e:  # surfaced by the test
        errors.append(e)


def test_random_workload_with_kills_downstream_outage_and_rotation_converges_exactly(chaos, tmp_path):
    setup, down = chaos
    rnd = random.Random(20261122)
    stop = threading.Event()
    errors: list[BaseException] = []
    by_server: dict[int, list] = {}
    for sh in setup.shards:
        by_server.setdefault(sh.ep.port, []).append(sh)
    writers = [threading.Thread(target=_workload, args=(shs, 7 + i, stop, errors))
               for i, shs in enumerate(by_server.values())]
    for w in writers:
        w.start()

    procs = {sid: spawn(setup, sid, tmp_path, mode="forever", tag="chaos") for sid in setup.sources}
    kills = restarts = 0
    rotated = outage = False
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 30:
            elapsed = time.monotonic() - t0
            if not rotated and elapsed > 10:
                conn = connect(setup.shards[0].ep)
                with conn.cursor() as cur:
                    cur.execute("FLUSH BINARY LOGS")
                conn.close()
                rotated = True
            if not outage and elapsed > 18:
                down.stop()  # the downstream goes away for a while; syncers fail and are retried
                time.sleep(6)
                down.start()
                outage = True
            victim = rnd.choice(setup.sources)
            if procs[victim].popen.poll() is None:
                procs[victim].popen.kill()
                kills += 1
            procs[victim].popen.wait()
            for sid, p in procs.items():  # Airflow retries a dead sensor
                if p.popen.poll() is not None:
                    procs[sid] = spawn(setup, sid, tmp_path, mode="forever", tag="chaos")
                    restarts += 1
            time.sleep(rnd.uniform(0.3, 2.0))
    finally:
        stop.set()
        for w in writers:
            w.join()
        for p in procs.values():
            p.popen.kill()
            p.popen.wait()
    assert not errors, f"the upstream workload failed: {errors[0]!r}"
    assert kills >= 10 and rotated and outage

    converge(setup, tmp_path, timeout=180)
    states = source_states(setup.task, setup.store)
    assert all(s["stage"] != "paused" for s in states.values()), {k: s["error"] for k, s in states.items()}
    assert_union(setup.task, setup.store)
    rows = connect(setup.down)
    with rows.cursor() as cur:
        cur.execute(f"SELECT COUNT(*), SUM(LENGTH(note) > 100000) FROM {qt(setup.tdb, 't')}")
        total, large = cur.fetchone()
    rows.close()
    assert total > 100 and large and large > 0, (total, large)
