"""dm_core/ddl/dry_run.py on the real downstream: a statement on an empty copy says whether the
table is already past it, whatever the session's sql_mode, and leaves no table behind."""

import pytest

from dm_core.ddl import dry_run
from dm_core.db import connect, qi, qt

from .helpers import drop_schemas
from .helpers import run_sql as run

pytestmark = pytest.mark.integration

T = "CREATE TABLE {t} (id int PRIMARY KEY, a int NULL, s varchar(20) CHARACTER SET utf8mb4 NOT NULL, KEY i (a))"
CASES = [  # (statement, verdict over T as it is)
    ("ALTER TABLE {t} MODIFY s varchar(20) CHARACTER SET latin1 NOT NULL", dry_run.CHANGES),
    ("ALTER TABLE {t} MODIFY s varchar(20) CHARACTER SET utf8mb4 NOT NULL", dry_run.SAME),
    ("ALTER TABLE {t} MODIFY a int NULL AFTER s", dry_run.CHANGES),
    ("ALTER TABLE {t} DROP INDEX i, ADD INDEX i (a)", dry_run.SAME),
    ("ALTER TABLE {t} DROP INDEX i, ADD INDEX i (a, s)", dry_run.CHANGES),
    ("ALTER TABLE {t} ENGINE=InnoDB", dry_run.SAME),
]


@pytest.fixture
def table(stack, uniq):
    db = f"pr{uniq}"
    run(stack["down"], f"CREATE DATABASE {qi(db)}", T.format(t=qt(db, "t")))
    yield db
    drop_schemas(stack["down"], [db])


@pytest.mark.parametrize("mode", ["", "ANSI_QUOTES", "NO_FIELD_OPTIONS,NO_TABLE_OPTIONS"])
@pytest.mark.parametrize("sql, verdict", CASES)
def test_the_verdict_whatever_the_sql_mode(stack, table, sql, verdict, mode):
    conn = connect(stack["down"])
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = %s", (mode,))
        got, err = dry_run.outcome(conn, sql.format(t=f"`{table}`.`t`"), table, "t")
        assert (got, err) == (verdict, None)
    finally:
        conn.close()


def test_young_probe_tables_and_user_tables_are_left_alone(stack, table):
    """Only probe tables older than any probe lives are leftovers: another connection's (which
    PROCESSLIST may not show) and a user's table named alike stay; the probe's own is gone."""
    run(stack["down"], f"CREATE TABLE {qt(table, '_sf_probe_999999999')} (id int)",
        f"CREATE TABLE {qt(table, '_sf_probe_old')} (id int)")
    conn = connect(stack["down"])
    try:
        dry_run.outcome(conn, f"ALTER TABLE `{table}`.`t` ADD COLUMN x int", table, "t")
        with conn.cursor() as cur:
            cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s ORDER BY 1",
                        (table,))
            assert sorted(r[0] for r in cur.fetchall()) == ["_sf_probe_999999999", "_sf_probe_old", "t"]
    finally:
        conn.close()
