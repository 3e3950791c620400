"""DM's `shardddl_optimistic` case (pingcap/tiflow dm/tests/shardddl_optimistic/run.sh), with DM's
own task and source files (conf/, vendored unchanged) and our own statements for its scenarios,
one pytest parameter per scenario as DM's ``run_case`` (tests/dm_cases/shardddl_scene.py), all
in optimistic mode (double-source-optimistic.yaml):

* DIFFERENT_SCHEMA_FULL: four shards of different shapes -- (a), (a,b), (a,c), (a,b,c) -- with
  a row each, merged into a target the user made with every column (a, b, c); the full phase
  loads 4 rows; then rows of every shape around four DDLs (source 1's tb1 adds c; source 2's tb2
  drops b; source 1's tb2 drops b, then adds c): 24 rows, and once no shard has b the merged
  table drops it (every shard and the target are (a, c));
* DIFFERENT_SCHEMA_INCREMENTAL: the same shards; after the full phase the upstreams' positions
  are read, the task paused and stopped, the rows and DDLs written, then the incremental task
  file (``double-source-optimistic-incr.yaml``, its ``pos-holder`` / ``name-holder`` /
  ``gtid-holder`` replaced as run.sh's sed does: source 1 by file and position, source 2 by
  GTID) started with ``--remove-meta``: 24 rows. DM pauses first with "Column count doesn't
  match" (its schema tracker starts from the downstream table, (a, b, c), for every shard)
  until ``operate-schema set`` gives each shard the schema DM's HTTP API saved. shardflow's
  tracker starts source 2 (no column names logged) from the upstream's tb2 of now, (a, c), and
  pauses with 50025 the same way. The optimistic lock too starts every shard from the merged
  table's schema at an incremental start: source 1 (names logged, not paused) runs its DDLs
  against it. ``binlog-schema update`` (its ``--sync``, as DM's, tells the lock too) sets source
  2's tables from the saved schemas and, after ``pause-task -s`` source 1, source 1's from the
  upstream of now (``--from-source``); resume-task: every row lands and, once source 2's tb2
  drops b, the merged table drops it (every shard and the target are (a, c));
* RESTART_TASK_MASTER_WORKER: the DIFFERENT_SCHEMA rows and DDLs, with a restart after each DDL
  once it was handled: DM picks at random among DM-master, worker 1, worker 2 and the task
  (stop + start); here each of the four in turn (worker 1, worker 2, the task, DM-master);
* STOP_TASK_FOR_A_SOURCE: four shards add b, then source 1's tb1 and source 2's tb1 add c and
  their tb2s drop b (12 rows); ``stop-task -s mysql-replica-02``; source 1's tb1 drops b and its
  tb2 adds c: the merged table is (id, c) -- the stopped source's tables left the lock -- and
  has 14 rows; ``start-task -s mysql-replica-02``: its tb1 drops b, its tb2 adds c, rows: equal;
* UPDATE_BA_ROUTE: shardddl1 and shardddl2 on both sources, columns added and dropped shard by
  shard (13 rows); stop-task, the block-allow list narrowed to shardddl1, start-task from the
  checkpoints: no lock; rows; source 1 drops new_col1, source 2 adds new_col3 (17 rows); stop,
  start with the original list: shardddl2's rows carry new_col1, which DM's merged table dropped
  meanwhile (the tables the narrowed list left out left the lock at the coordinator's round):
  both sources pause on "Unknown column 'new_col1'" until the user adds it downstream and
  resumes; then the shardddl2 shards drop it, one adds new_col3: equal;
* CREATE_DROP_TABLE: shards created and dropped around column changes: a new shard joins with
  fewer columns, dropped shards leave the lock (a column no remaining shard has is dropped):
  17 rows, then new_col2 on every remaining shard: 20 rows, the merged table is (id, new_col2),
  no lock left;
* CHANGE_UTF_CHARSET: four utf8mb3 shards, three changed to utf8mb4 with a row after each: the
  merged table is utf8mb4 and has the three rows at once (the fourth shard not changing does
  not hold anything back).

Not ported: DM's log greps ("finish to handle ddls in optimistic shard mode" becomes settled
sources and the merged table's columns), the relay of source 2 (no relay here).
"""

from __future__ import annotations

import json
import os
import tempfile

import pytest
import yaml

from .harness import dmctl, start_task
from .shardddl_scene import init_table

pytestmark = pytest.mark.integration

CASE = "shardddl_optimistic"
S1, S2 = "mysql-replica-01", "mysql-replica-02"


def _running(sc) -> None:
    st = sc.status_json()
    assert not sc.errors() and {s["status"] for s in st["sources"]} == {"running"}, st


def _different_shapes(sc) -> None:
    sc.s1("create table shardddl1.tb1 (a int primary key)",
          "create table shardddl1.tb2 (a int primary key, b varchar(10))",
          "insert into shardddl1.tb1 values(1)", "insert into shardddl1.tb2 values(2,'22')")
    sc.s2("create table shardddl1.tb1 (a int primary key, c text)",
          "create table shardddl1.tb2 (a int primary key, b varchar(10), c text)",
          "insert into shardddl1.tb1 values(3,'333')", "insert into shardddl1.tb2 values(4,'44','444')")
    sc.tidb("create database if not exists shardddl", "create table shardddl.tb (a int primary key, b varchar(10), c text)")


def _rows(sc, values: tuple[str, str, str, str]) -> None:
    sc.s1(f"insert into shardddl1.tb1 values({values[0]})", f"insert into shardddl1.tb2 values({values[1]})")
    sc.s2(f"insert into shardddl1.tb1 values({values[2]})", f"insert into shardddl1.tb2 values({values[3]})")


# DM's sequence of DIFFERENT_SCHEMA_*: (DDL or None, rows after it)
SEQUENCE = [
    (None, ("5", "6,'6'", "7,'77'", "8,'8','88'")),
    ((1, "alter table shardddl1.tb1 add column c text"), ("9,'999'", "10,'1010'", "11,'111111'", "12,'1212','121212'")),
    ((2, "alter table shardddl1.tb2 drop column b"), ("13,'131313'", "14,'1414'", "15,'151515'", "16,'161616'")),
    ((1, "alter table shardddl1.tb2 drop column b"), ("17,'171717'", "18", "19,'191919'", "20,'202020'")),
    ((1, "alter table shardddl1.tb2 add column c text"), ("21,'212121'", "22,'222222'", "23,'232323'", "24,'242424'")),
]


def _sequence(sc, after_ddl=None) -> None:
    for i, (ddl, values) in enumerate(SEQUENCE):
        if ddl is not None:
            sc.sql(*ddl)
            if after_ddl is not None:
                sc.settle()
                after_ddl(i)
        _rows(sc, values)


def _all_shapes_equal(sc) -> None:
    sc.assert_synced()
    assert sc.count() == 24
    assert sc.columns(None, "shardddl", "tb") == ["a", "c"]


def dm_different_schema_full(sc):
    _different_shapes(sc)
    sc.start()
    assert sc.count() == 4
    _sequence(sc)
    _all_shapes_equal(sc)


def dm_different_schema_incremental(sc):
    _different_shapes(sc)
    sc.start()
    assert sc.count() == 4
    # what DM's HTTP API saves before the stop: each shard's schema, to set it again later
    saved = {t: sc.s2(f"show create table shardddl1.{t}")[0][1] for t in ("tb1", "tb2")}
    f1, p1 = sc.s1("show master status")[0][:2]
    gtid2 = sc.s2("select @@gtid_binlog_pos")[0][0]
    rc, out, err = dmctl("pause-task", sc.files.name)
    assert rc == 0, out + err
    sc.steps(2)
    sc.stop_task()
    _sequence(sc)
    incr = sc.files.task("double-source-optimistic-incr.yaml", {"pos-holder": str(p1), "name-holder": f1,
                                                                "gtid-holder": gtid2}, out="task.yaml")
    sc.task, sc.sync = start_task(incr, sc.store, remove_meta=True, settle=False)
    sc.settle(paused_ok=True)
    errs = sc.errors()
    # As DM: source 2 logs no column names, and its tracker's first schema of tb2 (the upstream's table
    # of now, (a, c)) does not fit the rows at `meta`, which still have b: it pauses ("Column count
    # doesn't match" in DM) until each shard's schema is set as it was, then resumes.
    assert list(errs) == [S2] and "50025" in errs[S2] and "`shardddl1`.`tb2`" in errs[S2], errs
    # Source 1 logs names and went through its DDLs, which its lock members took from the merged
    # table's (a, b, c): paused, its tables are set as the upstream has them now (--from-source).
    # Source 2's are set from the saved schemas, as DM's operate-schema set does; both tell the lock
    # too (DM's --sync, on by default), so once source 2's tb2 drops b no shard has it any more.
    rc, out, err = dmctl("pause-task", sc.task.name, "-s", S1)
    assert rc == 0, out + err
    sc.steps(1)
    for t in ("tb1", "tb2"):
        rc, out, err = dmctl("binlog-schema", "update", sc.task.name, "shardddl1", t, "--from-source", "-s", S1)
        assert rc == 0 and "shard_ddl_lock" in out, out + err
    with tempfile.TemporaryDirectory() as d:
        for t, create in saved.items():
            path = os.path.join(d, f"{t}.sql")
            with open(path, "w") as f:
                f.write(create)
            rc, out, err = dmctl("binlog-schema", "update", sc.task.name, "shardddl1", t, path, "-s", S2)
            assert rc == 0 and "the schema given" in json.loads(out)["sources"][S2]["shard_ddl_lock"], out + err
    rc, out, err = dmctl("resume-task", sc.task.name)
    assert rc == 0, out + err
    sc.settle()
    assert sc.count() == 24 and sc.down_rows(["a", "c"]) == sc.union(["a", "c"])
    _all_shapes_equal(sc)
    _running(sc)


def dm_restart_task_master_worker(sc):
    _different_shapes(sc)
    sc.start()
    assert sc.count() == 4
    text = sc.files.task_file.read_text()

    def restart(i: int) -> None:
        if i in (1, 2):   # a worker killed and started again: a new session from its checkpoint
            sc.sync.restart(S1 if i == 1 else S2)
        elif i == 3:
            sc.stop_task()
            sc.start_again(text)
        else:             # last: the sessions keep the store they started with (their source fences)
            sc.restart_master()

    _sequence(sc, restart)
    _all_shapes_equal(sc)


def dm_stop_task_for_a_source(sc):
    init_table(sc, "111", "112", "211", "212")
    sc.start()
    _rows(sc, ("1", "2", "3", "4"))
    for src in (1, 2):
        sc.sql(src, "alter table shardddl1.tb1 add column b varchar(10)", "alter table shardddl1.tb2 add column b varchar(10)")
    _rows(sc, ("5,'aaa'", "6,'bbb'", "7,'ccc'", "8,'ddd'"))
    for src, n in ((1, 9), (2, 11)):
        sc.sql(src, "alter table shardddl1.tb1 add column c text", f"insert into shardddl1.tb1 values({n},'eee','eee')",
               "alter table shardddl1.tb2 drop column b", f"insert into shardddl1.tb2 values({n + 1})")
    sc.settle()
    assert sc.count() == 12
    rc, out, err = dmctl("stop-task", sc.files.name, "-s", S2)
    assert rc == 0 or "Airflow could not be told" in err, out + err
    assert sc.sync.sessions[S2].step().state == "stopped"
    del sc.sync.sessions[S2]
    sc.s1("alter table shardddl1.tb1 drop column b", "insert into shardddl1.tb1 values(13,'ggg')",
          "alter table shardddl1.tb2 add column c text", "insert into shardddl1.tb2 values(14,'hhh')")
    sc.settle()
    assert sc.count() == 14
    assert sc.columns(None, "shardddl", "tb") == ["id", "c"], "the stopped source's tables left the lock"
    # start-task -s mysql-replica-02: what dmctl records, then its sensor again
    from dm_core.state import lifecycle as lc

    sc.store.request_sources(sc.files.name, [S2], lc.RUNNING, all_sources=[S1, S2], clear_error=True)
    sc.sync.restart(S2)
    sc.s1("insert into shardddl1.tb1 values(15,'iii')", "insert into shardddl1.tb1 values(16,'jjj')")
    sc.s2("alter table shardddl1.tb1 drop column b", "insert into shardddl1.tb1 values(17,'kkk')",
          "alter table shardddl1.tb2 add column c text", "insert into shardddl1.tb2 values(18,'lll')")
    sc.assert_synced()
    _running(sc)


def dm_update_ba_route(sc):
    init_table(sc, "111", "121", "211", "221")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1)", "insert into shardddl2.tb1 values(2)")
    sc.s2("insert into shardddl1.tb1 values(3)", "insert into shardddl2.tb1 values(4)")
    for src in (1, 2):
        sc.sql(src, "alter table shardddl1.tb1 add column new_col1 int", "alter table shardddl2.tb1 add column new_col1 int")
    sc.s1("insert into shardddl1.tb1 values(5,5)", "insert into shardddl2.tb1 values(6,6)")
    sc.s2("insert into shardddl1.tb1 values(7,7)", "insert into shardddl2.tb1 values(8,8)")
    # source 1's shardddl2.tb1 adds a column and drops it again
    sc.s1("alter table shardddl2.tb1 add column new_col2 int", "insert into shardddl2.tb1 values(9,9,9)",
          "alter table shardddl2.tb1 drop column new_col2", "insert into shardddl2.tb1 values(10,10)")
    sc.s1("alter table shardddl1.tb1 add column new_col3 int", "insert into shardddl1.tb1 values(11,11,11)")
    sc.s2("alter table shardddl2.tb1 add column new_col3 int", "insert into shardddl2.tb1 values(12,12,12)")
    sc.s2("alter table shardddl1.tb1 drop column new_col1", "insert into shardddl1.tb1 values(13)")
    sc.settle()
    assert sc.count() == 13
    # the block-allow list narrowed to shardddl1, started again from the checkpoints
    original = sc.files.task_file.read_text()
    doc = yaml.safe_load(original)
    doc["block-allow-list"]["instance"]["do-dbs"] = ["shardddl1"]
    sc.stop_task()
    sc.start_again(yaml.safe_dump(doc, sort_keys=False))
    assert '"locks": []' in sc.locks()                      # DM: "no DDL lock exists"
    sc.s1("insert into shardddl1.tb1 values(14,14,14)")    # source 1: shardddl1.tb1 (id, new_col1, new_col3)
    sc.s2("insert into shardddl1.tb1 values(15)")          # source 2: shardddl1.tb1 (id)
    sc.settle()
    assert sc.count() == 15
    sc.s1("alter table shardddl1.tb1 drop column new_col1")
    sc.s2("alter table shardddl1.tb1 add column new_col3 int")
    sc.s1("insert into shardddl1.tb1 values(16,16)")
    sc.s2("insert into shardddl1.tb1 values(17,17)")
    sc.settle()
    assert sc.count() == 17
    # the original list again: shardddl2's shards still have new_col1, which the merged table dropped
    sc.stop_task()
    sc.start_again(original)
    sc.s1("insert into shardddl1.tb1 values(18,18)", "insert into shardddl2.tb1 values(19,19)")
    sc.s2("insert into shardddl1.tb1 values(20,20)", "insert into shardddl2.tb1 values(21,21,21)")
    # DM: the lock, rebuilt at the narrowed start from the tables the task then had, dropped
    # new_col1 downstream when source 1's shardddl1.tb1 dropped it; shardddl2's rows pause both
    # sources until the user adds it back downstream and resumes
    sc.settle(paused_ok=True)
    errs = sc.errors()
    assert len(errs) == 2 and all("Unknown column 'new_col1'" in e for e in errs.values()), errs
    sc.tidb("alter table shardddl.tb add column new_col1 int")
    rc, out, err = dmctl("resume-task", sc.task.name)
    assert rc == 0, out + err
    sc.settle()
    assert sc.count() == 21
    sc.s1("alter table shardddl2.tb1 drop column new_col1")
    sc.s2("alter table shardddl2.tb1 drop column new_col1")
    sc.s1("alter table shardddl2.tb1 add column new_col3 int")
    sc.s1("insert into shardddl1.tb1 values(22,22)", "insert into shardddl2.tb1 values(23,23)")
    sc.s2("insert into shardddl1.tb1 values(24,24)", "insert into shardddl2.tb1 values(25,25)")
    sc.assert_synced()
    _running(sc)


def dm_create_drop_table(sc):
    init_table(sc, "111", "121", "211", "221")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1)", "insert into shardddl2.tb1 values(2)")
    sc.s2("insert into shardddl1.tb1 values(3)", "insert into shardddl2.tb1 values(4)")
    # source 1: shardddl1.tb2 added, shardddl1.tb1 dropped
    sc.s1("create table shardddl1.tb2 (id int primary key)", "insert into shardddl1.tb2 values(5)",
          "drop table shardddl1.tb1")
    sc.s1("alter table shardddl1.tb2 add column new_col1 int", "alter table shardddl2.tb1 add column new_col1 int")
    sc.s2("alter table shardddl1.tb1 add column new_col1 int", "alter table shardddl2.tb1 add column new_col1 int")
    sc.s1("insert into shardddl2.tb1 values(6,6)")
    sc.s2("insert into shardddl1.tb1 values(7,7)", "insert into shardddl2.tb1 values(8,8)")
    sc.s1("insert into shardddl1.tb2 values(9,9)")
    # source 2: shardddl1.tb2 added with fewer columns, shardddl1.tb1 dropped
    sc.s2("create table shardddl1.tb2 (id int primary key)", "insert into shardddl1.tb2 values(10)",
          "drop table shardddl1.tb1")
    sc.s2("alter table shardddl2.tb1 drop column new_col1")
    sc.s1("insert into shardddl1.tb2 values(11,11)", "insert into shardddl2.tb1 values(12,12)")
    sc.s2("insert into shardddl1.tb2 values(13)", "insert into shardddl1.tb2 values(14)")
    # source 1's shardddl2.tb1 dropped; then no shard has new_col1
    sc.s1("drop table shardddl2.tb1")
    sc.s1("alter table shardddl1.tb2 drop column new_col1")
    sc.s1("insert into shardddl1.tb2 values(15)")
    sc.s2("insert into shardddl1.tb2 values(16)", "insert into shardddl2.tb1 values(17)")
    sc.settle()
    assert sc.count() == 17
    sc.s1("alter table shardddl1.tb2 add column new_col2 int")
    sc.s2("alter table shardddl1.tb2 add column new_col2 int", "alter table shardddl2.tb1 add column new_col2 int")
    sc.s1("insert into shardddl1.tb2 values(18,18)")
    sc.s2("insert into shardddl1.tb2 values(19,19)", "insert into shardddl2.tb1 values(20,20)")
    sc.settle()
    assert sc.count() == 20
    assert sc.columns(None, "shardddl", "tb") == ["id", "new_col2"]
    assert '"locks": []' in sc.locks()                      # DM: "no DDL lock exists"
    _running(sc)


def dm_change_utf_charset(sc):
    table = "(id int primary key, name varchar(10)) default character set utf8mb3 collate utf8mb3_bin"
    sc.s1(f"create table shardddl1.tb1 {table}", f"create table shardddl1.tb2 {table}")
    sc.s2(f"create table shardddl1.tb1 {table}", f"create table shardddl1.tb2 {table}")
    sc.start()
    sc.s1("alter table shardddl1.tb1 character set utf8mb4 collate utf8mb4_bin", "insert into shardddl1.tb1 values(1, 'a')",
          "alter table shardddl1.tb2 character set utf8mb4 collate utf8mb4_bin", "insert into shardddl1.tb2 values(2, 'b')")
    sc.s2("alter table shardddl1.tb1 character set utf8mb4 collate utf8mb4_bin", "insert into shardddl1.tb1 values(3, 'c')")
    # one shard left unchanged: optimistic mode must not hold the rows back
    sc.settle()
    assert sc.count() == 3
    create = sc.tidb("show create table shardddl.tb")[0][1]
    assert "CHARSET=utf8mb4" in create, create
    _running(sc)


SCENARIOS = [
    pytest.param(dm_different_schema_full, id="DIFFERENT_SCHEMA_FULL"),
    pytest.param(dm_different_schema_incremental, id="DIFFERENT_SCHEMA_INCREMENTAL"),
    pytest.param(dm_restart_task_master_worker, id="RESTART_TASK_MASTER_WORKER"),
    pytest.param(dm_stop_task_for_a_source, id="STOP_TASK_FOR_A_SOURCE"),
    pytest.param(dm_update_ba_route, id="UPDATE_BA_ROUTE"),
    pytest.param(dm_create_drop_table, id="CREATE_DROP_TABLE"),
    pytest.param(dm_change_utf_charset, id="CHANGE_UTF_CHARSET"),
]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_dm_shardddl_optimistic(scene_factory, scenario):  # noqa: F811
    scenario(scene_factory(CASE, "double-source-optimistic.yaml"))
