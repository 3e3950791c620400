"""DM's `downstream_diff_index` case (pingcap/tiflow dm/tests/downstream_diff_index/run.sh), with
DM's own task and source files (conf/, vendored unchanged) and its statements (data/*.sql and
run.sh, transcribed here):

- two shards (primary key c1, whose values overlap between the shards) merge into a target the
  user created beforehand without any key; after the full phase the user adds a UNIQUE key on
  c2 downstream;
- an UPDATE and a DELETE upstream must then change exactly the row of their own shard: the
  downstream finds it by its own unique key (c2), not by the upstream's key (c1, which two
  rows share);
- the user adds a PRIMARY KEY on c3 downstream, the shards drop c2 (a pessimistic shard DDL),
  and the next UPDATE and DELETE find their rows by c3;
- a utf8 table with a VARCHAR(20000) column is copied and synced.

DM checks in its log which columns its WHERE clauses used (a failpoint); here the rows say it:
every downstream row is checked after each step.
"""

import pytest


from .harness import dm_case, register_sources, run_sql, start, table_rows

pytestmark = pytest.mark.integration

DB, DB1, DB2 = "downstream_diff_index", "downstream_diff_index1", "downstream_diff_index2"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("downstream_diff_index", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB1], "up2": [DB2], "down": [DB]}) as got:
        yield got


def _t(down) -> list[tuple]:
    cols = [r[0] for r in run_sql(down, "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                                        "AND table_name = 't' ORDER BY ordinal_position", args=(DB,))]
    return table_rows(down, DB, "t", cols)


def test_dm_downstream_diff_index_case(case, stack):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    run_sql(up1, f"create database `{DB1}`", f"use `{DB1}`",
            "create table t1 (c1 int, c2 int, c3 varchar(10), primary key(c1))",
            "insert into t1 values(1, 1, '1')", "insert into t1 values(2, 2, '2')", "insert into t1 values(3, 3, '3')",
            "create table varchar20000 (c int primary key, c2 varchar(20000)) charset=utf8")
    run_sql(up2, f"create database `{DB2}`", f"use `{DB2}`",
            "create table t2 (c1 int, c2 int, c3 varchar(10), primary key(c1))",
            "insert into t2 values(1, 12, '13')", "insert into t2 values(2, 22, '23')",
            "insert into t2 values(3, 32, '33')")
    run_sql(down, f"create database `{DB}`", f"use `{DB}`", "create table t (c1 int, c2 int, c3 varchar(10))")
    register_sources(files)
    task, sync = start(files, store)
    assert _t(down) == [(1, 1, "1"), (1, 12, "13"), (2, 2, "2"), (2, 22, "23"), (3, 3, "3"), (3, 32, "33")]

    run_sql(down, f"alter table {DB}.t add unique key(c2)")
    run_sql(up1, f"use {DB1}", "update t1 set c3 = '111' where c1 = 1", "delete from t1 where c1 = 2",
            "insert into varchar20000 values (1, '1')")
    sync.settle()
    assert _t(down) == [(1, 1, "111"), (1, 12, "13"), (2, 22, "23"), (3, 3, "3"), (3, 32, "33")]
    assert run_sql(down, f"select c, c2 from {DB}.varchar20000") == [(1, "1")]

    run_sql(down, f"alter table {DB}.t add primary key(c3)")
    run_sql(up1, f"alter table {DB1}.t1 drop column c2")
    run_sql(up2, f"alter table {DB2}.t2 drop column c2")
    sync.settle()
    run_sql(up2, f"use {DB2}", "update t2 set c3 = '333' where c1 = 3", "delete from t2 where c1 = 1")
    sync.settle()
    assert _t(down) == [(1, "111"), (2, "23"), (3, "3"), (3, "333")]
    assert [r[0] for r in run_sql(down, f"show create table {DB}.t")][0] == "t"
