"""DM's `full_mode` case (pingcap/tiflow dm/tests/full_mode/run.sh), with DM's own task and source
files (conf/, vendored unchanged) and our own statements for the same situations. Every part
runs as DM's user `dm_full`: every privilege but REPLICATION SLAVE, REPLICATION CLIENT and SUPER
(a full task needs no binlog), and none of those TiDB lacks (LOCK TABLES, PROCESS ...).

1. (DM: fail_acquire_global_lock) dm_full without RELOAD either, `ignore-checking-items:
   ["dump_privilege"]`: DM's dump needs FLUSH TABLES WITH READ LOCK or LOCK TABLES and pauses with
   "Access denied"; shardflow's snapshot takes no lock (docs/architecture.md: the handoff from full
   to incremental), so the load finishes: the tables downstream equal upstream's;
2. (escape_schema) a database `full/mode` with a table `tb/1`: loaded, names and rows intact;
3. (empty_data) tables without rows: the task finishes, query-status says finished with 0 rows
   loaded;
4. (only_route_schema) dm-task-2.yaml routes `full_mode` -> `full_mode_test` and the upstream
   database has no table: the target database is created all the same;
5. (run) upstream global sql_mode NO_BACKSLASH_ESCAPES and global time zones +01:00 / +02:00;
   strings with newlines, tabs, quotes and backslashes, TIMESTAMP and DATETIME values, JSON with a
   generated column and a unique key over it, written before the task; a table `tb"1` that also
   exists downstream with a row of its own and `on-duplicate-logical: ignore`: the downstream row
   stays; every source finishes (query-status: finished) and nothing replicates afterwards.

Not ported: dump files cleaned up (no dump files: the Spark load streams), DM's metrics and log
lines, the TaskCheckInterval failpoint (DM internals).
"""

import json

import pytest
import yaml

from dm_core.db import qi, qt

from .harness import dm_case, dmctl, register_sources, run_sql, start_task, table_rows

pytestmark = pytest.mark.integration

DB = "full_mode"
USER = "dm_full"


@pytest.fixture
def case(stack, tmp_path):
    dbs = [DB, "full/mode"]
    with dm_case("full_mode", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": dbs, "up2": dbs, "down": dbs + ["full_mode_test"]}) as got:
        try:
            yield got
        finally:
            for key in ("up1", "up2"):
                run_sql(stack[key], f"DROP USER IF EXISTS {qi(USER)}@'%'")


def _user(ep, *, reload: bool = True) -> None:
    """DM's dm_full (data/db*.prepare.user.sql): no replication privileges, no SUPER."""
    run_sql(ep, f"DROP USER IF EXISTS {qi(USER)}@'%'", f"CREATE USER {qi(USER)}@'%' IDENTIFIED BY '123456'",
            f"GRANT ALL PRIVILEGES ON *.* TO {qi(USER)}@'%'",
            f"REVOKE REPLICATION SLAVE, REPLICATION CLIENT, SUPER ON *.* FROM {qi(USER)}@'%'",
            *([] if reload else [f"REVOKE RELOAD ON *.* FROM {qi(USER)}@'%'"]),
            f"REVOKE CREATE TEMPORARY TABLES, LOCK TABLES, CREATE ROUTINE, ALTER ROUTINE, EVENT, CREATE TABLESPACE, "
            f"FILE, SHUTDOWN, EXECUTE, PROCESS, INDEX ON *.* FROM {qi(USER)}@'%'")


def _sources(files, stack, *, reload: bool = True) -> None:
    """The user on both upstreams; DM's source files name it already (the stack's host/port swapped in)."""
    for key in ("up1", "up2"):
        _user(stack[key], reload=reload)
    for path in files.sources:
        doc = yaml.safe_load(open(path).read())
        doc["from"].update(user=USER, password="123456")
        with open(path, "w") as f:
            f.write(yaml.safe_dump(doc, sort_keys=False))
    register_sources(files)


def _status(name: str) -> dict:
    rc, out, err = dmctl("query-status", name)
    assert rc == 0, out + err
    return {s["source"]: s for s in json.loads(out)["tasks"][0]["sources"]}


def _prepare(stack, db: str = DB) -> None:
    """Both upstreams' tables (DM's data/db*.prepare.sql situations, our statements)."""
    up1, up2 = stack["up1"], stack["up2"]
    run_sql(up1, f"CREATE DATABASE {qi(db)}", f"USE {qi(db)}",
            "CREATE TABLE t1 (id int, name varchar(20), ts timestamp DEFAULT CURRENT_TIMESTAMP ON UPDATE "
            "CURRENT_TIMESTAMP, PRIMARY KEY (id))",
            "INSERT INTO t1 (id, name, ts) VALUES (1, 'arya', now()), (2, 'catelyn', '2021-05-11 10:01:03')",
            "INSERT INTO t1 (id, name) VALUES (3, 'Eddard\nStark')",
            "UPDATE t1 SET name = 'Arya S\\\\\\\\tark' WHERE id = 1",
            "UPDATE t1 SET name = 'Catelyn S\\\"\\n\\ttark' WHERE name = 'catelyn'",
            "ALTER TABLE t1 ADD COLUMN info json",
            "ALTER TABLE t1 ADD COLUMN gen_id int AS (JSON_VALUE(info, '$.id'))",
            "ALTER TABLE t1 ADD INDEX multi_col (id, gen_id)",
            "INSERT INTO t1 (id, name, info) VALUES (4, 'gentest', '{\"id\": 123}'), (5, 'gentest', '{\"id\": 124}')",
            "UPDATE t1 SET info = '{\"id\": 120}' WHERE id = 1", "UPDATE t1 SET info = '{\"id\": 121}' WHERE id = 2",
            "UPDATE t1 SET info = '{\"id\": 122}' WHERE id = 3",
            "ALTER TABLE t1 ADD COLUMN info2 varchar(40)",
            "INSERT INTO t1 (id, name, info) VALUES (6, 'gentest', '{\"id\": 125, \"test cache\": false}')",
            "ALTER TABLE t1 ADD UNIQUE KEY gen_idx (gen_id)",
            "UPDATE t1 SET name = 'gentestxx' WHERE gen_id = 123",
            "INSERT INTO t1 (id, name, info) VALUES (7, 'gentest', '{\"id\": 126}')",
            "UPDATE t1 SET name = 'gentestxxxxxx' WHERE gen_id = 124",
            "DELETE FROM t1 WHERE gen_id > 124")
    run_sql(up2, f"CREATE DATABASE {qi(db)}", f"USE {qi(db)}",
            "CREATE TABLE t2 (id int AUTO_INCREMENT, name varchar(20), dt datetime, ts timestamp NULL, PRIMARY KEY (id))",
            "INSERT INTO t2 (name, dt, ts) VALUES ('Arya', now(), now()), "
            "('Bran', '2021-05-11 10:09:03', '2021-05-11 10:09:03'), ('Sansa', NULL, NULL)")


QUOTED = 'tb"1'
TB = qt(DB, QUOTED)
T1 = ["id", "name", "CAST(ts AS char)", "info", "gen_id", "info2"]
T2 = ["id", "name", "CAST(dt AS char)", "CAST(ts AS char)"]


def _equal(stack, db: str = DB) -> None:
    down = stack["down"]
    assert table_rows(down, db, "t1", T1) == table_rows(stack["up1"], db, "t1", T1)
    assert table_rows(down, db, "t2", T2) == table_rows(stack["up2"], db, "t2", T2)


def test_dm_full_mode_without_reload(case, stack, tmp_path):
    """DM: fail_acquire_global_lock."""
    files, store = case
    _prepare(stack)
    _sources(files, stack, reload=False)
    path = files.task("dm-task.yaml")
    doc = yaml.safe_load(path.read_text())
    doc["ignore-checking-items"] = ["dump_privilege"]  # run.sh's sed
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    task, _ = start_task(path, store, remove_meta=True)
    _equal(stack)
    _finished(task.name, {"mysql-replica-01": 5, "mysql-replica-02": 3})


def _finished(name: str, rows: dict) -> None:
    """query-status: every source finished (DM: stage Finished), with the rows it loaded."""
    st = _status(name)
    assert {sid: (s["status"], s["loaded_rows"]) for sid, s in st.items()} == \
        {sid: ("finished", n) for sid, n in rows.items()}, st
    assert all("the full phase finished" in s["message"] for s in st.values()), st


def test_dm_full_mode_escaped_names(case, stack, tmp_path):
    """DM: escape_schema: `full/mode`.`tb/1`."""
    files, store = case
    db = "full/mode"
    _prepare(stack, db)
    run_sql(stack["up1"], f"CREATE TABLE {qt(db, 'tb/1')} (id int, name varchar(10), PRIMARY KEY (id))",
            f"INSERT INTO {qt(db, 'tb/1')} VALUES (1, 'haha'), (2, 'hihi')")
    _sources(files, stack)
    task, _ = start_task(files.task("dm-task.yaml", {"full_mode": db}), store, remove_meta=True)
    _equal(stack, db)
    assert table_rows(stack["down"], db, "tb/1", ["id", "name"]) == [(1, "haha"), (2, "hihi")]
    _finished(task.name, {"mysql-replica-01": 7, "mysql-replica-02": 3})


def test_dm_full_mode_empty_tables_and_a_routed_empty_schema(case, stack, tmp_path):
    """DM: empty_data, then only_route_schema."""
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    for ep, t in ((up1, "t1"), (up2, "t2")):
        run_sql(ep, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.{t} (id int, name varchar(20), PRIMARY KEY (id))")
    _sources(files, stack)
    task, _ = start_task(files.task_file, store, remove_meta=True)
    assert table_rows(down, DB, "t1", ["id"]) == table_rows(down, DB, "t2", ["id"]) == []
    _finished(task.name, {"mysql-replica-01": 0, "mysql-replica-02": 0})

    # dm-task-2.yaml: one source, `full_mode` routed to `full_mode_test`, and no table in it
    for ep in (up1, up2):
        run_sql(ep, f"DROP DATABASE {DB}")
    run_sql(up1, f"CREATE DATABASE {DB}")
    task, _ = start_task(files.task("dm-task-2.yaml"), store, remove_meta=True)
    assert run_sql(down, "SHOW DATABASES LIKE 'full_mode_test'") == [("full_mode_test",)]
    _finished(task.name, {"mysql-replica-01": 0})


def test_dm_full_mode_under_upstream_global_modes(case, stack, tmp_path):
    """DM: run: NO_BACKSLASH_ESCAPES and time zones of the upstreams' own; `tb"1` kept downstream."""
    files, store = case
    up1, down = stack["up1"], stack["down"]
    saved = {k: run_sql(stack[k], "SELECT @@GLOBAL.sql_mode, @@GLOBAL.time_zone")[0] for k in ("up1", "up2")}
    try:
        for key, zone in (("up1", "+01:00"), ("up2", "+02:00")):
            run_sql(stack[key], "SET GLOBAL sql_mode = 'NO_BACKSLASH_ESCAPES'", f"SET GLOBAL time_zone = '{zone}'")
        _prepare(stack)   # new sessions: the global modes
        run_sql(up1, f"CREATE TABLE {TB} (id int, name varchar(10), PRIMARY KEY (id))",
                f"INSERT INTO {TB} VALUES (1, 'haha'), (2, 'hihi')")
        assert run_sql(up1, f"SELECT name FROM {DB}.t1 WHERE id = 1") == [("Arya S\\\\\\\\tark",)]  # no escapes
        run_sql(down, f"CREATE DATABASE {DB}", f"CREATE TABLE {TB} (id int, name varchar(10), PRIMARY KEY (id))",
                f"INSERT INTO {TB} VALUES (1, 'hoho')")
        _sources(files, stack)
        task, _ = start_task(files.task_file, store, remove_meta=True)
        _finished(task.name, {"mysql-replica-01": 7, "mysql-replica-02": 3})
        # on-duplicate-logical: ignore keeps the row the downstream had
        assert table_rows(down, DB, QUOTED, ["id", "name"]) == [(1, "hoho"), (2, "hihi")]
        run_sql(up1, f"REPLACE INTO {TB} VALUES (1, 'hoho')")
        assert table_rows(down, DB, QUOTED, ["id", "name"]) == table_rows(up1, DB, QUOTED, ["id", "name"])
        _equal(stack)
        # TIMESTAMP values are the same instants (both sides read in UTC here)
        for key, t in (("up1", "t1"), ("up2", "t2")):
            q = ["SET time_zone = '+00:00'", f"SELECT id, CAST(ts AS char) FROM {DB}.{t} ORDER BY id"]
            assert run_sql(down, *q) == run_sql(stack[key], *q)
    finally:
        for key, (mode, zone) in saved.items():
            run_sql(stack[key], f"SET GLOBAL sql_mode = '{mode}'", f"SET GLOBAL time_zone = '{zone}'")
