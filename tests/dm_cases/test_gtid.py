"""DM's `gtid` case (pingcap/tiflow dm/tests/gtid/run.sh), with DM's own task and source files (conf/,
vendored unchanged: `enable-gtid: true`; the sources give no flavor, the test sets mariadb) and our own
statements (`gtid`.`t1` on upstream 1, `t2` on upstream 2):

1. advance_gtid_test: full phase, rows and an ADD COLUMN through the binlog; pause-task, more rows,
   resume-task: equal (DM's NotUpdateLatestGTID failpoint is DM-internal: its checkpoint's GTID is
   not advanced; shardflow's checkpoint GTID is checked against the server's instead);
2. a GTID gap: each upstream writes a row under a sequence number three past its last (MySQL's
   `SET gtid_next = 'uuid:n+3'`, MariaDB's `SET gtid_seq_no`), FLUSH LOGS, a row: equal;
3. stop-task, a row, start-task: equal;
4. stop-task, a row, FLUSH LOGS, a row, every binlog but the newest purged: start-task pauses each
   source with the server's 1236 (the transactions after the checkpoint are gone: DM's "ERROR 1236"),
   rows left upstream are not in the downstream, nothing applied out of order.

Not ported: relay (`no relay pos match gtid` is DM's relay's wording; shardflow reads the upstream).
"""

import json
import time

import pytest

from .harness import binlog_gtid_pos, dm_case, dmctl, register_sources, run_sql, start_task, stop_task, table_rows

pytestmark = pytest.mark.integration

DB = "gtid"
S1, S2 = "mysql-replica-01", "mysql-replica-02"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB], "up2": [DB], "down": [DB, "dm_meta"]}, flavor="mariadb") as got:
        yield got


def _both(stack, *stmts) -> None:
    for ep, t in ((stack["up1"], "t1"), (stack["up2"], "t2")):
        run_sql(ep, f"USE {DB}", *[s.format(t=t) for s in stmts])


def _equal(stack) -> None:
    for ep, t in ((stack["up1"], "t1"), (stack["up2"], "t2")):
        assert table_rows(stack["down"], DB, t, ["id"]) == table_rows(ep, DB, t, ["id"]), t


def _stop(task, sync) -> None:
    stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}


def test_dm_gtid_case(case, stack):
    files, store = case
    up = {S1: stack["up1"], S2: stack["up2"]}
    for ep, t in ((stack["up1"], "t1"), (stack["up2"], "t2")):
        run_sql(ep, f"CREATE DATABASE {DB}", f"USE {DB}", f"CREATE TABLE {t} (id int PRIMARY KEY)",
                f"INSERT INTO {t} VALUES (1)")
    register_sources(files)
    task, sync = start_task(files.task_file, store, remove_meta=True)
    _equal(stack)

    # 1. rows and a DDL; pause, rows, resume
    _both(stack, "ALTER TABLE {t} ADD COLUMN b int", "INSERT INTO {t} VALUES (2, 2)")
    sync.settle()
    _equal(stack)
    rc, out, err = dmctl("pause-task", task.name)
    assert rc == 0, out + err
    _both(stack, "INSERT INTO {t} VALUES (3, 3)", "UPDATE {t} SET b = 20 WHERE id = 2")
    assert set(sync.step().values()) == {"paused"}
    rc, out, err = dmctl("resume-task", task.name)
    assert rc == 0, out + err
    sync.settle()
    _equal(stack)
    for s in store.all_source_states(task.name):
        ep = up[s["source_id"]]
        gtid = binlog_gtid_pos(ep, s["binlog_file"], s["binlog_pos"])
        # NULL: the server finds no event boundary at the checkpoint (a restart by file/pos would fail)
        assert gtid is not None, (s, run_sql(ep, "SHOW BINARY LOGS"), run_sql(ep, "SHOW MASTER STATUS"))
        assert set(s["binlog_gtid"].split(",")) == set(gtid.split(",")), s   # domains in any order

    # 2. a gap in the GTID sequence, a new binlog file, a row
    for ep, t in ((stack["up1"], "t1"), (stack["up2"], "t2")):
        seq = int(run_sql(ep, "SELECT @@GLOBAL.gtid_binlog_pos")[0][0].split(",")[0].split("-")[2])
        run_sql(ep, f"USE {DB}", "SET SESSION gtid_seq_no = %s" % (seq + 3), f"INSERT INTO {t} VALUES (4, 4)")
    _both(stack, "FLUSH LOGS", "INSERT INTO {t} VALUES (5, 5)")
    sync.settle()
    _equal(stack)

    # 3. stop, a row, start from the checkpoints
    _stop(task, sync)
    _both(stack, "INSERT INTO {t} VALUES (6, 6)")
    task, sync = start_task(files.task_file, store)
    _equal(stack)

    # 4. stop, rows around a new file, every older binlog purged: the start pauses on 1236
    _stop(task, sync)
    _both(stack, "INSERT INTO {t} VALUES (7, 7)", "FLUSH LOGS", "INSERT INTO {t} VALUES (8, 8)")
    for ep in up.values():
        newest = run_sql(ep, "SHOW MASTER STATUS")[0][0]
        for _ in range(50):   # the server keeps a file a dump thread still reads (a stopped session's, closing)
            run_sql(ep, "PURGE BINARY LOGS TO %s", args=(newest,))
            if [r[0] for r in run_sql(ep, "SHOW BINARY LOGS")] == [newest]:
                break
            time.sleep(0.2)
        assert [r[0] for r in run_sql(ep, "SHOW BINARY LOGS")] == [newest]
    task, sync = start_task(files.task_file, store, settle=False)
    states = sync.settle(paused_ok=True)
    for _ in range(20):
        if set(states.values()) == {"paused"}:
            break
        states = sync.step()
    assert set(states.values()) == {"paused"}, states
    rc, out, err = dmctl("query-status", task.name)
    sources = {s["source"]: s for s in json.loads(out)["tasks"][0]["sources"]}
    for sid in (S1, S2):
        assert sources[sid]["status"] == "paused" and "1236" in sources[sid]["error"], sources[sid]
    for t in ("t1", "t2"):
        assert [r[0] for r in table_rows(stack["down"], DB, t, ["id"])] == [1, 2, 3, 4, 5, 6], t
