"""DM's `expression_filter` case (pingcap/tiflow dm/tests/expression_filter/run.sh, its main part),
with DM's own task and source files (conf/, vendored unchanged): 30 `insert-value-expr` filters,
one per MySQL type (NULL test, BIT, the integer types, DECIMAL, FLOAT, DOUBLE, DATE, DATETIME(3),
TIMESTAMP(4) with a zone offset in the expression, TIME(5) near its negative limit, YEAR, CHAR,
NATIONAL VARCHAR, BINARY, VARBINARY, the BLOB and TEXT sizes, ENUM, SET and a JSON path). For each
type our rows are a pair: one the filter keeps (should_skip = 0) and one it drops
(should_skip = 1); the TIMESTAMP rows are written by a client at +08:00 as DM's are. All rows come
through the binlog (the table is empty when the task starts). Downstream: exactly the 30 kept rows,
equal to upstream's, and none with should_skip = 1. The case's second part (a dump directory without
write permission: dumpling's error) has no equivalent: the Spark load writes no local files.
"""

import pytest


from .harness import dm_case, register_sources, run_sql, start, table_rows

pytestmark = pytest.mark.integration

DB = "expr_filter"
TABLE = """(id int NOT NULL AUTO_INCREMENT, should_skip int, c_null int, c_bit bit(8), c_tinyint tinyint(5) unsigned,
  c_smallint smallint(6), c_mediumint mediumint(7), c_int int(8), c_bigint bigint(9) unsigned, c_decimal decimal(7,2),
  c_float float(10), c_double double, c_date date, c_datetime datetime(3), c_timestamp timestamp(4) NULL,
  c_time time(5), c_year year, c_char char(4), c_varchar national varchar(255), c_binary binary(1),
  c_varbinary varbinary(4), c_tinyblob tinyblob, c_tinytext tinytext, c_blob blob(20), c_text text(10),
  c_mediumblob mediumblob, c_mediumtext mediumtext, c_longblob longblob, c_longtext longtext,
  c_enum enum('a', 'b', 'c'), c_set set('a', 'b', 'c'), c_json json, PRIMARY KEY (id))"""

# column, a value the filter keeps, a value it drops (what the task file's expression matches)
PAIRS = [
    ("c_null", None, 7), ("c_bit", "b'0101'", "b'1111'"), ("c_tinyint", 3, 40), ("c_smallint", 24, 25),
    ("c_mediumint", -5, 99), ("c_int", 0, 1000), ("c_bigint", 1, 30), ("c_decimal", "24.99", "25.00"),
    ("c_float", 1.5, 250.5), ("c_double", -1e10, 25.0001), ("c_date", "'2020-06-22'", "'2021-06-22'"),
    ("c_datetime", "'2021-01-01 12:34:56.788'", "'2021-01-01 12:34:56.789'"),
    ("c_timestamp", "'2021-01-01 12:34:56.5677'", "'2021-01-01 12:34:56.5678'"),
    ("c_time", "'-838:59:59.00000'", "'-838:58:50.12345'"), ("c_year", 1999, 2021),
    ("c_char", "'1111'", "'2234'"), ("c_varchar", "'äöü'", "'4234'"), ("c_binary", "'z'", "'b'"),
    ("c_varbinary", "'dd'", "'d'"), ("c_tinyblob", "'B'", "'b'"), ("c_tinytext", "'e'", "'d'"),
    ("c_blob", "'asdfg'", "'asdf'"), ("c_text", "'as'", "'asd'"), ("c_mediumblob", "x'00'", "'asdf'"),
    ("c_mediumtext", "'ASDF '", "'asdf'"), ("c_longblob", "''", "'asdf'"), ("c_longtext", "'fdsa'", "'asdf'"),
    ("c_enum", "'c'", "'b'"), ("c_set", "'a,c'", "'b,c'"), ("c_json", "'{\"id\": 3}'", "'{\"id\": 2}'"),
]
COLUMNS = ["id", "should_skip"] + [c for c, _, _ in PAIRS if c != "c_bit"] + ["HEX(c_bit)"]


def _lit(v) -> str:
    return "NULL" if v is None else str(v)


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("expression_filter", tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [DB], "down": [DB]}) as got:
        yield got


def test_dm_expression_filter_case(case, stack):
    files, store = case
    up, down = stack["up1"], stack["down"]
    assert len(PAIRS) == 30
    run_sql(up, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t1 {TABLE}")
    register_sources(files)
    task, sync = start(files, store)

    stmts = ["SET time_zone = '+08:00'"]  # the TIMESTAMP rows' client, as DM's
    for col, keep, drop in PAIRS:
        stmts.append(f"INSERT INTO {DB}.t1 (should_skip, {col}) VALUES (0, {_lit(keep)}), (1, {_lit(drop)})")
    stmts.append(f"ALTER TABLE {DB}.t1 ADD COLUMN dummy int")
    run_sql(up, *stmts)
    sync.settle()

    assert run_sql(up, f"SELECT COUNT(*) FROM {DB}.t1")[0][0] == 60
    kept = table_rows(up, DB, "t1", COLUMNS, "WHERE should_skip = 0")
    got = table_rows(down, DB, "t1", COLUMNS)
    assert [r[1] for r in got].count(1) == 0, [r for r in got if r[1] == 1]
    assert got == kept
