"""DM's `checkpoint_transaction` case (pingcap/tiflow dm/tests/checkpoint_transaction/run.sh), with
DM's own task and source files (conf/, vendored unchanged: `batch: 10000`, 16 workers,
`checkpoint-flush-interval: 300`) and our own statements for the same situations. One upstream
table takes transactions of 30 inserts each (DM: a stored procedure called inside one
transaction):

1. ungraceful stop in the middle of a transaction: the source's process dies while one of its
   workers has sent its share of the transaction downstream and not committed it (DM: the
   worker loses its keep-alive and exits without waiting for the transaction). The downstream
   then has fewer rows than the upstream, the checkpoint is before the transaction and its
   exit point past it; the restarted source replays it in safe mode and converges;
2. graceful pause in the middle of a transaction: pause-task arrives while the workers hold the
   transaction's rows uncommitted downstream (seen in information_schema.INNODB_TRX); the
   source finishes the transaction before it pauses (DM: "not receive xid job yet", then the
   pause waits for the XID): query-status says paused and the downstream equals the upstream;
3. resume, the source's process killed and started anew (DM also removes the worker's
   directory: shardflow keeps nothing local), then stop-task in the middle of the next
   transaction: the downstream equals the upstream after the stop;
4. (beyond run.sh) start-task again, and the process dies right after an ALTER TABLE ran
   downstream, before the checkpoint moved past it: the restart must not run it again (DM
   ignores "duplicate column" errors of a replayed DDL; shardflow replays it in safe mode).

DM's heartbeat keys (`enable-heartbeat`, `heartbeat-*-interval`) are accepted and warned: there
is no heartbeat table here.
"""

import time

import pytest

from .harness import Sync, dm_case, dmctl, pending_replay, register_sources, run_killed, run_sql, spawn, start

pytestmark = pytest.mark.integration

DB = "checkpoint_transaction"
S1 = "mysql-replica-01"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("checkpoint_transaction", tmp_path, stack, {"source1.yaml": "up1"},
                 {"up1": [DB], "down": [DB]}) as got:
        yield got


def _txn(up, column: str, n: int = 30) -> None:
    """One upstream transaction of ``n`` single-row inserts."""
    run_sql(up, f"USE {DB}", "START TRANSACTION",
            *[f"INSERT INTO t1 ({column}) VALUES ({v})" for v in range(n, 0, -1)], "COMMIT")


def _rows(ep) -> list[tuple]:
    return sorted(tuple(r) for r in run_sql(ep, f"SELECT id, a, b FROM {DB}.t1"))


def _until(what, cond, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)  # > 0.1 s: InnoDB refreshes INNODB_TRX only when it was not read for 0.1 s


def _open_downstream_txn(down) -> bool:
    """A worker holds rows uncommitted downstream (the transaction is in its middle there)."""
    return run_sql(down, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_rows_modified > 0")[0][0] > 0


def _caught_up(store, name: str, up) -> bool:
    from dm_core.db import connect, master_position

    conn = connect(up)
    try:
        f, p, _ = master_position(conn)
    finally:
        conn.close()
    st = store.source_state(name, S1)
    return (st["binlog_file"], int(st["binlog_pos"] or 0)) == (f, int(p))


def test_dm_checkpoint_transaction_case(case, stack, tmp_path):
    files, store = case
    up, down = stack["up1"], stack["down"]
    run_sql(up, f"CREATE DATABASE {DB}", f"USE {DB}",
            "CREATE TABLE t1 (id int NOT NULL AUTO_INCREMENT, a int, b int, PRIMARY KEY (id))",
            "INSERT INTO t1 (a) VALUES (0)")
    register_sources(files)
    task, sync = start(files, store)
    assert _rows(down) == _rows(up)

    # 1. killed while a worker holds its share of the transaction uncommitted
    _txn(up, "a")
    assert run_killed(files, {S1: "sync.apply.before_commit=1"}, tmp_path) == {S1: 97}
    assert len(_rows(down)) < len(_rows(up)), "the transaction was cut: the downstream has fewer rows"
    assert pending_replay(store, task.name, S1), store.source_state(task.name, S1)
    sync = Sync(task, store)
    sync.settle()
    assert _rows(down) == _rows(up)

    # 2. pause-task while the transaction is open downstream: it completes first
    p, log = spawn(files, S1, "sync.apply.before_commit=sleep:2", tmp_path, mode="forever")
    try:
        _txn(up, "a")
        _until("the transaction open downstream", lambda: _open_downstream_txn(down))
        rc, out, err = dmctl("pause-task", task.name)
        assert rc == 0, out + err
        _until("the checkpoint past the transaction", lambda: _caught_up(store, task.name, up))
    finally:
        p.kill()
        p.wait()
    rc, out, _ = dmctl("query-status", task.name)
    assert '"stage": "paused"' in out or '"status": "paused"' in out, out
    assert _rows(down) == _rows(up), log.read_text()[-3000:]

    # 3. resume; the process killed and started anew; stop-task in the middle of the next transaction
    rc, out, err = dmctl("resume-task", task.name)
    assert rc == 0, out + err
    p, log = spawn(files, S1, "", tmp_path, mode="forever")
    try:
        time.sleep(1)
    finally:
        p.kill()
        p.wait()
    p, log = spawn(files, S1, "sync.apply.before_commit=sleep:2", tmp_path, mode="forever")
    try:
        _txn(up, "b")
        _until("the transaction open downstream", lambda: _open_downstream_txn(down))
        store.stop_task(task.name)  # what dmctl stop-task does in the state store (Airflow is not run here)
        _until("the checkpoint past the transaction", lambda: _caught_up(store, task.name, up))
    finally:
        p.kill()
        p.wait()
    assert _rows(down) == _rows(up), log.read_text()[-3000:]
    assert len(_rows(down)) == 91

    # 4. (ours) start-task again; killed after a DDL ran downstream and before its checkpoint
    store.start_task(task.name, files.task_file.read_text())
    run_sql(up, f"USE {DB}", "ALTER TABLE t1 ADD COLUMN c int", "INSERT INTO t1 (a, c) VALUES (1, 1)")
    assert run_killed(files, {S1: "sync.ddl.after_downstream=1"}, tmp_path) == {S1: 97}
    assert pending_replay(store, task.name, S1), "the DDL ran past the checkpoint: the exit point must cover it"
    sync = Sync(task, store)
    sync.settle()
    cols = "id, a, b, c"
    assert sorted(run_sql(down, f"SELECT {cols} FROM {DB}.t1")) == sorted(run_sql(up, f"SELECT {cols} FROM {DB}.t1"))
