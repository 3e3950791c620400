"""DM's `sequence_sharding_optimistic` case (pingcap/tiflow dm/tests/sequence_sharding_optimistic/run.sh),
with DM's own task and source files (conf/, vendored unchanged) and our own statements for its
situations:

1. `sharding_seq_opt` on two upstreams, tables t1/t2 (t2 empty) and t2/t3/t4, latin1_bin, merged into
   `sharding_target_opt`.`t_target` in optimistic shard mode; full phase, then `sync diff`;
2. a database outside the routes through the binlog: CREATE DATABASE ... utf8, ALTER DATABASE ...
   utf8mb4, a table and a row in it (downstream has the row, and the database's charset);
3. pause-task / resume-task: query-status says paused, then running;
4. `shard-ddl-lock unlock` of a lock id that does not exist is refused, naming it;
5. the optimistic DDL sequence, shard after shard and interleaved with rows, upstream 2's half
   synced first: columns dropped on some shards while others still write them (the column stays
   downstream until the last shard drops it), added on some before others (added downstream at
   the first), each shard ending at (id, c2, c3); source 1's sync process killed at each named
   fault point of its shard DDLs (DM's FlushCheckpointStage failpoint on worker 1, which pauses it
   at five stages, resumed each time); then `sync diff` and the merged table's columns;
6. the lock's tracked schema of upstream 1's t1 (DM reads it through its schema API while the task
   is paused: (id, c2, c3)), shown by `shard-ddl-lock --all -v`;
7. more DDL while paused: t2 of upstream 1 adds c1 again (after resume-task the downstream has it
   back, with the row written to it), then drops it (downstream drops it: no other shard has it),
   rows on every shard; `sync diff`.

Not ported: DM's `binlog-schema update` of t1 to `c3 bigint` and the HTTP schema operations:
the update changes nothing a user can see downstream in DM (only the tracker's copy), so the rows
and columns checked at the end are the same without it (the command itself is tested in
tests/integration/test_schema_tracker_no_names.py); the optimistic lock's per-shard schemas are
read-only (`shard-ddl-lock -v`). DM's relay (`enable-relay` in
source2.yaml) is not built: source 2 reads the upstream's binlog directly.
"""

import pytest

from tests.integration.shard_helpers import active_locks as coordinator_locks

from .harness import dm_case, dmctl, register_sources, run_sql, start, sync_process, table_rows, union_rows

pytestmark = pytest.mark.integration

DB, TMP, TARGET = "sharding_seq_opt", "sharding_seq_tmp", "sharding_target_opt"
TABLE = "(id bigint primary key, c1 varchar(20), c2 varchar(20)) CHARSET=latin1 COLLATE=latin1_bin"
# the five places DM's FlushCheckpointStage failpoint stops worker 1 at, as shardflow names them
# (dm_core/faults.py): before the DDL is settled, after the lock answered, after a skip is
# acknowledged (t1's DROP c1: t2 still has c1), before and after the owner runs the DDL downstream
# (t2's DROP c1, the last shard to drop it)
FAULTS = ["sync.ddl.before_settle", "shardddl.sync.after_put_info", "shardddl.sync.after_skip_ack",
          "shardddl.exec.before_downstream", "shardddl.exec.after_downstream"]


FINAL_COLUMNS = [("id", "bigint(20)", "NO", None), ("c2", "varchar(20)", "YES", "latin1_bin"),
                 ("c3", "int(11)", "YES", None)]


def _shards(up1, up2) -> list[tuple]:
    return [(up1, DB, "t1"), (up1, DB, "t2"), (up2, DB, "t2"), (up2, DB, "t3"), (up2, DB, "t4")]


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("sequence_sharding_optimistic", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB, TMP], "up2": [DB, TMP], "down": [TARGET, TMP]}) as got:
        yield got


def _columns(ep, schema, table) -> list[tuple]:
    return [tuple(r) for r in run_sql(
        ep, "SELECT column_name, column_type, is_nullable, collation_name FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position", args=(schema, table))]


def _status(name: str) -> dict:
    import json

    rc, out, err = dmctl("query-status", name)
    assert rc == 0, out + err
    return {s["source"]: s for s in json.loads(out)["tasks"][0]["sources"]}


def _prepare(up1, up2) -> None:
    t = f"{DB}.{{}}".format
    run_sql(up1, f"CREATE DATABASE {DB}", f"CREATE TABLE {t('t1')} {TABLE}", f"CREATE TABLE {t('t2')} {TABLE}",
            f"INSERT INTO {t('t1')} VALUES (100001, 'uno', 'primero'), (100002, 'dos', 'segundo')",
            f"INSERT INTO {t('t1')} VALUES (200001, 'tres', 'tercero'), (200002, 'cuatro', 'cuarto')")
    run_sql(up2, f"CREATE DATABASE {DB}", *[f"CREATE TABLE {t(n)} {TABLE}" for n in ("t2", "t3", "t4")],
            f"INSERT INTO {t('t2')} VALUES (300001, 'cinco', 'quinto'), (300002, 'seis', 'sexto')",
            f"INSERT INTO {t('t3')} VALUES (400001, 'siete', 'septimo'), (400002, 'ocho', 'octavo')",
            f"INSERT INTO {t('t4')} VALUES (500001, 'nueve', 'noveno'), (500002, 'diez', 'decimo')")


def _sequence_up1(up1) -> None:
    t = f"{DB}.{{}}".format
    run_sql(up1,
            f"INSERT INTO {t('t2')} VALUES (200003, 'x210003', 'y220003')",
            f"INSERT INTO {t('t1')} VALUES (100003, 'x110003', 'y120003')",
            f"ALTER TABLE {t('t1')} DROP COLUMN c1",                       # t1 (id, c2); t2 (id, c1, c2)
            f"INSERT INTO {t('t1')} (id, c2) VALUES (100004, 'y120004')",
            f"INSERT INTO {t('t2')} VALUES (200004, 'x210004', 'y220004')",
            f"ALTER TABLE {t('t2')} ADD COLUMN c3 int",                    # t2 (id, c1, c2, c3)
            f"INSERT INTO {t('t2')} VALUES (200005, 'x210005', 'y220005', 230005)",
            f"INSERT INTO {t('t1')} (id, c2) VALUES (100005, 'y120005')",
            f"ALTER TABLE {t('t2')} DROP COLUMN c1",                       # t2 (id, c2, c3)
            f"INSERT INTO {t('t1')} (id, c2) VALUES (100006, 'y120006')",
            f"INSERT INTO {t('t2')} (id, c2, c3) VALUES (200006, 'y220006', 230006)",
            f"ALTER TABLE {t('t1')} ADD COLUMN c3 int",                    # t1 (id, c2, c3)
            f"INSERT INTO {t('t2')} (id, c2, c3) VALUES (200007, 'y220007', 230007)",
            f"INSERT INTO {t('t1')} (id, c2, c3) VALUES (100007, 'y120007', 130007)")


def _sequence_up2(up2) -> None:
    t = f"{DB}.{{}}".format
    run_sql(up2,
            f"ALTER TABLE {t('t4')} ADD COLUMN c3 int",                    # before any row: the join widens first
            f"INSERT INTO {t('t4')} VALUES (500004, 'x510004', 'y520004', 530004)",
            f"INSERT INTO {t('t2')} VALUES (300004, 'x310004', 'y320004')",
            f"INSERT INTO {t('t3')} VALUES (400004, 'x410004', 'y420004')",
            f"ALTER TABLE {t('t4')} DROP COLUMN c1",                       # t4 (id, c2, c3)
            f"INSERT INTO {t('t3')} VALUES (400005, 'x410005', 'y420005')",
            f"INSERT INTO {t('t4')} (id, c2, c3) VALUES (500005, 'y520005', 530005)",
            f"INSERT INTO {t('t2')} VALUES (300005, 'x310005', 'y320005')",
            f"ALTER TABLE {t('t2')} DROP COLUMN c1",                       # t2 (id, c2)
            f"INSERT INTO {t('t4')} (id, c2, c3) VALUES (500006, 'y520006', 530006)",
            f"INSERT INTO {t('t3')} VALUES (400006, 'x410006', 'y420006')",
            f"INSERT INTO {t('t2')} (id, c2) VALUES (300006, 'y320006')",
            f"ALTER TABLE {t('t2')} ADD COLUMN c3 int",                    # t2 (id, c2, c3)
            f"INSERT INTO {t('t2')} (id, c2, c3) VALUES (300007, 'y320007', 330007)",
            f"INSERT INTO {t('t4')} (id, c2, c3) VALUES (500007, 'y520007', 530007)",
            f"INSERT INTO {t('t3')} VALUES (400007, 'x410007', 'y420007')",
            f"ALTER TABLE {t('t3')} DROP COLUMN c1",                       # t3 (id, c2): no shard of upstream 2 has c1 now
            f"INSERT INTO {t('t3')} (id, c2) VALUES (400008, 'y420008')",
            f"INSERT INTO {t('t2')} (id, c2, c3) VALUES (300008, 'y320008', 330008)",
            f"INSERT INTO {t('t4')} (id, c2, c3) VALUES (500008, 'y520008', 530008)",
            f"ALTER TABLE {t('t3')} ADD COLUMN c3 int",                    # t3 (id, c2, c3)
            f"INSERT INTO {t('t4')} (id, c2, c3) VALUES (500009, 'y520009', 530009)",
            f"INSERT INTO {t('t3')} (id, c2, c3) VALUES (400009, 'y420009', 430009)",
            f"INSERT INTO {t('t2')} (id, c2, c3) VALUES (300009, 'y320009', 330009)")


def test_dm_sequence_sharding_optimistic_case(case, stack, tmp_path):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    t = f"{DB}.{{}}".format

    # 1. shards, sources, task, full phase
    _prepare(up1, up2)
    register_sources(files)
    task, sync = start(files, store)
    assert task.shard_mode == "optimistic"
    s1, s2 = (i.source_id for i in task.mysql_instances)
    shards = _shards(up1, up2)
    first = ["id", "c1", "c2"]
    assert table_rows(down, TARGET, "t_target", first) == union_rows(shards, first)

    # 2. CREATE / ALTER DATABASE of a database no route renames, a table and a row in it
    run_sql(up1, f"CREATE DATABASE {TMP} DEFAULT CHARACTER SET utf8",
            f"ALTER DATABASE {TMP} DEFAULT CHARACTER SET utf8mb4",
            f"CREATE TABLE {TMP}.t1 (id int primary key)", f"REPLACE INTO {TMP}.t1 VALUES (1)")
    sync.settle()
    assert run_sql(down, f"SELECT COUNT(*) FROM {TMP}.t1") == [(1,)]
    assert run_sql(down, "SELECT default_character_set_name FROM information_schema.schemata WHERE schema_name = %s",
                   args=(TMP,)) == [("utf8mb4",)]

    # 3. pause-task, query-status, resume-task
    rc, out, err = dmctl("pause-task", task.name)
    assert rc == 0, out + err
    sync.step()
    assert {s["status"] for s in _status(task.name).values()} == {"paused"}, _status(task.name)
    rc, out, err = dmctl("resume-task", task.name)
    assert rc == 0, out + err
    sync.settle()
    assert {s["status"] for s in _status(task.name).values()} == {"running"}, _status(task.name)

    # 4. unlocking a lock nobody has
    rc, out, err = dmctl("shard-ddl-lock", "unlock", "non-exist-task-`test_db`.`test_table`")
    assert rc != 0 and "non-exist-task-`test_db`.`test_table`" in out + err, out + err

    # 5. the DDL sequence, shard after shard, rows between
    _sequence_up2(up2)
    # upstream 2 first: its shards add c3 (downstream at once) and drop c1, which stays downstream
    # while upstream 1's shards still write it
    for _ in range(40):
        if sync.sessions[s2].step().state == "caught_up":
            break
    assert [c[0] for c in _columns(down, TARGET, "t_target")] == ["id", "c1", "c2", "c3"]
    _sequence_up1(up1)
    # source 1's sync process dies at each stage of its shard DDLs in turn, and is started again
    for point in FAULTS:
        rc = sync_process(files.task_file, s1, tmp_path, faults=f"{point}=1")
        assert rc == 97, f"source 1 did not reach fault point {point} (exit {rc})"
    sync.restart(s1)
    sync.settle()
    final = ["id", "c2", "c3"]
    assert table_rows(down, TARGET, "t_target", final) == union_rows(shards, final)
    assert _columns(down, TARGET, "t_target") == FINAL_COLUMNS

    # 6. the schema the lock tracks for upstream 1's t1
    import json

    rc, out, err = dmctl("shard-ddl-lock", task.name, "--all", "-v")
    assert rc == 0, out + err
    locks = json.loads(out)["locks"]
    assert [lk["lock_id"] for lk in locks] == [f"{task.name}-`{TARGET}`.`t_target`"], locks
    mine = {(m["source"], tuple(m["table"])): m for m in locks[0]["members"]}
    assert [c.split()[0] for c in mine[(s1, (DB, "t1"))]["columns"]] == ["`id`", "`c2`", "`c3`"], mine
    assert locks[0]["status"] == "idle"

    # 7. paused, more DDL and rows, resumed
    rc, out, err = dmctl("pause-task", task.name)
    assert rc == 0, out + err
    sync.step()
    run_sql(up1, f"ALTER TABLE {t('t2')} ADD COLUMN c1 varchar(20)",   # t2 (id, c2, c3, c1)
            f"INSERT INTO {t('t2')} (id, c1, c2, c3) VALUES (200008, 'x210008', 'y220008', 230008)",
            f"INSERT INTO {t('t1')} (id, c2, c3) VALUES (100008, 'y120008', 130008)")
    rc, out, err = dmctl("resume-task", task.name)
    assert rc == 0, out + err
    sync.settle()
    assert [c[0] for c in _columns(down, TARGET, "t_target")] == ["id", "c2", "c3", "c1"]
    assert run_sql(down, f"SELECT c1 FROM {TARGET}.t_target WHERE id = 200008") == [("x210008",)]
    run_sql(up1, f"ALTER TABLE {t('t2')} DROP COLUMN c1",             # no shard has c1 any more
            f"INSERT INTO {t('t1')} (id, c2, c3) VALUES (100009, 'y120009', 130009)",
            f"INSERT INTO {t('t2')} (id, c2, c3) VALUES (200009, 'y220009', 230009)")
    run_sql(up2, *[f"INSERT INTO {t(n)} (id, c2, c3) VALUES ({i}0010, 'y{i}20010', {i}30010)"
                   for n, i in (("t2", 3), ("t3", 4), ("t4", 5))])
    sync.settle()
    assert {s["status"] for s in _status(task.name).values()} == {"running"}
    assert table_rows(down, TARGET, "t_target", final) == union_rows(shards, final)
    assert [c[0] for c in _columns(down, TARGET, "t_target")] == ["id", "c2", "c3"]


def test_dm_sequence_sharding_optimistic_both_sources_at_once(case, stack):
    """Step 5 as DM's run.sh runs it: both upstreams write their half of the sequence, then both
    sources sync at once, in windows of a few binlog events taken in turn (the coordinator
    between), so the shards' DDLs reach the lock interleaved: rows equal the union, the merged
    table ends at (id, c2, c3)."""
    from dm_core.shardddl.coordinator import coordinate
    from dm_core.sync.syncer import Syncer

    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    _prepare(up1, up2)
    register_sources(files)
    task, sync = start(files, store)
    _sequence_up1(up1)
    _sequence_up2(up2)
    syncers = [Syncer(task, i.source_id, store, budget_events=4) for i in task.mysql_instances]
    for _ in range(400):
        results = [s.run_window() for s in syncers]
        coordinate(task, store)
        assert not any(r.paused for r in results), [r.paused for r in results]
        if all(r.caught_up for r in results) and not coordinator_locks(task, store):
            break
    else:
        pytest.fail("the sources did not settle")
    final = ["id", "c2", "c3"]
    assert table_rows(down, TARGET, "t_target", final) == union_rows(_shards(up1, up2), final)
    assert _columns(down, TARGET, "t_target") == FINAL_COLUMNS
