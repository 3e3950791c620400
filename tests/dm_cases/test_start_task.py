"""DM's `start_task` case (pingcap/tiflow dm/tests/start_task/run.sh), with DM's own task and source
files (conf/, vendored unchanged; the source says `flavor: ''` with GTID on, the test sets mariadb)
and our own statements for its situations:

1. start_task_by_time: `start-task --start-time` is not ported (see the end);
2. init_tracker_test: 100 tables of two rows (`i TINYINT, j INT UNIQUE KEY`, no primary key),
   full phase, rows into the first 50 only, stop-task, start-task from the checkpoints, two more
   rows in every table: all 100 equal upstream (DM greps its schema tracker's log for t50 and t51:
   shardflow has no tracker; the rows of the tables that had no checkpoint are what it shows);
3. DM's FetchTargetDoTablesFailed / FetchAllDoTablesFailed failpoints (error 1152 when listing the
   upstream's tables): start-task fails (check-task fails `table_schema` naming 1152; the full
   phase's discovery raises it), then without the error start-task loads and syncs every row;
4. test_COMMIT_in_QueryEvent: MyISAM tables (their binlog transactions end with a COMMIT query
   event, not an XID), one created through the binlog: every row arrives, query-status running.

Not ported: `start-task --start-time` (DM's start_task_by_time: only what the upstream wrote
after that time replicates, a time before the oldest binlog starts there, a time after the newest
event pauses with "no binlog location matches it"): shardflow's dmctl has no `--start-time`; a
task starts at its `meta` position or its checkpoints. Relay (`stop-relay`, `transfer-source`),
DM's log greps.
"""

import json

import pytest

from dm_core import faults

from .harness import dm_case, dmctl, register_sources, run_sql, start_task, stop_task, table_rows

pytestmark = pytest.mark.integration

DB = "start_task"
SID = "mysql-replica-01"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [DB], "down": [DB, "dm_meta"]},
                 flavor="mariadb") as got:
        yield got


def _equal(stack, tables) -> None:
    for t in tables:
        cols = ["i", "j"]
        assert table_rows(stack["down"], DB, t, cols) == table_rows(stack["up1"], DB, t, cols), t


def _status(name: str) -> dict:
    rc, out, err = dmctl("query-status", name)
    assert rc == 0, out + err
    return json.loads(out)["tasks"][0]["sources"][0]


def test_many_tables_stop_and_start_from_checkpoints(case, stack):
    """Part 2."""
    files, store = case
    up = stack["up1"]
    tables = [f"t{j}" for j in range(1, 101)]
    run_sql(up, f"CREATE DATABASE {DB}", f"USE {DB}",
            *[s for t in tables for s in (f"CREATE TABLE {t} (i TINYINT, j INT UNIQUE KEY)",
                                          f"INSERT INTO {t} VALUES (1, 10001), (1, 10011)")])
    register_sources(files)
    task, sync = start_task(files.task_file, store, remove_meta=True)
    _equal(stack, tables)
    run_sql(up, f"USE {DB}", *[f"INSERT INTO {t} VALUES (2, 20002), (2, 20022)" for t in tables[:50]])
    sync.settle()
    _equal(stack, tables)
    stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    task, sync = start_task(files.task_file, store, settle=False)
    run_sql(up, f"USE {DB}", *[s for t in tables for s in (f"INSERT INTO {t} VALUES (3, 30003), (3, 30033)",
                                                            f"INSERT INTO {t} VALUES (4, 40004), (4, 40044)")])
    sync.settle()
    _equal(stack, tables)
    assert run_sql(stack["down"], f"SELECT COUNT(*) FROM {DB}.t51") == [(6,)]


@pytest.mark.parametrize("i", [0, 1], ids=["FetchTargetDoTablesFailed", "FetchAllDoTablesFailed"])
def test_listing_the_tables_fails_then_start_again(case, stack, monkeypatch, i):
    """Part 3: the error fails the start (the precheck, and the full phase if it got there)."""
    from dm_core.config.task import load_task_file
    from dm_core.full.phase import forget, prepare

    files, store = case
    up = stack["up1"]
    t = f"t{i}"
    run_sql(up, f"CREATE DATABASE {DB}", f"USE {DB}", f"CREATE TABLE {t} (i TINYINT, j INT UNIQUE KEY)",
            *[f"INSERT INTO {t} VALUES ({j}, {j}000{j}), ({j}, {j}001{j})" for j in range(1, 101)])
    register_sources(files)
    monkeypatch.setenv("SHARDFLOW_FAULTS", "upstream.list_tables=errno:1152")
    rc, out, err = dmctl("check-task", str(files.task_file))
    assert rc != 0 and "table_schema" in out + err and "1152" in out + err, out + err
    assert "cannot list the tables the block-allow list selects" in out + err, out + err
    task = load_task_file(str(files.task_file))
    store.start_task(task.name, files.task_file.read_text())
    forget(task, store)
    with pytest.raises(Exception) as got:       # the full DAG's prepare task fails on it
        prepare(task, store)
    assert "1152" in str(got.value), got.value
    monkeypatch.delenv("SHARDFLOW_FAULTS")
    monkeypatch.setattr(faults, "_hits", {})
    task, sync = start_task(files.task_file, store)
    _equal(stack, [t])
    assert run_sql(stack["down"], f"SELECT COUNT(*) FROM {DB}.{t}") == [(200,)]


def test_myisam_transactions_end_with_a_commit_query(case, stack):
    """Part 4."""
    files, store = case
    up = stack["up1"]
    run_sql(up, f"CREATE DATABASE {DB}", f"USE {DB}", "CREATE TABLE t1 (i TINYINT, j INT UNIQUE KEY) ENGINE=MyISAM",
            *[f"INSERT INTO t1 VALUES ({j}, {j}000{j})" for j in range(1, 11)])
    register_sources(files)
    task, sync = start_task(files.task_file, store, remove_meta=True)
    run_sql(up, f"USE {DB}", "CREATE TABLE t2 (i TINYINT, j INT UNIQUE KEY) ENGINE=MyISAM",
            "INSERT INTO t1 VALUES (99, 9999)", "INSERT INTO t2 VALUES (99, 9999)")
    sync.settle()
    _equal(stack, ["t1", "t2"])
    assert run_sql(stack["down"], f"SELECT COUNT(*) FROM {DB}.t1") == [(11,)]
    st = _status(task.name)
    assert st["error"] is None and st["stage"] == "sync", st
