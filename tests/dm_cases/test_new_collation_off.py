"""DM's `new_collation_off` case (pingcap/tiflow dm/tests/new_collation_off/run.sh), with DM's own
task and source files (conf/, vendored unchanged) and our own statements.

DM's case is about TiDB: a downstream started with `new_collations_enabled_on_first_bootstrap =
false` takes an upstream column in MySQL 8's `utf8mb4_0900_as_cs`, which it does not know. No TiDB
runs here and MariaDB 10.11 has no `utf8mb4_0900_*` collations; what is observable is that a
column in a case- and accent-sensitive collation the downstream must keep (MariaDB's
`utf8mb4_uca1400_as_cs`, the counterpart of 0900_as_cs) replicates with its collation and rows,
for a table loaded by the full phase and for one created through the binlog, and that a lookup
downstream tells 'Alice' from 'alice' as the upstream does. DM's source file has
`enable-gtid: true` (MariaDB GTIDs here).
"""

import pytest

from .harness import dm_case, register_sources, run_sql, start_task, table_rows

pytestmark = pytest.mark.integration

DB = "new_collation_off"
COLL = "utf8mb4_uca1400_as_cs"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source2.yaml": "up2"}, {"up2": [DB], "down": [DB]}) as got:
        yield got


def _collation(ep, table: str) -> str:
    return run_sql(ep, "SELECT collation_name FROM information_schema.columns WHERE table_schema = %s AND "
                       "table_name = %s AND column_name = 'name'", args=(DB, table))[0][0]


def test_dm_new_collation_off_case(case, stack):
    files, store = case
    up, down = stack["up2"], stack["down"]
    run_sql(up, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t1 (id int PRIMARY KEY, name varchar(20) COLLATE {COLL})",
            f"INSERT INTO {DB}.t1 (id, name) VALUES (1, 'Alice')")
    register_sources(files)
    task, sync = start_task(files.task_file, store)
    run_sql(up, f"INSERT INTO {DB}.t1 (id, name) VALUES (2, 'alice')",
            f"CREATE TABLE {DB}.t2 (id int PRIMARY KEY, name varchar(20) COLLATE {COLL})",
            f"INSERT INTO {DB}.t2 (id, name) VALUES (3, 'Ångström'), (4, 'Angstrom')")
    sync.settle()
    for t in ("t1", "t2"):
        assert _collation(down, t) == _collation(up, t) == COLL, t
        assert table_rows(down, DB, t, ["id", "name"]) == table_rows(up, DB, t, ["id", "name"]), t
    assert run_sql(down, f"SELECT id FROM {DB}.t1 WHERE name = 'alice'") == [(2,)]
    assert run_sql(down, f"SELECT id FROM {DB}.t2 WHERE name = 'Angstrom'") == [(4,)]
