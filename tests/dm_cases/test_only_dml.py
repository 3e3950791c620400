"""DM's `only_dml` case (pingcap/tiflow dm/tests/only_dml/run.sh), with DM's own task and source files
(conf/, vendored unchanged: source 1 by file and position, source 2 by GTID, `batch: 10000`,
`checkpoint-flush-interval: 300`, the deprecated `enable-heartbeat`) and our own statements:

1. both upstreams start from an empty binlog (RESET MASTER), one table each (`only_dml`.`t1` on
   upstream 1, `t2` on upstream 2) with one row; task-mode all: the full phase, then a diff;
2. once the task is in its incremental phase only DML arrives: a client inserts rows into both
   tables and rotates both binlogs (FLUSH LOGS) after every two rows while the sources sync; twice
   in the middle, once both checkpoints reached the newest binlog file, every older file is purged
   upstream (DM purges its relay logs to the newest file, `purge-relay`; shardflow has no relay, the
   upstream's own files are what it reads) and the earliest file on the server changes;
3. DM's failpoint `syncDMLBatchNotFull` checks that a DML batch is executed when the job queue is
   empty although it is far from `batch` rows: here a single row written upstream is downstream after
   one step of its source, while `batch` x `worker-count` is 160,000 rows and the checkpoint interval
   300 s;
4. the writer stops; both tables downstream equal their upstream tables.

Not ported: relay (shardflow reads the upstream's binlog directly), DM's metrics and log lines.
"""

import threading

import pytest

from .harness import dm_case, register_sources, run_sql, start, table_rows

pytestmark = pytest.mark.integration

DB = "only_dml"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB], "up2": [DB], "down": [DB]}) as got:
        yield got


def _binlogs(ep) -> list[str]:
    return [r[0] for r in run_sql(ep, "SHOW BINARY LOGS")]


class Writer(threading.Thread):
    """DM's insert_data: odd ids into t1 upstream 1, even ids into t2 upstream 2, FLUSH LOGS on both
    after every two rows of each, until stopped."""

    def __init__(self, up1, up2):
        super().__init__(daemon=True)
        self.up1, self.up2 = up1, up2
        self.halt = threading.Event()
        self.rounds = 0
        self.error: BaseException | None = None

    def run(self):
        i = 1
        try:
            while not self.halt.is_set():
                for _ in range(2):
                    run_sql(self.up1, f"INSERT INTO {DB}.t1 VALUES ({i * 2 + 1})")
                    run_sql(self.up2, f"INSERT INTO {DB}.t2 VALUES ({i * 2 + 2})")
                    i += 1
                run_sql(self.up1, "FLUSH LOGS")
                run_sql(self.up2, "FLUSH LOGS")
                self.rounds += 1
                self.halt.wait(0.2)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


def test_dm_only_dml_case(case, stack):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    for up, t, v in ((up1, "t1", 1), (up2, "t2", 2)):
        run_sql(up, "RESET MASTER", f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.{t} (id int, PRIMARY KEY (id))",
                f"INSERT INTO {DB}.{t} VALUES ({v})")
    register_sources(files)
    task, sync = start(files, store)
    assert int(task.instance(task.mysql_instances[0].source_id).syncer.batch) == 10000
    assert table_rows(down, DB, "t1", ["id"]) == [(1,)] and table_rows(down, DB, "t2", ["id"]) == [(2,)]
    s1, s2 = (i.source_id for i in task.mysql_instances)

    # a lone row lands at once: the batch is executed though far from full (DM's syncDMLBatchNotFull)
    run_sql(up1, f"INSERT INTO {DB}.t1 VALUES (-1)")
    run_sql(up2, f"INSERT INTO {DB}.t2 VALUES (-2)")
    sync.step()
    assert table_rows(down, DB, "t1", ["id"], "WHERE id < 0") == [(-1,)]
    assert table_rows(down, DB, "t2", ["id"], "WHERE id < 0") == [(-2,)]

    for session in sync.sessions.values():   # steps of about a second while rows keep coming
        session.pacing.step_seconds = 1.0
    writer = Writer(up1, up2)
    writer.start()
    try:
        for purge in range(2):   # DM checks twice: the first purge and a later one
            target = writer.rounds + 5
            while writer.rounds < target and writer.is_alive():
                sync.step()
            for up, sid in ((up1, s1), (up2, s2)):
                newest = _binlogs(up)[-1]
                for _ in range(200):
                    st = store.source_state(task.name, sid)
                    if st["binlog_file"] is not None and st["binlog_file"] >= newest:
                        break
                    sync.step()
                else:
                    pytest.fail(f"{sid} never reached {newest}: {st['binlog_file']}")
                earliest = _binlogs(up)[0]
                run_sql(up, f"PURGE BINARY LOGS TO '{newest}'")
                assert _binlogs(up)[0] == newest != earliest, (purge, _binlogs(up))
            for _ in range(3):
                sync.step()
            assert writer.error is None, writer.error
    finally:
        writer.halt.set()
        writer.join(30)
    assert writer.error is None, writer.error
    assert writer.rounds >= 10
    sync.settle()
    for up, t in ((up1, "t1"), (up2, "t2")):
        assert table_rows(down, DB, t, ["id"]) == table_rows(up, DB, t, ["id"])
    states = {s["source_id"]: s for s in store.all_source_states(task.name)}
    assert not any(s["error"] for s in states.values()), states
