"""DM's `binlog_parse` case (pingcap/tiflow dm/tests/binlog_parse/run.sh), with DM's own task and
source files (conf/, vendored unchanged: `enable-gtid: true`, a block-allow list of `do-dbs`
plus `do-tables` that keeps `t1` and leaves `t2` out, `skip-tz-utc: true`) and our own
statements: `t1` has a TIMESTAMP column, `t2` a TIMESTAMP(3) one (DM's reader panicked on a
MariaDB TIMESTAMP(3) row of the table it was told to skip). Full phase, then rows through the
binlog in two rounds, each compared by `dmctl validate` (DM's check_sync_diff) and by the rows:
`t1` holds every row with its timestamps, `t2` is never created downstream. Beyond DM's run.sh:
the second round writes fractional seconds into `t2` and an UPDATE of `t1`'s timestamp, from
a client in another zone than the server's.

Not ported: DM's relay (`start-relay`); `validation start` is the Airflow DAG
`dm_<task>_validate` (tests/e2e/test_validate_spark.py), here `dmctl validate` runs the same
comparison in process.
"""

import pytest

from .harness import dm_case, dmctl, register_sources, run_sql, start_task, table_rows

pytestmark = pytest.mark.integration

DB = "binlog_parse"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [DB], "down": [DB]}) as got:
        yield got


def _validated(name: str) -> str:
    rc, out, err = dmctl("validate", name)
    assert rc == 0 and "EQUAL" in out, out + err
    return out


def _times(ep) -> list[tuple]:
    return table_rows(ep, DB, "t1", ["id", "CAST(created_time AS CHAR)"])


def test_dm_binlog_parse_case(case, stack):
    files, store = case
    up, down = stack["up1"], stack["down"]
    run_sql(up, f"CREATE DATABASE {DB} CHARACTER SET utf8",
            f"CREATE TABLE {DB}.t1 (id int, created_time timestamp, PRIMARY KEY (id)) CHARACTER SET utf8",
            f"CREATE TABLE {DB}.t2 (id int, created_time timestamp(3), PRIMARY KEY (id)) CHARACTER SET utf8",
            f"INSERT INTO {DB}.t1 (id, created_time) VALUES (1, '2022-01-01 00:00:01'), (2, '2022-01-02 00:00:01')",
            f"INSERT INTO {DB}.t2 (id, created_time) VALUES (1, '2022-01-01 00:00:01'), (2, '2022-01-02 00:00:01')")
    register_sources(files)
    task, sync = start_task(files.task_file, store, remove_meta=True)
    _validated(task.name)
    assert _times(down) == _times(up) == [(1, "2022-01-01 00:00:01"), (2, "2022-01-02 00:00:01")]

    run_sql(up, f"INSERT INTO {DB}.t1 (id, created_time) VALUES (3, '2022-01-03 00:00:01'), (4, '2022-01-04 00:00:01')",
            f"INSERT INTO {DB}.t2 (id, created_time) VALUES (3, '2022-01-03 00:00:01'), (4, '2022-01-04 00:00:01')")
    sync.settle()
    _validated(task.name)
    assert run_sql(down, f"SELECT count(1) FROM {DB}.t1") == [(4,)]      # DM: "count(1): 4"

    run_sql(up, "SET time_zone = '+05:30'",
            f"INSERT INTO {DB}.t1 (id, created_time) VALUES (5, '2022-01-05 00:00:01'), (6, '2022-01-06 00:00:01')",
            f"INSERT INTO {DB}.t2 (id, created_time) VALUES (5, '2022-01-05 00:00:01.123'), (6, '2022-01-06 00:00:01.999')")
    run_sql(up, f"UPDATE {DB}.t1 SET created_time = '2022-02-01 12:34:56' WHERE id = 2",
            f"UPDATE {DB}.t2 SET created_time = '2022-02-01 12:34:56.789' WHERE id = 2")
    states = sync.settle()
    assert set(states.values()) == {"caught_up"}, states
    _validated(task.name)
    assert _times(down) == _times(up)
    assert len(_times(down)) == 6
    assert run_sql(down, "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s AND table_name = 't2'",
                   args=(DB,)) == [(0,)]
