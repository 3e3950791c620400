"""DM's `incremental_mode` case (pingcap/tiflow dm/tests/incremental_mode/run.sh), with DM's own
task and source files (conf/, vendored unchanged; run.sh's placeholders replaced as its `sed`
does) and our own statements for the same situations:

1. the upstreams' binlogs start afresh (DM's CI servers start empty; ours are shared by every
   test, so the test runs RESET MASTER), then `incremental_mode` is created and filled on both
   (t1: 2 rows on upstream 1, t2: 3 auto-increment rows on upstream 2);
2. the sources are registered, then registered again with a user that has no SELECT, RELOAD,
   LOCK TABLES ... (DM's `dm_incremental`): an incremental task needs only the binlog;
3. `start-task --remove-meta` of the task-mode incremental file whose `meta` starts source 1 at
   the zero GTID of its server (binlog-gtid; MariaDB's form `domain-server-0`, DM's MySQL form is
   `uuid:0`) and source 2 at its first binlog file, position 4 (binlog-name/pos): everything the
   upstreams wrote, the CREATE DATABASE/TABLE included, replays downstream;
4. rows, two FLUSH LOGS, ADD COLUMN json, a generated column over it, an index with it, a unique key
   over the generated column, UPDATE and DELETE found through it (upstream 1); FLUSH LOGS twice and a
   DELETE (upstream 2): downstream equals upstream; query-status says running;
5. pause-task (query-status: paused), stop-task, rows and DDL while stopped, then start-task of the
   same file *without* --remove-meta: the meta (zero GTID, first file) disagrees with the
   checkpoints, and the checkpoints win, as in DM (nothing replays twice); the source restarted
   at every stage of a DDL replaces DM's FlushCheckpointStage failpoint pauses;
6. FLUSH LOGS and TRUNCATE on upstream 1: source 1's checkpoint is the upstream's binlog position;
7. stop-task; FLUSH LOGS on both; check-task with a meta at the new file passes; after PURGE BINARY
   LOGS on upstream 2 a meta naming a purged file fails check-task's meta position item, and after
   PURGE on upstream 1 so does the zero GTID, each naming the source, the position and what to do;
   the precheck of start-task --remove-meta refuses the same.

Not ported: DM's worker keepalive and relay commands (list-member, start-relay; shardflow has no
relay), `operate-source update` (DM refuses it too), the injected binlog read error
(GetEventError, covered by tests/integration/test_sync_errors.py), the WaitUserCancel sleep and
the log lines it greps (DM internals).
"""

import json
import time

import pytest
import yaml

from dm_core.db import qi

from .harness import (dm_case, dmctl, register_sources, run_sql, start_task, stop_task, sync_process,
                      table_rows)

pytestmark = pytest.mark.integration

DB = "incremental_mode"
USER = "dm_incremental"
T1 = ["id", "name", "info", "gen_id", "info2"]


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("incremental_mode", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB], "up2": [DB], "down": [DB]}, flavor="mariadb") as got:
        try:
            yield got
        finally:
            for key in ("up1", "up2"):
                run_sql(stack[key], f"DROP USER IF EXISTS {qi(USER)}@'%'")


def _master(ep) -> tuple[str, int]:
    f, p = run_sql(ep, "SHOW MASTER STATUS")[0][:2]
    return f, int(p)


def _binlogs(ep) -> list[str]:
    return [r[0] for r in run_sql(ep, "SHOW BINARY LOGS")]


def _purge(ep, to: str) -> None:
    """PURGE BINARY LOGS TO ``to``; a file a binlog dump thread still reads is kept by the server
    (a reader that just disconnected may linger a moment): again until it is gone."""
    for _ in range(50):
        run_sql(ep, f"PURGE BINARY LOGS TO '{to}'")
        if _binlogs(ep)[0] == to:
            return
        time.sleep(0.2)
    pytest.fail(f"binary logs before {to} are still read: {run_sql(ep, 'SHOW FULL PROCESSLIST')}")


def _status(name: str) -> dict:
    rc, out, err = dmctl("query-status", name)
    assert rc == 0, out + err
    return {s["source"]: s for s in json.loads(out)["tasks"][0]["sources"]}


def _limited_user(ep) -> None:
    """DM's dm_incremental: every privilege but those a dump needs (and those TiDB lacks)."""
    run_sql(ep, f"DROP USER IF EXISTS {qi(USER)}@'%'")
    run_sql(ep, f"CREATE USER {qi(USER)}@'%' IDENTIFIED BY '123456'")
    run_sql(ep, f"GRANT ALL PRIVILEGES ON *.* TO {qi(USER)}@'%'",
            f"REVOKE SELECT, RELOAD ON *.* FROM {qi(USER)}@'%'",
            f"REVOKE CREATE TEMPORARY TABLES, LOCK TABLES, CREATE ROUTINE, ALTER ROUTINE, EVENT, CREATE TABLESPACE, "
            f"FILE, SHUTDOWN, EXECUTE, PROCESS, INDEX ON *.* FROM {qi(USER)}@'%'")


def _as_user(files, user: str, password: str) -> None:
    """run.sh's `sed s/root/dm_incremental/` on the source files."""
    for path in files.sources:
        doc = yaml.safe_load(open(path).read())
        doc["from"].update(user=user, password=password)
        with open(path, "w") as f:
            f.write(yaml.safe_dump(doc, sort_keys=False))


def test_dm_incremental_mode_case(case, stack, tmp_path):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]

    # 1. binlogs from scratch, then the tables
    for ep in (up1, up2):
        run_sql(ep, "RESET MASTER")
    run_sql(up1, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t1 (id int, name varchar(20), PRIMARY KEY (id))",
            f"INSERT INTO {DB}.t1 (id, name) VALUES (1, 'arya'), (2, 'catelyn')")
    run_sql(up2, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t2 (id int AUTO_INCREMENT, name varchar(20), PRIMARY KEY (id))",
            f"INSERT INTO {DB}.t2 (name) VALUES ('Arya'), ('Bran'), ('Sansa')")
    domain, server_id = run_sql(up1, "SELECT @@gtid_domain_id, @@server_id")[0]
    zero_gtid = f"{domain}-{server_id}-0"
    first2 = _binlogs(up2)[0]

    # 2. sources, then again as a user that cannot dump
    register_sources(files)
    for ep in (up1, up2):
        _limited_user(ep)
    _as_user(files, USER, "123456")
    rc, out, err = dmctl("operate-source", "stop", *files.sources)
    assert rc == 0, out + err
    register_sources(files)

    # 3. incremental from the zero GTID / the first file
    placeholders = {"binlog-gtid-placeholder-1": zero_gtid, "binlog-name-placeholder-2": first2,
                    "binlog-pos-placeholder-2": "4"}
    task_file = files.task("dm-task.yaml", placeholders)
    task, sync = start_task(task_file, store, remove_meta=True)
    assert task.task_mode == "incremental"
    assert table_rows(down, DB, "t1", ["id", "name"]) == table_rows(up1, DB, "t1", ["id", "name"])
    assert table_rows(down, DB, "t2", ["id", "name"]) == table_rows(up2, DB, "t2", ["id", "name"])

    # 4. rows, logs flushed, a JSON column, a generated column, keys over it (upstream 1); a DELETE (2)
    run_sql(up1, f"USE {DB}", "INSERT INTO t1 (id, name) VALUES (3, 'Eddard Stark')",
            "UPDATE t1 SET name = 'Arya Stark' WHERE id = 1", "UPDATE t1 SET name = 'Catelyn Stark' WHERE name = 'catelyn'",
            "FLUSH LOGS",
            "ALTER TABLE t1 ADD COLUMN info json",
            "ALTER TABLE t1 ADD COLUMN gen_id int AS (JSON_VALUE(info, '$.id'))",
            "ALTER TABLE t1 ADD INDEX multi_col (id, gen_id)",
            "INSERT INTO t1 (id, name, info) VALUES (4, 'gentest', '{\"id\": 123}'), (5, 'gentest', '{\"id\": 124}')",
            "UPDATE t1 SET info = '{\"id\": 120}' WHERE id = 1", "UPDATE t1 SET info = '{\"id\": 121}' WHERE id = 2",
            "FLUSH LOGS",
            "UPDATE t1 SET info = '{\"id\": 122}' WHERE id = 3",
            "ALTER TABLE t1 ADD COLUMN info2 varchar(40)",
            "INSERT INTO t1 (id, name, info) VALUES (6, 'gentest', '{\"id\": 125, \"test cache\": false}')",
            "ALTER TABLE t1 ADD UNIQUE KEY gen_idx (gen_id)",
            "UPDATE t1 SET name = 'gentestxx' WHERE gen_id = 123",
            "INSERT INTO t1 (id, name, info) VALUES (7, 'gentest', '{\"id\": 126}')",
            "UPDATE t1 SET name = 'gentestxxxxxx' WHERE gen_id = 124",
            "DELETE FROM t1 WHERE gen_id > 124")
    run_sql(up2, f"USE {DB}", "FLUSH LOGS", "FLUSH LOGS", "DELETE FROM t2 WHERE name = 'Sansa'")
    sync.settle()
    assert table_rows(down, DB, "t1", T1) == table_rows(up1, DB, "t1", T1)
    assert [r[0] for r in table_rows(down, DB, "t1", ["id"])] == [1, 2, 3, 4, 5]
    assert table_rows(down, DB, "t2", ["id", "name"]) == table_rows(up2, DB, "t2", ["id", "name"]) == [(1, "Arya"), (2, "Bran")]
    st = _status(task.name)
    assert {s["status"] for s in st.values()} == {"running"}, st

    # 5. pause, stop; rows and DDL meanwhile; start again without --remove-meta: the checkpoints
    # win over the meta (zero GTID, first file), and a source killed at each stage of a DDL
    # (DM: FlushCheckpointStage) converges
    rc, out, err = dmctl("pause-task", task.name)
    assert rc == 0, out + err
    assert set(sync.step().values()) == {"paused"}
    st = _status(task.name)
    assert {s["status"] for s in st.values()} == {"paused"}, st
    stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    assert {s["status"] for s in _status(task.name).values()} == {"stopped"}
    run_sql(up1, f"USE {DB}", "INSERT INTO t1 (id, name, info) VALUES (8, 'stopped', '{\"id\": 8}')",
            "ALTER TABLE t1 ADD COLUMN c3 int DEFAULT 3",
            "UPDATE t1 SET c3 = id WHERE id < 3",
            "ALTER TABLE t1 ADD INDEX c3 (c3)",
            "INSERT INTO t1 (id, name, info, c3) VALUES (9, 'stopped', '{\"id\": 9}', 9)",
            "ALTER TABLE t1 MODIFY name varchar(40)",
            "INSERT INTO t1 (id, name, info, c3) VALUES (10, 'a longer name than twenty', '{\"id\": 10}', 10)")
    run_sql(up2, f"USE {DB}", "INSERT INTO t2 (name) VALUES ('Rickon')", "ALTER TABLE t2 ADD COLUMN c3 int",
            "UPDATE t2 SET c3 = id")
    task, sync = start_task(task_file, store, settle=False)
    for point in ("sync.ddl.before_settle=1", "sync.ddl.before_downstream=1", "sync.ddl.after_downstream=1",
                  "sync.ddl.after_downstream=2"):
        got = {sid: sync_process(task_file, sid, tmp_path, faults=point) for sid in ("mysql-replica-01", "mysql-replica-02")}
        assert got["mysql-replica-01"] == 97, (point, got)  # it died there (upstream 1 has three DDLs)
    sync.restart()
    sync.settle()
    cols = T1 + ["c3"]
    assert table_rows(down, DB, "t1", cols) == table_rows(up1, DB, "t1", cols)
    assert table_rows(down, DB, "t2", ["id", "name", "c3"]) == table_rows(up2, DB, "t2", ["id", "name", "c3"])

    # 6. a new binlog file and a DDL last: source 1's checkpoint is where the upstream stands
    run_sql(up1, "FLUSH LOGS", f"TRUNCATE TABLE {DB}.t1")
    sync.settle()
    assert table_rows(down, DB, "t1", ["id"]) == []
    f, p = _master(up1)
    assert _status(task.name)["mysql-replica-01"]["checkpoint"] == f"({f}, {p})"

    # 7. meta positions the upstream no longer has
    stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    old2 = _binlogs(up2)[-1]
    for ep in (up1, up2):
        run_sql(ep, "FLUSH LOGS")
    new1, new2 = _binlogs(up1)[-1], _binlogs(up2)[-1]

    def check(gtid: str, name2: str) -> tuple[int, str]:
        path = files.task("dm-task.yaml", {"binlog-gtid-placeholder-1": gtid, "binlog-name-placeholder-2": name2,
                                           "binlog-pos-placeholder-2": "4"})
        rc, out, err = dmctl("check-task", str(path))
        return rc, out + err

    rc, out = check(zero_gtid, new2)
    assert rc == 0 and "[FAIL]" not in out, out
    _purge(up2, new2)
    run_sql(up1, f"TRUNCATE TABLE {DB}.t1")
    run_sql(up2, f"TRUNCATE TABLE {DB}.t2")
    rc, out = check(zero_gtid, old2)
    assert rc == 1, out
    assert f"[FAIL] meta_position @ source mysql-replica-02: meta binlog file {old2} is not on the server" in out, out
    # the precheck of start-task --remove-meta (the precheck DAG runs these items) refuses the same
    _purge(up1, new1)
    rc, out = check(zero_gtid, new2)
    assert rc == 1, out
    assert f"[FAIL] meta_position @ source mysql-replica-01: the server cannot resume from meta binlog-gtid " \
           f"{zero_gtid}" in out and "purged" in out, out
