"""DM's `async_checkpoint_flush` case (pingcap/tiflow dm/tests/async_checkpoint_flush/run.sh), with DM's
own task and source files (conf/, vendored unchanged: `experimental: {async-checkpoint-flush: true}`,
`checkpoint-flush-interval: 10`) and our own statements:

a client inserts rows into `async_checkpoint_flush`.`t1` one by one, without pause, while the source
syncs; DM's AsyncCheckpointFlushThrowError makes its asynchronous checkpoint flush fail, which it
ignores until a synchronous flush succeeds. shardflow writes each checkpoint synchronously after the
batch it covers committed; the equivalent failure is the fault point `sync.after_batch_apply`
raising a transient error (the batch committed downstream, its checkpoint not written): the source
says it retries from its last checkpoint, replays in safe mode, and every row lands once (sync
diff: equal) with the checkpoint at the upstream's position at the end.

Not ported: DM's metrics and log lines; `async-checkpoint-flush` itself (shardflow's checkpoints are
written synchronously; the key is accepted).
"""

import threading
import time

import pytest

from dm_core import faults

from .harness import dm_case, register_sources, run_sql, start_task, table_rows

pytestmark = pytest.mark.integration

DB = "async_checkpoint_flush"
SID = "mysql-replica-01"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [DB], "down": [DB, "dm_meta"]}) as got:
        yield got


def test_dm_async_checkpoint_flush_case(case, stack, monkeypatch):
    files, store = case
    up, down = stack["up1"], stack["down"]
    run_sql(up, f"CREATE DATABASE {DB}", f"USE {DB}", "CREATE TABLE t1 (id int, PRIMARY KEY (id))")
    register_sources(files)
    task, sync = start_task(files.task_file, store, remove_meta=True)
    assert table_rows(down, DB, "t1", ["id"]) == []

    done = threading.Event()

    def insert() -> None:
        from dm_core.db import connect

        conn = connect(up)
        try:
            with conn.cursor() as cur:
                i = 1
                while not done.is_set():
                    cur.execute(f"INSERT INTO {DB}.t1 VALUES (%s)", (i * 2 + 1,))
                    conn.commit()
                    i += 1
        finally:
            conn.close()

    writer = threading.Thread(target=insert)
    writer.start()
    monkeypatch.setenv("SHARDFLOW_FAULTS", "sync.after_batch_apply=raise:3")
    monkeypatch.setattr(faults, "_hits", {})
    said, t0 = [], time.monotonic()
    try:
        while time.monotonic() - t0 < 8:
            out = sync.sessions[SID].step()
            said += [m for _, m in out.messages]
    finally:
        done.set()
        writer.join()
    assert any("fault point sync.after_batch_apply: injected error at hit 3" in m and "retrying from the last "
               "checkpoint" in m for m in said), said
    monkeypatch.delenv("SHARDFLOW_FAULTS")
    sync.settle()
    rows = table_rows(up, DB, "t1", ["id"])
    assert len(rows) > 20 and table_rows(down, DB, "t1", ["id"]) == rows
    st = store.source_state(task.name, SID)
    assert st["error"] is None and st["stage"] == "sync", st
