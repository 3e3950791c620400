"""DM's `shardddl3_1` case (pingcap/tiflow dm/tests/shardddl3_1/run.sh), with DM's own task and
source files (conf/, vendored unchanged) and our own statements for its scenarios, one pytest
parameter per (scenario, task file) as DM's ``run_case`` (tests/dm_cases/shardddl_scene.py).

Scenarios (DM's numbers; ``init_table 111 211 212``: source, database and table digits):

* 099 (pessimistic) / 101 (optimistic): four shards add ``col`` and get a row each, both tb1s
  add ``new_col1``; source 2's sync dies; source 1's tb2 adds it; source 2 starts again from
  its checkpoint, its tb2 adds it: equal. 100 (optimistic): source 1 dies after its tb1 added
  it; source 2's tb1 and source 1's tb2 add it meanwhile;
* 102 (pessimistic): the two sources add ``new_col1`` with two defaults (0, -1): the second
  source stops at its DDL (shardflow pauses it naming both statements); ``shard-ddl-lock``
  lists the lock ``test-`shardddl`.`tb```, ``unlock`` runs the owner's statement and the other
  source skips its own; the row written after it lands (two rows);
* 103 (both modes): ADD COLUMN c, DROP COLUMN b, CHANGE a to BIGINT DEFAULT 10, the three
  shards interleaved; 104 (optimistic): NOT NULL DEFAULT columns added in two orders, rows by
  their defaults: nine rows; 105 / 106 (optimistic): two indexes added / dropped in two
  orders: nine rows (105: every b and c);
* 107 (optimistic): a NOT NULL column without default added shard by shard, rows between:
  every source keeps running, equal at the end;
  (DM's ConflictSkipWaitRedirect: the table that added it first is held back until the others
  have it too, then its rows are replayed);
* 108 - 112 (optimistic): the two sources add ``col1`` with other types (DECIMAL(5,2) /
  (7,4), VARCHAR(3) / (4), VARCHAR(5) / (4), INT ZEROFILL / INT, INT UNSIGNED / INT). DM: the
  second source's DDL does not merge (query-status shows the statement and the table), and
  the downstream never equals the union (``check_sync_diff ... 'fail'``); so in shardflow for
  a signed and an unsigned (ZEROFILL) INT. Deviation for the DECIMALs and VARCHARs: shardflow
  widens the merged column to hold every shard's values (MODIFY COLUMN) where DM refuses "add
  columns with different field lengths"; the test checks the widened type and the union;
* 113 / 114 / 116 (both modes): ``ADD COLUMN (b int, c int)``, ``DROP COLUMN b, DROP COLUMN
  c``, ``ADD COLUMN b, DROP COLUMN c`` shard by shard, rows between; 115 (optimistic): b and c
  added on two shards and dropped again (the third never had them): they leave the merged
  table; 117 (optimistic): source 1's tb1 drops b and c while the others keep them, then adds
  them back: DM pauses ("add column b that wasn't fully dropped in downstream"), the user
  skips it (``binlog skip``) and repairs the row whose values the drop lost; equal;
* 118 (both modes): ``DROP INDEX idx, ADD INDEX idx(c3,c1,c2)`` shard by shard.

Not ported: 117's ``binlog-schema update`` (DM repairs its tracker's copy; ours follows the
binlog's DDL and needs no repair there); the log greps of 115.
"""

from __future__ import annotations

import re

import pytest

from .harness import dmctl
from .shardddl_scene import count, init_table

pytestmark = pytest.mark.integration

CASE = "shardddl3_1"
S1, S2 = "mysql-replica-01", "mysql-replica-02"


def _three(sc, table: str) -> None:
    sc.s1(f"create table shardddl1.tb1 {table}")
    sc.s2(f"create table shardddl1.tb1 {table}", f"create table shardddl1.tb2 {table}")


def _step_only(sc, sources: list[str], n: int = 6) -> None:
    """Rounds in which only ``sources`` sync (the others' workers are down), with the coordinator's."""
    from dm_core.shardddl.coordinator import coordinate

    for _ in range(n):
        for sid in sources:
            sc.sync.sessions[sid].step()
        coordinate(sc.task, sc.store)


def _running(sc) -> None:
    st = sc.status_json()
    assert not sc.errors() and {s["status"] for s in st["sources"]} == {"running"}, st


# ---- 099 - 101: a worker gone while a lock waits --------------------------------------------------
def _before_lock(sc) -> None:
    init_table(sc, "111", "112", "211", "212")
    sc.start()
    for src in (1, 2):
        sc.sql(src, "alter table shardddl1.tb1 add column col int", "alter table shardddl1.tb2 add column col int")
    sc.assert_synced()
    sc.s1("insert into shardddl1.tb1 values(1,1)")
    sc.s2("insert into shardddl1.tb1 values(2,2)", "insert into shardddl1.tb2 values(3,3)")
    sc.s1("insert into shardddl1.tb2 values(4,4)")


def dm_099_101(sc):
    _before_lock(sc)
    sc.s1("alter table shardddl1.tb1 add column new_col1 int")
    sc.s2("alter table shardddl1.tb1 add column new_col1 int")
    sc.steps(4)
    # dm-worker2 killed
    sc.s1("alter table shardddl1.tb2 add column new_col1 int")
    _step_only(sc, [S1])
    sc.sync.restart(S2)
    sc.steps(4)
    sc.s2("alter table shardddl1.tb2 add column new_col1 int")
    sc.assert_synced()
    _running(sc)


def dm_100(sc):
    _before_lock(sc)
    sc.s1("alter table shardddl1.tb1 add column new_col1 int")
    sc.steps(4)
    # dm-worker1 killed
    sc.s2("alter table shardddl1.tb1 add column new_col1 int")
    sc.s1("alter table shardddl1.tb2 add column new_col1 int")
    _step_only(sc, [S2])
    sc.sync.restart(S1)
    sc.steps(4)
    sc.s2("alter table shardddl1.tb2 add column new_col1 int")
    sc.assert_synced()
    _running(sc)


# ---- 102: two defaults, the lock unlocked by hand ----------------------------------------------------
def dm_102(sc):
    init_table(sc, "111", "211")
    sc.start()
    sc.s1("alter table shardddl1.tb1 add column new_col1 int default 0", "insert into shardddl1.tb1 values (1,1)")
    sc.s2("alter table shardddl1.tb1 add column new_col1 int default -1")
    sc.settle(paused_ok=True)
    sc.steps(3)
    # DM: source 2 does not get past its DDL (its syncer position stays behind its upstream's)
    st = {s["source_id"]: s for s in sc.store.all_source_states(sc.task.name)}
    assert "new_col1" not in sc.columns(None, "shardddl", "tb")
    locks = sc.locks()
    assert count(locks, re.escape('"lock_id": "test-`shardddl`.`tb`"')) == 1, locks
    assert "inconsistent DDL sequence" in sc.errors().get(S2, ""), sc.errors()
    rc, out, err = dmctl("shard-ddl-lock", "unlock", "test-`shardddl`.`tb`")
    assert rc == 0, out + err
    # DM's source 2 only waited at its DDL; shardflow paused it naming both statements (as in
    # shardddl1's RestartMaster), so it goes on after resume-task: it skips its own statement
    rc, out, err = dmctl("resume-task", sc.files.name)
    assert rc == 0, out + err
    sc.s2("insert into shardddl1.tb1 values (2,2)")
    sc.settle()
    assert sc.count() == 2
    assert sc.tidb("select column_default from information_schema.columns where table_schema = 'shardddl' and "
                   "table_name = 'tb' and column_name = 'new_col1'")[0][0] == "0", st  # the owner's statement ran


# ---- 103 - 107 -----------------------------------------------------------------------------------------
def dm_103(sc):
    _three(sc, "(a int primary key, b varchar(10))")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,'aaa')")
    sc.s2("insert into shardddl1.tb1 values(2,'bbb')", "insert into shardddl1.tb2 values(3,'ccc')")
    for src, sql in [(1, "alter table shardddl1.tb1 add column c double"), (1, "alter table shardddl1.tb1 drop column b"),
                     (2, "alter table shardddl1.tb1 add column c double"), (2, "alter table shardddl1.tb2 add column c double"),
                     (1, "alter table shardddl1.tb1 change a a bigint default 10"),
                     (2, "alter table shardddl1.tb1 drop column b"),
                     (2, "alter table shardddl1.tb1 change a a bigint default 10"),
                     (2, "alter table shardddl1.tb2 drop column b"),
                     (2, "alter table shardddl1.tb2 change a a bigint default 10")]:
        sc.sql(src, sql)
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["a", "c"]


def dm_104(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    for src, sql in [(1, "alter table shardddl1.tb1 add new_col1 int not null default 10"),
                     (1, "insert into shardddl1.tb1 (id) values(1)"),
                     (1, "alter table shardddl1.tb1 add new_col2 int not null default 20"),
                     (1, "insert into shardddl1.tb1 (id) values(2)"),
                     (2, "insert into shardddl1.tb1 values(3)"), (2, "insert into shardddl1.tb2 values(4)"),
                     (2, "alter table shardddl1.tb1 add new_col2 int not null default 20"),
                     (2, "insert into shardddl1.tb1 (id) values(5)"),
                     (2, "alter table shardddl1.tb1 add new_col1 int not null default 10"),
                     (2, "insert into shardddl1.tb1 (id) values(6)"),
                     (2, "alter table shardddl1.tb2 add new_col1 int not null default 10"),
                     (2, "alter table shardddl1.tb2 add new_col2 int not null default 20"),
                     (1, "insert into shardddl1.tb1 (id) values(7)"), (1, "insert into shardddl1.tb1 (id) values(8)"),
                     (2, "insert into shardddl1.tb2 (id) values(9)")]:
        sc.sql(src, sql)
    sc.settle()
    assert sc.count() == 9
    assert not sc.errors()


def _indexes(action: str, one: str, two: str):
    def scenario(sc):
        extra = ", index new_idx1(b), index new_idx2(c)" if action == "drop" else ""
        _three(sc, f"(a int primary key, b int, c int{extra})")
        sc.start()
        for src, sql in [(1, f"alter table shardddl1.tb1 {action} index new_idx1{one}"),
                         (1, "insert into shardddl1.tb1 values(1,1,1)"),
                         (1, f"alter table shardddl1.tb1 {action} index new_idx2{two}"),
                         (1, "insert into shardddl1.tb1 values(2,2,2)"),
                         (2, "insert into shardddl1.tb1 values(3,3,3)"), (2, "insert into shardddl1.tb2 values(4,4,4)"),
                         (2, f"alter table shardddl1.tb1 {action} index new_idx2{two}"),
                         (2, "insert into shardddl1.tb1 values(5,5,5)"),
                         (2, f"alter table shardddl1.tb1 {action} index new_idx1{one}"),
                         (2, "insert into shardddl1.tb1 values(6,6,6)"),
                         (2, f"alter table shardddl1.tb2 {action} index new_idx1{one}"),
                         (2, f"alter table shardddl1.tb2 {action} index new_idx2{two}"),
                         (1, "insert into shardddl1.tb1 values(7,7,7)"), (1, "insert into shardddl1.tb1 values(8,8,8)"),
                         (2, "insert into shardddl1.tb2 values(9,9,9)")]:
            sc.sql(src, sql)
        sc.settle()
        assert sc.count() == 9 and not sc.errors()
        assert sc.tidb("select count(b), count(c) from shardddl.tb")[0] == (9, 9)
        sc.assert_synced(settle=False)
        assert sc.indexes() == (["PRIMARY", "new_idx1", "new_idx2"] if action == "add" else ["PRIMARY"])
    return scenario


def dm_107(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1)", "alter table shardddl1.tb1 add column col1 int not null",
          "insert into shardddl1.tb1 values (2,2)")
    sc.settle(paused_ok=True, held_ok=True)   # DM: query-status "Running" 3 (the table held back)
    assert not sc.errors(), sc.errors()
    _running(sc)
    sc.s2("insert into shardddl1.tb1 values(3)", "alter table shardddl1.tb1 add column col1 int not null",
          "insert into shardddl1.tb1 values (4,4)")
    sc.s2("insert into shardddl1.tb2 values(5)", "alter table shardddl1.tb2 add column col1 int not null",
          "insert into shardddl1.tb2 values (6,6)")
    sc.steps(4)
    sc.s1("insert into shardddl1.tb1 values(7,7)")
    sc.s2("insert into shardddl1.tb1 values(8,8)", "insert into shardddl1.tb2 values(9,9)")
    sc.assert_synced()
    _running(sc)


# ---- 108 - 112: one column, two types -------------------------------------------------------------------

def _field_flags(type1, val1, type2, val2, type3, val3, widened: str | None):
    """``widened``: the merged column's type where shardflow merges the two definitions (None:
    they do not merge, as in DM)."""
    def scenario(sc):
        init_table(sc, "111", "211", "212")
        sc.start()
        sc.s1("insert into shardddl1.tb1 values(1)", f"alter table shardddl1.tb1 add column col1 {type1}",
              f"insert into shardddl1.tb1 values (2,{val1})")
        sc.s2("insert into shardddl1.tb1 values(3)", f"alter table shardddl1.tb1 add column col1 {type2}",
              f"insert into shardddl1.tb1 values (4,{val2})")
        sc.settle(paused_ok=True)
        sc.steps(3)
        status, errs = sc.status(), sc.errors()
        if widened is not None:
            # Deviation: DM refuses an ADD COLUMN whose definition differs from the column another shard
            # added ("add columns with different field lengths", or a lock waiting); shardflow widens the
            # merged column to hold both (MODIFY COLUMN), and the source goes on
            sc.s2("insert into shardddl1.tb2 values(5)", f"alter table shardddl1.tb2 add column col1 {type3}",
                  f"insert into shardddl1.tb2 values (6,{val3})")
            sc.assert_synced()
            got = sc.tidb("select column_type from information_schema.columns where table_schema = 'shardddl' "
                          "and table_name = 'tb' and column_name = 'col1'")[0][0]
            assert got == widened, got
            return
        # DM, whichever source came first: the statement and the table
        assert count(status, re.escape("ALTER TABLE `shardddl`.`tb` ADD COLUMN `col1`")) >= 1, status
        assert list(errs) == [S2] and "`shardddl1`.`tb1`" in errs[S2] and "col1" in errs[S2], errs
        sc.s2("insert into shardddl1.tb2 values(5)", f"alter table shardddl1.tb2 add column col1 {type3}",
              f"insert into shardddl1.tb2 values (6,{val3})")
        sc.settle(paused_ok=True)
        sc.steps(3)
        assert sc.diff(), "DM: check_sync_diff ... 'fail' -- the second type never reaches the merged table"
    return scenario


# ---- 113 - 118: several columns at once, indexes rebuilt -------------------------------------------------
def _rows_after(sc, ddls: list[tuple[int, str]], rows: list[list[tuple[int, str, str]]]) -> None:
    for (src, sql), after in zip(ddls, rows):
        sc.sql(src, sql)
        for s, tb, values in after:
            sc.sql(s, f"insert into shardddl1.{tb} values({values})")


def dm_113(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1)")
    sc.s2("insert into shardddl1.tb1 values(2)", "insert into shardddl1.tb2 values(3)")
    add = "add column (b int, c int)"
    _rows_after(sc, [(1, f"alter table shardddl1.tb1 {add}"), (2, f"alter table shardddl1.tb1 {add}"),
                     (2, f"alter table shardddl1.tb2 {add}")],
                [[(1, "tb1", "4,4,4"), (2, "tb1", "5"), (2, "tb2", "6")],
                 [(1, "tb1", "7,7,7"), (2, "tb1", "8,8,8"), (2, "tb2", "9")],
                 [(1, "tb1", "10,10,10"), (2, "tb1", "11,11,11"), (2, "tb2", "12,12,12")]])
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["id", "b", "c"]


def dm_114(sc):
    _three(sc, "(a int primary key, b int, c int)")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,1,1)")
    sc.s2("insert into shardddl1.tb1 values(2,2,2)", "insert into shardddl1.tb2 values(3,3,3)")
    drop = "drop column b, drop column c"
    _rows_after(sc, [(1, f"alter table shardddl1.tb1 {drop}"), (2, f"alter table shardddl1.tb1 {drop}"),
                     (2, f"alter table shardddl1.tb2 {drop}")],
                [[(1, "tb1", "4"), (2, "tb1", "5,5,5"), (2, "tb2", "6,6,6")],
                 [(1, "tb1", "7"), (2, "tb1", "8"), (2, "tb2", "9,9,9")],
                 [(1, "tb1", "10"), (2, "tb1", "11"), (2, "tb2", "12")]])
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["a"]


def dm_115(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1)")
    sc.s2("insert into shardddl1.tb1 values(2)", "insert into shardddl1.tb2 values(3)")
    add, drop = "add column (b int, c int)", "drop column b, drop column c"
    _rows_after(sc, [(1, f"alter table shardddl1.tb1 {add}"), (2, f"alter table shardddl1.tb1 {add}")],
                [[(1, "tb1", "4,4,4"), (2, "tb1", "5"), (2, "tb2", "6")],
                 [(1, "tb1", "7,7,7"), (2, "tb1", "8,8,8"), (2, "tb2", "9")]])
    sc.settle()
    assert sc.columns(None, "shardddl", "tb") == ["id", "b", "c"]   # DM: "finish to handle ddls ... add column"
    _rows_after(sc, [(2, f"alter table shardddl1.tb1 {drop}"), (1, f"alter table shardddl1.tb1 {drop}")],
                [[(1, "tb1", "10,10,10"), (2, "tb1", "11"), (2, "tb2", "12")],
                 [(1, "tb1", "13"), (2, "tb1", "14"), (2, "tb2", "15")]])
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["id"]


def dm_116(sc):
    _three(sc, "(a int primary key, c int)")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,1)")
    sc.s2("insert into shardddl1.tb1 values(2,2)", "insert into shardddl1.tb2 values(3,3)")
    ddl = "add column b int, drop column c"
    _rows_after(sc, [(1, f"alter table shardddl1.tb1 {ddl}"), (2, f"alter table shardddl1.tb1 {ddl}"),
                     (2, f"alter table shardddl1.tb2 {ddl}")],
                [[(1, "tb1", "4,4"), (2, "tb1", "5,5"), (2, "tb2", "6,6")],
                 [(1, "tb1", "7,7"), (2, "tb1", "8,8"), (2, "tb2", "9,9")],
                 [(1, "tb1", "10,10"), (2, "tb1", "11,11"), (2, "tb2", "12,12")]])
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["a", "b"]


def dm_117(sc):
    _three(sc, "(a int primary key, b int, c int) engine=innodb default charset=latin1 collate=latin1_bin")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,1,1)")
    sc.s2("insert into shardddl1.tb1 values(2,2,2)", "insert into shardddl1.tb2 values(3,3,3)")
    sc.s1("alter table shardddl1.tb1 drop column b, drop column c", "insert into shardddl1.tb1 values(4)")
    sc.s2("insert into shardddl1.tb1 values(5,5,5)", "insert into shardddl1.tb2 values(6,6,6)")
    sc.s1("alter table shardddl1.tb1 add column (b int, c int)", "insert into shardddl1.tb1 values(7,7,7)")
    sc.s2("insert into shardddl1.tb1 values(8,8,8)", "insert into shardddl1.tb2 values(9,9,9)")
    sc.settle(paused_ok=True)
    sc.steps(3)
    errs = sc.errors()
    assert list(errs) == [S1], errs
    assert "add column b that wasn't fully dropped in downstream" in errs[S1], errs
    assert count(sc.status(), "wasn't fully dropped in downstream") >= 1
    # DM: `binlog-schema update` of source 1's tracked tb1 (shardflow keeps none), then `binlog skip`
    rc, out, err = dmctl("binlog", "skip", sc.files.name)
    assert rc == 0, out + err
    sc.s1("insert into shardddl1.tb1 values(10,10,10)")
    sc.s2("insert into shardddl1.tb1 values(11,11,11)", "insert into shardddl1.tb2 values(12,12,12)")
    sc.settle()
    sc.tidb("update shardddl.tb set b=null, c=null where a=1")   # the values source 1's drop lost upstream
    sc.assert_synced()


def dm_118(sc):
    _three(sc, "(a int primary key, c1 int, c2 int, c3 int, index idx(c1, c2, c3))")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,1,1,1)")
    sc.s2("insert into shardddl1.tb1 values(2,2,2,2)", "insert into shardddl1.tb2 values(3,3,3,3)")
    ddl = "drop index idx, add index idx(c3,c1,c2)"
    n = 3
    for src, tb in [(1, "tb1"), (2, "tb1"), (2, "tb2")]:
        sc.sql(src, f"alter table shardddl1.{tb} {ddl}")
        for s, t in [(1, "tb1"), (2, "tb1"), (2, "tb2")]:
            n += 1
            sc.sql(s, f"insert into shardddl1.{t} values({n},{n},{n},{n})")
    sc.assert_synced()
    cols = [r[0] for r in sc.tidb("select column_name from information_schema.statistics where table_schema = "
                                  "'shardddl' and table_name = 'tb' and index_name = 'idx' order by seq_in_index")]
    assert cols == ["c3", "c1", "c2"]


SCENARIOS = [
    pytest.param(dm_099_101, "double-source-pessimistic", id="099"),
    pytest.param(dm_100, "double-source-optimistic", id="100"),
    pytest.param(dm_099_101, "double-source-optimistic", id="101"),
    pytest.param(dm_102, "double-source-pessimistic", id="102"),
    pytest.param(dm_103, "double-source-pessimistic", id="103-pessimistic"),
    pytest.param(dm_103, "double-source-optimistic", id="103-optimistic"),
    pytest.param(dm_104, "double-source-optimistic", id="104"),
    pytest.param(_indexes("add", "(b)", "(c)"), "double-source-optimistic", id="105"),
    pytest.param(_indexes("drop", "", ""), "double-source-optimistic", id="106"),
    pytest.param(dm_107, "double-source-optimistic", id="107"),
    pytest.param(_field_flags("decimal(5,2)", "2", "decimal(7,4)", "4", "decimal(9,6)", "6", "decimal(9,6)"),
                 "double-source-optimistic", id="108"),
    pytest.param(_field_flags("varchar(3)", "'222'", "varchar(4)", "'4444'", "varchar(5)", "'66666'", "varchar(5)"),
                 "double-source-optimistic", id="109"),
    pytest.param(_field_flags("varchar(5)", "'22222'", "varchar(4)", "'4444'", "varchar(3)", "'666'", "varchar(5)"),
                 "double-source-optimistic", id="110"),
    pytest.param(_field_flags("int(11) zerofill", "2", "int(11)", "4", "int(11) zerofill", "'66666'", None),
                 "double-source-optimistic", id="111"),
    pytest.param(_field_flags("int(11) unsigned", "2", "int(11)", "4", "int(11) unsigned", "'66666'", None),
                 "double-source-optimistic", id="112"),
    pytest.param(dm_113, "double-source-pessimistic", id="113-pessimistic"),
    pytest.param(dm_113, "double-source-optimistic", id="113-optimistic"),
    pytest.param(dm_114, "double-source-pessimistic", id="114-pessimistic"),
    pytest.param(dm_114, "double-source-optimistic", id="114-optimistic"),
    pytest.param(dm_115, "double-source-optimistic", id="115"),
    pytest.param(dm_116, "double-source-pessimistic", id="116-pessimistic"),
    pytest.param(dm_116, "double-source-optimistic", id="116-optimistic"),
    pytest.param(dm_117, "double-source-optimistic", id="117"),
    pytest.param(dm_118, "double-source-pessimistic", id="118-pessimistic"),
    pytest.param(dm_118, "double-source-optimistic", id="118-optimistic"),
]


@pytest.mark.parametrize("scenario, conf", SCENARIOS)
def test_dm_shardddl3_1_up2_logs_no_column_names(scene_factory, scenario, conf):  # noqa: F811
    scenario(scene_factory(CASE, f"{conf}.yaml"))
