"""DM's `sharding2` case (pingcap/tiflow dm/tests/sharding2/run.sh), with DM's own task and source
files (conf/, vendored unchanged) and our own statements for its situations (pessimistic shard
mode, DM's `is-sharding: true`; one shard `sharding22`.`t1` on each upstream, merged into
`db_target`.`t_target`):

1. the task starts while neither upstream has the database (the full phase loads nothing); then
   CREATE DATABASE and CREATE TABLE arrive through the binlog on both upstreams: the shards join
   the sharding group and the target is created once; `sync diff`;
2. stop-task, start-task (from the checkpoints); a DDL sequence on both shards with rows between:
   ADD COLUMN name + ADD INDEX, ADD COLUMN c/d/e with their indexes (e's in the same statement),
   ADD COLUMN f; `sync diff` and the merged table's columns;
3. both sources' sync processes die right after the shard DDL `DROP COLUMN f` ran downstream,
   before anything recorded it (DM's ExitAfterDDLBeforeFlush on both workers): the owner at
   `shardddl.exec.after_downstream`, then the other source right after it acknowledged its skip
   (`shardddl.sync.after_skip_ack`); started again, `DROP COLUMN f` is not run twice and no row is
   lost; rows with five columns on both shards; `sync diff`;
4. a row, FLUSH LOGS (a new binlog file), a row, then ADD COLUMN new_col, on each upstream;
   rows with the new column; `sync diff`; query-status says every source runs.

Not ported: DM's relay (start-relay / stop-relay, the relay writer recovery and the relay
directory purge: shardflow has no relay; each source reads its upstream's binlog directly).
"""

import json

import pytest

from .harness import (FAULT_EXIT, dm_case, dmctl, register_sources, run_killed, run_sql, start, start_task,
                      stop_task, table_rows, union_rows)

pytestmark = pytest.mark.integration

DB, TARGET = "sharding22", "db_target"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("sharding2", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB], "up2": [DB], "down": [TARGET]}) as got:
        yield got


def _columns(ep) -> list[str]:
    return [r[0] for r in run_sql(ep, "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                                      "AND table_name = 't_target' ORDER BY ordinal_position", args=(TARGET,))]


def _indexes(ep) -> list[str]:
    return sorted({r[0] for r in run_sql(ep, "SELECT index_name FROM information_schema.statistics WHERE "
                                             "table_schema = %s AND table_name = 't_target'", args=(TARGET,))})


def test_dm_sharding2_case(case, stack, tmp_path):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    shards = [(up1, DB, "t1"), (up2, DB, "t1")]
    t1 = f"{DB}.t1"

    # 1. nothing upstream at the start; the database and the shards come through the binlog
    register_sources(files)
    task, sync = start(files, store)
    assert task.shard_mode == "pessimistic"
    sids = [i.source_id for i in task.mysql_instances]
    for ep in (up1, up2):
        run_sql(ep, f"CREATE DATABASE {DB}", f"CREATE TABLE {t1} (id int primary key)")
    sync.settle()
    assert _columns(down) == ["id"]
    assert table_rows(down, TARGET, "t_target", ["id"]) == union_rows(shards, ["id"]) == []

    # 2. stop, start from the checkpoints, the DDL sequence with rows
    stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    task, sync = start_task(files.task_file, store, settle=False)
    for ep, ids in ((up1, (1, 2, 3, 4, 5, 6)), (up2, (10, 11))):
        run_sql(ep, f"ALTER TABLE {t1} ADD COLUMN name varchar(20)", f"ALTER TABLE {t1} ADD INDEX abc (name)",
                *[f"INSERT INTO {t1} VALUES ({i}, '{chr(96 + i % 26)}')" for i in ids])
    run_sql(up1, f"ALTER TABLE {t1} ADD COLUMN c int", f"ALTER TABLE {t1} ADD INDEX c (c)",
            f"ALTER TABLE {t1} ADD COLUMN d int", f"ALTER TABLE {t1} ADD INDEX d (d)",
            f"ALTER TABLE {t1} ADD COLUMN e int, ADD INDEX e (e)",
            *[f"INSERT INTO {t1} VALUES ({i}, 'x{i}', {i}, {i}, {i})" for i in (7, 8, 9)],
            f"ALTER TABLE {t1} ADD COLUMN f int")
    run_sql(up2, f"ALTER TABLE {t1} ADD COLUMN c int", f"ALTER TABLE {t1} ADD INDEX c (c)",
            f"ALTER TABLE {t1} ADD COLUMN d int", f"ALTER TABLE {t1} ADD INDEX d (d)",
            f"ALTER TABLE {t1} ADD COLUMN e int, ADD INDEX e (e)",
            *[f"INSERT INTO {t1} VALUES ({i}, 'y{i}', {i}, {i}, {i})" for i in (12, 13)],
            f"ALTER TABLE {t1} ADD COLUMN f int")
    sync.settle()
    six = ["id", "name", "c", "d", "e", "f"]
    assert _columns(down) == six
    assert _indexes(down) == ["PRIMARY", "abc", "c", "d", "e"]
    assert table_rows(down, TARGET, "t_target", six) == union_rows(shards, six)

    # 3. a row each, then DROP COLUMN f: the sync processes die right after it ran downstream
    run_sql(up1, f"INSERT INTO {t1} VALUES (14, 'j', 14, 14, 14, 14)", f"ALTER TABLE {t1} DROP COLUMN f")
    run_sql(up2, f"INSERT INTO {t1} VALUES (15, 'i', 15, 15, 15, 15)", f"ALTER TABLE {t1} DROP COLUMN f")
    got = run_killed(files, dict.fromkeys(sids, "shardddl.exec.after_downstream=1"), tmp_path)
    assert sorted(got.values()) == [-9, FAULT_EXIT], got   # the owner died there, the other was killed waiting
    assert _columns(down) == six[:-1]                      # the DROP ran, nothing recorded it yet
    got = run_killed(files, dict.fromkeys(sids, "shardddl.sync.after_skip_ack=1"), tmp_path)
    assert FAULT_EXIT in got.values(), got                 # the other died right after acknowledging its skip
    sync.restart()
    sync.settle()
    five = six[:-1]
    assert _columns(down) == five
    run_sql(up1, f"INSERT INTO {t1} VALUES (16, 'l', 16, 16, 16)")
    run_sql(up2, f"INSERT INTO {t1} VALUES (17, 'm', 17, 17, 17)")
    sync.settle()
    assert table_rows(down, TARGET, "t_target", five) == union_rows(shards, five)

    # 4. a new binlog file between rows, then ADD COLUMN new_col on both
    for ep, a, b in ((up1, 18, 19), (up2, 20, 21)):
        run_sql(ep, f"INSERT INTO {t1} VALUES ({a}, 'o', {a}, {a}, {a})", "FLUSH LOGS",
                f"INSERT INTO {t1} VALUES ({b}, 'p', {b}, {b}, {b})", f"ALTER TABLE {t1} ADD COLUMN new_col int")
    sync.settle()
    assert table_rows(down, TARGET, "t_target", five) == union_rows(shards, five)
    run_sql(up1, f"INSERT INTO {t1} VALUES (22, 's', 22, 22, 22, 22)")
    run_sql(up2, f"INSERT INTO {t1} VALUES (23, 's', 23, 23, 23, 23)")
    sync.settle()
    seven = five + ["new_col"]
    assert _columns(down) == seven
    assert table_rows(down, TARGET, "t_target", seven) == union_rows(shards, seven)
    rc, out, err = dmctl("query-status", task.name)
    assert rc == 0, out + err
    st = json.loads(out)["tasks"][0]
    assert st["status"] == "running" and st["ddl_locks"] == []
    assert [(s["source"], s["error"], s["unresolved_groups"]) for s in st["sources"]] == [(s, None, []) for s in sids]
