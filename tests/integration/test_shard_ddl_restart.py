"""Restart safety of shard DDL coordination on real servers (issue 6: "kill any sensor or
the coordinator at any step of a lock; rerunning converges with the DDL executed exactly
once and no DML lost or duplicated").

Each source's sync windows run in their own process (``shard_helpers`` runner), as the
sensors' pokes do. A named fault point (``SHARDFLOW_FAULTS``) ends a process with
``os._exit(97)`` at a chosen step of the lock; the other sources' processes are then
SIGKILLed too (they would otherwise wait for the dead one). After up to three such
rounds every source is rerun without faults until it settles.

What a user checks afterwards: the downstream table has the expected columns and index;
every ALTER reached the downstream exactly once (this module's downstream is a private
MariaDB with the general query log on, so each statement the server received is counted);
no lock is left active; the merged table equals the union of the shards.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time

import pytest

from dm_core.db import Endpoint

from .mariadb_fixture import free_port, private_port, start_mariadb
from .shard_helpers import (FAULT_EXIT, ROOT, SourceSpec, active_locks, assert_union, columns, converge, dml,
                            indexes, query, run, setup_shards, source_states, spawn, teardown)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def logged_down(tmp_path_factory, stack):
    """A private downstream that logs every statement it receives (mysql.general_log)."""
    port = free_port(private_port(i) for i in range(4, 10))
    db = start_mariadb(tmp_path_factory.mktemp("sdrs_down"), port, 60 + port % 10,
                       ("--general-log=1", "--log-output=TABLE"), log_bin=False)
    yield db.endpoint(name="down")
    db.stop()


def downstream_alters(down: Endpoint, tdb: str) -> list[str]:
    """Every ALTER TABLE on the merged table the downstream server received, in order."""
    rows = query(down, "SELECT argument FROM mysql.general_log WHERE command_type = 'Query' "
                       "ORDER BY event_time")
    out = []
    for (arg,) in rows:
        text = arg.decode(errors="replace") if isinstance(arg, (bytes, bytearray)) else str(arg)
        # a replay's probe runs the statement on an empty copy first (dm_core/ddl/dry_run.py): not the table
        if text.lstrip().upper().startswith("ALTER TABLE") and f"`{tdb}`" in text and "`_sf_probe_" not in text:
            out.append(" ".join(text.split()))
    return out


@pytest.fixture
def two_sources(stack, uniq, tmp_path, logged_down, request):
    """a (up1): 2 schemas × t_1, t_2; b (up2): 2 schemas × t_1 → 6 shards into one target."""
    mode = getattr(request, "param", "pessimistic")
    p = f"rs{uniq}"
    specs = [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1", f"{p}_2"], ["t_1", "t_2"], 1),
             SourceSpec(f"b-{uniq}", stack["up2"], [f"{p}_1", f"{p}_2"], ["t_1"], 2)]
    setup = setup_shards(uniq, specs, logged_down, tmp_path, prefix=p, shard_mode=mode)
    yield setup
    teardown(setup)


PESSIMISTIC_SEQ = ["ALTER TABLE {t} ADD COLUMN c1 int NULL",
                   "ALTER TABLE {t} ADD INDEX idx_amount (amount)"]


def _write_sequence(setup, ddls, *, with_c1_after=0, c1_until=None, pause=0.0, first=1):
    """Every shard runs the DDLs in the same order, with DML before and after each; after the
    ``with_c1_after``-th DDL (1-based; 0: never) and before the ``c1_until``-th, rows also
    write the new column c1. ``first``: the DDLs before it were written already."""
    for k, ddl in enumerate(ddls[first - 1:], first):
        for i, sh in enumerate(setup.shards):
            dml(sh.ep, sh.schema, sh.table, f"r{k}b{i}", n=3)
            run(sh.ep, ddl.format(t=sh.q))
            dml(sh.ep, sh.schema, sh.table, f"r{k}a{i}", n=3)
            if with_c1_after and k >= with_c1_after and (c1_until is None or k < c1_until):
                run(sh.ep, f"INSERT INTO {sh.q} (name, amount, c1) VALUES ('c1-{k}-{i}', 7, {k * 100 + i})")
            time.sleep(pause)


def _faulted_rounds(setup, tmp_path, faults: str, *, rounds: int = 3) -> list[dict[str, int]]:
    """Run every source in its own process with ``faults``; when one dies at the fault point,
    SIGKILL the others (a sensor killed mid-lock, the rest killed wherever they were).
    Repeats while a process dies (at most ``rounds``). Returns each round's exit codes."""
    history = []
    for _ in range(rounds):
        procs = {sid: spawn(setup, sid, tmp_path, faults=faults, timeout=25, tag="fault")
                 for sid in setup.sources}
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            codes = {sid: p.popen.poll() for sid, p in procs.items()}
            if all(c is not None for c in codes.values()):
                break
            if any(c == FAULT_EXIT for c in codes.values()):
                for p in procs.values():
                    if p.popen.poll() is None:
                        p.popen.kill()
                        p.popen.wait()
                break
            time.sleep(0.05)
        else:
            for p in procs.values():
                p.popen.kill()
                p.popen.wait()
        codes = {sid: p.popen.wait() for sid, p in procs.items()}
        history.append(codes)
        for sid, p in procs.items():
            assert codes[sid] in (0, FAULT_EXIT, -9), (
                f"{sid} exited {codes[sid]} under faults {faults}:\n{p.out.read_text()[-2000:]}\n{p.stderr()[-3000:]}")
        if FAULT_EXIT not in codes.values():
            break
    return history


def _require_fault(history, faults: str) -> None:
    """The fault must have ended a process in the first round. A point's first hit is met
    in every interleaving; a later hit (``=2``) only when one process owns two steps of the
    lock, which depends on which source reports first: such a run is skipped, not passed."""
    if FAULT_EXIT in history[0].values():
        return
    if faults.endswith("=1"):
        pytest.fail(f"fault point {faults} was never reached: {history}")
    pytest.skip(f"this interleaving never reached {faults} (no source owned enough steps): {history}")


def _assert_converged(setup, expected_cols, expected_alters, *, index=None):
    down, tdb = setup.down, setup.tdb
    assert [c for c, _ in columns(down, tdb, "t")] == expected_cols
    if index:
        assert index in indexes(down, tdb, "t")
    alters = downstream_alters(down, tdb)
    assert sorted(alters) == sorted(expected_alters), f"each DDL must reach the downstream exactly once: {alters}"
    assert not active_locks(setup.task, setup.store)
    st = source_states(setup.task, setup.store)
    assert all(s["stage"] != "paused" for s in st.values()), {k: s["error"] for k, s in st.items()}
    assert_union(setup.task, setup.store)


PESSIMISTIC_FAULTS = [
    "shardddl.sync.after_record=1", "shardddl.sync.after_record=3",
    "shardddl.ops.before_commit=1", "shardddl.ops.before_commit=2", "shardddl.ops.before_commit=4",
    "shardddl.sync.after_put_info=1", "shardddl.sync.after_put_info=2",
    "shardddl.exec.before_downstream=1", "shardddl.exec.before_downstream=2",
    "shardddl.exec.after_downstream=1", "shardddl.exec.after_downstream=2",
    "shardddl.sync.after_skip_ack=1",
    "shardddl.sync.after_resolved=1", "shardddl.sync.after_resolved=2",
    "shardddl.sync.after_rewind_checkpoint=1", "shardddl.sync.after_rewind_checkpoint=2",
]


@pytest.mark.parametrize("faults", PESSIMISTIC_FAULTS)
def test_pessimistic_kill_at_each_step_of_a_lock_converges_exactly_once(two_sources, tmp_path, faults):
    setup = two_sources
    _write_sequence(setup, PESSIMISTIC_SEQ, with_c1_after=1)
    history = _faulted_rounds(setup, tmp_path, faults)
    _require_fault(history, faults)
    converge(setup, tmp_path)
    _assert_converged(setup, ["id", "name", "amount", "c1"],
                      [f"ALTER TABLE `{setup.tdb}`.`t` ADD COLUMN `c1` INT NULL",
                       f"ALTER TABLE `{setup.tdb}`.`t` ADD INDEX `idx_amount` (`amount`)"],
                      index="idx_amount")


OPTIMISTIC_FAULTS = [
    "shardddl.ops.before_commit=1", "shardddl.ops.before_commit=3",
    "shardddl.sync.after_put_info=1", "shardddl.sync.after_put_info=2",
    "shardddl.exec.before_downstream=1", "shardddl.exec.after_downstream=1",
    "shardddl.exec.after_downstream=2", "shardddl.sync.after_skip_ack=1",
]


# a rename every shard runs in turn: the first five shards are held back (their rows after it too),
# the sixth runs it downstream, the others' sources rewind and replay their tables
OPTIMISTIC_HOLD_FAULTS = [
    "shardddl.sync.after_put_info=2", "shardddl.sync.after_put_info=4",
    "shardddl.exec.after_downstream=2", "shardddl.sync.after_skip_ack=1",
    "shardddl.sync.after_rewind_checkpoint=1", "shardddl.sync.after_rewind_checkpoint=2",
]
# name → (DDLs, how many of them every source syncs before the faulted runs, the DDL before which
# rows stop writing c1, columns at the end, statements run downstream, index at the end).
# add-index-drop syncs its ADD first: a source that has not reported counts with the schema the lock
# was made with (DM's INIT_SCHEMA), so when one source ran ADD, INDEX and DROP on all its tables
# before the other reported anything, DM (and shardflow) drop c1 downstream and add it again with
# the late source's ADD: a right answer, but not the one this test counts, and whether it happens
# is up to the processes' timing (a slow start of one source: seen in CI). The kills at the ADD
# itself are the add-index sequence's, which no timing changes.
OPTIMISTIC_SEQUENCES = {
    "add-index": (["ALTER TABLE {t} ADD COLUMN c1 int NULL", "ALTER TABLE {t} ADD INDEX idx_amount (amount)"], 0,
                  None, ["id", "name", "amount", "c1"],
                  ["ADD COLUMN `c1` INT NULL", "ADD INDEX `idx_amount` (`amount`)"], "idx_amount"),
    "add-index-drop": (["ALTER TABLE {t} ADD COLUMN c1 int NULL", "ALTER TABLE {t} ADD INDEX idx_amount (amount)",
                        "ALTER TABLE {t} DROP COLUMN c1"], 1, 3, ["id", "name", "amount"],
                       ["ADD COLUMN `c1` INT NULL", "ADD INDEX `idx_amount` (`amount`)", "DROP COLUMN `c1`"],
                       "idx_amount"),
    "held-rename": (["ALTER TABLE {t} ADD COLUMN c1 int NULL", "ALTER TABLE {t} CHANGE COLUMN c1 c2 int NULL"], 0, 2,
                    ["id", "name", "amount", "c2"], ["ADD COLUMN `c1` INT NULL", "CHANGE COLUMN `c1` `c2` INT NULL"],
                    None),
}


@pytest.mark.parametrize("two_sources", ["optimistic"], indirect=True)
@pytest.mark.parametrize("sequence,faults", [(s, f) for s in ("add-index", "add-index-drop") for f in OPTIMISTIC_FAULTS]
                         + [("held-rename", f) for f in OPTIMISTIC_HOLD_FAULTS])
def test_optimistic_kill_at_each_step_converges_exactly_once(two_sources, tmp_path, sequence, faults):
    setup = two_sources
    ddls, synced, c1_until, cols, alters, index = OPTIMISTIC_SEQUENCES[sequence]
    if synced:
        _write_sequence(setup, ddls[:synced], with_c1_after=1, c1_until=c1_until)
        converge(setup, tmp_path)
    _write_sequence(setup, ddls, with_c1_after=1, c1_until=c1_until, first=synced + 1)
    history = _faulted_rounds(setup, tmp_path, faults)
    _require_fault(history, faults)
    converge(setup, tmp_path)
    _assert_converged(setup, cols, [f"ALTER TABLE `{setup.tdb}`.`t` {a}" for a in alters], index=index)


def test_coordinator_killed_mid_transition_then_sources_converge(two_sources, tmp_path):
    """The coordinator (``ops.resolve``) dies inside its transaction while a lock waits for a
    source: nothing of that transaction remains, and the next run plus the sources finish."""
    setup = two_sources
    _write_sequence(setup, PESSIMISTIC_SEQ[:1], with_c1_after=1)
    a, b = setup.sources
    pa = spawn(setup, a, tmp_path, timeout=4)       # a reports and waits for b: exits 4 (timeout)
    assert pa.wait(60) == 4, pa.stderr()[-2000:]
    locks = active_locks(setup.task, setup.store)
    assert len(locks) == 1 and locks[0]["synced"] == [a] and locks[0]["unsynced"] == [b]
    r = _coordinator(setup, faults="shardddl.ops.before_commit=1")
    assert r.returncode == FAULT_EXIT, r.stderr[-2000:]
    assert active_locks(setup.task, setup.store) == locks  # the killed transaction left nothing
    r = _coordinator(setup)
    assert r.returncode == 0, r.stderr[-2000:]
    converge(setup, tmp_path)
    _assert_converged(setup, ["id", "name", "amount", "c1"],
                      [f"ALTER TABLE `{setup.tdb}`.`t` ADD COLUMN `c1` INT NULL"])


def _coordinator(setup, faults=None):
    env = {k: v for k, v in os.environ.items() if k != "SHARDFLOW_FAULTS"}
    env["PYTHONPATH"] = str(ROOT)
    if faults:
        env["SHARDFLOW_FAULTS"] = faults
    return subprocess.run([sys.executable, "-m", "tests.integration.shard_helpers", "resolve", str(setup.task_file)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_sigkill_while_ddl_and_dml_happen_converges(two_sources, tmp_path, seed):
    """Every source's windows loop in a process that is SIGKILLed at random moments while the
    upstream shards run a DDL sequence with DML around it; restarted each time. Afterwards:
    exactly once downstream, the union of the shards."""
    setup = two_sources
    rnd = random.Random(seed)
    procs = {sid: spawn(setup, sid, tmp_path, mode="forever", tag=f"loop{seed}") for sid in setup.sources}
    ddls = ["ALTER TABLE {t} ADD COLUMN c1 int NULL", "ALTER TABLE {t} ADD INDEX idx_amount (amount)",
            "ALTER TABLE {t} MODIFY COLUMN name varchar(100) NULL", "ALTER TABLE {t} ADD COLUMN c2 int NULL"]
    done = threading.Event()
    errors = []

    def writer():
        try:
            _write_sequence(setup, ddls, with_c1_after=1, pause=0.15)
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            done.set()

    w = threading.Thread(target=writer)
    w.start()
    kills = 0
    end_after = None
    killed_mid_lock = 0
    while True:
        time.sleep(rnd.uniform(0.5, 1.5))
        sid = rnd.choice(setup.sources)
        killed_mid_lock += bool(active_locks(setup.task, setup.store))
        procs[sid].popen.kill()
        procs[sid].popen.wait()
        kills += 1
        procs[sid] = spawn(setup, sid, tmp_path, mode="forever", tag=f"loop{seed}")
        if done.is_set() and end_after is None:
            end_after = kills + 3   # a few more kills while the sources catch up
        if end_after is not None and kills >= end_after:
            break
    w.join()
    assert not errors, errors
    print(f"seed {seed}: {kills} kills, {killed_mid_lock} while a lock was active")
    for p in procs.values():
        p.popen.kill()
        p.popen.wait()
    converge(setup, tmp_path)
    t = f"`{setup.tdb}`.`t`"
    _assert_converged(setup, ["id", "name", "amount", "c1", "c2"],
                      [f"ALTER TABLE {t} ADD COLUMN `c1` INT NULL", f"ALTER TABLE {t} ADD INDEX `idx_amount` (`amount`)",
                       f"ALTER TABLE {t} MODIFY COLUMN `name` VARCHAR(100) NULL",
                       f"ALTER TABLE {t} ADD COLUMN `c2` INT NULL"], index="idx_amount")
    assert dict(columns(setup.down, setup.tdb, "t"))["name"] == "varchar(100)"
