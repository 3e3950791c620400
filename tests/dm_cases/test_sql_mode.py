"""DM's `sql_mode` case (pingcap/tiflow dm/tests/sql_mode/run.sh), with DM's own task and source
files (conf/, vendored unchanged) and its statements (data/*.sql, transcribed here):

- upstream 1 runs with a global sql_mode of nearly every flag (NO_BACKSLASH_ESCAPES,
  PIPES_AS_CONCAT, IGNORE_SPACE, REAL_AS_FLOAT, HIGH_NOT_PRECEDENCE, NO_AUTO_VALUE_ON_ZERO,
  strict and zero-date modes ...), upstream 2 with ''; the clients then write under their own
  session modes, before the task starts (full phase) and after (binlog);
- a table created under NO_BACKSLASH_ESCAPES with generated columns whose regular expressions
  hold backslashes: DM checks that the downstream's expression keeps both backslashes;
- ours, in the same spirit: a table created under REAL_AS_FLOAT, PIPES_AS_CONCAT and
  NO_BACKSLASH_ESCAPES (a REAL column, a DEFAULT with a backslash, a generated ``||``), whose
  downstream definition must be the upstream's: a DDL means what it meant in the session that
  ran it, so the syncer replays it under that session's sql_mode (the QUERY event records it).

Every table downstream must equal its upstream, column definitions included. DM's case uses
the named zones Asia/Shanghai and America/Phoenix; the local servers have no zone tables, so
their offsets in April 2001 (+08:00, -07:00) stand in.
"""

import pytest


from .harness import dm_case, register_sources, run_sql, start, table_rows

pytestmark = pytest.mark.integration

WILD = ("PIPES_AS_CONCAT,IGNORE_SPACE,ONLY_FULL_GROUP_BY,NO_UNSIGNED_SUBTRACTION,NO_DIR_IN_CREATE,NO_AUTO_VALUE_ON_ZERO,"
        "NO_BACKSLASH_ESCAPES,STRICT_TRANS_TABLES,STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ALLOW_INVALID_DATES,"
        "ERROR_FOR_DIVISION_BY_ZERO,HIGH_NOT_PRECEDENCE,NO_ENGINE_SUBSTITUTION,REAL_AS_FLOAT")
DB2_MODE = ("ONLY_FULL_GROUP_BY,NO_UNSIGNED_SUBTRACTION,NO_DIR_IN_CREATE,STRICT_TRANS_TABLES,STRICT_ALL_TABLES,"
            "NO_ZERO_IN_DATE,NO_ZERO_DATE,ALLOW_INVALID_DATES,ERROR_FOR_DIVISION_BY_ZERO,HIGH_NOT_PRECEDENCE,"
            "NO_ENGINE_SUBSTITUTION,REAL_AS_FLOAT")
T_1 = ("CREATE TABLE `t_1` (`id` int NOT NULL AUTO_INCREMENT, `name` varchar(60), `num` int, `dt` datetime, "
       "PRIMARY KEY (id))")


def db1(first: bool, sum_or_count: str, ids: tuple[int, int]) -> list[str]:
    """db1.prepare.sql / db1.increment.sql (session sql_mode '')."""
    head = ["set @@session.SQL_MODE=''"]
    if first:
        head += ["drop database if exists `sql_mode`", "create database `sql_mode`"]
    head += ["use `sql_mode`"] + ([T_1] if first else [])
    body = ["insert into t_1(num) values('pipes'||'as'||'concat')", 'insert into t_1(name) values("a")',
            f"create table {sum_or_count} (id int not null, primary key(id))",
            f"insert into t_1(id, name) values ({ids[0]}, 'a')", "insert into t_1(id, name) values (0, 'b')",
            "insert into t_1(id, name) values (0, 'c')", "insert into t_1(name) values ('\\\\a')",
            "insert into t_1(dt) values('0000-06-00')", "insert into t_1(dt) values('0000-00-01')",
            "insert into t_1(dt) values('0000-06-01')", "insert into t_1(dt) values('0000-00-00')",
            "insert into t_1(num) values(4/0)"]
    if first:
        body += ["create table if not exists `sql_mode`.`timezone` (`id` int, `a` timestamp, PRIMARY KEY (id))",
                 "set @@session.time_zone = '+08:00'",
                 "insert into `sql_mode`.`timezone`(`id`, `a`) values (1, '2001-04-15 01:30:12')",
                 "set @@session.time_zone = '-07:00'",
                 "insert into `sql_mode`.`timezone`(`id`, `a`) values (4, '2001-04-15 01:30:12')"]
    return head + body


def db2(first: bool, ids: tuple[int, ...]) -> list[str]:
    """db2.prepare.sql / db2.increment.sql (a strict session mode, flags added one by one)."""
    out = [f"set @@session.sql_mode='{DB2_MODE}'"]
    if first:
        out += ["drop database if exists `sql_mode`", "create database `sql_mode`", "use `sql_mode`",
                T_1.replace("t_1", "t_2")]
    else:
        out += ["use sql_mode"]
    out += ["set @@session.sql_mode=concat(@@session.sql_mode, ',PIPES_AS_CONCAT')",
            "insert into t_2(name) values('pipes'||'as'||'concat')", 'insert into t_2(name) values("a")',
            "set @@session.sql_mode=concat(@@session.sql_mode, ',IGNORE_SPACE')",
            "insert into t_2(name) values(concat ('ignore', 'space'))",
            "set @@session.sql_mode=concat(@@session.sql_mode, ',NO_AUTO_VALUE_ON_ZERO')",
            f"insert into t_2(id, name) values ({ids[0]}, 'a')",
            "insert into t_2(id, name) values (0, 'b')" if first else "replace into t_2(id, name) values (0, 'c')",
            "set @@session.sql_mode=concat(@@session.sql_mode, ',NO_BACKSLASH_ESCAPES')",
            "insert into t_2(name) values ('\\\\a')"]
    return out


GENERATED_T0 = ('create table sql_mode.t0(id bigint primary key, a text,'
                'b text as ((regexp_replace(a, "^([a-zA-Z]+-?)+[a-zA-Z0-9]+\\\\.[x|X][m|M][l|L]$","aaaaa"))),'
                'c text as ((regexp_substr(a, "^([a-zA-Z]+-?)+[a-zA-Z0-9]+\\\\.[x|X][m|M][l|L]$"))))')
EXTRA = ("create table sql_mode.t_extra (id int primary key, r REAL, s varchar(20) DEFAULT 'a\\b', "
         "g varchar(40) AS ('x' || s) VIRTUAL, n int AS (NOT id BETWEEN 1 AND 2) VIRTUAL)")


@pytest.fixture
def case(stack, tmp_path):
    up1, up2 = stack["up1"], stack["up2"]
    (was1,) = run_sql(up1, "SELECT @@GLOBAL.sql_mode")[0]
    (was2,) = run_sql(up2, "SELECT @@GLOBAL.sql_mode")[0]
    try:
        with dm_case("sql_mode", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                     {k: ["sql_mode"] for k in ("up1", "up2", "down")}) as got:
            yield got
    finally:
        run_sql(up1, "SET GLOBAL sql_mode = %s", args=(was1,))
        run_sql(up2, "SET GLOBAL sql_mode = %s", args=(was2,))


def _columns(ep, table: str) -> list[tuple]:
    """What a user compares of a table's definition: each column's type, default, generation."""
    return [tuple(r) for r in run_sql(
        ep, "SELECT column_name, column_type, is_nullable, column_default, generation_expression "
            "FROM information_schema.columns WHERE table_schema = 'sql_mode' AND table_name = %s "
            "ORDER BY ordinal_position", args=(table,))]


def _assert_equal(up1, up2, down, tables: dict) -> None:
    for table, ep in tables.items():
        cols = [c[0] for c in _columns(ep, table)]
        assert _columns(down, table) == _columns(ep, table), f"definition of sql_mode.{table}"
        quoted = [f"`{c}`" for c in cols]
        assert table_rows(down, "sql_mode", table, quoted) == table_rows(ep, "sql_mode", table, quoted), \
            f"rows of sql_mode.{table}"


def test_dm_sql_mode_case(case, stack):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    run_sql(up1, f"SET GLOBAL sql_mode = '{WILD}'")
    run_sql(up2, "SET GLOBAL sql_mode = ''")
    run_sql(up1, *db1(True, "count", (10, 0)))
    run_sql(up2, *db2(True, (10,)))
    register_sources(files)
    task, sync = start(files, store)
    tables = {"t_1": up1, "count": up1, "timezone": up1, "t_2": up2}
    _assert_equal(up1, up2, down, tables)

    run_sql(up1, *db1(False, "sum", (30, 0)))
    sync.settle()
    run_sql(up2, *db2(False, (20,)))
    sync.settle()
    run_sql(up1, "use `sql_mode`", "SET @@session.SQL_MODE=''", "set @@session.time_zone = '+08:00'",
            "insert into `sql_mode`.`timezone`(`id`, `a`) values (2, '2001-04-15 02:30:12')",
            "insert into `sql_mode`.`timezone`(`id`, `a`) values (3, '2001-04-15 03:30:12')",
            "set @@session.time_zone = '-07:00'",
            "insert into `sql_mode`.`timezone`(`id`, `a`) values (5, '2001-04-15 02:30:12')",
            "insert into `sql_mode`.`timezone`(`id`, `a`) values (6, '2001-04-15 03:30:12')")
    sync.settle()
    tables["sum"] = up1
    _assert_equal(up1, up2, down, tables)

    # DDL in the binlog under the session mode that gives it its meaning
    run_sql(up2, "SET GLOBAL sql_mode = 'NO_BACKSLASH_ESCAPES'")
    run_sql(up2, GENERATED_T0, "INSERT INTO sql_mode.t0 (id, a) VALUES (1, 'ab-cd.xml'), (2, 'a.b')")
    run_sql(up1, EXTRA, "INSERT INTO sql_mode.t_extra (id, r) VALUES (1, 0.1), (2, 1.5), (3, NULL)",
            sql_mode="REAL_AS_FLOAT,PIPES_AS_CONCAT,NO_BACKSLASH_ESCAPES,HIGH_NOT_PRECEDENCE")
    # ANSI_QUOTES: the table is named in double quotes (routing reads the text as the session did)
    run_sql(up1, "USE sql_mode", 'CREATE TABLE "sql_mode"."t_ansi" ("id" int primary key, "v" varchar(10) '
            "DEFAULT 'x\"y')", 'INSERT INTO "sql_mode"."t_ansi" ("id") VALUES (1)',
            'ALTER TABLE "t_ansi" ADD COLUMN "w" int DEFAULT 7', "INSERT INTO \"t_ansi\" (\"id\", \"v\") VALUES (2, 'z')",
            sql_mode="ANSI_QUOTES")
    sync.settle()
    tables.update(t0=up2, t_extra=up1, t_ansi=up1)
    _assert_equal(up1, up2, down, tables)
    (expr,) = run_sql(down, "SELECT generation_expression FROM information_schema.columns WHERE "
                            "table_schema = 'sql_mode' AND table_name = 't0' AND column_name = 'b'")[0]
    assert "\\\\." in expr, f"the regular expression lost a backslash downstream: {expr}"
