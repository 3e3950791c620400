"""DM's `safe_mode` case (pingcap/tiflow dm/tests/safe_mode/run.sh), with DM's own task and source
files (conf/, vendored unchanged; run.sh's `sed` edits of them are placeholders here) and our own
statements for the same situations. Two upstreams, shards `t1`, `t2` (upstream 1) and `t2`, `t3`
(upstream 2) of `safe_mode_test` merge into `safe_mode_target`.`t_target` (pessimistic shard DDL;
the shards' AUTO_INCREMENT ranges keep ids apart), and the shard DDL rounds ADD COLUMN age and
ADD COLUMN age2 are interleaved with rows and with counters updated by `age = age + n`.

1. `consistency_none`: upstream 2's global sql_mode is ANSI_QUOTES while the full phase runs,
   and both upstreams take writes (inserts, updates, a delete) between the full phase's low
   watermark and its copy: the high watermark (DM: the dump's second SHOW MASTER STATUS) is
   past the low one, the sync replays up to it in safe mode, and the merged table equals the
   union of the shards.
2. `safe_mode_recover`, four times from a fresh start: each source syncs in its own process and
   is killed at a named fault point (DM: the SafeModeExit failpoint's four places, where DM
   pauses the worker and then kills it), while the first DDL round runs:
   (1) `sync.after_open`, before anything is read (DM: reading the first event fails);
   (2) `shardddl.exec.after_downstream`, the owner ran the shard DDL downstream and had not
       recorded it (DM: the DDL ran, then "DDL lock info not found"); the other source is killed
       while it waits on the lock;
   (3) `shardddl.exec.before_downstream`, the owner marked the DDL executing and had not sent it
       (DM: the DDL execution fails);
   (4) `sync.after_batch_apply`, a batch committed downstream and its checkpoint not written
       (DM: the DML ran, then an error).
   After (4) the exit point is past the checkpoint (DM's check_exit_safe_binlog `<`); after (1),
   (2) and (3) it is not (`=`): nothing was sent past the checkpoint, which a shard DDL writes
   before it is coordinated (DM says `<` for (2) and (3): its exit point is the furthest event
   it had read, written when the failpoint's error stops the syncer; shardflow keeps it exact,
   which is what lets (4.) below restart at 0s). The restarted sources converge; the second DDL
   round (ADD COLUMN age2, counters) converges; after pause-task no source has anything left to
   replay (`=`).
3. `safe_mode_duration` (dm-task-safe-mode-duration.yaml: source 1 `safe-mode-duration: 0s`,
   source 2 `60s`): both sources killed after a batch committed downstream before its checkpoint
   (DM: SkipSaveGlobalPoint); on restart source 1 pauses with DM's "your `safe-mode-duration` in
   task.yaml is set to 0s, the task can't be re-processed without safe mode currently" and query-
   status shows it; stop-task, start-task with 30s converges (checkpoints kept); stop-task, rows
   and the second DDL round while stopped, start-task with 0s again converges (a clean stop
   leaves nothing to replay).
4. DM's last part: both sources killed right after a resolved shard DDL moved their checkpoint
   back to replay the rows they held (DM: ReSyncExit), restarted, converge; then in the second
   round the lock owner is killed before it runs the DDL downstream (DM:
   ShardSyncedExecutionExit) and the sources restart with `safe-mode-duration: 0s` (DM's
   SafeModeInitPhaseSeconds failpoint) and converge: the checkpoint written before a shard DDL
   leaves nothing to replay.

Not ported: dumpling's metadata file (the full phase records its watermarks in the state store,
checked instead), relay logs (`enable-relay` is warned: shardflow reads the upstream binlog) and
`operate-schema set` after (2)/(3) (DM's schema tracker had the DDL already; shardflow reads
column names from the binlog). The kills are SIGKILL-equivalent (``os._exit`` at the fault point)
where DM's failpoints return an error and pause first.
"""

import pytest

from dm_core.reset import reset_task

from .harness import (DMFiles, Sync, dm_case, dmctl, full_phase, pending_replay, register_sources, run_killed,
                      run_sql, table_rows, union_rows)

pytestmark = pytest.mark.integration

DB, TDB = "safe_mode_test", "safe_mode_target"
S1, S2 = "mysql-replica-01", "mysql-replica-02"
BASE = ["id", "uid", "name"]
WITH_AGE = BASE + ["age"]
WITH_AGE2 = WITH_AGE + ["age2"]


def _table(name: str, auto_increment: int, charset: str = " DEFAULT CHARSET=utf8mb4") -> str:
    return (f"CREATE TABLE {name} (id bigint AUTO_INCREMENT, uid int, name varchar(80), PRIMARY KEY (id), "
            f"UNIQUE KEY (uid)){charset} AUTO_INCREMENT = {auto_increment}")


def _prepare(up1, up2) -> None:
    run_sql(up1, f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}", f"USE {DB}",
            _table("t1", 1), _table("t2", 100),
            "INSERT INTO t1 (uid, name) VALUES (10001, 'Macunaíma'), (10002, 'Brás Cubas')",
            "INSERT INTO t2 (uid, name) VALUES (20001, 'Capitu'), (20002, 'Bentinho'), (20003, 'Quincas Borba')")
    run_sql(up2, f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}", f"USE {DB}",
            _table("t2", 200, ""), _table("t3", 300, ""),
            "INSERT INTO t2 (uid, name) VALUES (40000, 'Riobaldo'), (40001, 'Diadorim')",
            "INSERT INTO t3 (uid, name) VALUES (30001, 'Gabriela'), (30002, 'Nacib'), (30003, 'Dona Flor')")


def _round1(up1, up2) -> None:
    """ADD COLUMN age on every shard, rows of the other shards between, then counters."""
    run_sql(up1, f"USE {DB}",
            "INSERT INTO t1 (uid, name) VALUES (10003, 'Ouro Preto')",
            "ALTER TABLE t1 ADD COLUMN age int",
            "INSERT INTO t1 (uid, name, age) VALUES (10005, 'Mariana', 20)",
            "INSERT INTO t2 (uid, name) VALUES (20005, 'Sabará')",
            "INSERT INTO t1 (uid, name, age) VALUES (10006, 'Diamantina', 21)",
            "ALTER TABLE t2 ADD COLUMN age int",
            "INSERT INTO t1 (uid, name, age) VALUES (10007, 'Tiradentes', 30)",
            "INSERT INTO t2 (uid, name, age) VALUES (20006, 'Congonhas', 31)",
            "INSERT INTO t1 (uid, name, age) VALUES (10008, 'Serro', 40)",
            "INSERT INTO t2 (uid, name, age) VALUES (20007, 'Caeté', 41)",
            "UPDATE t1 SET age = 44 WHERE uid = 10005",
            "UPDATE t1 SET age = age + 1 WHERE uid >= 10005")
    run_sql(up2, f"USE {DB}",
            "DELETE FROM t3 WHERE uid = 30002",
            "ALTER TABLE t2 ADD COLUMN age int",
            "START TRANSACTION",
            "INSERT INTO t2 (uid, name, age) VALUES (40002, 'Zé Bebelo', 10)",
            "INSERT INTO t2 (uid, name, age) VALUES (40003, 'Otacília', 13)",
            "COMMIT",
            "INSERT INTO t3 (uid, name) VALUES (30004, 'Vadinho'), (30005, 'Teodoro'), (30006, 'Tonico Bastos')",
            "ALTER TABLE t3 ADD COLUMN age int",
            "UPDATE t3 SET age = 1",
            "UPDATE t3 SET age = age + 1 WHERE uid > 30003")


def _round2(up1, up2) -> None:
    """ADD COLUMN age2 on every shard, with counters bumped before, between and after."""
    run_sql(up1, f"USE {DB}",
            "INSERT INTO t1 (uid, name, age) VALUES (10009, 'Paraty', 10)",
            "INSERT INTO t2 (uid, name, age) VALUES (20008, 'Cunha', 402)",
            "ALTER TABLE t1 ADD COLUMN age2 int",
            "INSERT INTO t1 (uid, name, age, age2) VALUES (10010, 'Ubatuba', 200, 404)",
            "INSERT INTO t2 (uid, name, age) VALUES (20009, 'Bananal', 100)",
            "UPDATE t2 SET age = age + 1 WHERE uid = 20008",
            "UPDATE t2 SET age = age + 2 WHERE uid = 20007",
            "UPDATE t2 SET age = age + 1 WHERE uid = 20009",
            "UPDATE t1 SET age = age + 1 WHERE uid = 10008",
            "UPDATE t1 SET age = age + 1 WHERE uid = 10009",
            "ALTER TABLE t2 ADD COLUMN age2 int",
            "UPDATE t1 SET age = age + 1 WHERE uid IN (10010, 10011)",
            "UPDATE t2 SET age = age + 1 WHERE uid IN (20009, 20010)",
            "UPDATE t2 SET age2 = age2 + 1")
    run_sql(up2, f"USE {DB}",
            "ALTER TABLE t2 ADD COLUMN age2 int",
            "INSERT INTO t2 (uid, name, age, age2) VALUES (40004, 'Hermógenes', 100, 300), (40005, 'Joca Ramiro', 103, 301)",
            "INSERT INTO t3 (uid, name, age) VALUES (30007, 'Ilhéus', 99), (30008, 'Itabuna', 999), (30009, 'Olivença', 9999)",
            "UPDATE t2 SET age = age + 33 WHERE uid = 40004",
            "UPDATE t3 SET age = age + 44 WHERE uid > 30006 AND uid < 30010",
            "ALTER TABLE t3 ADD COLUMN age2 int",
            "UPDATE t3 SET age2 = 100",
            "UPDATE t3 SET age2 = age2 + 1 WHERE uid > 30006")


def _shards(up1, up2):
    return [(up1, DB, "t1"), (up1, DB, "t2"), (up2, DB, "t2"), (up2, DB, "t3")]


def _equal(stack, cols) -> None:
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    got, want = table_rows(down, TDB, "t_target", cols), union_rows(_shards(up1, up2), cols)
    assert got == want, f"downstream:\n{got}\nupstream union:\n{want}"


def _fresh(files, store, stack):
    """DM's cleanup_data + prepare + start-task --remove-meta."""
    reset_task(store, files.name)
    run_sql(stack["down"], f"DROP DATABASE IF EXISTS {TDB}")
    _prepare(stack["up1"], stack["up2"])


def _start(files, store, *, during_load=None):
    """check-task, start-task: the full phase (``during_load`` runs between its low watermark
    and the copy), then every source synced until settled."""
    from dm_core.config.task import load_task_file
    from dm_core.full.phase import finish, forget, prepare
    from tests.integration.test_full_support import run_load

    rc, out, err = dmctl("check-task", str(files.task_file))
    assert rc == 0, out + err
    task = load_task_file(str(files.task_file))
    store.start_task(task.name, files.task_file.read_text())
    if during_load is None:
        full_phase(task, store)
    else:
        forget(task, store)
        prepare(task, store)
        during_load()
        r = run_load(task.name)
        assert r.returncode == 0, r.stderr[-4000:]
        finish(task, store)
    sync = Sync(task, store)
    sync.settle()
    return task, sync


def _restart(files, store):
    """start-task of ``files`` over the kept checkpoints (after a stop), or a new process per
    source (after a kill)."""
    from dm_core.config.task import load_task_file

    task = load_task_file(str(files.task_file))
    store.start_task(task.name, files.task_file.read_text())
    return task, Sync(task, store)


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("safe_mode", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB], "up2": [DB], "down": [TDB]}) as got:
        yield got


def test_consistency_none(case, stack):
    files, store = case
    up1, up2 = stack["up1"], stack["up2"]
    mode = run_sql(up2, "SELECT @@GLOBAL.sql_mode")[0][0]
    run_sql(up2, "SET GLOBAL sql_mode = 'ANSI_QUOTES'")
    try:
        _prepare(up1, up2)
        register_sources(files)

        def writes():  # after the low watermark, before the copy: the copy may or may not see them
            run_sql(up1, f"USE {DB}", "INSERT INTO t1 (uid, name) VALUES (10004, 'Sete Lagoas')",
                    "UPDATE t2 SET name = 'Capitolina' WHERE uid = 20001", "DELETE FROM t2 WHERE uid = 20003")
            run_sql(up2, f"USE {DB}", "INSERT INTO t3 (uid, name) VALUES (30010, 'Porto Seguro')",
                    "UPDATE t2 SET uid = uid + 5 WHERE uid = 40001")

        task, sync = _start(files, store, during_load=writes)
        for sid in (S1, S2):
            st = store.source_state(task.name, sid)
            assert (st["high_file"], st["high_pos"]) > (st["low_file"], st["low_pos"]), st
            assert not pending_replay(store, task.name, sid), "the catch-up ended with its checkpoint past the high watermark"
        _equal(stack, BASE)
    finally:
        run_sql(up2, "SET GLOBAL sql_mode = %s", args=(mode,))


@pytest.mark.parametrize("i, faults", [
    (1, {S1: "sync.after_open=1", S2: "sync.after_open=1"}),
    (2, {S1: "shardddl.exec.after_downstream=1", S2: "shardddl.exec.after_downstream=1"}),
    (3, {S1: "shardddl.exec.before_downstream=1", S2: "shardddl.exec.before_downstream=1"}),
    (4, {S1: "sync.after_batch_apply=1", S2: "sync.after_batch_apply=1"}),
])
def test_safe_mode_recover(case, stack, tmp_path, i, faults):
    files, store = case
    up1, up2 = stack["up1"], stack["up2"]
    _fresh(files, store, stack)
    register_sources(files)
    task, sync = _start(files, store)
    _equal(stack, BASE)

    _round1(up1, up2)
    codes = run_killed(files, faults, tmp_path, wait_all=i in (1, 4))
    died = [sid for sid, c in codes.items() if c == 97]
    # DM: both paused for (1) and (4), the DDL owner only for (2) and (3)
    assert len(died) == (1 if i in (2, 3) else 2), codes
    for sid in (S1, S2):  # DM: `=` for (1), `<` for the others; here `<` only where rows passed the checkpoint
        assert pending_replay(store, task.name, sid) == (i == 4), (sid, store.source_state(task.name, sid))

    task, sync = _restart(files, store)
    sync.settle()
    _equal(stack, WITH_AGE)

    _round2(up1, up2)
    sync.settle()
    _equal(stack, WITH_AGE2)
    rc, out, err = dmctl("pause-task", task.name)
    assert rc == 0, out + err
    assert set(sync.step().values()) == {"paused"}
    for sid in (S1, S2):
        assert not pending_replay(store, task.name, sid), store.source_state(task.name, sid)


def test_safe_mode_duration(case, stack, tmp_path):
    _, store = case
    up1, up2 = stack["up1"], stack["up2"]
    sources = {"source1.yaml": "up1", "source2.yaml": "up2"}
    zero = DMFiles("safe_mode", tmp_path, stack, sources, task_file="dm-task-safe-mode-duration.yaml")
    thirty = DMFiles("safe_mode", tmp_path, stack, sources, task_file="dm-task-safe-mode-duration.yaml",
                     out="dm-task-safe-mode-duration-30s.yaml",
                     placeholders={'safe-mode-duration: "0s"': 'safe-mode-duration: "30s"'})
    _fresh(zero, store, stack)
    register_sources(zero)
    task, sync = _start(zero, store)
    assert task.instance(S1).syncer.safe_mode_duration == 0 and task.instance(S2).syncer.safe_mode_duration == 60
    _equal(stack, BASE)

    _round1(up1, up2)
    codes = run_killed(zero, {S1: "sync.after_batch_apply=1", S2: "sync.after_batch_apply=1"}, tmp_path,
                       wait_all=True)
    assert set(codes.values()) == {97}, codes
    assert pending_replay(store, task.name, S1) and pending_replay(store, task.name, S2)

    task, sync = _restart(zero, store)
    states = sync.settle(paused_ok=True)
    assert states[S1] == "paused", states
    err = store.source_state(task.name, S1)
    assert "your `safe-mode-duration` in task.yaml is set to 0s, the task can't be re-processed without safe mode " \
           "currently" in err["error"] and err["error_code"] == 50017, err
    rc, out, _ = dmctl("query-status", task.name)
    assert out.count('"error": "[code=50017:sync] source mysql-replica-01: your `safe-mode-duration`') == 1, out
    assert "is set to 0s" not in out.split('"source": "mysql-replica-02"')[1], out
    for _ in range(3):  # it stays paused; resume-task refuses again (DM: a new start, the same check)
        assert sync.step()[S1] == "paused"
    rc, out, err = dmctl("resume-task", task.name)
    assert rc == 0, out + err
    assert sync.step()[S1] == "paused" and "is set to 0s" in store.source_state(task.name, S1)["error"]

    # stop-task, start-task with 30s: replays in safe mode up to the exit point
    store.stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    task, sync = _restart(thirty, store)
    sync.settle()
    _equal(stack, WITH_AGE)

    # stop-task, writes while stopped, start-task with 0s: nothing to replay after a clean stop
    store.stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    _round2(up1, up2)
    task, sync = _restart(zero, store)
    sync.settle()
    _equal(stack, WITH_AGE2)


def test_resync_exit_and_owner_exit(case, stack, tmp_path):
    files, store = case
    up1, up2 = stack["up1"], stack["up2"]
    zero = DMFiles("safe_mode", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                   out="dm-task-0s.yaml", placeholders={"    batch: 100": '    batch: 100\n    safe-mode-duration: "0s"'})
    _fresh(files, store, stack)
    register_sources(files)
    task, sync = _start(files, store)

    # DM's ReSyncExit: killed as the replay of the held rows begins
    _round1(up1, up2)
    codes = run_killed(files, {S1: "shardddl.sync.after_rewind_checkpoint=1",
                               S2: "shardddl.sync.after_rewind_checkpoint=1"}, tmp_path)
    assert 97 in codes.values(), codes
    # restarted with DM's ShardSyncedExecutionExit armed: no DDL left in this round
    codes = run_killed(files, {S1: "shardddl.exec.before_downstream=1", S2: "shardddl.exec.before_downstream=1"},
                       tmp_path)
    assert set(codes.values()) == {0}, codes
    _equal(stack, WITH_AGE)

    # DM's ShardSyncedExecutionExit: the owner dies before running the DDL; restart at 0s
    _round2(up1, up2)
    codes = run_killed(files, {S1: "shardddl.exec.before_downstream=1", S2: "shardddl.exec.before_downstream=1"},
                       tmp_path)
    assert sorted(codes.values()) == [-9, 97], codes
    for sid in (S1, S2):
        assert not pending_replay(store, task.name, sid), store.source_state(task.name, sid)
    task, sync = _restart(zero, store)
    assert task.instance(S1).syncer.safe_mode_duration == 0
    sync.settle()
    _equal(stack, WITH_AGE2)
