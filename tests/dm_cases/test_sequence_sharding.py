"""DM's `sequence_sharding` case (pingcap/tiflow dm/tests/sequence_sharding/run.sh), with DM's own
task and source files (conf/, vendored unchanged) and our own statements for its situations:

1. one schema `sharding_seq` on two upstreams, tables t1/t2 and t2/t3/t4 (utf8mb4_bin, distinct
   AUTO_INCREMENT ranges), merged into `sharding_target2`.`t_target`; names with quotes and
   backticks; full phase, then `sync diff`;
2. each shard runs the whole DDL sequence (ADD COLUMN c, ADD INDEX c, ADD COLUMN d, ADD INDEX d,
   ADD COLUMN e with its index in one statement), with updates between, one shard after the
   other (the sequence is what DM's sharding group must line up), rows after, a unique-key
   UPDATE on one shard; `sync diff`;
3. every shard adds `new_col1` (consistent: it runs downstream once), then the shards disagree on
   the next column (new_col2 on some, new_col3 on others): the sources pause with DM's
   "inconsistent DDL sequence", no retry by themselves, a resume pauses them again, and so
   does a stop and a start of the task with `ignore-checking-items: ["all"]`.
"""

import pytest
import yaml

from dm_core.config.task import load_task_file

from .harness import Sync, dm_case, dmctl, register_sources, run_sql, start, table_rows, union_rows

pytestmark = pytest.mark.integration

BASE = ["id", "uid", "name"]
ALL = BASE + ["c", "d", "e"]
TABLE = ("(id bigint AUTO_INCREMENT, uid int, name varchar(20), PRIMARY KEY (id), UNIQUE KEY (uid)) "
         "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin AUTO_INCREMENT={}")
SEQUENCE = ["ALTER TABLE {t} ADD COLUMN c int", "ALTER TABLE {t} ADD INDEX c (c)", "UPDATE {t} SET c = 100",
            "ALTER TABLE {t} ADD COLUMN d int", "ALTER TABLE {t} ADD INDEX d (d)",
            "ALTER TABLE {t} ADD COLUMN e int, ADD INDEX e (e)", "UPDATE {t} SET d = 200"]


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("sequence_sharding", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": ["sharding_seq"], "up2": ["sharding_seq"], "down": ["sharding_target2"]}) as got:
        yield got


def _paused_inconsistent(store, task) -> dict[str, str]:
    return {s["source_id"]: s["error"] for s in store.all_source_states(task.name)
            if s["error"] and "inconsistent" in s["error"].lower()}


def test_dm_sequence_sharding_case_up2_logs_no_column_names(case, stack):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    t = "sharding_seq.{}".format

    run_sql(up1, "CREATE DATABASE sharding_seq", f"CREATE TABLE {t('t1')} {TABLE.format(100000)}",
            f"CREATE TABLE {t('t2')} {TABLE.format(200000)}",
            f"INSERT INTO {t('t1')} (uid, name) VALUES (100001, 'kVqpZ'), (100002, 'mNoPqRsT')",
            f"INSERT INTO {t('t2')} (uid, name) VALUES (200001, 'aBcDeF'), (200002, 'gHiJk'), "
            "(200003, 'Q\"\"''uote`s')")
    run_sql(up2, "CREATE DATABASE sharding_seq", f"CREATE TABLE {t('t2')} {TABLE.format(300000)}",
            f"CREATE TABLE {t('t3')} {TABLE.format(400000)}", f"CREATE TABLE {t('t4')} {TABLE.format(500000)}",
            f"INSERT INTO {t('t2')} (uid, name) VALUES (300001, 'xy'), (300002, 'LmNoPq')",
            f"INSERT INTO {t('t3')} (uid, name) VALUES (400001, 'RsTu'), (400002, 'VW'), (400003, 'XyZaB')",
            f"INSERT INTO {t('t4')} (uid, name) VALUES (500001, '`uid` = 7'), (500002, '12345'), (500003, 'CdEfG')")
    register_sources(files)
    task, sync = start(files, store)
    shards = [(up1, "sharding_seq", "t1"), (up1, "sharding_seq", "t2"), (up2, "sharding_seq", "t2"),
              (up2, "sharding_seq", "t3"), (up2, "sharding_seq", "t4")]
    assert table_rows(down, "sharding_target2", "t_target", BASE) == union_rows(shards, BASE)

    # 2. the DDL sequence, shard after shard, with rows
    run_sql(up1, f"INSERT INTO {t('t1')} (uid, name) VALUES (100003, 'ZZ')",
            f"UPDATE {t('t1')} SET name = 'renamed' WHERE uid = 100001",
            f"UPDATE {t('t1')} SET name = 'again' WHERE name = 'mNoPqRsT'",
            f"INSERT INTO {t('t2')} (uid, name) VALUES (200004, 'more'), (200005, '987654')",
            *[s.format(t=t("t1")) for s in SEQUENCE], *[s.format(t=t("t2")) for s in SEQUENCE],
            f"UPDATE {t('t1')} SET c = 101", f"UPDATE {t('t2')} SET c = 102",
            f"INSERT INTO {t('t1')} (uid, name, c) VALUES (100004, 'VALUES', 191472878), (100005, 'x', 1091218279)")
    run_sql(up2, f"DELETE FROM {t('t3')} WHERE uid = 400002",
            f"INSERT INTO {t('t4')} (uid, name) VALUES (500005, '`.`'), (500006, 'quit')",
            *[s.format(t=t(n)) for n in ("t2", "t3", "t4") for s in SEQUENCE],
            f"UPDATE {t('t4')} SET uid = uid + 100000",
            f"INSERT INTO {t('t2')} (uid, name, c) VALUES (300003, 'abc', 73), (300004, 'def', 4029)",
            f"INSERT INTO {t('t3')} (uid, name, c) VALUES (400004, '1000', 1000)")
    sync.settle()
    assert table_rows(down, "sharding_target2", "t_target", ALL) == union_rows(shards, ALL)

    # 3. new_col1 everywhere, then the shards disagree
    run_sql(up1, f"ALTER TABLE {t('t1')} ADD COLUMN new_col1 int", f"ALTER TABLE {t('t1')} ADD COLUMN new_col2 int",
            f"ALTER TABLE {t('t2')} ADD COLUMN new_col1 int", f"ALTER TABLE {t('t2')} ADD COLUMN new_col3 int")
    run_sql(up2, *[f"ALTER TABLE {t(n)} ADD COLUMN new_col1 int" for n in ("t2", "t3", "t4")],
            f"ALTER TABLE {t('t2')} ADD COLUMN new_col2 int", f"ALTER TABLE {t('t3')} ADD COLUMN new_col2 int",
            f"ALTER TABLE {t('t4')} ADD COLUMN new_col3 int")
    sync.settle(paused_ok=True)
    for _ in range(5):  # no resume by itself
        sync.step()
    paused = _paused_inconsistent(store, task)
    assert set(paused) == {i.source_id for i in task.mysql_instances}, paused
    cols = [r[0] for r in run_sql(down, "SELECT column_name FROM information_schema.columns WHERE "
                                        "table_schema = 'sharding_target2' AND table_name = 't_target'")]
    assert "new_col1" in cols and "new_col2" not in cols and "new_col3" not in cols, cols
    rc, out, _ = dmctl("query-status", task.name)
    assert "inconsistent" in out.lower()

    ids = [i.source_id for i in task.mysql_instances]
    store.request_sources(task.name, ids, "running", all_sources=ids, clear_error=True)  # resume-task
    sync.settle(paused_ok=True)
    assert set(_paused_inconsistent(store, task)) == set(ids), "still conflicting after a resume"

    # stop, then start again with every precheck item ignored: still the same conflict
    store.stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    doc = yaml.safe_load(files.task_file.read_text())
    doc["ignore-checking-items"] = ["all"]
    files.task_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    rc, out, err = dmctl("check-task", str(files.task_file))
    assert rc == 0, out + err
    store.start_task(task.name, files.task_file.read_text())
    sync = Sync(load_task_file(str(files.task_file)), store)
    sync.settle(paused_ok=True)
    assert set(_paused_inconsistent(store, task)) == set(ids), "still conflicting after stop + start"
