"""DM's `all_mode` case (pingcap/tiflow dm/tests/all_mode/run.sh), with DM's own task and source
files (conf/, vendored unchanged; run.sh's `sed`s repeated: the task name `t-Ë!s`t`, source 1's
enable-gtid off where run.sh turns it off) and our own statements for the same situations. As in
run.sh, the upstreams run with global sql_mode ANSI_QUOTES,NO_AUTO_VALUE_ON_ZERO and global time
zones +01:00 / +02:00 until the last part.

1. (test_expression_filter) full + sync with `delete-value-expr: "id = 30"` on t1: rows inserted in
   a multi-row statement and in a two-statement transaction arrive; the DELETE of id 30 does not;
2. (test_json_expression) a table of JSON values with fifteen generated columns over JSON
   functions, then fifteen more added by ALTER TABLE and rows after them: equal after full + sync;
3. (test_session_config) the task named `t-Ë!s`t`, `tidb_retry_limit: "fjs"` in the target session
   (DM's TiDB refuses it; here the downstream is not TiDB and leaves tidb_* variables out),
   CREATE TABLE IF NOT EXISTS of an existing table and a row; then an UPDATE written with
   binlog_row_image=MINIMAL pauses the source with an error that names the cause;
4. (test_query_timeout) after stop-task no connection of the task is left on the three servers;
5. (test_regexpr_router) regular-expression routes and block-allow list (`~test2?[animal|human]`,
   `~testtable_[donot_delete]?`) into target databases the user created, with DM's
   regexpr-task.yaml and regexpr-task-lightning.yaml;
6. (run) a target table the user created with two more columns (DATETIME and TIMESTAMP defaulting
   to CURRENT_TIMESTAMP), a greek-charset table, an ignored database; full + sync; a CREATE VIEW is
   skipped and the sources stay running; pause, resume, a restart of every source; binlog rows
   written under session time zones +03:00 and +07:00; generated columns and keys over them,
   DECIMAL, BIT, BIGINT at both ends, 0 in an AUTO_INCREMENT column; the ignored database is
   not downstream; DROP TABLE IF EXISTS of missing tables; the target database dropped
   downstream, then a CREATE TABLE upstream: the source pauses naming "Unknown database";
7. (test_source_and_target_with_empty_gtid) an upstream whose binlog starts empty (RESET MASTER) and a
   table without primary key (a UNIQUE column): full + sync; then the checkpoint reaches the
   upstream's position when the last event is a DDL that runs, a CREATE FUNCTION, an ANALYZE TABLE
   and a CREATE DATABASE of a database the task does not move (query-status --wait-synced).

Deviations: MariaDB has no `->`/`->>`, functional and multi-valued indexes (JSON_VALUE /
JSON_UNQUOTE(JSON_EXTRACT()) instead; those tables left out); its greek charset exists, so DM's
"Unknown character set" load error (a TiDB limit) does not happen. Not ported: DM's injected
failures between jobs of one event (failSecondJob: kills mid-transaction are
tests/integration/test_sync_chaos.py), query-status timing out (BlockSyncStatus, an RPC of DM's),
operate-schema (DM's schema tracker: shardflow reads column names from the binlog), relay
pause/resume, the killed TiDB (tests/integration/test_sync_chaos.py stops the downstream), a second
start-task of a running task (refused through Airflow: tests/e2e), metrics and log lines,
passwords in logs (tests/e2e/test_secrets_never_leak.py).
"""

import contextlib
import json

import pytest
import yaml

from dm_core.db import qt
from dm_core.reset import reset_task

from .harness import dm_case, dmctl, register_sources, run_sql, start_task, stop_task

pytestmark = pytest.mark.integration

DB = "all_mode"
NAME = "t-Ë!s`t"
S1, S2 = "mysql-replica-01", "mysql-replica-02"


@pytest.fixture
def case(stack, tmp_path):
    from dm_core.state import StateStore

    dbs = {"up1": [DB, "ignore_db", "test2animal", "xxx"], "up2": [DB, "ignore_db", "test4s_2022"],
           "down": [DB, "ignore_db", "dtest2", "dtest4", "xxx"]}
    with dm_case("all_mode", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"}, dbs) as got:
        for name in (NAME, "regexprtest", "regexprtest-lightning"):
            reset_task(got[1], name)
        try:
            yield got
        finally:
            with StateStore() as store:
                for name in (NAME, "regexprtest", "regexprtest-lightning"):
                    reset_task(store, name)


@contextlib.contextmanager
def global_modes(stack):
    """run.sh's first lines: both upstreams' global sql_mode and time zone, restored afterwards."""
    saved = {k: run_sql(stack[k], "SELECT @@GLOBAL.sql_mode, @@GLOBAL.time_zone")[0] for k in ("up1", "up2")}
    try:
        for key, zone in (("up1", "+01:00"), ("up2", "+02:00")):
            run_sql(stack[key], "SET GLOBAL sql_mode = 'ANSI_QUOTES,NO_AUTO_VALUE_ON_ZERO'", f"SET GLOBAL time_zone = '{zone}'")
        yield
    finally:
        for key, (mode, zone) in saved.items():
            run_sql(stack[key], f"SET GLOBAL sql_mode = '{mode}'", f"SET GLOBAL time_zone = '{zone}'")


def rows(ep, table: str, cols: list[str], db: str = DB) -> list[tuple]:
    """A table's rows read at +00:00 (TIMESTAMP columns as instants), sorted."""
    got = run_sql(ep, "SET time_zone = '+00:00'", f"SELECT {', '.join(cols)} FROM {qt(db, table)}")
    return sorted((tuple(r) for r in got), key=repr)


def equal(stack, table: str, cols: list[str], key: str = "up1", db: str = DB) -> list[tuple]:
    up = rows(stack[key], table, cols, db)
    assert rows(stack["down"], table, cols, db) == up, table
    return up


T1 = ["id", "name", "CAST(dt AS char)", "CAST(ts AS char)"]
T2 = ["id", "name", "CAST(ts AS char)"]


def prepare(stack) -> None:
    """DM's data/db1.prepare.sql and db2.prepare.sql situations (our statements)."""
    run_sql(stack["up1"], f"CREATE DATABASE {DB}", f"USE {DB}",
            "CREATE TABLE t1 (id int NOT NULL AUTO_INCREMENT, name varchar(20), dt datetime, "
            "ts timestamp DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, PRIMARY KEY (id))",
            "INSERT INTO t1 (id, name, dt, ts) VALUES (1, 'ar\"ya', now(), now()), "
            "(2, 'catelyn', '2021-05-11 10:01:05', '2021-05-11 10:01:05')",
            "INSERT INTO t1 (id, name) VALUES (0, 'lalala')",       # 0 stays 0 (NO_AUTO_VALUE_ON_ZERO)
            "CREATE TABLE no_diff (id int NOT NULL PRIMARY KEY)", "INSERT INTO no_diff (id) VALUES (1), (2), (3)",
            "CREATE DATABASE ignore_db", "CREATE TABLE ignore_db.ignore_table (id int)")
    run_sql(stack["up2"], f"CREATE DATABASE {DB}", f"USE {DB}",
            "CREATE TABLE t2 (id int NOT NULL AUTO_INCREMENT, name varchar(20), ts timestamp NULL, PRIMARY KEY (id))",
            "INSERT INTO t2 (name, ts) VALUES ('Arya', now()), ('Bran', '2021-05-11 10:01:05'), ('Sansa', NULL)",
            "CREATE DATABASE ignore_db", "CREATE TABLE ignore_db.ignore_table (id int)")


def source_files(files, *, gtid1: bool = True) -> None:
    """run.sh's `sed s/enable-gtid: true/enable-gtid: false/` on source 1 where it does it, then
    `operate-source create` of both."""
    path = files.sources[0]
    doc = yaml.safe_load(open(path).read())
    doc["enable-gtid"] = gtid1
    with open(path, "w") as f:
        f.write(yaml.safe_dump(doc, sort_keys=False))
    register_sources(files)


def named(files, fname: str = "dm-task.yaml"):
    """run.sh's `sed s/name: test/name: $ILLEGAL_CHAR_NAME/`."""
    return files.task(fname, {"name: test": f"name: {json.dumps(NAME)}"})


def status(name: str) -> dict:
    rc, out, err = dmctl("query-status", name)
    assert rc == 0, out + err
    return {s["source"]: s for s in json.loads(out)["tasks"][0]["sources"]}


# ---- 1 ---------------------------------------------------------------------------------------
def test_dm_all_mode_expression_filter(case, stack):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    with global_modes(stack):
        prepare(stack)
        source_files(files, gtid1=False)
        task, sync = start_task(files.task("dm-task-expression-filter.yaml"), store, remove_meta=True)
        run_sql(up1, f"USE {DB}", "INSERT INTO t1 (id, name) VALUES (10, '10'), (20, '20')",
                "INSERT INTO t1 (id, name) VALUES (30, '30')")
        run_sql(up2, f"USE {DB}", "BEGIN", "INSERT INTO t2 (id, name) VALUES (10, '10')",
                "INSERT INTO t2 (id, name) VALUES (20, '20')", "COMMIT", "INSERT INTO t2 (id, name) VALUES (30, '30')")
        sync.settle()
        assert sorted(r[0] for r in equal(stack, "t1", T1)) == [0, 1, 2, 10, 20, 30]
        equal(stack, "t2", T2, "up2")
        run_sql(up1, f"DELETE FROM {DB}.t1 WHERE id = 30")
        sync.settle()
        assert sorted(r[0] for r in rows(down, "t1", ["id"])) == [0, 1, 2, 10, 20, 30], "the filtered DELETE arrived"
        assert {s["status"] for s in status(task.name).values()} == {"running"}


# ---- 2 ---------------------------------------------------------------------------------------
def _jq(path: str) -> str:
    return f"JSON_UNQUOTE(JSON_EXTRACT(j, '{path}'))"   # MySQL's j ->> path


GENERATED = [  # (name, type, expression) of DM's t_extract, in MariaDB's spelling
    ("a", "int", _jq("$.a")), ("b", "char(10)", _jq("$.b")),
    ("j1", "json", "JSON_SEARCH(j, 'one', '1')"), ("j2", "json", f"JSON_ARRAY({_jq('$.a')}, {_jq('$.b')})"),
    ("j3", "json", f"JSON_OBJECT('a', {_jq('$.a')}, 'b', {_jq('$.b')})"),
    ("j4", "json", "JSON_MERGE_PRESERVE(b, '{\"k\": \"v\"}')"), ("j5", "json", "JSON_MERGE_PATCH(b, '{\"k\": \"v\"}')"),
    ("j7", "json", "JSON_SET(b, '$.k', 'v')"), ("j8", "json", "JSON_INSERT(b, '$.k', 'v')"),
    ("j9", "json", "JSON_REPLACE(b, '$.k', 'v')"), ("j10", "json", "JSON_REMOVE(b, '$.k')"),
    ("j11", "int", "JSON_CONTAINS(b, '{\"k\": \"v\"}')"), ("j12", "int", "JSON_CONTAINS_PATH(b, 'one', '$.k')"),
    ("j13", "json", "JSON_ARRAY_APPEND(b, '$[0]', 'v')"), ("j14", "json", "JSON_ARRAY_INSERT(j3, '$[0]', 'v')"),
]
JSONS = ["'{\"a\":1, \"b\": {\"a\":1}}'", "'{\"a\":1, \"b\": [1,2,3]}'", "'[1,2]'", "'true'", "'false'", "NULL",
         "'\"string\"'", "'1'", "'3.14'", "'{\"a\":1, \"b\": {\"a\":1}, \"c\": \"string\"}'"]


def test_dm_all_mode_json_generated_columns(case, stack):
    files, store = case
    up1 = stack["up1"]
    with global_modes(stack):
        cols = ", ".join(f"{n} {t} AS ({e})" for n, t, e in GENERATED)
        inserts = [f"INSERT INTO t_extract (j) VALUES ({v})" for v in JSONS]
        run_sql(up1, f"CREATE DATABASE {DB}", f"USE {DB}",
                f"CREATE TABLE t_extract (id int PRIMARY KEY AUTO_INCREMENT, j json, {cols})", *inserts)
        run_sql(stack["up2"], f"CREATE DATABASE {DB}")
        source_files(files, gtid1=False)
        task, sync = start_task(files.task("dm-task-expression-filter.yaml"), store, remove_meta=True)
        every = ["id", "j"] + [n for n, _, _ in GENERATED]
        equal(stack, "t_extract", every)
        run_sql(up1, f"USE {DB}", *inserts,
                *[f"ALTER TABLE t_extract ADD COLUMN alt_{n} {t} AS ({e})" for n, t, e in GENERATED], *inserts)
        sync.settle()
        got = equal(stack, "t_extract", every + [f"alt_{n}" for n, _, _ in GENERATED])
        assert len(got) == 30


# ---- 3, 4 ------------------------------------------------------------------------------------
def test_dm_all_mode_session_config_and_a_minimal_row_image(case, stack):
    files, store = case
    up1, down = stack["up1"], stack["down"]
    with global_modes(stack):
        prepare(stack)
        source_files(files)
        path = named(files)
        text = path.read_text()
        path.write_text(text.replace("tidb_retry_limit: '10'", "tidb_retry_limit: fjs"))
        task, sync = start_task(path, store, remove_meta=True)
        assert task.name == NAME
        run_sql(up1, f"CREATE TABLE IF NOT EXISTS {DB}.t1 (c int)", f"INSERT INTO {DB}.t1 (id, name) VALUES (9, 'haha')")
        sync.settle()
        equal(stack, "t1", T1)
        equal(stack, "t2", T2, "up2")
        assert {s["status"] for s in status(NAME).values()} == {"running"}

        # a row change written with binlog_row_image=MINIMAL: the image lacks columns
        run_sql(up1, "SET SESSION binlog_row_image = 'MINIMAL'", f"UPDATE {DB}.t1 SET name = 'hoho' WHERE id = 9")
        assert sync.settle(paused_ok=True)[S1] == "paused"
        st = status(NAME)[S1]
        assert st["status"] == "paused" and "upstream didn't log enough columns in binlog" in st["error"], st
        assert "`all_mode`.`t1`" in st["error"] and "dt" in st["error"] and "binlog_row_image" in st["error"], st
        assert rows(down, "t1", ["id", "name"], DB)[-1] == (9, "haha"), "nothing written from the partial image"
        assert sorted(r[0] for r in rows(down, "t1", ["id"])) == [0, 1, 2, 9]

        # 4. stop-task: no connection of the task is left on any server
        stop_task(NAME)
        assert set(sync.step().values()) == {"stopped"}
        for key in ("up1", "up2", "down"):  # DM: SHOW PROCESSLIST has one row, its own
            got = [r for r in run_sql(stack[key], "SHOW FULL PROCESSLIST") if r[1] != "system user"]
            assert [r[7] for r in got] == ["SHOW FULL PROCESSLIST"], (key, got)


# ---- 5 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("fname", ["regexpr-task.yaml", "regexpr-task-lightning.yaml"])
def test_dm_all_mode_regular_expression_routes(case, stack, fname):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    with global_modes(stack):
        run_sql(up1, "CREATE DATABASE test2animal",
                "CREATE TABLE test2animal.tbl_animal_dogcat (a int, b int, PRIMARY KEY (a))",
                "INSERT INTO test2animal.tbl_animal_dogcat VALUES (1, 1), (2, 2), (3, 3)")
        run_sql(up2, "CREATE DATABASE test4s_2022",
                "CREATE TABLE test4s_2022.testtable_donot_delete (a int, b int, PRIMARY KEY (a))",
                "INSERT INTO test4s_2022.testtable_donot_delete VALUES (1, 1), (2, 2), (3, 3), (4, 4)")
        run_sql(down, "CREATE DATABASE dtest2", "CREATE DATABASE dtest4")
        source_files(files)
        task, sync = start_task(files.task(fname), store, remove_meta=True)
        assert task.name.startswith("regexprtest")
        run_sql(up1, "INSERT INTO test2animal.tbl_animal_dogcat VALUES (4, 4)")
        run_sql(up2, "UPDATE test4s_2022.testtable_donot_delete SET b = 40 WHERE a = 4")
        sync.settle()
        assert rows(down, "dtable2", ["a", "b"], "dtest2") == rows(up1, "tbl_animal_dogcat", ["a", "b"], "test2animal")
        assert rows(down, "dtable4", ["a", "b"], "dtest4") == rows(up2, "testtable_donot_delete", ["a", "b"], "test4s_2022")
        assert run_sql(down, "SELECT table_name FROM information_schema.tables "
                             "WHERE table_schema IN ('test2animal', 'test4s_2022')") == [], "a table kept its name"


# ---- 6 ---------------------------------------------------------------------------------------
def _increment(stack) -> None:
    """DM's data/db1.increment.sql and db2.increment.sql situations, in MariaDB's spelling (no
    functional indexes: MySQL 8.0.13+ only)."""
    run_sql(stack["up1"], f"USE {DB}",
            "INSERT INTO t1 (id, name) VALUES (3, 'Eddard Stark')",
            "UPDATE t1 SET name = 'Arya Stark' WHERE id = 1", "UPDATE t1 SET name = 'Catelyn Stark' WHERE name = 'catelyn'",
            "ALTER TABLE t1 ADD COLUMN info json",
            "ALTER TABLE t1 ADD COLUMN gen_id int AS (JSON_VALUE(info, '$.id'))",
            "ALTER TABLE t1 ADD INDEX multi_col (id, gen_id, ts)",
            "INSERT INTO t1 (id, name, info) VALUES (4, 'gentest', '{\"id\": 123}')",
            "INSERT INTO t1 (id, name, info) VALUES (5, 'gentest', '{\"id\": 124}')",
            "UPDATE t1 SET info = '{\"id\": 120}', ts = '2021-05-11 12:02:05' WHERE id = 1",
            "UPDATE t1 SET info = '{\"id\": 121}' WHERE id = 2", "UPDATE t1 SET info = '{\"id\": 122}' WHERE id = 3",
            "ALTER TABLE t1 ADD COLUMN info2 varchar(40)",
            "INSERT INTO t1 (id, name, info) VALUES (6, 'gentest', '{\"id\": 125, \"test cache\": false}')",
            "ALTER TABLE t1 ADD UNIQUE KEY gen_idx (gen_id)",
            "UPDATE t1 SET name = 'gentestxx' WHERE gen_id = 123",
            "INSERT INTO t1 (id, name, info) VALUES (7, 'gentest', '{\"id\": 126}')",
            "UPDATE t1 SET name = 'gentestxxxxxx', dt = '2021-05-11 12:03:05', ts = '2021-05-11 12:03:05' WHERE gen_id = 124",
            "DELETE FROM t1 WHERE gen_id > 124",
            "CREATE TABLE t_stored_gen_unique (id int PRIMARY KEY, name varchar(64), "
            "lower_name varchar(64) GENERATED ALWAYS AS (lower(name)) STORED, UNIQUE KEY uk_lower_name (lower_name))",
            "REPLACE INTO t_stored_gen_unique (id, name) VALUES (10, 'Carol')",
            "REPLACE INTO t_stored_gen_unique (id, name) VALUES (20, 'Carol')",
            "REPLACE INTO t_stored_gen_unique (id, name) VALUES (30, 'Dave')",
            "REPLACE INTO t_stored_gen_unique (id, name) VALUES (40, 'DAVE')",
            "ALTER TABLE t1 ADD COLUMN lat decimal(9,6) DEFAULT '0.000000'",
            "INSERT INTO t1 (id, name, info, lat) VALUES (8, 'gentest', '{\"id\":127}', '123.123')",
            "ALTER TABLE t1 ADD COLUMN bin bit(1) DEFAULT NULL",
            "INSERT INTO t1 (id, name, info, lat, bin) VALUES (9, 'gentest', '{\"id\":128}', '123.123', b'0')",
            "INSERT INTO t1 (id, name, info, lat, bin) VALUES (10, 'gentest', '{\"id\":129}', '123.123', b'1')",
            "ALTER TABLE t1 ADD COLUMN big1 bigint", "ALTER TABLE t1 ADD COLUMN big2 bigint unsigned",
            "INSERT INTO t1 (id, name, info, lat, big1, big2) VALUES (11, 'gentest', '{\"id\":130}', '123.123', "
            "-9223372036854775808, 0)",
            "INSERT INTO t1 (id, name, info, lat, big1, big2) VALUES (12, 'gentest', '{\"id\":131}', '123.123', "
            "9223372036854775807, 18446744073709551615)",
            "SET @@session.time_zone = '+07:00'",
            "INSERT INTO t1 (id, name, info) VALUES (13, 'tztest', '{\"id\": 132}')")
    run_sql(stack["up2"], f"USE {DB}", "DELETE FROM t2 WHERE name = 'Sansa'",
            "INSERT INTO t2 (id, name) VALUES (0, 'haha')")   # 0 stays 0 (NO_AUTO_VALUE_ON_ZERO)


T1_ALL = T1 + ["info", "gen_id", "info2", "lat", "bin + 0", "big1", "big2"]
SAME_WALL_CLOCK = "SELECT count(*) FROM all_mode.no_diff WHERE dt = ts"


def test_dm_all_mode(case, stack):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    with global_modes(stack):
        # a target table of the user's with two more columns; a greek table; an ignored database
        run_sql(down, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.no_diff (id int NOT NULL PRIMARY KEY, "
                "dt datetime NOT NULL DEFAULT CURRENT_TIMESTAMP, ts timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP)")
        prepare(stack)
        run_sql(up1, f"CREATE TABLE {DB}.no_diff2 (id int PRIMARY KEY, name varchar(20)) CHARSET=greek",
                f"INSERT INTO {DB}.no_diff2 VALUES (1, 'αβγ')")
        source_files(files)
        task, sync = start_task(named(files), store, remove_meta=True)
        equal(stack, "t1", T1)
        equal(stack, "t2", T2, "up2")
        assert run_sql(down, f"SELECT count(1) FROM {DB}.no_diff2 WHERE name = 'αβγ'") == [(1,)]
        assert rows(down, "no_diff", ["id"]) == [(1,), (2,), (3,)]
        # DM: the task's timezone (+04:00) is the downstream session's, so the defaults agree there
        wall_clock = [run_sql(down, "SET time_zone = '+04:00'", SAME_WALL_CLOCK)[0][0]]

        # a view is skipped; the sources keep running
        run_sql(up1, f"CREATE VIEW {DB}.t1_v AS SELECT * FROM {DB}.t1 WHERE id = 0")
        sync.settle()
        st = status(NAME)
        assert {s["status"] for s in st.values()} == {"running"} and not st[S1]["error"], st
        assert run_sql(down, f"SHOW FULL TABLES FROM {DB} WHERE Table_type = 'VIEW'") == []

        # pause, resume, every source restarted (DM: its workers killed and started again)
        rc, out, err = dmctl("pause-task", NAME)
        assert rc == 0, out + err
        assert set(sync.step().values()) == {"paused"}
        assert {s["status"] for s in status(NAME).values()} == {"paused"}
        rc, out, err = dmctl("resume-task", NAME)
        assert rc == 0, out + err
        sync.restart()
        sync.settle()

        # rows under other session zones, then DM's increment: generated columns and keys over them,
        # DECIMAL, BIT, BIGINT at both ends, 0 in an AUTO_INCREMENT column
        run_sql(up2, f"DELETE FROM {DB}.t2 WHERE id = 1")
        run_sql(up1, "FLUSH LOGS", "SET SESSION time_zone = '+03:00'", f"USE {DB}", "INSERT INTO no_diff (id) VALUES (5)",
                "INSERT INTO t1 (id, name, ts) VALUES (100, 'Eddard Stark', '2021-05-11 12:01:05')")
        sync.settle()
        equal(stack, "t1", T1)
        equal(stack, "t2", T2, "up2")
        assert rows(down, "no_diff", ["id"]) == [(1,), (2,), (3,), (5,)]
        wall_clock.append(run_sql(down, "SET time_zone = '+04:00'", SAME_WALL_CLOCK)[0][0])
        _increment(stack)
        sync.settle()
        got = equal(stack, "t1", T1_ALL)
        assert sorted(r[0] for r in got) == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 100]
        assert equal(stack, "t_stored_gen_unique", ["id", "name", "lower_name"]) == [(20, "Carol", "carol"),
                                                                                    (40, "DAVE", "dave")]
        assert sorted(r[0] for r in equal(stack, "t2", T2, "up2")) == [0, 2]
        dbs = [r[0] for r in run_sql(down, "SHOW DATABASES")]
        assert DB in dbs and "ignore_db" not in dbs

        # DROP TABLE IF EXISTS of tables that do not exist, twice on each upstream
        for ep, t in ((up1, "tb1"), (up2, "tb2")):
            run_sql(ep, f"DROP TABLE IF EXISTS {DB}.{t}", f"DROP TABLE IF EXISTS {DB}.{t}")
        sync.settle()

        # the target database is gone downstream: the next CREATE TABLE pauses, naming why
        run_sql(down, f"DROP DATABASE {DB}")
        run_sql(up1, f"CREATE TABLE {DB}.db_error (c int PRIMARY KEY)")
        assert sync.settle(paused_ok=True)[S1] == "paused"
        err = status(NAME)[S1]["error"]
        assert "Unknown database" in err and "db_error" in err, err
        stop_task(NAME)
        assert set(sync.step().values()) == {"stopped"}
    if wall_clock != [3, 4]:
        pytest.xfail(f"DM runs the downstream session at the task's timezone (+04:00), so a DATETIME column the "
                     f"user added downstream with DEFAULT CURRENT_TIMESTAMP gets +04:00 wall-clock time and equals "
                     f"its TIMESTAMP read at +04:00 (DM: 3, then 4 rows); shardflow's sessions run at +00:00 by "
                     f"design (docs/compatibility.md: time zones), so they differ by the offset (got {wall_clock})")


# ---- 7 ---------------------------------------------------------------------------------------
def test_dm_all_mode_empty_gtid_and_a_checkpoint_after_ddl_that_changes_nothing(case, stack):
    """DM: test_source_and_target_with_empty_gtid (after run.sh sets the global modes back)."""
    files, store = case
    up1, down = stack["up1"], stack["down"]
    run_sql(up1, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t1 (i TINYINT, j INT UNIQUE KEY)", "RESET MASTER")
    assert run_sql(up1, "SELECT @@GLOBAL.gtid_binlog_pos") == [("",)], "the upstream's GTID state is empty"
    source_files(files)
    task, sync = start_task(files.task("dm-task-no-gtid.yaml"), store, remove_meta=True)
    run_sql(up1, f"INSERT INTO {DB}.t1 VALUES (1, 1001)")
    sync.settle()
    assert status(task.name)[S1]["status"] == "running"
    assert rows(down, "t1", ["i", "j"]) == rows(up1, "t1", ["i", "j"]) == [(1, 1001)]

    def synced() -> None:  # every event up to the upstream's position now is behind the checkpoint
        sync.settle()
        rc, out, err = dmctl("query-status", task.name, "--wait-synced", "30")
        assert rc == 0, out + err

    run_sql(up1, f"CREATE TABLE {DB}.t2 (c int PRIMARY KEY)")       # a DDL that runs downstream
    synced()
    assert run_sql(down, f"SHOW TABLES FROM {DB} LIKE 't2'") == [("t2",)]
    run_sql(up1, f"CREATE FUNCTION {DB}.hello (s CHAR(20)) RETURNS CHAR(50) DETERMINISTIC RETURN 'a'")
    synced()
    run_sql(up1, f"ANALYZE TABLE {DB}.t1")
    synced()
    run_sql(up1, "CREATE DATABASE xxx")                              # a database the task does not move
    synced()
    assert "xxx" not in [r[0] for r in run_sql(down, "SHOW DATABASES")]
