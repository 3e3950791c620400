"""DM's `mariadb_source` case (pingcap/tiflow dm/tests/mariadb_source/run.sh), with DM's own task
and source files (conf/, vendored unchanged: `flavor: mariadb`, the deprecated
`black-white-list`, a `checker` block, `import-mode: logical`) and our own statements: a MariaDB
upstream whose database is `utf8mb4_general_ci` (MariaDB 11.4+ would default to a uca1400
collation); the task starts with `--remove-meta`: query-status shows the source syncing with no
error, the full phase loaded both rows; then ADD COLUMN note with a default, an UPDATE of two
columns and an INSERT through the binlog: the downstream has `note` varchar(32) and the rows.
Every source of the stack is MariaDB, so the other cases run this flavor too; this one checks
DM's MariaDB-specific task and source files as they are.
"""

import json

import pytest

from .harness import dm_case, dmctl, register_sources, run_sql, start_task, table_rows

pytestmark = pytest.mark.integration

DB = "mariadb_source"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [DB], "down": [DB]}) as got:
        yield got


def test_dm_mariadb_source_case(case, stack):
    files, store = case
    up, down = stack["up1"], stack["down"]
    run_sql(up, f"CREATE DATABASE {DB} DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
            f"CREATE TABLE {DB}.t1 (id int PRIMARY KEY, name varchar(32) NOT NULL)",
            f"INSERT INTO {DB}.t1 (id, name) VALUES (1, 'uno'), (2, 'dos')")
    register_sources(files)
    rc, out, err = dmctl("operate-source", "show")
    assert rc == 0 and '"flavor": "mariadb"' in out, out + err
    task, sync = start_task(files.task_file, store, remove_meta=True)
    st = json.loads(dmctl("query-status", task.name)[1])["tasks"][0]
    assert [(s["source"], s["stage"], s["error"]) for s in st["sources"]] == [("mysql-replica-01", "sync", None)], st
    assert table_rows(down, DB, "t1", ["id", "name"]) == [(1, "uno"), (2, "dos")]

    run_sql(up, f"ALTER TABLE {DB}.t1 ADD COLUMN note varchar(32) DEFAULT ''",
            f"UPDATE {DB}.t1 SET name = 'dos bis', note = 'changed' WHERE id = 2",
            f"INSERT INTO {DB}.t1 (id, name, note) VALUES (3, 'tres', 'new')")
    sync.settle()
    assert "`note` varchar(32) DEFAULT ''" in run_sql(down, f"SHOW CREATE TABLE {DB}.t1")[0][1]
    assert table_rows(down, DB, "t1", ["id", "name", "note"]) == [(1, "uno", ""), (2, "dos bis", "changed"),
                                                                  (3, "tres", "new")]
    assert run_sql(down, "SELECT default_collation_name FROM information_schema.schemata WHERE schema_name = %s",
                   args=(DB,)) == [("utf8mb4_general_ci",)]
