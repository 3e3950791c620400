"""DM's `sequence_sharding_removemeta` case (pingcap/tiflow dm/tests/sequence_sharding_removemeta/run.sh),
with DM's own task and source files (conf/, vendored unchanged) and our own statements for its
situations (pessimistic shard mode, DM's `is-sharding: true`):

1. `sharding_seq` on two upstreams, tables t1/t2 and t2/t3/t4 (distinct AUTO_INCREMENT ranges),
   merged into `sharding_target3`.`t_target`; full phase, then `sync diff`;
2. the DDL sequence (ADD COLUMN c, its index, ADD COLUMN d, its index, ADD COLUMN e with its index)
   on every shard but t4 of upstream 2, which stops after c and its index: the lock of the target
   waits on `ADD COLUMN d` (upstream 1 reported, upstream 2 has it on two of its three tables);
   `shard-ddl-lock` shows it, and query-status shows each source's unresolved sharding group (the
   tables that met the DDL and those still to);
3. stop-task; the downstream database dropped; t4 catches up upstream (d, e, updates, a unique-key
   UPDATE) with more rows; start-task --remove-meta: the lock is gone, a fresh full phase loads
   every shard at its present schema, `sync diff` equals (nothing applied twice, nothing lost);
4. upstream 1's two tables add f (and write it): the lock waits on `ADD COLUMN f` for upstream 2,
   which query-status says has not met any shard DDL of the group; stop-task; `shard-ddl-lock
   unlock` of the lock works on a stopped task and leaves no lock (DM: a stopped task's worker
   cannot run anything, so the unlock force-removes: nothing runs downstream);
5. (beyond DM's run.sh, what a user does next) start-task again: source 1 reads its ADD COLUMN f
   again and reports it to a new lock that waits for upstream 2; once upstream 2 adds f, it runs
   downstream once and the rows held back arrive: nothing lost, nothing twice.

Not ported: DM's metrics (`dm_master_ddl_state_number`), relay (source2.yaml's `enable-relay`).
"""

import json

import pytest

from .harness import dm_case, dmctl, register_sources, run_sql, start, start_task, stop_task, table_rows, union_rows
from .test_sequence_sharding import SEQUENCE, TABLE

pytestmark = pytest.mark.integration

DB, TARGET = "sharding_seq", "sharding_target3"
BASE = ["id", "uid", "name"]
ALL = BASE + ["c", "d", "e"]


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("sequence_sharding_removemeta", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB], "up2": [DB], "down": [TARGET]}) as got:
        yield got


def _locks(name: str) -> list[dict]:
    rc, out, err = dmctl("shard-ddl-lock", name)
    assert rc == 0, out + err
    return json.loads(out)["locks"]


def _status(name: str) -> dict:
    rc, out, err = dmctl("query-status", name)
    assert rc == 0, out + err
    return json.loads(out)["tasks"][0]


def _groups(status: dict) -> dict:
    return {s["source"]: s["unresolved_groups"] for s in status["sources"]}


def _columns(ep) -> list[str]:
    return [r[0] for r in run_sql(ep, "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                                      "AND table_name = 't_target' ORDER BY ordinal_position", args=(TARGET,))]


def test_dm_sequence_sharding_removemeta_case(case, stack):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    t = f"{DB}.{{}}".format

    # 1. shards, sources, task, full phase
    run_sql(up1, f"CREATE DATABASE {DB}", f"CREATE TABLE {t('t1')} {TABLE.format(10000)}",
            f"CREATE TABLE {t('t2')} {TABLE.format(20000)}",
            f"INSERT INTO {t('t1')} (uid, name) VALUES (100001, 'Bergen'), (100002, 'Trondheim')",
            f"INSERT INTO {t('t2')} (uid, name) VALUES (200001, 'Stavanger'), (200002, 'Tromsø'), "
            "(200003, 'Å\"\"''lesund')")
    run_sql(up2, f"CREATE DATABASE {DB}", f"CREATE TABLE {t('t2')} {TABLE.format(30000)}",
            f"CREATE TABLE {t('t3')} {TABLE.format(40000)}", f"CREATE TABLE {t('t4')} {TABLE.format(50000)}",
            f"INSERT INTO {t('t2')} (uid, name) VALUES (300001, 'Bodø'), (300002, 'Kristiansand')",
            f"INSERT INTO {t('t3')} (uid, name) VALUES (400001, 'Drammen'), (400002, 'Fredrikstad'), (400003, 'Hamar')",
            f"INSERT INTO {t('t4')} (uid, name) VALUES (500001, '`id` = 15'), (500002, '942032497'), (500003, 'Molde')")
    register_sources(files)
    task, sync = start(files, store)
    assert task.shard_mode == "pessimistic"
    s1, s2 = (i.source_id for i in task.mysql_instances)
    lock_id = f"{task.name}-`{TARGET}`.`t_target`"
    shards = [(up1, DB, "t1"), (up1, DB, "t2"), (up2, DB, "t2"), (up2, DB, "t3"), (up2, DB, "t4")]
    assert table_rows(down, TARGET, "t_target", BASE) == union_rows(shards, BASE)
    assert _locks(task.name) == []

    # 2. the sequence everywhere but on t4 of upstream 2, which stops after c and its index
    run_sql(up1, f"INSERT INTO {t('t1')} (uid, name) VALUES (100003, 'Narvik')",
            f"UPDATE {t('t1')} SET name = 'Bergen sentrum' WHERE uid = 100001",
            f"UPDATE {t('t1')} SET name = 'Nidaros' WHERE name = 'Trondheim'",
            f"INSERT INTO {t('t2')} (uid, name) VALUES (200004, 'Alta'), (200005, '188689130')",
            *[s.format(t=t("t1")) for s in SEQUENCE], *[s.format(t=t("t2")) for s in SEQUENCE],
            f"UPDATE {t('t1')} SET c = 101", f"UPDATE {t('t2')} SET c = 102",
            f"INSERT INTO {t('t1')} (uid, name, c) VALUES (100004, 'VALUES', 191472878), (100005, 'Harstad', 1091218279)")
    run_sql(up2, f"DELETE FROM {t('t3')} WHERE id = 40002",
            f"INSERT INTO {t('t4')} (uid, name) VALUES (500005, '`.`'), (500006, 'exit')",
            *[s.format(t=t(n)) for n in ("t2", "t3") for s in SEQUENCE], *[s.format(t=t("t4")) for s in SEQUENCE[:2]])
    for _ in range(12):
        sync.step()
    locks = _locks(task.name)
    assert [lk["lock_id"] for lk in locks] == [lock_id], locks
    assert locks[0]["ddls"] == [f"ALTER TABLE `{TARGET}`.`t_target` ADD COLUMN `d` INT"], locks
    assert locks[0]["reported"] == [s1] and locks[0]["waiting_for"] == [s2], locks
    assert _columns(down) == BASE + ["c"]   # d waits for upstream 2's t4
    st = _status(task.name)
    assert [lk["lock_id"] for lk in st["ddl_locks"]] == [lock_id]
    d = [f"ALTER TABLE `{TARGET}`.`t_target` ADD COLUMN `d` INT"]
    tgt = f"`{TARGET}`.`t_target`"
    assert _groups(st) == {   # DM's unresolvedGroups: each source met the DDL on some tables
        s1: [{"target": tgt, "ddls": d, "synced": [f"`{DB}`.`t1`", f"`{DB}`.`t2`"], "unsynced": []}],
        s2: [{"target": tgt, "ddls": d, "synced": [f"`{DB}`.`t2`", f"`{DB}`.`t3`"], "unsynced": [f"`{DB}`.`t4`"]}]}

    # 3. stop; the downstream database dropped; t4 catches up; start --remove-meta
    stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    run_sql(down, f"DROP DATABASE IF EXISTS {TARGET}")
    run_sql(up2, *[s.format(t=t("t4")) for s in SEQUENCE[2:]], f"UPDATE {t('t4')} SET uid = uid + 100000",
            f"INSERT INTO {t('t2')} (uid, name, c) VALUES (300003, 'Tønsberg', 73), (300004, 'nD1000', 4029)",
            f"INSERT INTO {t('t3')} (uid, name, c) VALUES (400004, '1000', 1000)")
    task, sync = start_task(files.task_file, store, remove_meta=True)
    assert _locks(task.name) == []
    assert table_rows(down, TARGET, "t_target", ALL) == union_rows(shards, ALL)

    # 4. upstream 1 adds f on both tables (and writes it): the lock waits for upstream 2, which met none of it
    run_sql(up1, f"ALTER TABLE {t('t1')} ADD COLUMN f int", f"ALTER TABLE {t('t2')} ADD COLUMN f int",
            f"INSERT INTO {t('t1')} (uid, name, f) VALUES (100006, 'Svolvær', 6)",
            f"UPDATE {t('t2')} SET f = 7 WHERE uid = 200004")
    for _ in range(8):
        sync.step()
    locks = _locks(task.name)
    assert [lk["lock_id"] for lk in locks] == [lock_id], locks
    assert locks[0]["ddls"] == [f"ALTER TABLE `{TARGET}`.`t_target` ADD COLUMN `f` INT"], locks
    assert locks[0]["reported"] == [s1] and locks[0]["waiting_for"] == [s2], locks
    f = [f"ALTER TABLE `{TARGET}`.`t_target` ADD COLUMN `f` INT"]
    assert _groups(_status(task.name)) == {   # upstream 2 met none of it (DM: "doesn't receive any shard DDL")
        s1: [{"target": tgt, "ddls": f, "synced": [f"`{DB}`.`t1`", f"`{DB}`.`t2`"], "unsynced": []}],
        s2: [{"target": tgt, "ddls": f, "synced": [], "unsynced": ["this source has not met any shard DDL of this group"]}]}

    # stop-task, then unlock: the task has no running source to run the DDL (DM: the unlock of a
    # stopped task force-removes the lock); nothing ran downstream
    stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    rc, out, err = dmctl("shard-ddl-lock", "unlock", lock_id)
    assert rc == 0 and json.loads(out)["result"] is True, out + err
    assert "removed" in err, err
    assert _locks(task.name) == []
    assert "f" not in _columns(down)
    assert table_rows(down, TARGET, "t_target", ALL, "WHERE uid <> 100006") == \
        union_rows(shards, ALL, "WHERE uid <> 100006")

    # what a user does next: start the task again. Source 1 reads its ADD COLUMN f again and reports
    # it to a new lock, which waits for upstream 2 as before; once upstream 2's tables add f, it runs
    # downstream once and the rows held back arrive
    task, sync = start_task(files.task_file, store, settle=False)
    for _ in range(8):
        sync.step()
    locks = _locks(task.name)
    assert [(lk["lock_id"], lk["reported"], lk["waiting_for"]) for lk in locks] == [(lock_id, [s1], [s2])], locks
    run_sql(up2, *[f"ALTER TABLE {t(n)} ADD COLUMN f int" for n in ("t2", "t3", "t4")],
            f"UPDATE {t('t3')} SET f = 3")
    sync.settle()
    assert _locks(task.name) == []
    assert _columns(down) == ALL + ["f"]
    assert table_rows(down, TARGET, "t_target", ALL + ["f"]) == union_rows(shards, ALL + ["f"])
