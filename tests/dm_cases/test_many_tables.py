"""DM's `many_tables` case (pingcap/tiflow dm/tests/many_tables/run.sh), with DM's own task and
source files (conf/, vendored unchanged) and our own statements:

- 500 tables in one schema on the stack's up2, which logs no column names
  (binlog_row_metadata=NO_LOG: rows decode through the schema tracker), each with no primary key (a nullable UNIQUE column), 15 columns
  and 3 rows; the upstream's global time zone is +02:00 and the downstream's +06:00;
- full phase, then sync: every table equal;
- three rounds of inserts into every table; while the task is paused, `t1` gets a DATETIME
  and `t2` a TIMESTAMP column `DEFAULT current_timestamp` (filling their existing rows with
  the upstream's clock); after resume every table is equal, the new columns included, which
  needs each DDL replayed at its event's time and zone (dm_core/ddl/upstream_session.py);
- one more row into `t1` and `t2`: equal again (the replay's clock was set back).

DM also checks its own metrics and log lines, a small TiDB transaction limit and a killed
downstream that its task checker resumes the task over again and again (this file's
`checker: {check-enable: true, backoff-max: 1s}`); those are DM internals, or covered by
tests/integration/test_sync_auto_resume.py (a killed downstream, the source resumed by its
checker until it is back).
"""

import time

import pytest


from .harness import dm_case, register_sources, run_sql, start

pytestmark = pytest.mark.integration

DB, N = "many_tables_db", int(__import__("os").environ.get("MANY_TABLES", 500))
COLS = ["i", "j"] + [f"c{k}" for k in range(1, 14)]


@pytest.fixture
def case(stack, tmp_path):
    up, down = stack["up2"], stack["down"]
    zones = [(ep, run_sql(ep, "SELECT @@global.time_zone")[0][0]) for ep in (up, down)]
    run_sql(up, "SET GLOBAL time_zone = '+02:00'")
    run_sql(down, "SET GLOBAL time_zone = '+06:00'")
    try:
        with dm_case("many_tables", tmp_path, stack, {"source1.yaml": "up2"}, {"up2": [DB], "down": [DB]}) as got:
            yield got
    finally:
        for ep, zone in zones:
            run_sql(ep, "SET GLOBAL time_zone = %s", args=(zone,))


def _rows(ep, cols: list[str], tables) -> dict[int, list[tuple]]:
    """The tables' rows, read in UTC on either side (TIMESTAMP values compare as instants)."""
    out = {}
    for n in tables:
        out[n] = sorted((tuple(r) for r in run_sql(ep, f"SELECT {', '.join(cols)} FROM {DB}.t{n}")), key=repr)
    return out


def _same(up, down, cols=COLS, tables=None):
    tables = tables or range(1, N + 1)
    a, b = _rows(up, cols, tables), _rows(down, cols, tables)
    bad = [n for n in tables if a[n] != b[n]]
    assert not bad, f"{len(bad)} tables differ, e.g. t{bad[0]}: up {a[bad[0]]} down {b[bad[0]]}"


def test_dm_many_tables_case_up2_logs_no_column_names(case, stack):
    files, store = case
    up, down = stack["up2"], stack["down"]
    ddl = ", ".join(f"c{k} VARCHAR(20)" for k in range(1, 14))
    stmts = [f"CREATE DATABASE {DB}"]
    for n in range(1, N + 1):
        stmts += [f"CREATE TABLE {DB}.t{n} (i INT, j INT UNIQUE KEY, {ddl})",
                  f"INSERT INTO {DB}.t{n} (i, j) VALUES ({n}, 10001), ({n}, 10011), ({n}, 20002), ({n}, 20012), "
                  f"({n}, 99999)"]
    run_sql(up, *stmts)
    register_sources(files)
    task, sync = start(files, store)
    _same(up, down)

    # three rounds of inserts into every table
    run_sql(up, *[f"INSERT INTO {DB}.t{n} (i, j) VALUES ({n}, {j}000{j}), ({n}, {j}001{j})"
                  for j in range(3, 6) for n in range(1, N + 1)])
    # "paused": no source steps while the upstream adds columns that fill old rows with its clock
    # (a client session in the server's zone, +02:00, as DM's mysql client has)
    run_sql(up, "SET SESSION time_zone = @@global.time_zone",
            f"ALTER TABLE {DB}.t1 ADD x datetime DEFAULT current_timestamp",
            f"ALTER TABLE {DB}.t2 ADD x timestamp DEFAULT current_timestamp")
    time.sleep(2)       # the resume comes later: the replay's own clock would differ
    sync.restart()      # resume-task: new sessions from the checkpoints
    sync.settle(rounds=200)
    _same(up, down)
    _same(up, down, COLS + ["x"], tables=[1, 2])
    x_up = run_sql(up, f"SELECT MIN(x) FROM {DB}.t1")[0][0]
    assert x_up is not None

    run_sql(up, f"INSERT INTO {DB}.t1 (i, j) VALUES (1, 1001)", f"INSERT INTO {DB}.t2 (i, j) VALUES (2, 2002)")
    sync.settle()
    _same(up, down, COLS + ["x"], tables=[1, 2])
