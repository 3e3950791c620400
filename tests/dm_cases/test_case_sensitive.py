"""DM's `case_sensitive` case (pingcap/tiflow dm/tests/case_sensitive/run.sh), with DM's own task
and source files (conf/, vendored unchanged; the deprecated `black-white-list`, heartbeat keys and
the source's `checker` block included) and our own statements, run twice as DM does:

* ``case-sensitive: true`` (the task file as written): the block-allow list's ``Upper_DB*`` /
  ``Do_Table*`` / ``lower_table*`` / ``Upper_Table*`` patterns, the route ``Upper_DB``.``Do_Table`` →
  ``UPPER_DB_ROUTE``.``do_table_route`` and the filter that ignores TRUNCATE on ``Upper_DB*``.``Do_Table*``
  match names in their exact case only: ``Upper_Db_IGNORE``, ``Do_table_ignore``, ``lower_Table1`` and
  ``lower_db``.``upper_table`` stay upstream;
* without it (run.sh deletes the line, and the `upper_table` that would collide with `Upper_Table` in
  DM's TiDB, whose names are case-insensitive): the same patterns match in any case, so
  ``Do_table_ignore`` and ``lower_Table1`` are replicated too, names kept as the upstream spells them.

Each run: both upstreams' global sql_mode ANSI_QUOTES,NO_AUTO_VALUE_ON_ZERO (a `"` inside a string,
a 0 written into an AUTO_INCREMENT column); the route's target database created by the user first;
full phase and a diff; both sources restarted (DM restarts both workers); then through the binlog:
DROP COLUMN, ADD INDEX, a JSON column, a generated column over it and an index on both, rows and
updates, a DELETE and the 0 id; rows of an ignored database and table; every replicated table
equals its upstream, the route's table holds 5 rows; a TRUNCATE of the routed table is dropped by
the filter (its rows stay: 6 after one more insert), while a TRUNCATE of a table the filter's
pattern does not cover runs; tables created through the binlog as `Do_Table_2` and `do_table_3`
are replicated (and their TRUNCATE ignored) as the patterns say in each mode.

Our downstream is MariaDB on Linux (lower_case_table_names=0: database and table names are
case-sensitive, as MySQL on Linux, unlike TiDB's, which compare them case-insensitively), so the
names DM's TiDB would fold together (`Upper_Table` / `upper_table`) could both exist here; the test
keeps DM's file contents and checks names in their exact case. MariaDB has no `->`: the generated
column reads JSON_EXTRACT. DM's metrics, HTTP status API and relay failpoints are not ported.
"""

import pytest

from dm_core.db import qi

from .harness import dm_case, register_sources, run_sql, start, table_rows

pytestmark = pytest.mark.integration

UP1_DBS, UP2_DBS = ["Upper_DB", "Upper_DB1", "Upper_Db_IGNORE"], ["lower_db", "lower_db_ignore"]
DOWN_DBS = ["Upper_DB", "Upper_DB1", "lower_db", "UPPER_DB_ROUTE", "Upper_Db_IGNORE", "lower_db_ignore"]
MODE = "ANSI_QUOTES,NO_AUTO_VALUE_ON_ZERO"


@pytest.fixture(params=["sensitive", "insensitive"])
def case(request, stack, tmp_path):
    sensitive = request.param == "sensitive"
    placeholders = None if sensitive else {"case-sensitive: true\n": ""}   # run.sh: sed -i "/sensitive/d"
    modes = {}
    for key in ("up1", "up2"):
        modes[key] = run_sql(stack[key], "SELECT @@GLOBAL.sql_mode")[0][0]
        run_sql(stack[key], "SET GLOBAL sql_mode = %s", args=(MODE,))
    try:
        with dm_case("case_sensitive", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                     {"up1": UP1_DBS, "up2": UP2_DBS, "down": DOWN_DBS}, placeholders=placeholders,
                     flavor="mariadb") as (files, store):
            yield files, store, sensitive
    finally:
        for key, mode in modes.items():
            run_sql(stack[key], "SET GLOBAL sql_mode = %s", args=(mode,))


def _databases(ep) -> set[str]:
    return {r[0] for r in run_sql(ep, "SHOW DATABASES")}


def _tables(ep, db: str) -> set[str]:
    return {r[0] for r in run_sql(ep, f"SHOW TABLES FROM {qi(db)}")}


def _columns(ep, db: str, table: str) -> list[str]:
    return [r[0] for r in run_sql(ep, "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                                      "AND table_name = %s ORDER BY ordinal_position", args=(db, table))]


def test_dm_case_sensitive_case(case, stack):
    files, store, sensitive = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    # clients in the servers' global mode (ANSI_QUOTES: names in backquotes, strings in single quotes)
    run_sql(up1, "CREATE DATABASE `Upper_DB`",
            "CREATE TABLE `Upper_DB`.`Do_Table` (id int NOT NULL AUTO_INCREMENT, name varchar(20), dt datetime, "
            "ts timestamp DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, PRIMARY KEY (id))",
            "INSERT INTO `Upper_DB`.`Do_Table` (id, name, dt, ts) VALUES (1, 'Tyr\"ion', NOW(), NOW()), "
            "(2, 'Brienne', '2022-03-04 05:06:07', '2022-03-04 05:06:07')",
            "CREATE TABLE `Upper_DB`.`Do_table_ignore` (id int PRIMARY KEY)",
            "INSERT INTO `Upper_DB`.`Do_table_ignore` VALUES (7)",
            "CREATE TABLE `Upper_DB`.`lower_table` (id int NOT NULL, val varchar(12), PRIMARY KEY (id))",
            "INSERT INTO `Upper_DB`.`lower_table` VALUES (0, 'zero'), (5, 'five')",
            "CREATE TABLE `Upper_DB`.`lower_Table1` (id int NOT NULL PRIMARY KEY)",
            "INSERT INTO `Upper_DB`.`lower_Table1` VALUES (11)",
            "CREATE DATABASE `Upper_DB1`",
            "CREATE TABLE `Upper_DB1`.`Do_Table1` (id int NOT NULL AUTO_INCREMENT, name varchar(20), PRIMARY KEY (id))",
            "INSERT INTO `Upper_DB1`.`Do_Table1` (id, name) VALUES (1, 'Sandor'), (2, 'Gregor')",
            "CREATE DATABASE `Upper_Db_IGNORE`", "CREATE TABLE `Upper_Db_IGNORE`.`ignore_table` (id int)")
    up2_tables = ["CREATE TABLE `lower_db`.`Upper_Table` (id int NOT NULL AUTO_INCREMENT, name varchar(20), "
                  "ts timestamp NULL, PRIMARY KEY (id))",
                  "INSERT INTO `lower_db`.`Upper_Table` (name, ts) VALUES ('Jaime', NOW()), "
                  "('Cersei', '2022-03-04 05:06:07'), ('Joffrey', NULL)"]
    if sensitive:  # an upper_table beside Upper_Table: out of the block-allow list when names are case-sensitive
        up2_tables += ["CREATE TABLE `lower_db`.`upper_table` (id int NOT NULL PRIMARY KEY)",
                       "INSERT INTO `lower_db`.`upper_table` VALUES (1)"]
    run_sql(up2, "CREATE DATABASE `lower_db`", *up2_tables,
            "CREATE DATABASE `lower_db_ignore`", "CREATE TABLE `lower_db_ignore`.`Upper_Table` (id int)")
    run_sql(down, "CREATE DATABASE IF NOT EXISTS `UPPER_DB_ROUTE`")   # the route's target, made by the user
    assert set(MODE.split(",")) <= set(run_sql(up1, "SELECT @@SESSION.sql_mode")[0][0].split(","))

    register_sources(files)
    task, sync = start(files, store)
    assert task.case_sensitive is sensitive

    def same(db: str, table: str, columns: list[str], target: tuple[str, str] | None = None):
        up = up2 if db == "lower_db" else up1
        tdb, ttb = target or (db, table)
        assert table_rows(down, tdb, ttb, columns) == table_rows(up, db, table, columns), f"{db}.{table}"

    def diff(do_table_columns):
        same("Upper_DB", "Do_Table", do_table_columns, ("UPPER_DB_ROUTE", "do_table_route"))
        same("Upper_DB1", "Do_Table1", _columns(up1, "Upper_DB1", "Do_Table1"))
        same("Upper_DB", "lower_table", ["id", "val"])
        same("lower_db", "Upper_Table", ["id", "name", "ts"])
        # what the block-allow list and the route leave out
        dbs = _databases(down)
        assert {"Upper_DB", "Upper_DB1", "lower_db", "UPPER_DB_ROUTE"} <= dbs, dbs
        assert "lower_db_ignore" not in dbs
        assert _tables(down, "UPPER_DB_ROUTE") == {"do_table_route"}
        assert _tables(down, "lower_db") == {"Upper_Table"}
        if sensitive:
            assert "Upper_Db_IGNORE" not in dbs
            assert _tables(down, "Upper_DB") == {"lower_table"}
        else:   # Do_Table* and lower_table* match Do_table_ignore and lower_Table1 in any case
            assert _tables(down, "Upper_DB") == {"lower_table", "Do_table_ignore", "lower_Table1"}
            same("Upper_DB", "Do_table_ignore", ["id"])
            same("Upper_DB", "lower_Table1", ["id"])
            if "Upper_Db_IGNORE" in dbs:   # its name matches do-dbs now, its table matches no do-tables
                assert not _tables(down, "Upper_Db_IGNORE")

    diff(["id", "name", "dt", "ts"])

    sync.restart()   # DM restarts both workers; the task resumes by itself
    run_sql(up1, "INSERT INTO `Upper_DB`.`Do_Table` (id, name, dt, ts) VALUES (100, 'Podrick', NOW(), "
                 "'2022-05-11 12:01:05')",
            "ALTER TABLE `Upper_DB`.`Do_Table` DROP COLUMN `dt`",
            "INSERT INTO `Upper_DB`.`Do_Table` (id, name, ts) VALUES (101, 'Bronn', '2022-05-31 12:01:05')",
            "ALTER TABLE `Upper_DB`.`Do_Table` ADD INDEX `idx_name_ts` (`name`, `ts`)",
            "INSERT INTO `Upper_DB`.`Do_Table` (id, name, ts) VALUES (102, 'Varys', '2022-05-31 13:01:00')",
            "INSERT INTO `Upper_DB1`.`Do_Table1` (id, name) VALUES (3, 'third')",
            "ALTER TABLE `Upper_DB1`.`Do_Table1` ADD COLUMN info json",
            "ALTER TABLE `Upper_DB1`.`Do_Table1` ADD COLUMN gen_id int AS (JSON_EXTRACT(info, '$.id'))",
            "ALTER TABLE `Upper_DB1`.`Do_Table1` ADD INDEX multi_col (`name`, `gen_id`)",
            "INSERT INTO `Upper_DB1`.`Do_Table1` (id, name, info) VALUES (4, 'gentest', '{\"id\": 123}')",
            "INSERT INTO `Upper_DB1`.`Do_Table1` (id, name, info) VALUES (5, 'gentest', '{\"id\": 124}')",
            "UPDATE `Upper_DB1`.`Do_Table1` SET info = '{\"id\": 120}' WHERE id = 1",
            "UPDATE `Upper_DB1`.`Do_Table1` SET info = '{\"id\": 121}' WHERE id = 2",
            "UPDATE `Upper_DB1`.`Do_Table1` SET info = '{\"id\": 122}' WHERE id = 3",
            "INSERT INTO `Upper_Db_IGNORE`.`ignore_table` (id) VALUES (0)",
            "ALTER TABLE `Upper_Db_IGNORE`.`ignore_table` ADD COLUMN description varchar(32)",
            "INSERT INTO `Upper_Db_IGNORE`.`ignore_table` (id, description) VALUES (0, 'ignored')",
            "INSERT INTO `Upper_DB`.`Do_table_ignore` VALUES (8)", "INSERT INTO `Upper_DB`.`lower_Table1` VALUES (12)")
    run_sql(up2, "DELETE FROM `lower_db`.`Upper_Table` WHERE name = 'Joffrey'",
            "INSERT INTO `lower_db`.`Upper_Table` (id, name) VALUES (0, 'Tommen')",   # NO_AUTO_VALUE_ON_ZERO: id 0
            "INSERT INTO `lower_db_ignore`.`Upper_Table` (id) VALUES (1)",
            *(["INSERT INTO `lower_db`.`upper_table` VALUES (2)"] if sensitive else []))
    sync.settle()
    assert run_sql(up2, "SELECT COUNT(*) FROM `lower_db`.`Upper_Table` WHERE id = 0") == [(1,)]
    diff(["id", "name", "ts"])
    assert _columns(down, "UPPER_DB_ROUTE", "do_table_route") == ["id", "name", "ts"]
    assert {r[2] for r in run_sql(down, "SHOW INDEX FROM `UPPER_DB_ROUTE`.`do_table_route`")} >= {"idx_name_ts"}
    assert {r[2] for r in run_sql(down, "SHOW INDEX FROM `Upper_DB1`.`Do_Table1`")} >= {"multi_col"}
    assert table_rows(down, "Upper_DB1", "Do_Table1", ["id", "gen_id"], "WHERE gen_id IS NOT NULL") == \
        [(1, 120), (2, 121), (3, 122), (4, 123), (5, 124)]
    assert run_sql(down, "SELECT COUNT(*) FROM `UPPER_DB_ROUTE`.`do_table_route`") == [(5,)]

    # the binlog event filter: TRUNCATE of Upper_DB*.Do_Table* is ignored; the row after it lands
    run_sql(up1, "TRUNCATE TABLE `Upper_DB`.`Do_Table`",
            "INSERT INTO `Upper_DB`.`Do_Table` (id, name) VALUES (103, 'new')",
            "TRUNCATE TABLE `Upper_DB`.`lower_table`")   # not a Do_Table*: runs
    sync.settle()
    assert run_sql(down, "SELECT COUNT(*) FROM `UPPER_DB_ROUTE`.`do_table_route`") == [(6,)]
    assert run_sql(down, "SELECT COUNT(*) FROM `Upper_DB`.`lower_table`") == [(0,)]

    # tables created through the binlog, named in two cases: the patterns decide as for the first ones
    run_sql(up1, "CREATE TABLE `Upper_DB`.`Do_Table_2` (id int PRIMARY KEY)",
            "CREATE TABLE `Upper_DB`.`do_table_3` (id int PRIMARY KEY)",
            "INSERT INTO `Upper_DB`.`Do_Table_2` VALUES (1), (2)", "INSERT INTO `Upper_DB`.`do_table_3` VALUES (1), (2)",
            "TRUNCATE TABLE `Upper_DB`.`Do_Table_2`", "TRUNCATE TABLE `Upper_DB`.`do_table_3`",
            "INSERT INTO `Upper_DB`.`Do_Table_2` VALUES (3)", "INSERT INTO `Upper_DB`.`do_table_3` VALUES (3)")
    sync.settle()
    assert table_rows(down, "Upper_DB", "Do_Table_2", ["id"]) == [(1,), (2,), (3,)], "TRUNCATE ignored by the filter"
    if sensitive:
        assert "do_table_3" not in _tables(down, "Upper_DB")
    else:
        assert table_rows(down, "Upper_DB", "do_table_3", ["id"]) == [(1,), (2,), (3,)]
