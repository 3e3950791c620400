"""DM's `extend_column` case (pingcap/tiflow dm/tests/extend_column/run.sh), with DM's own task and
source files (conf/, vendored unchanged; `import-mode-placeholder` replaced by "sql" as run.sh's sed
does) and our own statements:

- tables of two upstreams whose primary keys overlap merge into one target each, told apart by DM's
  extend columns: `y1`/`y2` → `y` with `c_table` (extract-table), `t1`/`t2` of two schemas on two
  upstreams → `t` with `c_table`, `c_schema` and `c_source` (extract-table, -schema, -source);
  `y` also has a VIRTUAL generated column; `is-sharding: false`;
- the downstream tables are created by the user beforehand, with the extend columns in the key;
  check-task first fails while they lack the extend columns (DM: "does not exist in downstream table");
- full phase, then inserts, key updates and deletes through the binlog: each lands on the row of
  its own shard only.
"""

import pytest


from .harness import dm_case, dmctl, register_sources, run_sql, start

pytestmark = pytest.mark.integration

DOWN_T = ("CREATE TABLE extend_column.t (c1 int, c2 int, c3 int, c_table varchar(64), c_schema varchar(64), "
          "c_source varchar(64), PRIMARY KEY (c1, c_table, c_schema, c_source))")
DOWN_Y = ("CREATE TABLE extend_column.y (c1 int, c2 int, c3 int, gc3 int GENERATED ALWAYS AS (c1 + 1) VIRTUAL, "
          "c_table varchar(64), PRIMARY KEY (c1, c_table))")
SHARD = "(c1 int, c2 int, c3 int, PRIMARY KEY (c1))"
SHARD_G = "(c1 int, c2 int, c3 int, gc3 int GENERATED ALWAYS AS (c1 + 1) VIRTUAL, PRIMARY KEY (c1))"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("extend_column", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": ["extend_column1"], "up2": ["extend_column2"], "down": ["extend_column"]},
                 placeholders={"import-mode-placeholder": "sql"}) as got:
        yield got


def _rows(down, table: str, cols: str) -> list[tuple]:
    return sorted(tuple(r) for r in run_sql(down, f"SELECT {cols} FROM extend_column.{table}"))


def test_dm_extend_column_case(case, stack):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    run_sql(up1, "CREATE DATABASE extend_column1", f"CREATE TABLE extend_column1.t1 {SHARD}",
            f"CREATE TABLE extend_column1.y1 {SHARD_G}", f"CREATE TABLE extend_column1.y2 {SHARD_G}",
            "INSERT INTO extend_column1.t1 VALUES (1, 10, 100), (2, 20, 200)",
            "INSERT INTO extend_column1.y1 (c1, c2, c3) VALUES (1, 11, 111), (2, 21, 211)",
            "INSERT INTO extend_column1.y2 (c1, c2, c3) VALUES (1, 12, 112), (2, 22, 212)")
    run_sql(up2, "CREATE DATABASE extend_column2", f"CREATE TABLE extend_column2.t2 {SHARD}",
            "INSERT INTO extend_column2.t2 VALUES (1, 13, 113), (2, 23, 213)")
    register_sources(files)

    # the user's downstream table lacks the extend columns: the precheck refuses, naming them
    run_sql(down, "CREATE DATABASE extend_column", "CREATE TABLE extend_column.t (c1 int PRIMARY KEY, c2 int, c3 int)")
    rc, out, err = dmctl("check-task", str(files.task_file))
    assert rc != 0 and "c_table" in out + err, out + err
    run_sql(down, "DROP TABLE extend_column.t", DOWN_T, DOWN_Y)
    task, sync = start(files, store)
    assert _rows(down, "y", "c1, c2, gc3, c_table") == [(1, 11, 2, "1"), (1, 12, 2, "2"), (2, 21, 3, "1"),
                                                       (2, 22, 3, "2")]
    assert _rows(down, "t", "c1, c2, c_table, c_schema, c_source") == [
        (1, 10, "1", "extend_column1", "replica01"), (1, 13, "2", "extend_column2", "replica02"),
        (2, 20, "1", "extend_column1", "replica01"), (2, 23, "2", "extend_column2", "replica02")]

    run_sql(up1, "INSERT INTO extend_column1.t1 VALUES (3, 30, 300)",
            "INSERT INTO extend_column1.y1 (c1, c2, c3) VALUES (3, 31, 311)",
            "INSERT INTO extend_column1.y2 (c1, c2, c3) VALUES (3, 32, 312)")
    run_sql(up2, "INSERT INTO extend_column2.t2 VALUES (3, 33, 313)")
    sync.settle()
    assert len(_rows(down, "y", "c1")) == 6 and len(_rows(down, "t", "c1")) == 6

    run_sql(up1, "UPDATE extend_column1.y2 SET c1 = 4 WHERE c1 = 3")
    run_sql(up2, "UPDATE extend_column2.t2 SET c1 = 4 WHERE c1 = 3")
    sync.settle()
    assert _rows(down, "y", "c1, c_table") == [(1, "1"), (1, "2"), (2, "1"), (2, "2"), (3, "1"), (4, "2")]
    assert _rows(down, "t", "c1, c_table") == [(1, "1"), (1, "2"), (2, "1"), (2, "2"), (3, "1"), (4, "2")]

    run_sql(up1, "DELETE FROM extend_column1.y2 WHERE c1 = 4")
    run_sql(up2, "DELETE FROM extend_column2.t2 WHERE c1 > 1")
    sync.settle()
    assert _rows(down, "y", "c1, c_table") == [(1, "1"), (1, "2"), (2, "1"), (2, "2"), (3, "1")]
    assert _rows(down, "t", "c1, c_table, c_source") == [(1, "1", "replica01"), (1, "2", "replica02"),
                                                         (2, "1", "replica01"), (3, "1", "replica01")]
