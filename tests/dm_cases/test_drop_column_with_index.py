"""DM's `drop_column_with_index` case (pingcap/tiflow dm/tests/drop_column_with_index/run.sh), with
DM's own task and source files (conf/, vendored unchanged: the deprecated `black-white-list`, the
heartbeat keys and the source's `checker` block included) and our own statements:

1. a table without a primary key, with single-column, multi-column and unique indexes; full phase;
2. DROP COLUMN of a column that has an index and a unique index, rows before and after;
3. a new table with an index, then one ALTER that drops the column and its index together;
4. DROP COLUMN of a column covered by a multi-column index. DM's downstream (TiDB) refuses to drop
   such a column, so DM keeps it and its indexes; a MySQL/MariaDB downstream drops it as the
   upstream did (single-column indexes go, the composite one keeps its other column), which is
   what shardflow replicates: the downstream table stays equal to the upstream's.
DM's injected binlog-read errors (a paused task, then pause and resume) are covered by
tests/integration/test_sync_errors.py (transient errors retried, then a pause, then resume).
"""

import pytest


from tests.integration.test_sync_ddl_coverage import show_create

from .harness import dm_case, register_sources, run_sql, start, table_rows

pytestmark = pytest.mark.integration

DB = "drop_column_with_index"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [DB], "down": [DB]}) as got:
        yield got


def _same(up, down, table: str, columns: list[str]) -> None:
    assert show_create(down, DB, table) == show_create(up, DB, table)
    assert table_rows(down, DB, table, columns) == table_rows(up, DB, table, columns)


def test_dm_drop_column_with_index_case(case, stack):
    files, store = case
    up, down = stack["up1"], stack["down"]
    t1, tb = f"{DB}.t1", f"{DB}.tb"
    run_sql(up, f"CREATE DATABASE {DB}", f"CREATE TABLE {t1} (c1 int, c2 int, c3 int)",
            f"ALTER TABLE {t1} ADD INDEX idx1 (c1)", f"ALTER TABLE {t1} ADD INDEX idx2 (c2)",
            f"ALTER TABLE {t1} ADD INDEX idx3 (c3)", f"ALTER TABLE {t1} ADD INDEX idx23 (c2, c3)",
            f"ALTER TABLE {t1} ADD UNIQUE INDEX uidx1 (c1)", f"ALTER TABLE {t1} ADD UNIQUE INDEX uidx2 (c2)",
            f"INSERT INTO {t1} VALUES (1, 10, 100), (2, 20, 200), (NULL, 30, 300), (4, NULL, 400)")
    register_sources(files)
    task, sync = start(files, store)
    _same(up, down, "t1", ["c1", "c2", "c3"])

    run_sql(up, f"INSERT INTO {t1} VALUES (5, 50, 500)", f"UPDATE {t1} SET c3 = c3 + 1 WHERE c1 = 1",
            f"ALTER TABLE {t1} DROP COLUMN c1",
            f"INSERT INTO {t1} VALUES (60, 600)", f"DELETE FROM {t1} WHERE c2 = 20")
    sync.settle()
    _same(up, down, "t1", ["c2", "c3"])

    run_sql(up, f"CREATE TABLE {tb} (id int PRIMARY KEY, col int)", f"CREATE INDEX idx_col ON {tb} (col)",
            f"INSERT INTO {tb} VALUES (1, 1), (2, 2)",
            f"ALTER TABLE {tb} DROP COLUMN col, DROP INDEX idx_col",
            f"INSERT INTO {tb} VALUES (3)")
    sync.settle()
    _same(up, down, "tb", ["id"])

    run_sql(up, f"ALTER TABLE {t1} DROP COLUMN c2", f"INSERT INTO {t1} VALUES (700)")
    sync.settle()
    _same(up, down, "t1", ["c3"])
