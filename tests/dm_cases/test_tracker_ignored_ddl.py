"""DM's `tracker_ignored_ddl` case (pingcap/tiflow dm/tests/tracker_ignored_ddl/run.sh), with DM's own
task and source files (conf/, vendored unchanged: a binlog event filter that ignores every `alter
table`, `checkpoint-flush-interval: 1`), run once per source file as DM does (`source1_gtid.yaml`,
`source1_pos.yaml`), with our own statements:

1. `t1` (an AUTO_INCREMENT key) with one row; full phase, then a diff;
2. `ALTER TABLE t1 ADD COLUMN ignore_1 int` upstream: the filter ignores it, the downstream table
   keeps its one column (DM's schema tracker still learns the new column);
3. a DDL that is not ignored (CREATE TABLE `test`) and a pause of two seconds: the next event
   passes the checkpoint interval, so a checkpoint is written there;
4. a row with a value for `ignore_1`: the downstream has no such column, and the source pauses with
   the server's "Unknown column" (1054) naming the statement and its binlog position (DM: the same
   error; its tracker knows `ignore_1`, shardflow reads the column from the binlog row);
5. resume-task while the downstream still lacks the column: the source pauses again with the same
   error, and the row is neither lost nor passed by (DM's issue 5272: a checkpoint flushed past the
   failing row on resume would lose it);
6. the user adds `ignore_1` downstream, resume-task: the source runs, `t1` has both rows downstream,
   `test` exists, query-status says running; stop-task.

DM runs the two source files one after another without cleaning the downstream in between (the
second run's binlog recreates the database); here each run starts clean. Not ported: relay
(`stop-relay`), DM's metrics.
"""

import json

import pytest

from .harness import dm_case, dmctl, register_sources, run_sql, start, stop_task, table_rows

pytestmark = pytest.mark.integration

DB = "tracker_ignored_ddl"


@pytest.fixture(params=["source1_gtid.yaml", "source1_pos.yaml"])
def case(request, stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {request.param: "up1"}, {"up1": [DB], "down": [DB]},
                 flavor="mariadb") as got:
        yield got


def _columns(ep) -> list[str]:
    return [r[0] for r in run_sql(ep, "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                                      "AND table_name = 't1' ORDER BY ordinal_position", args=(DB,))]


def _status(name: str) -> dict:
    rc, out, err = dmctl("query-status", name)
    assert rc == 0, out + err
    return json.loads(out)["tasks"][0]["sources"][0]


def test_dm_tracker_ignored_ddl_case(case, stack):
    files, store = case
    up, down = stack["up1"], stack["down"]
    run_sql(up, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t1 (id int NOT NULL AUTO_INCREMENT, PRIMARY KEY (id))",
            f"INSERT INTO {DB}.t1 VALUES (1)")
    register_sources(files)
    task, sync = start(files, store)
    sid = task.mysql_instances[0].source_id
    assert table_rows(down, DB, "t1", ["id"]) == [(1,)]

    run_sql(up, f"USE {DB}", "ALTER TABLE t1 ADD COLUMN `ignore_1` int")
    sync.settle()
    assert _columns(down) == ["id"], "the filter ignores ALTER TABLE"

    run_sql(up, f"CREATE TABLE {DB}.test (c int PRIMARY KEY)")   # not ignored: a checkpoint there
    sync.settle()
    assert run_sql(down, f"SHOW TABLES FROM {DB} LIKE 'test'") == [("test",)]
    mark = store.source_state(task.name, sid)
    run_sql(up, "DO SLEEP(2)")   # the next event is past checkpoint-flush-interval (1 s)
    run_sql(up, f"USE {DB}", "INSERT INTO t1 (`id`, `ignore_1`) VALUES (2, 2)")
    states = sync.settle(paused_ok=True)
    assert states[sid] == "paused", states
    st = store.source_state(task.name, sid)
    assert "1054" in st["error"] and "Unknown column" in st["error"] and "ignore_1" in st["error"], st["error"]
    assert st["error_stmt"] and "t1" in st["error_stmt"], st
    assert st["error_pos"] and (st["binlog_file"], st["binlog_pos"]) >= (mark["binlog_file"], mark["binlog_pos"])
    view = _status(task.name)
    assert view["status"] == "paused" and "Unknown column" in json.dumps(view), view

    # a resume while the downstream still lacks the column: the same pause, the row not passed by
    failing_at = st["error_pos"]
    rc, out, err = dmctl("resume-task", task.name)
    assert rc == 0, out + err
    states = sync.settle(paused_ok=True)
    assert states[sid] == "paused", states
    st = store.source_state(task.name, sid)
    assert "Unknown column" in st["error"] and st["error_pos"] == failing_at, st
    assert table_rows(down, DB, "t1", ["id"]) == [(1,)]

    # the user adds the column downstream and resumes: the row lands
    run_sql(down, f"ALTER TABLE {DB}.t1 ADD COLUMN ignore_1 int")
    rc, out, err = dmctl("resume-task", task.name)
    assert rc == 0, out + err
    sync.settle()
    assert table_rows(down, DB, "t1", ["id", "ignore_1"]) == [(1, None), (2, 2)]
    assert run_sql(down, f"SELECT COUNT(1) FROM {DB}.t1") == [(2,)]
    view = _status(task.name)
    assert view["status"] == "running" and not view.get("error"), view
    stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
