"""DM's `sequence_safe_mode` case (pingcap/tiflow dm/tests/sequence_safe_mode/run.sh), with DM's own
task and source files (conf/, vendored unchanged) and our own statements for the same situations:

- shards `t1`, `t2` (upstream 1) and `t2`, `t3` (upstream 2) of `sequence_safe_mode_test`, whose ids
  overlap, merge into a target the user created beforehand, told apart by DM's extend columns
  `c_table` (extract-table) and `c_source` (extract-source) in its primary key, with a UNIQUE uid
  (utf8mb4_bin); pessimistic shard DDL;
- a *sequence* of shard DDLs on every shard (two columns added by one ALTER, then two indexes),
  each shard running its whole sequence before the next shard starts it, rows between: both
  sources are killed as the replay of the rows they held back begins (DM: ReSyncExit, both
  workers exit), restarted, and the merged table equals the union of the shards;
- a second sequence (a column, then its index) with counters bumped between: the lock owner is
  killed just before it runs the *second* DDL of the sequence downstream (DM:
  SequenceShardSyncedExecutionExit, the owner exits at the sequence's second DDL; the other source
  is killed while it waits on the lock), and the sources restart with `safe-mode-duration: 0s`
  (DM: the SafeModeInitPhaseSeconds failpoint set to "0s") and converge; every index exists
  downstream once.

To make upstream 1 the owner of every lock of the second sequence (DM does not know which worker
will own it and tries both), upstream 2's process sleeps at `shardddl.sync.after_record`.
"""

import pytest

from dm_core.config.task import load_task_file

from .harness import DMFiles, Sync, dm_case, pending_replay, register_sources, run_killed, run_sql, start

pytestmark = pytest.mark.integration

DB, TDB = "sequence_safe_mode_test", "sequence_safe_mode_target"
S1, S2 = "mysql-replica-01", "mysql-replica-02"
SHARDS = [("up1", "t1", S1), ("up1", "t2", S1), ("up2", "t2", S2), ("up2", "t3", S2)]
TABLE = ("(id bigint AUTO_INCREMENT, uid int, name varchar(80), PRIMARY KEY (id), UNIQUE KEY (uid)) "
         "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
TARGET = (f"CREATE TABLE {TDB}.t_target (id bigint AUTO_INCREMENT, uid int, name varchar(80), c_table varchar(255), "
          "c_source varchar(255), PRIMARY KEY (id, c_table, c_source), UNIQUE KEY (uid)) "
          "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
SEQ1 = ["ALTER TABLE {t} ADD COLUMN age int AFTER name, ADD COLUMN level int AFTER name",
        "ALTER TABLE {t} ADD INDEX age (age)", "ALTER TABLE {t} ADD INDEX level (level)"]
SEQ2 = ["ALTER TABLE {t} ADD COLUMN age2 int AFTER age", "ALTER TABLE {t} ADD INDEX age2 (age2)"]


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("sequence_safe_mode", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB], "up2": [DB], "down": [TDB]}) as got:
        yield got


def _expected(stack, cols: list[str]) -> list[tuple]:
    out = []
    for key, t, sid in SHARDS:
        out += [tuple(r) + (t, sid) for r in run_sql(stack[key], f"SELECT {', '.join(cols)} FROM {DB}.{t}")]
    return sorted(out, key=repr)


def _equal(stack, cols: list[str]) -> None:
    got = sorted((tuple(r) for r in run_sql(stack["down"], f"SELECT {', '.join(cols)}, c_table, c_source "
                                                           f"FROM {TDB}.t_target")), key=repr)
    want = _expected(stack, cols)
    assert got == want, f"downstream:\n{got}\nupstream union:\n{want}"


def _indexes(down) -> list[str]:
    return sorted(r[0] for r in run_sql(down, "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS "
                                              f"WHERE TABLE_SCHEMA = '{TDB}' AND TABLE_NAME = 't_target'"))


def test_dm_sequence_safe_mode_case(case, stack, tmp_path):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    zero = DMFiles("sequence_safe_mode", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                   out="dm-task-0s.yaml", placeholders={"    batch: 100": '    batch: 100\n    safe-mode-duration: "0s"'})
    run_sql(up1, f"CREATE DATABASE {DB}", f"USE {DB}", f"CREATE TABLE t1 {TABLE}", f"CREATE TABLE t2 {TABLE}",
            "INSERT INTO t1 (uid, name) VALUES (10001, 'Pedro Páramo'), (10002, 'Susana San Juan')",
            "INSERT INTO t2 (uid, name) VALUES (20001, 'Juan Preciado'), (20002, 'Abundio'), (20003, 'Dorotea')")
    run_sql(up2, f"CREATE DATABASE {DB}", f"USE {DB}", f"CREATE TABLE t2 {TABLE}", f"CREATE TABLE t3 {TABLE}",
            "INSERT INTO t2 (uid, name) VALUES (40000, 'Eduviges'), (40001, 'Miguel Páramo')",
            "INSERT INTO t3 (uid, name) VALUES (30001, 'Fulgor Sedano'), (30002, 'Damiana'), (30003, 'Rentería')")
    run_sql(down, f"CREATE DATABASE {TDB}", TARGET)
    register_sources(files)
    task, sync = start(files, store)
    _equal(stack, ["id", "uid", "name"])

    # the first sequence: each shard runs all three DDLs before the next one starts
    def seq(t, ddls):
        return [d.format(t=t) for d in ddls]

    run_sql(up1, f"USE {DB}",
            "INSERT INTO t1 (uid, name) VALUES (10003, 'Comala')",
            *seq("t1", SEQ1),
            "INSERT INTO t1 (uid, name, age) VALUES (10005, 'Comala', 200)",
            "INSERT INTO t2 (uid, name) VALUES (20005, 'Media Luna')",
            "INSERT INTO t1 (uid, name, age) VALUES (10006, 'Sayula', 200)",
            *seq("t2", SEQ1),
            "INSERT INTO t1 (uid, name, age) VALUES (10007, 'Contla', 300)",
            "INSERT INTO t2 (uid, name, age) VALUES (20006, 'Los Confines', 301)",
            "INSERT INTO t1 (uid, name, age, level) VALUES (10008, 'Tuxcacuexco', 400, 1)",
            "INSERT INTO t2 (uid, name, age) VALUES (20007, 'Zapotlán', 401)",
            "UPDATE t1 SET age = 404 WHERE uid = 10005")
    run_sql(up2, f"USE {DB}",
            "DELETE FROM t3 WHERE uid = 30002",
            *seq("t2", SEQ1),
            "INSERT INTO t2 (uid, name, age) VALUES (40002, 'Donis', 100), (40003, 'la hermana de Donis', 103)",
            "INSERT INTO t3 (uid, name) VALUES (30004, 'Toribio Aldrete'), (30005, 'Justina'), (30006, 'Gerardo')",
            *seq("t3", SEQ1),
            "UPDATE t3 SET age = 1",
            "UPDATE t3 SET level = level + 1 WHERE level IS NOT NULL")
    codes = run_killed(files, {S1: "shardddl.sync.after_rewind_checkpoint=1",
                               S2: "shardddl.sync.after_rewind_checkpoint=1"}, tmp_path, wait_all=True)
    assert set(codes.values()) == {97}, codes  # DM: both workers offline
    sync = Sync(task, store)
    sync.settle()
    _equal(stack, ["id", "uid", "name", "age", "level"])
    assert _indexes(down) == ["PRIMARY", "age", "level", "uid"]

    # a graceful restart of both (DM: pkill -hup), then the second sequence; the owner dies at its second DDL
    sync = Sync(task, store)
    sync.settle()
    run_sql(up1, f"USE {DB}",
            "INSERT INTO t1 (uid, name, age) VALUES (10009, 'Comala', 100)",
            "INSERT INTO t2 (uid, name, age) VALUES (20008, 'Media Luna', 402)",
            *seq("t1", SEQ2),
            "INSERT INTO t1 (uid, name, age, age2) VALUES (10010, 'Sayula', 200, 404)",
            "INSERT INTO t2 (uid, name, age) VALUES (20009, 'Contla', 100)",
            "UPDATE t2 SET age = age + 1 WHERE uid = 20008",
            "UPDATE t2 SET age = age + 2 WHERE uid = 20007",
            "UPDATE t2 SET age = age + 1 WHERE uid = 20009",
            "UPDATE t1 SET age = age + 1 WHERE uid = 10008",
            "UPDATE t1 SET age = age + 1 WHERE uid = 10009",
            *seq("t2", SEQ2),
            "UPDATE t1 SET age = age + 1 WHERE uid IN (10010, 10011)",
            "UPDATE t2 SET age = age + 1 WHERE uid IN (20009, 20010)")
    run_sql(up2, f"USE {DB}",
            *seq("t2", SEQ2),
            "INSERT INTO t2 (uid, name, age, age2) VALUES (40004, 'Donis', 100, 300), (40005, 'Dolores', 103, 301)",
            "INSERT INTO t3 (uid, name, age) VALUES (30007, 'Toribio', 99), (30008, 'Justina', 999), (30009, 'Bartolomé', 9999)",
            "UPDATE t2 SET age = age + 33 WHERE uid = 40004",
            "UPDATE t3 SET age = age + 44 WHERE uid > 30006 AND uid < 30010",
            *seq("t3", SEQ2),
            "UPDATE t3 SET age2 = 100",
            "UPDATE t3 SET age2 = age2 + 1, level = 7 WHERE uid > 30006")
    codes = run_killed(files, {S1: "shardddl.exec.before_downstream=2",
                               S2: "shardddl.sync.after_record=sleep:1"}, tmp_path, timeout=90)
    assert codes == {S1: 97, S2: -9}, codes
    assert _indexes(down) == ["PRIMARY", "age", "level", "uid"], "the second DDL had not run downstream"
    for sid in (S1, S2):
        assert not pending_replay(store, task.name, sid), store.source_state(task.name, sid)
    task = load_task_file(str(zero.task_file))
    assert task.instance(S1).syncer.safe_mode_duration == 0
    store.start_task(task.name, zero.task_file.read_text())
    sync = Sync(task, store)
    sync.settle()
    _equal(stack, ["id", "uid", "name", "age", "level", "age2"])
    assert _indexes(down) == ["PRIMARY", "age", "age2", "level", "uid"]
