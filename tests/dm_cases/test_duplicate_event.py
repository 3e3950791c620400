"""DM's `duplicate_event` case (pingcap/tiflow dm/tests/duplicate_event/run.sh), with DM's own task
and source files (conf/, vendored unchanged; the sources say `flavor: mysql`, the test sets
mariadb; run.sh's second pass turns `enable-gtid` off, so does the test's) and our own statements
for the same situations:

1. `dm-task.yaml` (source 1, `dup_event` routed to `dup_event1`, checkpoint-flush-interval 1s):
   after the full phase and its safe-mode catch-up, three transactions of five inserts each;
   reading the binlog fails at the third row event of the first one (DM: GetEventErrorInTxn=3,
   then "reset replication binlog puller" and "discard event already consumed"). Here the
   failure is the fault point `binlog.in_transaction` raising a transient error in the sensor's
   process: the source says it retries from its checkpoint, and the retry applies every row
   once, outside safe mode (a row applied twice would be a duplicate-key pause).
2. `dm-task-relay.yaml` (source 2, routed to `dup_event_relay`): DM fails its relay unit at the
   third event and checks the relay log's size; shardflow has no relay log (`enable-relay` is
   warned), so the same read failure is injected right after a binlog rotation (`FLUSH LOGS`,
   as run.sh does before the rows): the retry resumes across the rotation.
3. Both with `enable-gtid: true` and `false`.
"""

import pytest

from dm_core import faults
from dm_core.reset import reset_task

from .harness import DMFiles, dm_case, register_sources, run_sql, start, table_rows

pytestmark = pytest.mark.integration

DB = "dup_event"


@pytest.fixture(params=[True, False], ids=["gtid", "position"])
def gtid(request):
    return request.param


@pytest.fixture
def case(stack, tmp_path, gtid):
    with dm_case("duplicate_event", tmp_path, stack, {"source1.yaml": "up1"},
                 {"up1": [DB], "up2": [DB], "down": ["dup_event1", "dup_event_relay"]},
                 flavor="mariadb", source_keys={"enable-gtid": gtid}) as got:
        yield got


def _prepare(up) -> None:
    run_sql(up, f"CREATE DATABASE {DB}", f"USE {DB}", "CREATE TABLE t1 (id int, name varchar(20), PRIMARY KEY (id))",
            "INSERT INTO t1 (id, name) VALUES (1, 'sansa'), (2, 'bran')")


def _three_transactions(up) -> None:
    stmts = [f"USE {DB}"]
    for k in (1, 2, 3):
        stmts += ["BEGIN", *[f"INSERT INTO t1 (id, name) VALUES ({k}{i}, 'row{k}{i}')" for i in range(1, 6)], "COMMIT"]
    run_sql(up, *stmts)


def _read_fails_mid_transaction(monkeypatch, sync, sid) -> None:
    """The first step meets the injected read error in the first transaction and says it
    retries; the next one applies all three transactions, not in safe mode."""
    monkeypatch.setenv("SHARDFLOW_FAULTS", "binlog.in_transaction=raise:3")
    monkeypatch.setattr(faults, "_hits", {})
    out = sync.sessions[sid].step()
    said = "\n".join(m for _, m in out.messages)
    assert out.state == "retrying" and "fault point binlog.in_transaction: injected error at hit 3" in said, said
    assert "transient error (attempt 1 of 8), retrying from the last checkpoint" in said, said
    out = sync.sessions[sid].step()
    assert out.state == "caught_up" and out.last.rows == 15 and not out.last.safe_mode, (out.state, out.last)
    monkeypatch.delenv("SHARDFLOW_FAULTS")
    sync.settle()


def test_dm_duplicate_event_case(case, stack, tmp_path, gtid, monkeypatch):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]

    # 1. a binlog read fails in the middle of a transaction, after safe mode ended
    _prepare(up1)
    register_sources(files)
    task, sync = start(files, store)
    assert table_rows(down, "dup_event1", "t1", ["id", "name"]) == table_rows(up1, DB, "t1", ["id", "name"])
    _three_transactions(up1)
    _read_fails_mid_transaction(monkeypatch, sync, "mysql-replica-01")
    assert table_rows(down, "dup_event1", "t1", ["id", "name"]) == table_rows(up1, DB, "t1", ["id", "name"])
    assert len(table_rows(down, "dup_event1", "t1", ["id"])) == 17

    # 2. the second source and task (DM's relay part): the same, right after a binlog rotation
    relay = DMFiles("duplicate_event", tmp_path, stack, {"source2.yaml": "up2"}, task_file="dm-task-relay.yaml",
                    flavor="mariadb", source_keys={"enable-gtid": gtid})
    reset_task(store, relay.name)
    try:
        _prepare(up2)
        register_sources(relay)
        task2, sync2 = start(relay, store)
        assert table_rows(down, "dup_event_relay", "t1", ["id", "name"]) == table_rows(up2, DB, "t1", ["id", "name"])
        run_sql(up2, "FLUSH BINARY LOGS")
        _three_transactions(up2)
        _read_fails_mid_transaction(monkeypatch, sync2, "mysql-replica-02")
        assert table_rows(down, "dup_event_relay", "t1", ["id", "name"]) == table_rows(up2, DB, "t1", ["id", "name"])
    finally:
        reset_task(store, relay.name)
