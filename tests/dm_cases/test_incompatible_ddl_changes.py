"""DM's `incompatible_ddl_changes` case (pingcap/tiflow dm/tests/incompatible_ddl_changes/run.sh), with
DM's own task and source files (conf/, vendored unchanged) and our own statements, run with both task
files as DM does: `dm-task.yaml` (a filter with the group `incompatible ddl changes`, action Error) and
`dm-task1.yaml` (the same events listed one by one). Then once more with dm-task1.yaml's action turned
to Ignore (in memory, as run.sh's `sed` would), which DM's case does not run.

1. a table with a column of every type; the task (all mode); rows of every type through the binlog,
   then an ADD COLUMN (compatible: it runs); synced;
2. DM's sequence of DDLs, each paused on with the event DM names and skipped with `dmctl binlog skip`
   (or, where DM does not pause, run downstream): MODIFY to a narrower integer (value range decrease),
   back (runs); DECIMAL(7,1) and then DECIMAL(7,2) (precision decrease twice: the second is judged
   against the first, which was skipped, as DM's schema tracker does); to VARCHAR and back (modify
   column twice); CHANGE to another name and back (rename column twice); DROP COLUMN (drop column),
   ADD of the same column (runs: the downstream still has it, and its "Duplicate column" is ignored
   as DM ignores it); CHANGE dropping AUTO_INCREMENT (remove auto increment); DROP PRIMARY KEY;
   CHANGE with a DEFAULT (modify default value); ADD CONSTRAINT UNIQUE (modify constraint); CHANGE
   without UNIQUE (drop unique key); DROP INDEX; CHANGE ... AFTER (modify columns order); a column's
   CHARACTER SET (modify charset) and COLLATE (modify collation); ENGINE (modify storage engine);
   PARTITION BY (runs); REORGANIZE / TRUNCATE / REBUILD / EXCHANGE / COALESCE / DROP PARTITION; ADD
   INDEX (modify constraint), RENAME INDEX; RENAME TABLE, TRUNCATE TABLE, DROP TABLE, DROP DATABASE.
   Every pause names the event, the table, the statement and the binlog position where the
   statement starts (what `binlog skip` acts on); the downstream keeps the table as it was;
3. (Ignore) the same statements, none pauses: each incompatible one leaves the downstream as it was
   (no column narrowed, renamed, dropped, no key or option changed, no partition reorganized, the
   tables and the database stay), the compatible ones run, and rows written in between land.

MariaDB stands in for DM's MySQL upstream: `text(10)` is TINYTEXT, `->` is not needed. DM's metrics
and its second start of the task after a stop are not ported.
"""

import json
from decimal import Decimal

import pytest

from .harness import dm_case, dmctl, register_sources, run_sql, start, table_rows

pytestmark = pytest.mark.integration

DB = "incompatible_ddl_changes"
T1 = f"{DB}.t1"

# (statement, the event DM pauses with, or None: DM runs it)
SEQUENCE = [
    (f"ALTER TABLE {T1} MODIFY COLUMN c_mediumint smallint(6)", "value range decrease"),
    (f"ALTER TABLE {T1} MODIFY COLUMN c_mediumint mediumint(7)", None),
    (f"ALTER TABLE {T1} MODIFY COLUMN c_decimal decimal(7,1)", "precision decrease"),
    (f"ALTER TABLE {T1} MODIFY COLUMN c_decimal decimal(7,2)", "precision decrease"),
    (f"ALTER TABLE {T1} MODIFY COLUMN c_mediumint varchar(10)", "modify column"),
    (f"ALTER TABLE {T1} MODIFY COLUMN c_mediumint mediumint(7)", "modify column"),
    (f"ALTER TABLE {T1} CHANGE c_mediumint c_mediumint_new mediumint(7)", "rename column"),
    (f"ALTER TABLE {T1} CHANGE c_mediumint_new c_mediumint mediumint(7)", "rename column"),
    (f"ALTER TABLE {T1} DROP COLUMN c_json", "drop column"),
    (f"ALTER TABLE {T1} ADD COLUMN c_json json", None),
    (f"ALTER TABLE {T1} CHANGE id id int(11)", "remove auto increment"),
    (f"ALTER TABLE {T1} DROP PRIMARY KEY", "drop primary key"),
    (f"ALTER TABLE {T1} CHANGE c_int c_int int DEFAULT 1", "modify default value"),
    (f"ALTER TABLE {T1} ADD CONSTRAINT c_int_unique UNIQUE (c_int)", "modify constraint"),
    (f"ALTER TABLE {T1} CHANGE c_int c_int int", "drop unique key"),
    (f"ALTER TABLE {T1} DROP INDEX c_int_unique", "drop index"),
    (f"ALTER TABLE {T1} CHANGE c_smallint c_smallint smallint(6) AFTER c_json", "modify columns order"),
    (f"ALTER TABLE {T1} MODIFY c_char char(4) CHARACTER SET latin1", "modify charset"),
    (f"ALTER TABLE {T1} MODIFY c_text text COLLATE utf8mb4_unicode_ci", "modify collation"),
    (f"ALTER TABLE {T1} ENGINE = MyISAM", "modify storage engine"),
    (f"ALTER TABLE {T1} PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100000))", None),
    (f"ALTER TABLE {T1} REORGANIZE PARTITION p0 INTO (PARTITION n0 VALUES LESS THAN (5), "
     "PARTITION n1 VALUES LESS THAN (100000))", "reorganize table partition"),
    (f"ALTER TABLE {T1} TRUNCATE PARTITION n0", "truncate table partition"),
    (f"ALTER TABLE {T1} REBUILD PARTITION n0, n1", "rebuild table partition"),
    (f"CREATE TABLE {DB}.tb1 (id int) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100000), "
     "PARTITION p1 VALUES LESS THAN (1000000))", None),
    (f"CREATE TABLE {DB}.tb2 (id int)", None),
    (f"ALTER TABLE {DB}.tb1 EXCHANGE PARTITION p0 WITH TABLE {DB}.tb2", "exchange table partition"),
    (f"CREATE TABLE {DB}.tb3 (id int) PARTITION BY HASH (id) PARTITIONS 6", None),
    (f"ALTER TABLE {DB}.tb3 COALESCE PARTITION 2", "coalesce table partition"),
    (f"ALTER TABLE {DB}.tb3 ADD INDEX idx (id)", "modify constraint"),
    (f"ALTER TABLE {DB}.tb3 RENAME INDEX idx TO idx1", "rename index"),
    (f"ALTER TABLE {DB}.tb1 DROP PARTITION p0", "drop table partition"),
    "rows",   # (Ignore) rows written upstream here must land downstream
    (f"RENAME TABLE {DB}.tb3 TO {DB}.tb4", "rename table"),
    (f"TRUNCATE TABLE {DB}.tb4", "truncate table"),
    (f"DROP TABLE {DB}.tb4", "drop table"),
    (f"DROP DATABASE {DB}", "drop database"),
]


@pytest.fixture(params=["dm-task.yaml", "dm-task1.yaml", "ignore"])
def case(request, stack, tmp_path):
    task_file = "dm-task1.yaml" if request.param == "ignore" else request.param
    placeholders = {"action: Error": "action: Ignore"} if request.param == "ignore" else None
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [DB], "down": [DB]}, flavor="mariadb",
                 task_file=task_file, placeholders=placeholders) as (files, store):
        yield files, store, request.param == "ignore"


def _prepare(up) -> None:
    run_sql(up, f"CREATE DATABASE {DB} CHARACTER SET utf8mb4",
            f"CREATE TABLE {T1} (id int NOT NULL AUTO_INCREMENT, should_skip int, c_null int, c_bit bit(8), "
            "c_tinyint tinyint(5) unsigned, c_smallint smallint(6), c_mediumint mediumint(7), c_int int(8), "
            "c_bigint bigint(9) unsigned, c_decimal decimal(7,2), c_float float(10), c_double double, c_date date, "
            "c_datetime datetime(3), c_timestamp timestamp(4) NULL, c_time time(5), c_year year, c_char char(4), "
            "c_varchar varchar(255), c_binary binary(1), c_varbinary varbinary(4), c_tinyblob tinyblob, "
            "c_tinytext tinytext, c_blob blob(20), c_text text(10), c_mediumblob mediumblob, c_mediumtext mediumtext, "
            "c_longblob longblob, c_longtext longtext, c_enum enum('a','b','c'), c_set set('a','b','c'), c_json json, "
            "PRIMARY KEY (id))")


def _rows(up) -> None:
    values = {"c_null": ("NULL", "7"), "c_bit": ("b'0110'", "b'1001'"), "c_tinyint": ("3", "250"),
              "c_smallint": ("-6", "26"), "c_mediumint": ("-7", "27"), "c_int": ("8", "-28"),
              "c_bigint": ("9", "18446744073709551615"), "c_decimal": ("-10.01", "30.02"),
              "c_float": ("1.5", "-31.25"), "c_double": ("12.32", "-3.2e100"), "c_date": ("'1999-12-31'", "'2024-02-29'"),
              "c_datetime": ("'1000-01-01 00:00:00.001'", "'2038-01-19 03:14:07.999'"),
              "c_timestamp": ("'2001-01-01 12:34:56.1234'", "'2030-06-30 23:59:59.9999'"),
              "c_time": ("'-838:59:58.12345'", "'12:00:00.5'"), "c_year": ("1999", "2155"),
              "c_char": ("'abcd'", "'ñ'"), "c_varchar": ("'x'", "'Zürich'"), "c_binary": ("'a'", "X'00'"),
              "c_varbinary": ("'cd'", "X'0001'"), "c_tinyblob": ("'a'", "X'FF'"), "c_tinytext": ("'c'", "'d'"),
              "c_blob": ("'qwer'", "'asdf'"), "c_text": ("'qwe'", "'asd'"), "c_mediumblob": ("'m'", "'n'"),
              "c_mediumtext": ("'mm'", "'nn'"), "c_longblob": ("'l'", "'o'"), "c_longtext": ("'ll'", "'oo'"),
              "c_enum": ("'a'", "'c'"), "c_set": ("'a'", "'b,c'"), "c_json": ("'{\"id\": 1}'", "'[1, {\"a\": null}]'")}
    run_sql(up, "SET SESSION time_zone = '+08:00'",
            *[f"INSERT INTO {T1} (should_skip, {c}) VALUES (0, {a}), (1, {b})" for c, (a, b) in values.items()])


def _binlog_at(up) -> str:
    f, p = run_sql(up, "SHOW MASTER STATUS")[0][:2]
    return f"({f}, {p})"


def _columns(ep, table: str = "t1") -> list[tuple]:
    return [tuple(r) for r in run_sql(
        ep, "SELECT column_name, column_type, character_set_name, collation_name, column_default, extra "
            "FROM information_schema.columns WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
        args=(DB, table))]


def _indexes(ep, table: str = "t1") -> list[tuple]:
    return sorted(tuple(r) for r in run_sql(
        ep, "SELECT index_name, non_unique, column_name FROM information_schema.statistics "
            "WHERE table_schema = %s AND table_name = %s", args=(DB, table)))


def _table_options(ep, table: str = "t1") -> tuple:
    return tuple(run_sql(ep, "SELECT engine, create_options FROM information_schema.tables WHERE table_schema = %s "
                             "AND table_name = %s", args=(DB, table))[0])


def _partitions(ep, table: str) -> list[str]:
    return [r[0] for r in run_sql(ep, "SELECT partition_name FROM information_schema.partitions WHERE table_schema = %s "
                                      "AND table_name = %s ORDER BY partition_ordinal_position", args=(DB, table))]


def test_dm_incompatible_ddl_changes_case(case, stack):
    files, store, ignore = case
    up, down = stack["up1"], stack["down"]
    _prepare(up)
    register_sources(files)
    task, sync = start(files, store)
    sid = task.mysql_instances[0].source_id
    cols = [c[0] for c in _columns(up)]
    _rows(up)
    run_sql(up, f"ALTER TABLE {T1} ADD COLUMN dummy int")   # compatible: runs downstream
    sync.settle()
    assert table_rows(down, DB, "t1", cols + ["dummy"]) == table_rows(up, DB, "t1", cols + ["dummy"])
    before = (_columns(down), _indexes(down), _table_options(down))
    rows_now = table_rows(down, DB, "t1", cols)

    for item in SEQUENCE:
        if item == "rows":
            if ignore:   # rows keep flowing while the two tables differ: the columns both have
                run_sql(up, f"INSERT INTO {T1} (id, should_skip, c_int, c_decimal, c_char, c_json) "
                            "VALUES (1000, 2, 42, 12.5, 'ab', '{\"k\": 2}')")
            continue
        stmt, event = item
        at = _binlog_at(up)
        run_sql(up, stmt)
        states = sync.settle(paused_ok=True)
        if event is None or ignore:
            assert states[sid] != "paused", (stmt, store.source_state(task.name, sid)["error"])
            continue
        assert states[sid] == "paused", (stmt, states)
        st = store.source_state(task.name, sid)
        assert f"event {event} on `{DB}`." in st["error"], (stmt, st["error"])
        logged = st["error_stmt"].replace("`", "").replace(" /* generated by server */", "")   # DROP TABLE as logged
        assert logged == stmt and st["error_pos"] == at, (stmt, st["error_stmt"], st["error_pos"], at)
        rc, out, err = dmctl("query-status", task.name)
        view = json.loads(out)["tasks"][0]["sources"][0]
        assert view["status"] == "paused" and f"event {event}" in json.dumps(view), view
        rc, out, err = dmctl("binlog", "skip", task.name)
        assert rc == 0, out + err
        states = sync.settle(paused_ok=True)
        assert states[sid] != "paused", (stmt, store.source_state(task.name, sid)["error"])

    # the downstream kept what the incompatible statements would have changed
    after_cols = _columns(down)
    assert after_cols == before[0], "no column narrowed, renamed, dropped, moved, re-charset or re-collated"
    assert _indexes(down) == before[1], "no key added or dropped"
    assert _table_options(down)[0] == before[2][0] == "InnoDB"
    assert "partitioned" in _table_options(down)[1]          # PARTITION BY ran
    assert _partitions(down, "t1") == ["p0"]                  # REORGANIZE did not
    assert _partitions(down, "tb1") == ["p0", "p1"]           # DROP PARTITION did not
    assert _partitions(down, "tb3") == [f"p{i}" for i in range(6)]   # COALESCE did not
    assert _indexes(down, "tb3") == []                        # ADD INDEX did not
    tables = {r[0] for r in run_sql(down, f"SHOW TABLES FROM {DB}")}
    assert tables == {"t1", "tb1", "tb2", "tb3"}, "the RENAME, TRUNCATE, DROP TABLE and DROP DATABASE did not run"
    got = table_rows(down, DB, "t1", cols, "WHERE id < 1000")
    assert got == rows_now, "the rows written before the statements are untouched"
    if ignore:
        assert table_rows(down, DB, "t1", ["id", "c_int", "c_decimal", "c_char", "c_json"], "WHERE id >= 1000") == \
            [(1000, 42, Decimal("12.50"), "ab", '{"k": 2}')]
    else:
        assert run_sql(down, f"SELECT COUNT(*) FROM {T1} WHERE id >= 1000") == [(0,)]
    assert not store.source_state(task.name, sid)["error"]
