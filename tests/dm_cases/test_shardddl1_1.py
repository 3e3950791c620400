"""DM's `shardddl1_1` case (pingcap/tiflow dm/tests/shardddl1_1/run.sh), with DM's own task and
source files (conf/, vendored unchanged) and our own statements for its scenarios, one pytest
parameter per (scenario, task file) as DM's ``run_case`` (tests/dm_cases/shardddl_scene.py).

Scenarios (DM's numbers; ``init_table 111 211``: source, database and table digits):

* 006-009 (double-source-pessimistic): one shard on each source adds the same column and
  writes a row; the shards in the same or another database, under the same or another name;
* 010 / 013 (single-source, pessimistic / optimistic): two shards add two columns each,
  rows after each DDL; 014 (optimistic): the second shard adds them in the other order;
* 011 / 012 (pessimistic): the second source adds a column of another type, or the columns
  in the other order: it pauses naming both statements (DM's master: "is different with");
* 015 / 016: DROP DATABASE of the shards' database is skipped, CREATE DATABASE (IF NOT
  EXISTS) goes through; 017 / 018: the same for DROP TABLE and CREATE TABLE (IF NOT
  EXISTS): the merged table and its rows stay; 019 (both modes): TRUNCATE TABLE is skipped;
* 020 (no routes): RENAME TABLE of a replicated table, then rows into the new name;
  021 (pessimistic): a shard renamed within its target (DM runs the target's rename onto
  itself and ignores "already exists"); 022 (no routes): a rename onto a table the user
  created downstream ("already exists", ignored as DM does); 023 (pessimistic): one RENAME
  TABLE of two shards is refused;
* 026: a new shard created while syncing joins the group; 027: a new shard created with a
  column the merged table lacks: its rows are refused downstream (DM: "Unknown column
  'val'"), never written without that column;
* 030 (both modes): one source's shard adds a column while the other's writes rows of the
  old schema; 031 (both modes): two sources add one column with two types; 032
  (optimistic): a column added, dropped, another added; 033 (pessimistic): a NOT NULL
  column without default added shard by shard; 034 (both modes): a UNIQUE AUTO_INCREMENT
  column added shard by shard; 035 (optimistic): two columns added in two orders;
* SAME_DDL_TWICE (pessimistic): one column added and dropped again and again on the shards
  of source 2 while source 1 keeps it, then on source 1: five DDL rounds, rows between;
* BINARY_COLUMN (no sharding): a BINARY(16) primary key, inserted, updated, deleted, also by
  a 15-byte literal MySQL pads with a zero byte.

Not ported: 028 needs TiDB's clustered primary key (`primary key(a) clustered`, and TiDB's
refusal to drop it); DM's log greps become checks of the state (nothing paused, the
downstream table and rows kept).
"""

from __future__ import annotations

import re

import pytest

from .shardddl_scene import count, init_table

pytestmark = pytest.mark.integration

CASE = "shardddl1_1"


def _pairs(sc, *steps):
    """Statements per source, in order: ``(source, sql)``."""
    for source, sql in steps:
        sc.sql(source, sql)


# ---- 006 - 009 --------------------------------------------------------------------------------
def _two_sources(t1: str, t2: str):
    def scenario(sc):
        init_table(sc, "111", t2)
        sc.start()
        a, b = "shardddl1.tb1", f"shardddl{t2[1]}.tb{t2[2]}"
        _pairs(sc, (1, f"alter table {a} add column new_col1 int"), (1, f"insert into {a} values (1,1)"),
               (2, f"alter table {b} add column new_col1 int"), (2, f"insert into {b} values (2,2)"))
        sc.assert_synced()
    return scenario


# ---- 010 - 014 --------------------------------------------------------------------------------
def _two_columns(second_order: tuple[str, str]):
    def scenario(sc):
        init_table(sc, "111", "112")
        sc.start()
        sc.s1("alter table shardddl1.tb1 add column new_col1 int", "insert into shardddl1.tb1 values (1,1)",
              "alter table shardddl1.tb1 add column new_col2 int", "insert into shardddl1.tb1 values (2,2,2)",
              f"alter table shardddl1.tb2 add column {second_order[0]} int", "insert into shardddl1.tb2 values (3,3)",
              f"alter table shardddl1.tb2 add column {second_order[1]} int", "insert into shardddl1.tb2 values (4,4,4)")
        if second_order == ("new_col1", "new_col2"):
            sc.assert_synced()
        else:  # DM_014: only the count
            sc.settle()
            assert sc.count() == 4
    return scenario


def _different(second: list[str], values: list[str]):
    def scenario(sc):
        init_table(sc, "111", "211")
        sc.start()
        sc.s1("alter table shardddl1.tb1 add column new_col1 int", "insert into shardddl1.tb1 values (1,1)",
              "alter table shardddl1.tb1 add column new_col2 int", "insert into shardddl1.tb1 values (2,2,2)")
        sc.s2(f"alter table shardddl1.tb1 add column {second[0]}", f"insert into shardddl1.tb1 values ({values[0]})",
              f"alter table shardddl1.tb1 add column {second[1]}", f"insert into shardddl1.tb1 values ({values[1]})")
        sc.settle(paused_ok=True)
        sc.steps(3)
        errs = sc.errors()
        assert list(errs) == ["mysql-replica-02"], errs
        err = errs["mysql-replica-02"]
        assert "ADD COLUMN `new_col1` INT" in err and f"ADD COLUMN `{second[0].split()[0]}`" in err, err
        assert "inconsistent" in err.lower()
    return scenario


# ---- 015 - 019: database / table drops, creates, truncates --------------------------------------
def _drop_create_database(create: str):
    def scenario(sc):
        init_table(sc, "111")
        sc.start()
        sc.s1("insert into shardddl1.tb1 values (1)")
        sc.settle()
        sc.s1("drop database shardddl1")
        sc.settle()
        assert not sc.errors() and sc.count() == 1, "DROP DATABASE of a shard's database is skipped"
        sc.s1(create)
        sc.settle()
        assert not sc.errors() and sc.count() == 1
    return scenario


def _drop_create_table(create: str):
    def scenario(sc):
        init_table(sc, "111")
        sc.start()
        sc.s1("insert into shardddl1.tb1 values (1)")
        sc.settle()
        sc.s1("drop table shardddl1.tb1")
        sc.settle()
        assert not sc.errors() and sc.count() == 1, "DROP TABLE of a shard is skipped"
        sc.s1(create)
        sc.settle()
        assert not sc.errors() and sc.count() == 1
        assert sc.columns(None, "shardddl", "tb") == ["id"]
    return scenario


def dm_019(sc):
    init_table(sc, "111")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values (1)")
    sc.settle()
    sc.s1("truncate table shardddl1.tb1")
    sc.settle()
    assert not sc.errors() and sc.count() == 1, "TRUNCATE TABLE of a shard is skipped"


# ---- 020 - 023: RENAME TABLE -----------------------------------------------------------------------
def dm_020(sc):
    init_table(sc, "111")
    sc.start()
    sc.s1("rename table shardddl1.tb1 to shardddl1.tb2", "insert into shardddl1.tb2 values (1)")
    sc.settle()
    assert [r[0] for r in sc.tidb("show tables from shardddl1")] == ["tb2"]
    assert sc.tidb("select count(1) from shardddl1.tb2")[0][0] == 1


def dm_021(sc):
    init_table(sc, "111")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values (1)")
    sc.s1("rename table shardddl1.tb1 to shardddl1.tb2")   # same as renaming shardddl.tb to shardddl.tb
    sc.s1("insert into shardddl1.tb2 values (2)")
    sc.assert_synced()


def dm_022(sc):
    init_table(sc, "111")
    sc.start()
    sc.tidb("create table shardddl1.tb2 (id int)")
    sc.s1("rename table shardddl1.tb1 to shardddl1.tb2")  # downstream: "Table 'tb2' already exists", ignored by DM
    sc.settle()
    assert not sc.errors()


def dm_023(sc):
    init_table(sc, "111", "112")
    sc.start()
    sc.s1("rename table shardddl1.tb1 to shardddl1.tb3, shardddl1.tb2 to shardddl1.tb4")
    sc.settle(paused_ok=True)
    err = sc.errors().get("mysql-replica-01", "")   # DM: "rename table .* not supported"
    assert "not supported" in err and "rename table shardddl1.tb1 to shardddl1.tb3, shardddl1.tb2 to" in err, err
    assert count(sc.status(), "not supported") >= 1


# ---- 026 - 027: new shards -------------------------------------------------------------------------
def dm_026(sc):
    init_table(sc, "111", "112")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values (1)", "insert into shardddl1.tb2 values (2)",
          "create table shardddl1.tb3(id int primary key)",
          "insert into shardddl1.tb1 values (3)", "insert into shardddl1.tb2 values (4)",
          "insert into shardddl1.tb3 values (5)")
    sc.assert_synced()


def dm_027(sc):
    init_table(sc, "111", "112")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values (1)", "insert into shardddl1.tb2 values (2)",
          "create table shardddl1.tb3(id int,val int)",
          "insert into shardddl1.tb1 values (3)", "insert into shardddl1.tb2 values (4)",
          "insert into shardddl1.tb3 values (5,6)")
    sc.settle(paused_ok=True)
    sc.steps(2)
    errs = sc.errors()
    assert list(errs) == ["mysql-replica-01"] and "val" in errs["mysql-replica-01"], errs
    assert count(sc.status(), r"Unknown column 'val'") >= 1
    assert sorted(r[0] for r in sc.tidb("select id from shardddl.tb")) == [1, 2, 3, 4], \
        "the rows before it are in, the row with the unknown column is not written without it"


# ---- 030 - 035 --------------------------------------------------------------------------------------
def dm_030(sc):
    init_table(sc, "111", "211")
    sc.start()
    _pairs(sc, (1, "alter table shardddl1.tb1 add new_col1 int"), (1, "insert into shardddl1.tb1 values(1,1)"),
           (2, "insert into shardddl1.tb1 values(2)"), (2, "alter table shardddl1.tb1 add new_col1 int"),
           (1, "insert into shardddl1.tb1 values(3,3)"), (2, "insert into shardddl1.tb1 values(4,4)"))
    sc.assert_synced()


def dm_031(sc):
    init_table(sc, "111", "211")
    sc.start()
    _pairs(sc, (1, "alter table shardddl1.tb1 add new_col1 int"), (1, "insert into shardddl1.tb1 values(1,1)"),
           (2, "insert into shardddl1.tb1 values(2)"), (2, "alter table shardddl1.tb1 add new_col1 varchar(10)"),
           (1, "insert into shardddl1.tb1 values(3,3)"), (2, "insert into shardddl1.tb1 values(4,'dkfj')"))
    sc.settle(paused_ok=True)
    sc.steps(3)
    errs = sc.errors()
    assert list(errs) == ["mysql-replica-02"], errs
    err, status = errs["mysql-replica-02"], sc.status()
    if sc.task.shard_mode == "pessimistic":  # DM's master: "is different with"
        assert "ADD COLUMN `new_col1` INT" in err and "ADD COLUMN `new_col1` VARCHAR(10)" in err, err
    else:  # DM: the statement and the table in query-status
        assert count(status, re.escape("ALTER TABLE `shardddl`.`tb` ADD COLUMN `new_col1`")) >= 1, status
        assert "`shardddl1`.`tb1`" in err and "new_col1" in err, err


def dm_032(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    _pairs(sc, (1, "alter table shardddl1.tb1 add new_col1 int"), (1, "insert into shardddl1.tb1 values(1,1)"),
           (1, "alter table shardddl1.tb1 drop column new_col1"), (1, "insert into shardddl1.tb1 values(2)"),
           (1, "alter table shardddl1.tb1 add new_col2 float"), (1, "insert into shardddl1.tb1 values(3,3.0)"),
           (2, "alter table shardddl1.tb1 add new_col2 float"), (1, "insert into shardddl1.tb1 values(4,4.0)"),
           (2, "insert into shardddl1.tb1 values(5,5.0)"), (2, "insert into shardddl1.tb2 values(6)"),
           (2, "alter table shardddl1.tb2 add new_col2 float"), (1, "insert into shardddl1.tb1 values(7,7.0)"),
           (2, "insert into shardddl1.tb1 values(8,8.0)"), (2, "insert into shardddl1.tb2 values(9,9.0)"))
    sc.assert_synced()


def dm_033(sc):
    table = "(a int primary key, b int)"
    sc.s1(f"create table shardddl1.tb1 {table}")
    sc.s2(f"create table shardddl1.tb1 {table}", f"create table shardddl1.tb2 {table}")
    sc.start()
    _pairs(sc, (1, "alter table shardddl1.tb1 add new_col1 int not null"), (1, "insert into shardddl1.tb1 values(1,1,1)"),
           (2, "insert into shardddl1.tb1 values(2,null)"), (2, "alter table shardddl1.tb1 add new_col1 int not null"),
           (1, "insert into shardddl1.tb1 values(3,3,3)"), (2, "insert into shardddl1.tb1 values(4,4,4)"),
           (2, "insert into shardddl1.tb2 values(5,null)"), (2, "alter table shardddl1.tb2 add new_col1 int not null"))
    sc.assert_synced()


def dm_034(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    _pairs(sc, (1, "alter table shardddl1.tb1 add new_col1 int unique auto_increment"),
           (1, "insert into shardddl1.tb1 values(1,0)"), (2, "insert into shardddl1.tb1 values(2)"),
           (2, "alter table shardddl1.tb1 add new_col1 int unique auto_increment"),
           (1, "insert into shardddl1.tb1 values(3,0)"), (2, "insert into shardddl1.tb1 values(4,0)"),
           (2, "insert into shardddl1.tb2 values(5)"),
           (2, "alter table shardddl1.tb2 add new_col1 int unique auto_increment"))
    sc.settle(paused_ok=True)
    sc.steps(3)
    errs, status = sc.errors(), sc.status()
    assert set(errs) == {"mysql-replica-01", "mysql-replica-02"}, errs  # each source, at its first such DDL
    if sc.task.shard_mode == "pessimistic":   # DM: TiDB refuses the owner's DDL
        assert count(status, "unsupported add column 'new_col1' constraint UNIQUE KEY when altering") >= 1, status
    else:                                     # DM: the optimistic lock's conflict
        assert count(status, "there will be conflicts") >= 2, status
    # nothing of the shards' own numbering reached the merged table (it had overwritten rows)
    assert sc.columns(None, "shardddl", "tb") == ["id"]
    assert sc.down_rows() == [(2,)]


def dm_035(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    _pairs(sc, (1, "alter table shardddl1.tb1 add new_col1 int"), (1, "alter table shardddl1.tb1 add new_col2 int"),
           (1, "insert into shardddl1.tb1 values(1,1,1)"), (2, "insert into shardddl1.tb1 values(2)"),
           (2, "insert into shardddl1.tb2 values(3)"),
           (2, "alter table shardddl1.tb1 add new_col2 int"), (2, "alter table shardddl1.tb1 add new_col1 int"),
           (1, "insert into shardddl1.tb1 values(4,4,4)"), (2, "insert into shardddl1.tb1 values(5,5,5)"),
           (2, "insert into shardddl1.tb2 values(6)"),
           (2, "alter table shardddl1.tb2 add new_col2 int"), (2, "alter table shardddl1.tb2 add new_col1 int"),
           (1, "insert into shardddl1.tb1 values(7,7,7)"), (2, "insert into shardddl1.tb1 values(8,8,8)"),
           (2, "insert into shardddl1.tb2 values(9,9,9)"))
    sc.settle()
    assert sc.count() == 9


# ---- SAME_DDL_TWICE, BINARY_COLUMN -----------------------------------------------------------------
def dm_same_ddl_twice(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    has = {(1, "tb1"): False, (2, "tb1"): False, (2, "tb2"): False}
    n = 0

    def rows():
        nonlocal n
        for (src, tb), col in has.items():
            n += 1
            sc.sql(src, f"insert into shardddl1.{tb} values({n}{f',{n}' if col else ''})")

    def ddl(src, tb, add):
        sc.sql(src, f"alter table shardddl1.{tb} {'add new_col1 int' if add else 'drop new_col1'}")
        has[(src, tb)] = add

    ddl(1, "tb1", True)
    rows()
    for src, tb in [(2, "tb1"), (2, "tb2")]:      # source 2's shards: add, drop, add, drop, add
        for add in (True, False, True, False, True):
            ddl(src, tb, add)
            rows()
    for add in (False, True, False, True):        # source 1's shard: drop, add, drop, add
        ddl(1, "tb1", add)
        rows()
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["id", "new_col1"]


def dm_binary_column(sc):
    sc.s1("create table shardddl1.tb1 (a int, b binary(16) primary key)")
    sc.start()
    full, short = "0xBF500C00A2034521B819D6EB7065D200", "0xBF500C00A2034521B819D6EB7065D2"
    for value in (full, short):   # the 15-byte literal is padded with a zero byte by MySQL: the same key
        sc.s1(f"insert into shardddl1.tb1(a,b) values(1,{value})")
        sc.assert_synced()
        sc.s1(f"update shardddl1.tb1 set a=2 where b={full}")
        sc.assert_synced()
        sc.s1(f"delete from shardddl1.tb1 where b={full}")
        sc.assert_synced()
    assert sc.count() == 0


SCENARIOS = [
    pytest.param(_two_sources("111", "211"), "double-source-pessimistic", id="006"),
    pytest.param(_two_sources("111", "212"), "double-source-pessimistic", id="007"),
    pytest.param(_two_sources("111", "221"), "double-source-pessimistic", id="008"),
    pytest.param(_two_sources("111", "222"), "double-source-pessimistic", id="009"),
    pytest.param(_two_columns(("new_col1", "new_col2")), "single-source-pessimistic", id="010"),
    pytest.param(_different(["new_col1 float", "new_col2 float"], ["3,3.0", "4,4.0,4.0"]),
                 "double-source-pessimistic", id="011"),
    pytest.param(_different(["new_col2 int", "new_col1 int"], ["3,3", "4,4,4"]), "double-source-pessimistic",
                 id="012"),
    pytest.param(_two_columns(("new_col1", "new_col2")), "single-source-optimistic", id="013"),
    pytest.param(_two_columns(("new_col2", "new_col1")), "single-source-optimistic", id="014"),
    pytest.param(_drop_create_database("create database shardddl1"), "single-source-pessimistic", id="015"),
    pytest.param(_drop_create_database("create database if not exists shardddl1"), "single-source-pessimistic",
                 id="016"),
    pytest.param(_drop_create_table("create table shardddl1.tb1(id int)"), "single-source-pessimistic", id="017"),
    pytest.param(_drop_create_table("create table if not exists shardddl1.tb1(id int)"), "single-source-pessimistic",
                 id="018"),
    pytest.param(dm_019, "single-source-pessimistic", id="019-pessimistic"),
    pytest.param(dm_019, "single-source-optimistic", id="019-optimistic"),
    pytest.param(dm_020, "single-source-no-routes", id="020"),
    pytest.param(dm_021, "single-source-pessimistic", id="021"),
    pytest.param(dm_022, "single-source-no-routes", id="022"),
    pytest.param(dm_023, "double-source-pessimistic", id="023"),
    pytest.param(dm_026, "single-source-pessimistic", id="026"),
    pytest.param(dm_027, "single-source-pessimistic", id="027"),
    pytest.param(dm_030, "double-source-pessimistic", id="030-pessimistic"),
    pytest.param(dm_030, "double-source-optimistic", id="030-optimistic"),
    pytest.param(dm_031, "double-source-pessimistic", id="031-pessimistic"),
    pytest.param(dm_031, "double-source-optimistic", id="031-optimistic"),
    pytest.param(dm_032, "double-source-optimistic", id="032-optimistic"),
    pytest.param(dm_033, "double-source-pessimistic", id="033-pessimistic"),
    pytest.param(dm_034, "double-source-pessimistic", id="034-pessimistic"),
    pytest.param(dm_034, "double-source-optimistic", id="034-optimistic"),
    pytest.param(dm_035, "double-source-optimistic", id="035-optimistic"),
    pytest.param(dm_same_ddl_twice, "double-source-pessimistic", id="SAME_DDL_TWICE-pessimistic"),
    pytest.param(dm_binary_column, "single-source-no-sharding", id="BINARY_COLUMN"),
]


@pytest.mark.parametrize("scenario, conf", SCENARIOS)
def test_dm_shardddl1_1_up2_logs_no_column_names(scene_factory, scenario, conf):  # noqa: F811
    scenario(scene_factory(CASE, f"{conf}.yaml"))
