"""DM's `fake_rotate_event` case (pingcap/tiflow dm/tests/fake_rotate_event/run.sh), with DM's own task
and source files (conf/, vendored unchanged: the deprecated `black-white-list`, `enable-gtid: true`;
the source gives no flavor, the test sets mariadb) and our own statements:

1. `fake_rotate_event`.`t1` with two rows; full phase; FLUSH LOGS, a row: equal;
2. the source's sync ends (DM kills its worker); FLUSH LOGS, an ADD COLUMN (DM: "trigger a flush
   job"), a row with the new column; a new sync process starts from the checkpoint: its dump begins
   with the server's artificial ROTATE (position 0 in its header, naming the checkpoint's file) and
   crosses a real rotation: equal, and the checkpoint is in the upstream's newest binlog file at its
   position, with the server's GTID state there.

Not ported: DM's MakeFakeRotateEvent failpoint, which renames every ROTATE the syncer reads to
`mysql-bin.000001` and checks that DM's location recorder, resuming by GTID, still replicates right
(its query-status then shows the fake name). shardflow names positions by the server's ROTATE events
and resumes by file and position while the file exists; a server that names another file in a
ROTATE has no equivalent here.
"""

import pytest

from .harness import dm_case, register_sources, run_sql, start_task, table_rows

pytestmark = pytest.mark.integration

DB = "fake_rotate_event"
SID = "mysql-replica-01"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [DB], "down": [DB, "dm_meta"]},
                 flavor="mariadb") as got:
        yield got


def test_dm_fake_rotate_event_case(case, stack):
    files, store = case
    up, down = stack["up1"], stack["down"]
    run_sql(up, f"CREATE DATABASE {DB}", f"USE {DB}", "CREATE TABLE t1 (c1 int, c2 int, c3 int, PRIMARY KEY (c1))",
            "INSERT INTO t1 VALUES (1, 1, 1)", "INSERT INTO t1 VALUES (2, 2, 2)")
    register_sources(files)
    task, sync = start_task(files.task_file, store, remove_meta=True)
    run_sql(up, "FLUSH LOGS", f"INSERT INTO {DB}.t1 VALUES (3, 3, 3)")
    sync.settle()
    assert table_rows(down, DB, "t1", ["c1", "c2", "c3"]) == table_rows(up, DB, "t1", ["c1", "c2", "c3"])

    run_sql(up, "FLUSH LOGS", f"ALTER TABLE {DB}.t1 ADD COLUMN info2 varchar(40)",
            f"INSERT INTO {DB}.t1 VALUES (4, 4, 4, 'info')")
    sync.restart()          # a new sync process from the checkpoint
    sync.settle()
    cols = ["c1", "c2", "c3", "info2"]
    assert table_rows(down, DB, "t1", cols) == table_rows(up, DB, "t1", cols)
    f, p = run_sql(up, "SHOW MASTER STATUS")[0][:2]
    st = store.source_state(task.name, SID)
    assert (st["binlog_file"], int(st["binlog_pos"])) == (f, int(p)), st
    at = run_sql(up, "SELECT BINLOG_GTID_POS(%s, %s)", args=(f, p))[0][0]
    assert set(st["binlog_gtid"].split(",")) == set(at.split(",")), (st, at)   # domains in any order
