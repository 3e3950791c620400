"""DM's `start_task` case (pingcap/tiflow dm/tests/start_task/run.sh), with DM's own task and source
files (conf/, vendored unchanged; the source says `flavor: ''` with GTID on, the test sets mariadb)
and our own statements for its situations:

1. start_task_by_time: the upstream's global zone +02:00, the downstream's +06:00; `t1` created,
   the time taken (upstream wall clock, as DM's `TZ='UTC-2' date`), `t2` created with four rows;
   DM's task file with run.sh's `sed` to task-mode incremental. `start-task --start-time` with
   that time: only `t2` downstream, with its rows. Stopped and started again with the same time
   over the rows already downstream: they replay in safe mode (no duplicate-key pause; DM greps
   "enable safe-mode for safe mode exit point"), then again into an empty downstream database
   (DM's run: only `t2`). A time before the oldest binlog ('1995-03-07 01:02:03'): starts at the
   oldest transaction, so `t1` too. A time after the newest event ('2037-12-12 01:02:03'): the
   source pauses with "no binlog location matches it" (code 50020) and keeps the time, resume-task
   pauses again. Plus what dmctl refuses: a time in none of DM's spellings, and task-mode all;
2. init_tracker_test: 100 tables of two rows (`i TINYINT, j INT UNIQUE KEY`, no primary key),
   full phase, rows into the first 50 only, stop-task, start-task from the checkpoints, two more
   rows in every table: all 100 equal upstream (DM greps its schema tracker's log for t50 and t51:
   shardflow has no tracker; the rows of the tables that had no checkpoint are what it shows);
3. DM's FetchTargetDoTablesFailed / FetchAllDoTablesFailed failpoints (error 1152 when listing the
   upstream's tables): start-task fails (check-task fails `table_schema` naming 1152; the full
   phase's discovery raises it), then without the error start-task loads and syncs every row;
4. test_COMMIT_in_QueryEvent: MyISAM tables (their binlog transactions end with a COMMIT query
   event, not an XID), one created through the binlog: every row arrives, query-status running.

Not ported: relay (`stop-relay`, `transfer-source`: the time is found in the upstream's own binlog
here, DM's remote finder), DM's log greps. For part 1 the upstream's binlogs are purged first
(FLUSH + PURGE), so "the oldest binlog" holds only this case's events.
"""

import datetime
import json
import logging
import time

import pytest
import yaml

from dm_core import faults

from tests.integration.helpers import purge_binlogs_to

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


@pytest.fixture
def zones(stack):
    run_sql(stack["up1"], "SET GLOBAL time_zone = '+02:00'")
    run_sql(stack["down"], "SET GLOBAL time_zone = '+06:00'")
    yield
    run_sql(stack["up1"], "SET GLOBAL time_zone = SYSTEM")
    run_sql(stack["down"], "SET GLOBAL time_zone = SYSTEM")


def _purge_older_binlogs(ep) -> None:
    run_sql(ep, "FLUSH BINARY LOGS")
    purge_binlogs_to(ep, run_sql(ep, "SHOW MASTER STATUS")[0][0])


def _downstream_tables(stack) -> list[str]:
    return sorted(r[0] for r in run_sql(stack["down"], f"SELECT table_name FROM information_schema.tables "
                                                      f"WHERE table_schema = '{DB}'"))


def _fresh_downstream(stack) -> None:
    run_sql(stack["down"], f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}")


def _stop(sync, name: str) -> None:
    stop_task(name)
    assert set(sync.step().values()) == {"stopped"}


def test_start_task_by_time(case, stack, zones, caplog):
    """Part 1."""
    files, store = case
    up = stack["up1"]
    _purge_older_binlogs(up)
    # a meta the server no longer has: --start-time wins over it (DM does not check it then)
    gone = run_sql(up, "SHOW BINARY LOGS")[0][0].rsplit(".", 1)[0] + ".000000"
    incremental = files.task("dm-task.yaml", {"task-mode: all": "task-mode: incremental"},
                             out="dm-task-incremental.yaml")
    doc = yaml.safe_load(incremental.read_text())
    doc["mysql-instances"][0]["meta"] = {"binlog-name": gone, "binlog-pos": 4}
    incremental.write_text(yaml.safe_dump(doc, sort_keys=False))
    run_sql(up, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t1 (c INT PRIMARY KEY)")
    time.sleep(2)   # binlog events are stamped in whole seconds
    # the upstream's wall clock at +02:00 (same machine, same clock), as DM's TZ='UTC-2' date
    start_time = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=2)).strftime(
        "%Y-%m-%d %H:%M:%S")
    time.sleep(2)
    run_sql(up, f"CREATE TABLE {DB}.t2 (c INT PRIMARY KEY)", f"INSERT INTO {DB}.t2 VALUES (1), (2)",
            f"INSERT INTO {DB}.t2 VALUES (3), (4)")
    register_sources(files)

    # what dmctl refuses, before anything starts
    before = store.task_info(files.name)
    for args, says in ((["--start-time", "yesterday"], "'2021-10-21 00:01:00'"),
                       (["--start-time", "2021-10-21 00:01"], "is not a time")):
        rc, out, err = dmctl("start-task", str(incremental), *args)
        assert rc != 0 and "--start-time" in out + err and says in out + err, out + err
    rc, out, err = dmctl("start-task", str(files.task_file), "--start-time", start_time)
    assert rc != 0 and "task-mode incremental" in out + err, out + err
    rc, out, err = dmctl("check-task", str(incremental))
    assert rc != 0 and f"meta binlog file {gone} is not on the server" in out, out + err
    rc, out, err = dmctl("check-task", str(incremental), "--start-time", start_time)
    assert rc == 0 and "0 failed" in out, out + err
    assert store.task_info(files.name) == before, "a refused start-task started nothing"

    _fresh_downstream(stack)
    task, sync = start_task(incremental, store, remove_meta=True, start_time=start_time)
    assert _downstream_tables(stack) == ["t2"]
    assert table_rows(stack["down"], DB, "t2", ["c"]) == [(1,), (2,), (3,), (4,)]
    st = _status(task.name)
    assert st["start_time"] is None and st["error"] is None and st["checkpoint"], st

    # again over what is downstream: the stretch it had applied replays in safe mode
    _stop(sync, task.name)
    caplog.set_level(logging.INFO, logger="shardflow")
    task, sync = start_task(incremental, store, start_time=start_time)
    assert any("safe mode up to" in r.getMessage() for r in caplog.records), caplog.text
    assert _downstream_tables(stack) == ["t2"]
    assert table_rows(stack["down"], DB, "t2", ["c"]) == [(1,), (2,), (3,), (4,)]

    # DM's run: into an empty downstream database
    _stop(sync, task.name)
    _fresh_downstream(stack)
    task, sync = start_task(incremental, store, start_time=start_time)
    assert _downstream_tables(stack) == ["t2"]

    # too early: from the oldest binlog the upstream keeps
    _stop(sync, task.name)
    _fresh_downstream(stack)
    caplog.clear()
    task, sync = start_task(incremental, store, start_time="1995-03-07 01:02:03")
    assert _downstream_tables(stack) == ["t1", "t2"]
    assert table_rows(stack["down"], DB, "t2", ["c"]) == [(1,), (2,), (3,), (4,)]
    assert any("before the oldest binlog" in r.getMessage() for r in caplog.records), caplog.text

    # too late: paused, saying so; the time is kept for the next look
    _stop(sync, task.name)
    _fresh_downstream(stack)
    task, sync = start_task(incremental, store, start_time="2037-12-12 01:02:03", settle=False)
    assert set(sync.settle(paused_ok=True).values()) == {"paused"}
    st = _status(task.name)
    assert "no binlog location matches it" in st["error"] and "50020" in st["error"], st
    assert st["start_time"] == "2037-12-12 01:02:03" and _downstream_tables(stack) == [], st
    rc, out, err = dmctl("resume-task", task.name)
    assert rc == 0, out + err
    assert set(sync.settle(paused_ok=True).values()) == {"paused"}
    assert "no binlog location matches it" in _status(task.name)["error"]
    _stop(sync, task.name)
