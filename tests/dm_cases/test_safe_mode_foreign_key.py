"""DM's `safe_mode_foreign_key` case (pingcap/tiflow dm/tests/safe_mode_foreign_key/run.sh), with DM's
own task and source files (conf/, vendored unchanged: `session: {foreign_key_checks: 1}`, one worker,
`safe-mode: true` for the whole task) and our own statements of its data's shape (`fk_demo`.`parent`
with a UNIQUE `payload`, `child` referencing it ON DELETE CASCADE):

1. the downstream's global foreign_key_checks on; full phase: both tables equal;
2. in safe mode, through the binlog: a parent's non-key column updated twice (its children stay:
   a REPLACE of the parent with the checks on would delete them), a child updated, a parent
   deleted (the downstream cascades to its child, as upstream), a child inserted and the same
   insert replayed as INSERT ... ON DUPLICATE KEY UPDATE: every assertion of DM's, no orphan child,
   both tables equal;
3. a parent's UNIQUE key column updated: the source pauses with DM's "safe-mode update with
   foreign_key_checks=1 and PK/UK changes is not supported";
4. stop, both sides cleaned, start-task --remove-meta again: a CREATE TABLE with a FOREIGN KEY through
   the binlog pauses the source naming "CREATE TABLE with FOREIGN KEY" (DM refuses such DDL while the
   downstream session checks foreign keys), the table not created downstream.
"""

import json

import pytest

from .harness import dm_case, dmctl, register_sources, run_sql, start_task, stop_task, table_rows

pytestmark = pytest.mark.integration

DB = "fk_demo"
SID = "mysql-replica-01"
COLS = {"parent": ["parent_id", "payload", "note"], "child": ["child_id", "parent_id", "child_data"]}


@pytest.fixture
def case(stack, tmp_path):
    old = run_sql(stack["down"], "SELECT @@GLOBAL.foreign_key_checks")[0][0]
    run_sql(stack["down"], "SET GLOBAL foreign_key_checks = 1")
    try:
        with dm_case("safe_mode_foreign_key", tmp_path, stack, {"source1.yaml": "up1"},
                     {"up1": [DB], "down": [DB, "dm_meta"]}, flavor="mariadb") as got:
            yield got
    finally:
        run_sql(stack["down"], "SET GLOBAL foreign_key_checks = %s", args=(old,))


def prepare(up, db: str = DB) -> None:
    run_sql(up, "SET SESSION foreign_key_checks = 1", f"CREATE DATABASE {db}", f"USE {db}",
            "CREATE TABLE parent (parent_id INT PRIMARY KEY, payload VARCHAR(100) NOT NULL, note VARCHAR(100) NOT NULL, "
            "UNIQUE KEY uk_payload (payload)) ENGINE=InnoDB",
            "CREATE TABLE child (child_id INT PRIMARY KEY, parent_id INT NOT NULL, child_data VARCHAR(100) NOT NULL, "
            "CONSTRAINT fk_child_parent FOREIGN KEY (parent_id) REFERENCES parent (parent_id) ON DELETE CASCADE) "
            "ENGINE=InnoDB",
            "INSERT INTO parent (parent_id, payload, note) VALUES (1, 'p1', 'n1'), (2, 'p2', 'n2'), (3, 'p3', 'n3')",
            "INSERT INTO child (child_id, parent_id, child_data) VALUES (10, 1, 'c10'), (11, 1, 'c11'), (20, 2, 'c20'), "
            "(30, 3, 'c30')")


def increment(up, db: str = DB) -> None:
    run_sql(up, f"USE {db}",
            "UPDATE parent SET note = 'n1_v2' WHERE parent_id = 1",
            "UPDATE parent SET note = 'n1_v2' WHERE parent_id = 1",     # the same again: nothing changes
            "UPDATE child SET child_data = 'c20_v2' WHERE child_id = 20",
            "DELETE FROM parent WHERE parent_id = 3",                   # cascades to child 30
            "INSERT INTO child (child_id, parent_id, child_data) VALUES (21, 2, 'c21')",
            "INSERT INTO child (child_id, parent_id, child_data) VALUES (21, 2, 'c21') "
            "ON DUPLICATE KEY UPDATE child_data = VALUES(child_data)")


def one(ep, sql: str):
    return run_sql(ep, sql)[0][0]


def orphans(down, db: str, parent: str = "parent", child: str = "child") -> int:
    return one(down, f"SELECT COUNT(*) FROM {db}.{child} c LEFT JOIN {db}.{parent} p ON c.parent_id = p.parent_id "
                     "WHERE p.parent_id IS NULL")


def _status(name: str) -> dict:
    rc, out, err = dmctl("query-status", name)
    assert rc == 0, out + err
    return json.loads(out)["tasks"][0]["sources"][0]


def _equal(up, down) -> None:
    for t, cols in COLS.items():
        assert table_rows(down, DB, t, cols) == table_rows(up, DB, t, cols), t


def test_dm_safe_mode_foreign_key_case(case, stack):
    files, store = case
    up, down = stack["up1"], stack["down"]
    prepare(up)
    register_sources(files)
    task, sync = start_task(files.task_file, store, remove_meta=True)
    _equal(up, down)

    increment(up)
    sync.settle()
    assert one(up, f"SELECT note FROM {DB}.parent WHERE parent_id = 1") == "n1_v2"
    assert one(down, f"SELECT note FROM {DB}.parent WHERE parent_id = 1") == "n1_v2"
    assert one(up, f"SELECT COUNT(*) FROM {DB}.child WHERE parent_id = 1") == 2
    assert one(down, f"SELECT COUNT(*) FROM {DB}.child WHERE parent_id = 1") == 2
    assert one(down, f"SELECT child_data FROM {DB}.child WHERE child_id = 20") == "c20_v2"
    assert one(down, f"SELECT COUNT(*) FROM {DB}.parent WHERE parent_id = 3") == 0
    assert one(down, f"SELECT COUNT(*) FROM {DB}.child WHERE parent_id = 3") == 0
    assert one(down, f"SELECT COUNT(*) FROM {DB}.child WHERE child_id = 21") == 1
    assert orphans(down, DB) == 0
    _equal(up, down)

    # a UNIQUE key column of the parent changes: refused in safe mode with the checks on
    run_sql(up, f"UPDATE {DB}.parent SET payload = 'p2_v2' WHERE parent_id = 2")
    states = sync.settle(paused_ok=True)
    assert states[SID] == "paused", states
    st = _status(task.name)
    assert st["status"] == "paused", st
    assert "safe-mode update with foreign_key_checks=1 and PK/UK changes is not supported" in st["error"], st
    assert one(down, f"SELECT payload FROM {DB}.parent WHERE parent_id = 2") == "p2"

    # stop, clean both sides, start again: a CREATE TABLE with a FOREIGN KEY is refused
    stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    run_sql(down, f"DROP DATABASE IF EXISTS {DB}", "DROP DATABASE IF EXISTS dm_meta")
    run_sql(up, f"DROP DATABASE {DB}")
    prepare(up)
    task, sync = start_task(files.task_file, store, remove_meta=True)
    _equal(up, down)
    run_sql(up, f"CREATE TABLE {DB}.child_extra (id INT PRIMARY KEY, parent_id INT, CONSTRAINT fk_child_extra "
                f"FOREIGN KEY (parent_id) REFERENCES {DB}.parent (parent_id))")
    states = sync.settle(paused_ok=True)
    assert states[SID] == "paused", states
    st = _status(task.name)
    assert st["status"] == "paused" and "CREATE TABLE with FOREIGN KEY" in st["error"], st
    assert run_sql(down, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s AND table_name = "
                         "'child_extra'", args=(DB,)) == [(0,)]
