"""DM's `check_task` case (pingcap/tiflow dm/tests/check_task/run.sh), with DM's own task and
source files (conf/, vendored unchanged but for the downstream user of task-priv.yaml, which
run.sh creates) and our own statements:

1. twenty tables without a primary key: check-task passes with warnings (DM's "state": "warn");
2. tables `t1`..`t6` of the database `check-task` (a name that must be quoted) with different
   columns, routed into one sharded target: check-task fails (the shards' definitions differ);
3. a downstream user with SELECT, CREATE, INSERT, UPDATE, DELETE, ALTER, DROP, INDEX and CREATE
   VIEW only (no SUPER; DM also grants TiDB's CONFIG, which MariaDB does not have): the task
   starts without a failed check, loads, and replicates rows, ADD COLUMN with a default,
   CREATE / DROP TABLE, CREATE INDEX; equal, every source running; stop-task;
4. the same user without UPDATE: check-task warns "lack of UPDATE privilege" (DM: a warning,
   not a failure: which tables the binlog will write is not known beforehand); with UPDATE
   granted it passes, also with the full set.
"""

import json

import pytest
import yaml

from .harness import dm_case, dmctl, register_sources, run_sql, start_task, stop_task, table_rows

pytestmark = pytest.mark.integration

USER = "test1"
PASSWORD = "check-task-pw"     # a loopback test server's user, made and dropped here


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("check_task", tmp_path, stack, {"source1.yaml": "up1"},
                 {"up1": ["checktask", "check-task", "checktask1"], "down": ["checktask1", "check-task", "checktask"]},
                 task_file="task-noshard.yaml") as got:
        files, _ = got
        register_sources(files)
        yield got
    run_sql(stack["down"], f"DROP USER IF EXISTS '{USER}'@'%'")


def _check(path) -> tuple[int, str]:
    rc, out, err = dmctl("check-task", str(path))
    return rc, out + err


def test_tables_without_a_key_warn(case, stack):
    files, _ = case
    run_sql(stack["up1"], "CREATE DATABASE checktask",
            *[f"CREATE TABLE checktask.test{i} (id int, b varchar(10))" for i in range(1, 21)])
    rc, out = _check(files.task_file)
    assert rc == 0, out
    warned = [ln for ln in out.splitlines() if "has no primary key" in ln]
    assert len(warned) == 20, out
    assert "0 failed" in out, out


def test_shards_of_different_definitions_fail(case, stack):
    files, _ = case
    run_sql(stack["up1"], "CREATE DATABASE `check-task`", "CREATE TABLE `check-task`.t1 (c int primary key)",
            *[f"CREATE TABLE `check-task`.t{i} (c int primary key, c{i} int)" for i in range(2, 7)])
    rc, out = _check(files.task("task-sharding.yaml"))
    assert rc != 0 and "schema_of_shard_tables" in out, out
    assert "`check-task`" in out, out


def _priv_task(files, tmp_path):
    """task-priv.yaml with the downstream user run.sh creates."""
    path = files.task("task-priv.yaml")
    doc = yaml.safe_load(path.read_text())
    doc["target-database"].update(user=USER, password=PASSWORD)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _user(down, *privileges: str) -> None:
    run_sql(down, f"DROP USER IF EXISTS '{USER}'@'%'")
    run_sql(down, f"CREATE USER '{USER}'@'%%' IDENTIFIED BY %s", args=(PASSWORD,))
    run_sql(down, f"GRANT {', '.join(privileges)} ON *.* TO '{USER}'@'%'", "FLUSH PRIVILEGES")


FULL_SET = ("SELECT", "CREATE", "INSERT", "UPDATE", "DELETE", "ALTER", "DROP", "INDEX", "CREATE VIEW")


def test_a_user_without_super_can_migrate(case, stack, tmp_path):
    files, store = case
    up, down = stack["up1"], stack["down"]
    run_sql(up, "CREATE DATABASE checktask1", "CREATE TABLE checktask1.test_privilege (id int primary key, b varchar(10))",
            "INSERT INTO checktask1.test_privilege VALUES (1, 'a'), (2, 'b')")
    _user(down, *FULL_SET)
    path = _priv_task(files, tmp_path)
    task, sync = start_task(path, store, remove_meta=True)
    assert table_rows(down, "checktask1", "test_privilege", ["id", "b"]) == [(1, "a"), (2, "b")]
    run_sql(up, "INSERT INTO checktask1.test_privilege VALUES (3, 'c'), (4, 'd')",
            "ALTER TABLE checktask1.test_privilege ADD COLUMN c int DEFAULT 0",
            "CREATE TABLE checktask1.test_ddl (id int primary key, b varchar(10))",
            "CREATE TABLE checktask1.test_ddl2 (id int primary key, b varchar(10))",
            "DROP TABLE checktask1.test_ddl2",
            "CREATE INDEX idx ON checktask1.test_privilege (b)",
            "INSERT INTO checktask1.test_privilege VALUES (5, 'e', 5), (6, 'f', 6)",
            "INSERT INTO checktask1.test_ddl VALUES (1, 'a'), (2, 'b')")
    sync.settle()
    for t, cols in (("test_privilege", ["id", "b", "c"]), ("test_ddl", ["id", "b"])):
        assert table_rows(down, "checktask1", t, cols) == table_rows(up, "checktask1", t, cols), t
    assert sorted(r[0] for r in run_sql(down, "SHOW TABLES FROM checktask1")) == ["test_ddl", "test_privilege"]
    assert "KEY `idx`" in run_sql(down, "SHOW CREATE TABLE checktask1.test_privilege")[0][1]
    rc, out, err = dmctl("query-status", task.name)
    st = json.loads(out)["tasks"][0]
    assert [(s["source"], s["stage"], s["error"]) for s in st["sources"]] == [("mysql-replica-01", "sync", None)], st
    stop_task(task.name)


def test_missing_target_privileges_warn(case, stack, tmp_path):
    files, _ = case
    down = stack["down"]
    run_sql(stack["up1"], "CREATE DATABASE checktask1", "CREATE TABLE checktask1.t (id int primary key)")
    path = _priv_task(files, tmp_path)
    _user(down, "SELECT", "CREATE", "INSERT", "DELETE", "ALTER", "DROP", "INDEX")
    rc, out = _check(path)
    assert rc == 0 and "lack of UPDATE privilege" in out and "0 failed, 1 warning" in out, out
    run_sql(down, f"GRANT UPDATE ON *.* TO '{USER}'@'%'", "FLUSH PRIVILEGES")
    rc, out = _check(path)
    assert rc == 0 and "lack of" not in out and "0 failed" in out, out
    _user(down, *FULL_SET)
    rc, out = _check(path)
    assert rc == 0 and "lack of" not in out, out
