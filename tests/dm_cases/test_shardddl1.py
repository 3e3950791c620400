"""DM's `shardddl1` case (pingcap/tiflow dm/tests/shardddl1/run.sh), with DM's own task and
source files (conf/, vendored unchanged) and our own statements for its scenarios, one pytest
parameter per (scenario, task file) as DM's ``run_case NAME TASK_FILE INIT CLEAN MODE``
(tests/dm_cases/shardddl_scene.py is DM's run_case and shardddl_lib.sh).

Scenarios (DM's function names):

* 001 (single-source-no-sharding): two tables merged without sharding coordination both add
  the same column: the second ADD COLUMN meets "Duplicate column name" downstream, which DM
  ignores (it ignores "already exists" kinds of DDL errors); the task stays synced;
* 002 / 005 (single-source-pessimistic): both shards add a column (005: rows between);
* 003 (pessimistic): one shard adds a column and writes a row: the row is held back until
  the other shard has the column too (sync-diff fails, then passes);
* 004 (single-source-optimistic): the row of the shard that added the column lands at once;
* RENAME_TABLE: three shards on two sources add a column, are renamed (tb1 → tb3, tb2 → tb4:
  the same target), add another column, rows between every step: pessimistic mode merges
  everything (the rename is coordinated like any shard DDL; DM runs the target's rename onto
  itself downstream and ignores "already exists"); optimistic mode pauses both sources with
  DM's "`RENAME TABLE` statement not supported in optimistic mode";
* ADD_DROP_COLUMNS (both modes): ALTERs of several changes (add three columns; drop two; add
  one and drop one; drop one and add one) run shard after shard with a row into every shard
  after each; the merged table equals the union after each stage;
* RemoveLock (both modes): every shard adds a column (one lock round), then source 1 drops
  a column while no coordinator round has run since (DM's master sleeps while it removes
  the finished lock), then changes the key column's type and default; the other shards
  follow: the union is equal and the merged table has the final columns;
* RestartMaster (both modes): two sources add a column `c` of different types (DOUBLE, TEXT):
  the second source pauses naming both statements (pessimistic: the lock's and its own;
  optimistic: the column's two definitions, source 1's change already downstream), and
  query-status / shard-ddl-lock show what DM's checks grep for; the same after the
  coordinator restarts (DM-master), whose state is all in the state store. Deviation: DM's
  pessimistic worker waits without an error state (the master logs the difference);
  shardflow pauses the source with the error, as its conflicts do;
* COLUMN_INDEX (both modes): the same with a column and an index changed in one ALTER (add
  column + add index, drop column + drop index, drop column + add index, add column + drop
  index);
* CAUSALITY (single-source-no-sharding: compact, multiple-rows, 10 workers): a key update
  and a re-insert of the freed unique value; CAUSALITY_USE_DOWNSTREAM_SCHEMA: the same into a
  target the user made with an AUTO_INCREMENT primary key the upstream lacks and a NULL-able
  unique key (rows are written by every column they carry; causality must also key on the
  unique index), then the user swaps the target for another shape;
* COMPACT: 100 rounds of insert, updates, a key update, delete, re-insert on one row;
  COMPACT_USE_DOWNSTREAM_SCHEMA: 11 such rounds into a user-made target keyed downstream by
  its NOT NULL unique key (its AUTO_INCREMENT primary key is not in the rows);
* MULTIPLE_ROWS: multi-row inserts, updates (of values, unique and primary keys) and
  deletes, twice, then 100 more rows;
* KEY_NOT_FOUND (double-source-optimistic): rows deleted downstream by hand, then updated
  and deleted upstream: nothing pauses, the union is equal (empty);
* RENAME_COLUMN_OPTIMISTIC, UpdateBARule (optimistic): ported in full; the column renames are
  held back shard by shard with every source running (DM's ConflictSkipWaitRedirect), the
  last one runs downstream and the held rows are replayed; UpdateBARule's tables that left the
  block-allow list leave the lock at the coordinator's next round (DM checks with retries).

Not ported (DM internals): the log lines and metrics DM greps (compact and causality
counts, "putted shard DDL info", the master's "found new DDL info"); the failpoints become
what they cause: a slow downstream is a large batch here, DM-master's sleep while it removes
a lock is sources stepping with no coordinator round (``Scene.sources_only``), the safe-mode
start phase is the task's own. DML_EXECUTE_ERROR is commented out in DM's run().
"""

from __future__ import annotations

import re

import pytest
import yaml

from .shardddl_scene import count, init_table

pytestmark = pytest.mark.integration

CASE = "shardddl1"


# ---- 001 - 005 --------------------------------------------------------------------------------
def dm_001(sc):
    init_table(sc, "111", "112")
    sc.start()
    sc.s1("alter table shardddl1.tb1 add column new_col1 int")
    sc.s1("alter table shardddl1.tb2 add column new_col1 int")
    sc.settle()
    st = sc.status_json()
    assert not sc.errors() and all(s["stage"] != "paused" for s in st["sources"]), st
    assert sc.columns(None, "shardddl", "tb") == ["id", "new_col1"]


def dm_002(sc):
    init_table(sc, "111", "112")
    sc.start()
    sc.s1("alter table shardddl1.tb1 add column new_col1 int")
    sc.s1("alter table shardddl1.tb2 add column new_col1 int")
    sc.assert_synced()


def dm_003(sc):
    init_table(sc, "111", "112")
    sc.start()
    sc.s1("alter table shardddl1.tb1 add column new_col1 int")
    sc.s1("insert into shardddl1.tb1 values (1,1)")
    sc.steps()
    assert sc.diff(), "the row of the shard past the DDL is held back (DM's sync-diff fails)"
    assert sc.count() == 0
    sc.s1("alter table shardddl1.tb2 add column new_col1 int")
    sc.assert_synced()


def dm_004(sc):
    init_table(sc, "111", "112")
    sc.start()
    sc.s1("alter table shardddl1.tb1 add column new_col1 int")
    sc.s1("insert into shardddl1.tb1 values (1,1)")
    sc.settle()
    assert sc.count() == 1
    sc.s1("alter table shardddl1.tb2 add column new_col1 int")
    sc.s1("insert into shardddl1.tb2 values (2,2)")
    sc.assert_synced()


def dm_005(sc):
    init_table(sc, "111", "112")
    sc.start()
    sc.s1("alter table shardddl1.tb1 add column new_col1 int")
    sc.s1("insert into shardddl1.tb1 values (1,1)")
    sc.s1("alter table shardddl1.tb2 add column new_col1 int")
    sc.s1("insert into shardddl1.tb2 values (2,2)")
    sc.assert_synced()


# ---- RENAME_TABLE -------------------------------------------------------------------------------
def dm_rename_table(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1)")
    sc.s2("insert into shardddl1.tb1 values(2)", "insert into shardddl1.tb2 values(3)")
    sc.s1("alter table shardddl1.tb1 add column a int")
    sc.s2("alter table shardddl1.tb1 add column a int", "alter table shardddl1.tb2 add column a int")
    sc.s1("insert into shardddl1.tb1 values(4,4)")
    sc.s2("insert into shardddl1.tb1 values(5,5)", "insert into shardddl1.tb2 values(6,6)")
    sc.s1("rename table shardddl1.tb1 to shardddl1.tb3")
    sc.s2("rename table shardddl1.tb1 to shardddl1.tb3", "rename table shardddl1.tb2 to shardddl1.tb4")
    sc.s1("insert into shardddl1.tb3 values(7,7)")
    sc.s2("insert into shardddl1.tb3 values(8,8)", "insert into shardddl1.tb4 values(9,9)")
    sc.s1("alter table shardddl1.tb3 add column b int")
    sc.s2("alter table shardddl1.tb3 add column b int", "alter table shardddl1.tb4 add column b int")
    sc.s1("insert into shardddl1.tb3 values(10,10,10)")
    sc.s2("insert into shardddl1.tb3 values(11,11,11)", "insert into shardddl1.tb4 values(12,12,12)")
    if sc.task.shard_mode == "pessimistic":
        sc.assert_synced()
        return
    sc.settle(paused_ok=True)
    sc.steps(3)
    errs = sc.errors()
    assert len(errs) == 2 and all("`RENAME TABLE` statement not supported in optimistic mode" in e
                                  for e in errs.values()), errs
    assert count(sc.status(), "`RENAME TABLE` statement not supported in optimistic mode") >= 2


# ---- ADD_DROP_COLUMNS, COLUMN_INDEX ---------------------------------------------------------------
def _three_tables(sc, columns: str) -> None:
    sc.s1(f"create table shardddl1.tb1 ({columns})")
    sc.s2(f"create table shardddl1.tb1 ({columns})", f"create table shardddl1.tb2 ({columns})")


def _shard_by_shard(sc, stage: int, ddl: str, rows: list[tuple[str, str, str]]) -> None:
    """DM's pattern: source 1's tb1 runs ``ddl``, then source 2's tb1, then its tb2; after each,
    one row into every shard (``rows``: the three shards' VALUES lists for the three steps,
    ``{n}`` the row number, 10 * stage + 1 ... + 9)."""
    n = 10 * stage
    for step, (source, table) in enumerate([(1, "tb1"), (2, "tb1"), (2, "tb2")]):
        sc.sql(source, ddl.format(t=f"shardddl1.{table}"))
        for (src, tb), values in zip([(1, "tb1"), (2, "tb1"), (2, "tb2")], rows[step]):
            n += 1
            sc.sql(src, f"insert into shardddl1.{tb} values({values.format(n=n)})")


def dm_add_drop_columns(sc):
    _three_tables(sc, "a int primary key, id datetime")
    sc.start()
    old, new = "{n},now()", "{n},now(),{n},{n},{n}"
    _shard_by_shard(sc, 0, "alter table {t} add column col1 int, add column col2 int, add column col3 int",
                    [(new, old, old), (new, new, old), (new, new, new)])
    sc.assert_synced()
    old, new = "{n},now(),{n},{n},{n}", "{n},now(),{n}"
    _shard_by_shard(sc, 1, "alter table {t} drop column col1, drop column col2",
                    [(new, old, old), (new, new, old), (new, new, new)])
    sc.assert_synced()
    one = "{n},now(),{n}"
    _shard_by_shard(sc, 2, "alter table {t} add column col4 int, drop column col3", [(one,) * 3] * 3)
    sc.assert_synced()
    _shard_by_shard(sc, 3, "alter table {t} drop column col4, add column col5 int", [(one,) * 3] * 3)
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["a", "id", "col5"]


def dm_column_index(sc):
    _three_tables(sc, "a int primary key, col1 int, col2 int")
    sc.start()
    three, four = "{n},{n},{n}", "{n},{n},{n},{n}"
    _shard_by_shard(sc, 0, "alter table {t} add column col3 int, add index idx_col1(col1)",
                    [(four, three, three), (four, four, three), (four, four, four)])
    _shard_by_shard(sc, 1, "alter table {t} drop column col2, drop index idx_col1",
                    [(three, four, four), (three, three, four), (three, three, three)])
    two = "{n},{n}"
    _shard_by_shard(sc, 2, "alter table {t} drop column col1, add index idx_col3(col3)",
                    [(two, three, three), (two, two, three), (two, two, two)])
    _shard_by_shard(sc, 3, "alter table {t} add column col4 int, drop index idx_col3",
                    [(three, two, two), (three, three, two), (three, three, three)])
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["a", "col3", "col4"]
    assert sc.indexes() == ["PRIMARY"]


# ---- RestartMaster ---------------------------------------------------------------------------------
def dm_restart_master(sc):
    sc.s1("create table shardddl1.tb1 (a int primary key, b varchar(10))")
    sc.s2("create table shardddl1.tb1 (a int primary key, b varchar(10))")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,'aaa')")
    sc.s2("insert into shardddl1.tb1 values(2,'bbb')")
    sc.assert_synced()
    sc.s1("alter table shardddl1.tb1 add column c double")
    sc.steps(3)
    sc.s2("alter table shardddl1.tb1 add column c text")
    sc.settle(paused_ok=True)
    sc.steps(3)
    double, text = "ALTER TABLE `shardddl`.`tb` ADD COLUMN `c` DOUBLE", "ALTER TABLE `shardddl`.`tb` ADD COLUMN `c` TEXT"
    for restarted in (False, True):  # DM-master restarted: the same locks and the same pause after
        if restarted:
            sc.restart_master()
            sc.steps(3)
        status, locks = sc.status(), sc.locks()
        errs = sc.errors()
        assert list(errs) == ["mysql-replica-02"], errs  # the source whose DDL does not fit
        if sc.task.shard_mode == "pessimistic":
            # DM: both statements in query-status (blocking DDLs, unresolved groups), the lock's in shard-ddl-lock
            assert count(status, re.escape(double)) >= 2 and count(status, re.escape(text)) >= 2, status
            assert count(locks, re.escape("ALTER TABLE `shardddl`.`tb` ADD COLUMN `c`")) >= 1, locks
            assert "c" not in sc.columns(None, "shardddl", "tb")
        else:
            # DM: the conflicting statement and its table; both members in shard-ddl-lock
            assert count(status, re.escape(text)) >= 1 and "mysql-replica-02 `shardddl1`.`tb1`" in errs[
                "mysql-replica-02"], status
            assert count(locks, re.escape(text)) >= 1, locks
            assert "mysql-replica-01 `shardddl1`.`tb1`" in locks and "mysql-replica-02 `shardddl1`.`tb1`" in locks
            assert sc.columns(None, "shardddl", "tb") == ["a", "b", "c"]  # source 1's column went ahead


# ---- RemoveLock ------------------------------------------------------------------------------------
def dm_remove_lock(sc):
    table = "(a int primary key, b varchar(10))"
    sc.s1(f"create table shardddl1.tb1 {table}")
    sc.s2(f"create table shardddl1.tb1 {table}", f"create table shardddl1.tb2 {table}")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,'aaa')")
    sc.s2("insert into shardddl1.tb1 values(2,'bbb')", "insert into shardddl1.tb2 values(3,'ccc')")
    sc.s1("alter table shardddl1.tb1 add column c double")
    sc.s2("alter table shardddl1.tb1 add column c double", "alter table shardddl1.tb2 add column c double")
    sc.steps(4)
    # DM-master sleeps while it removes the finished lock (failpoint SleepWhenRemoveLock): no
    # coordinator round runs while source 1 reports its next DDL for the same target
    sc.s1("alter table shardddl1.tb1 drop column b")
    sc.sources_only(4)
    sc.s1("alter table shardddl1.tb1 change a a bigint default 10")
    sc.s2("alter table shardddl1.tb1 drop column b", "alter table shardddl1.tb1 change a a bigint default 10",
          "alter table shardddl1.tb2 drop column b", "alter table shardddl1.tb2 change a a bigint default 10")
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["a", "c"]


# ---- not sharded: compactor, causality, multiple rows, keys not found --------------------------------
def dm_causality(sc):
    sc.s1("create table shardddl1.tb1 (a int primary key, b int unique)")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,2)", "insert into shardddl1.tb1 values(2,3)",
          "update shardddl1.tb1 set a=3, b=4 where b=3", "delete from shardddl1.tb1 where a=1",
          "insert into shardddl1.tb1 values(1,3)")
    sc.assert_synced()
    assert sc.down_rows() == [(1, 3), (3, 4)]


def _swap_downstream(sc, create: str, columns: str) -> None:
    """DM's check: the user replaces the merged table by one of another shape, rows copied."""
    sc.tidb(f"create table shardddl.tb_temp {create}",
            f"insert into shardddl.tb_temp ({columns}) select {columns} from shardddl.tb",
            "drop table shardddl.tb", "rename table shardddl.tb_temp to shardddl.tb")


def dm_causality_use_downstream_schema(sc):
    sc.s1("create table shardddl1.tb1 (a int primary key, b int unique)")
    sc.tidb("create database shardddl",
            "create table shardddl.tb (a int, b int unique, c int primary key auto_increment) auto_increment = 100")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,2)", "insert into shardddl1.tb1 values(2,3)",
          "update shardddl1.tb1 set a=3, b=4 where b=3", "delete from shardddl1.tb1 where a=1",
          "insert into shardddl1.tb1 values(1,3)")
    sc.settle()
    assert sc.down_rows(["a", "b"]) == [(1, 3), (3, 4)]
    _swap_downstream(sc, "(a int primary key, b int unique)", "a, b")
    sc.assert_synced()


def dm_compact(sc):
    sc.s1("create table shardddl1.tb1 (a int primary key, b int unique, c int)")
    sc.start()
    stmts = []
    for i in range(1, 101):
        stmts += [f"insert into shardddl1.tb1(a,b) values({i},{i})", f"update shardddl1.tb1 set c=1 where a={i}",
                  f"update shardddl1.tb1 set c=c+1 where a={i}", f"update shardddl1.tb1 set b=b+1 where a={i}",
                  f"update shardddl1.tb1 set a=a+100 where a={i}", f"delete from shardddl1.tb1 where a={i + 100}",
                  f"insert into shardddl1.tb1(a,b) values({i},{i})"]
    sc.s1(*stmts)
    sc.assert_synced()
    assert sc.count() == 100


def dm_compact_use_downstream_schema(sc):
    sc.s1("create table shardddl1.tb1 (a int primary key, b int unique not null, c int)")
    sc.tidb("create database shardddl", "create table shardddl.tb (a int, b int unique not null, c int, "
                                        "d int primary key auto_increment) auto_increment = 100")
    sc.start()
    stmts = []
    for i in range(0, 11):
        stmts += [f"insert into shardddl1.tb1(a,b,c) values({i + 100},{i},{i})",
                  f"update shardddl1.tb1 set c=20 where a={i + 100}", f"update shardddl1.tb1 set c=c+1 where a={i + 100}",
                  f"update shardddl1.tb1 set b=b+1 where a={i + 100}",    # the downstream's key b changes
                  f"update shardddl1.tb1 set a=a+100 where a={i + 100}",
                  f"delete from shardddl1.tb1 where a={i + 200}",
                  f"insert into shardddl1.tb1(a,b,c) values({i + 100},{i},{i})"]
    sc.s1(*stmts)
    sc.settle()
    assert sc.count() == 11
    assert sc.down_rows(["a", "b", "c"]) == sc.union(["a", "b", "c"])
    _swap_downstream(sc, "(a int primary key auto_increment, b int unique not null, c int) auto_increment = 100",
                     "a, b, c")
    sc.assert_synced()


def _multiple_rows_round(sc, base: int = 1) -> list[str]:
    ten = range(base, base + 100, 10)
    return ([f"insert into shardddl1.tb1(a,b) values{','.join(f'({j},{j})' for j in range(i, i + 10))}" for i in ten]
            + [f"update shardddl1.tb1 set c=1 where a>={i} and a<{i + 10}" for i in ten]
            + [f"update shardddl1.tb1 set b = 0 - b where a>={i} and a<{i + 10}" for i in ten]
            + [f"update shardddl1.tb1 set a = 0 - a where a>={i} and a<{i + 10}" for i in ten]
            + [f"delete from shardddl1.tb1 where a<={0 - i} and a>{-10 - i}" for i in ten])


def dm_multiple_rows(sc):
    sc.s1("create table shardddl1.tb1 (a int primary key, b int unique, c int)")
    sc.start()
    sc.s1(*_multiple_rows_round(sc))              # DM: inside the safe-mode start phase
    sc.assert_synced()
    sc.s1(*_multiple_rows_round(sc))              # and after it
    sc.s1(*[f"insert into shardddl1.tb1(a,b) values{','.join(f'({j},{j})' for j in range(i, i + 10))}"
            for i in range(101, 201, 10)])
    sc.settle()
    assert sc.tidb("select count(1) from shardddl.tb where a>100 and a<=200")[0][0] == 100
    sc.assert_synced()


def dm_key_not_found(sc):
    init_table(sc, "111", "211")
    sc.s1("insert into shardddl1.tb1 values(1)")
    sc.s2("insert into shardddl1.tb1 values(2)")
    sc.start()
    sc.assert_synced()
    sc.tidb("delete from shardddl.tb where id=1", "delete from shardddl.tb where id=2")
    sc.s1("update shardddl1.tb1 set id=3 where id=1")
    sc.s2("update shardddl1.tb1 set id=4 where id=2")
    sc.s1("delete from shardddl1.tb1 where id=3")
    sc.s2("delete from shardddl1.tb1 where id=4")
    sc.assert_synced()
    assert sc.count() == 0


# ---- optimistic mode: a rename other shards follow (DM's ConflictSkipWaitRedirect) ----------------------
def _goes_on(sc, what: str) -> None:
    """DM's ConflictSkipWaitRedirect: the source holds the table back and goes on unpaused."""
    sc.settle(paused_ok=True, held_ok=True)
    assert not sc.errors(), f"paused on {what}: {sc.errors()}"


def dm_rename_column_optimistic(sc):
    table = "(a int primary key, b varchar(10)) DEFAULT CHARSET=latin1 COLLATE=latin1_bin"
    sc.s1(f"create table shardddl1.tb1 {table}")
    sc.s2(f"create table shardddl1.tb1 {table}", f"create table shardddl1.tb2 {table}")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,'aaa')")
    sc.s2("insert into shardddl1.tb1 values(2,'bbb')", "insert into shardddl1.tb2 values(3,'ccc')")
    sc.assert_synced()
    values = iter(["ddd", "eee", "fff", "ggg", "hhh", "iii", "jjj", "kkk", "lll"])
    n = 4
    for source, table in [(1, "tb1"), (2, "tb1"), (2, "tb2")]:  # the rename, shard after shard, rows between
        sc.sql(source, f"alter table shardddl1.{table} change a c int")
        for src, tb in [(1, "tb1"), (2, "tb1"), (2, "tb2")]:
            sc.sql(src, f"insert into shardddl1.{tb} values({n},'{next(values)}')")
            n += 1
    _goes_on(sc, "`change a c int`")    # DM: every source Running
    # now it works as normal
    for source, table in [(1, "tb1"), (2, "tb1"), (2, "tb2")]:
        sc.sql(source, f"alter table shardddl1.{table} add column d int")
        for src, tb in [(1, "tb1"), (2, "tb1"), (2, "tb2")]:
            has_d = sc.columns(src, "shardddl1", tb)[-1] == "d"
            sc.sql(src, f"insert into shardddl1.{tb} values({n},'x{n}'{f',{n}' if has_d else ''})")
            n += 1
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["c", "b", "d"]
    assert not sc.errors() and '"locks": []' in sc.locks()


def dm_update_ba_rule(sc):
    init_table(sc, "111", "121", "211", "221")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1)", "insert into shardddl2.tb1 values(2)")
    sc.s2("insert into shardddl1.tb1 values(3)", "insert into shardddl2.tb1 values(4)")
    sc.s1("alter table shardddl1.tb1 add column new_col1 int", "alter table shardddl2.tb1 add column new_col1 int")
    sc.s2("alter table shardddl1.tb1 add column new_col1 int", "alter table shardddl2.tb1 add column new_col1 int")
    sc.s1("insert into shardddl1.tb1 values(5,5)", "insert into shardddl2.tb1 values(6,6)")
    sc.s2("insert into shardddl1.tb1 values(7,7)", "insert into shardddl2.tb1 values(8,8)")
    # source 1's shardddl2.tb1 adds a column and drops it again
    sc.s1("alter table shardddl2.tb1 add column new_col2 int", "insert into shardddl2.tb1 values(9,9,9)",
          "alter table shardddl2.tb1 drop column new_col2", "insert into shardddl2.tb1 values(10,10)")
    sc.s1("alter table shardddl1.tb1 add column new_col3 int", "insert into shardddl1.tb1 values(11,11,11)")
    sc.s2("alter table shardddl1.tb1 drop column new_col1", "insert into shardddl1.tb1 values(12)")
    sc.settle()
    assert sc.count() == 12 and sc.columns(None, "shardddl", "tb") == ["id", "new_col1", "new_col3"]
    # source 2's shardddl2.tb1 renames a column: no conflict yet for DM (the others may follow)
    sc.s2("alter table shardddl2.tb1 change id new_id int")
    _goes_on(sc, "`change id new_id int`")
    # source 1's shardddl2.tb1 adds a NOT NULL column: a conflict
    sc.s1("alter table shardddl2.tb1 add column new_col4 int not null")
    sc.settle(paused_ok=True)
    assert "mysql-replica-01" in sc.errors()
    # the user changes the block-allow list (shardddl1 only) and starts the task again, checkpoints kept
    sc.stop_task()
    doc = yaml.safe_load(sc.files.task_file.read_text())
    doc["block-allow-list"]["instance"]["do-dbs"] = ["shardddl1"]
    doc["ignore-checking-items"] = ["schema_of_shard_tables"]
    sc.start_again(yaml.safe_dump(doc, sort_keys=False))
    sc.sync.step()   # DM checks with retries: the coordinator's round drops the tables that left the task
    assert '"locks": []' in sc.locks()
    sc.s1("insert into shardddl1.tb1 values(13,13,13)")
    sc.s2("insert into shardddl1.tb1 values(14)")
    sc.settle()
    assert sc.count() == 14
    sc.restart_master()
    assert '"locks": []' in sc.locks()
    sc.s1("alter table shardddl1.tb1 drop column new_col1")
    sc.s2("alter table shardddl1.tb1 add column new_col3 int")
    sc.s1("insert into shardddl1.tb1 values(15,15)")
    sc.s2("insert into shardddl1.tb1 values(16,16)")
    sc.settle()
    assert sc.count() == 16 and not sc.errors() and '"locks": []' in sc.locks()


SCENARIOS = [
    pytest.param(dm_001, "single-source-no-sharding", id="001"),
    pytest.param(dm_002, "single-source-pessimistic", id="002"),
    pytest.param(dm_003, "single-source-pessimistic", id="003-pessimistic"),
    pytest.param(dm_004, "single-source-optimistic", id="004-optimistic"),
    pytest.param(dm_005, "single-source-pessimistic", id="005"),
    pytest.param(dm_rename_table, "double-source-pessimistic", id="RENAME_TABLE-pessimistic"),
    pytest.param(dm_rename_table, "double-source-optimistic", id="RENAME_TABLE-optimistic"),
    pytest.param(dm_add_drop_columns, "double-source-pessimistic", id="ADD_DROP_COLUMNS-pessimistic"),
    pytest.param(dm_add_drop_columns, "double-source-optimistic", id="ADD_DROP_COLUMNS-optimistic"),
    pytest.param(dm_column_index, "double-source-pessimistic", id="COLUMN_INDEX-pessimistic"),
    pytest.param(dm_column_index, "double-source-optimistic", id="COLUMN_INDEX-optimistic"),
    pytest.param(dm_remove_lock, "double-source-pessimistic", id="RemoveLock-pessimistic"),
    pytest.param(dm_remove_lock, "double-source-optimistic", id="RemoveLock-optimistic"),
    pytest.param(dm_rename_column_optimistic, "double-source-optimistic", id="RENAME_COLUMN_OPTIMISTIC"),
    pytest.param(dm_update_ba_rule, "double-source-optimistic", id="UpdateBARule-optimistic"),
    pytest.param(dm_causality, "single-source-no-sharding", id="CAUSALITY"),
    pytest.param(dm_causality_use_downstream_schema, "single-source-no-sharding", id="CAUSALITY_USE_DOWNSTREAM_SCHEMA"),
    pytest.param(dm_compact, "single-source-no-sharding", id="COMPACT"),
    pytest.param(dm_compact_use_downstream_schema, "single-source-no-sharding", id="COMPACT_USE_DOWNSTREAM_SCHEMA"),
    pytest.param(dm_multiple_rows, "single-source-no-sharding", id="MULTIPLE_ROWS"),
    pytest.param(dm_key_not_found, "double-source-optimistic", id="KEY_NOT_FOUND"),
    pytest.param(dm_restart_master, "double-source-pessimistic", id="RestartMaster-pessimistic"),
    pytest.param(dm_restart_master, "double-source-optimistic", id="RestartMaster-optimistic"),
]


@pytest.mark.parametrize("scenario, conf", SCENARIOS)
def test_dm_shardddl1_up2_logs_no_column_names(scene_factory, scenario, conf):  # noqa: F811
    scenario(scene_factory(CASE, f"{conf}.yaml"))
