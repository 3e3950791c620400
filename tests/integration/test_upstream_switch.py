"""DM's upstream_switch case: the address a source points at moves from a MariaDB master to its
replica (DM's case moves a keepalived VIP; here the source is registered again with the
replica's port), and the task goes on from its checkpoint.

The two servers' binlogs have files of the same names holding the same transactions at other
offsets (the master wrote more before replication began, as DM's prepare_more_binlogs), so
the master's checkpoint read on the replica would start at the wrong event. With
`enable-gtid` the start is found by the checkpoint's GTID state; without it the source pauses
and says why (UPSTREAM_SWITCHED, 50018) instead of reading from a meaningless position.
"""

import logging
import os
import signal
from contextlib import contextmanager

import pytest

from dm_core.db import connect, master_position, qi, qt
from dm_core.errors import ErrorCode
from dm_core.sync.session import Clocks, SyncSession
from dm_core.sync.syncer import Syncer
from dm_core.validate.compare import compare_task, render

from .replication import insert_rows, master_and_replica, one, received, register_source, replicated

pytestmark = pytest.mark.integration

BEFORE = ["CREATE DATABASE before_replication", "CREATE TABLE before_replication.t (id int PRIMARY KEY)",
          *[f"INSERT INTO before_replication.t VALUES ({i})" for i in range(30)]]


def _sync(task, store, sid):
    return Syncer(task, sid, store, budget_events=200).run_until(float("inf"), max_windows=100)


def _equal(task, store, rows: int) -> None:
    diffs = compare_task(task, store)
    assert diffs and all(d.equal for d in diffs), render(diffs)
    assert sum(d.upstream_rows for d in diffs) == rows


def _replicated_table(master, replica, schema: str, rows: int) -> None:
    """``schema``.tb on the master holding rows 1..``rows``, and the replica holding them too."""
    master.sql(f"CREATE DATABASE {qi(schema)}", f"CREATE TABLE {qt(schema, 'tb')} (id int PRIMARY KEY, a int)")
    insert_rows(master, schema, range(1, rows + 1))
    replicated(replica, schema, rows)


@contextmanager
def _master_gone(master):
    """Inside, the master answers nothing (SIGSTOP), as a failed server; after, it goes on."""
    os.kill(master.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(master.proc.pid, signal.SIGCONT)


@pytest.mark.parametrize("gtid", [True, False], ids=["enable-gtid", "positions-only"])
def test_source_moved_to_the_replica_resumes_at_the_same_transaction(stack, uniq, tmp_path, gtid):
    schema = f"us{uniq}"
    # the master's binlog gets ahead before replication starts (BEFORE): same file names, other offsets
    with master_and_replica(tmp_path, stack, f"us{uniq}", schema, source="master", gtid=gtid, master_id=11,
                            replica_id=12, before=BEFORE) as (master, replica, task, store, sid):
        master.sql(f"CREATE DATABASE {qi(schema)} COLLATE latin1_bin",
                   f"CREATE TABLE {qt(schema, 'tb')} (id int PRIMARY KEY, a int)")
        insert_rows(master, schema, range(1, 101))
        replicated(replica, schema, 100)
        r = _sync(task, store, sid)
        assert r.caught_up and not r.paused, r
        _equal(task, store, 100)
        before = store.source_state(task.name, sid)
        assert before["binlog_server"] == "server_id=11"
        assert before["binlog_file"] == master_position(connect(replica.endpoint()))[0]  # the same file name

        with _master_gone(master):   # the address now reaches the replica
            register_source(store, sid, replica, gtid)
            insert_rows(replica, schema, range(101, 151))
            if gtid:
                r = _sync(task, store, sid)
                assert r.caught_up and not r.paused, r
                _equal(task, store, 150)
                assert store.source_state(task.name, sid)["binlog_server"] == "server_id=12"
            else:
                out = SyncSession(task, sid, store, clocks=Clocks(sleep=lambda s: None)).step()   # as the sync sensor runs it
                st = store.source_state(task.name, sid)
                assert out.state == "paused" and st["stage"] == "paused", (out.state, st)
                assert st["error_code"] == ErrorCode.UPSTREAM_SWITCHED.number, st
                assert "server_id=11" in st["error"] and "server_id=12" in st["error"], st["error"]
                assert (st["binlog_file"], st["binlog_pos"]) == (before["binlog_file"], before["binlog_pos"])
                down = connect(stack["down"])
                with down.cursor() as cur:
                    cur.execute(f"SELECT COUNT(*) FROM {qt(schema, 'tb')}")
                    assert cur.fetchone()[0] == 100   # nothing read from a meaningless position
                down.close()


def test_transactions_the_replica_logged_after_one_of_its_own_are_replayed_in_safe_mode(stack, uniq, tmp_path, caplog):
    """After the switch, the replica's binlog holds a transaction of its own (another GTID
    domain, not in the checkpoint's state) before transactions the source had already applied
    from the master: reading on from the first transaction not in the state replays those,
    and must do it in safe mode, whatever the two servers' file numbers. The replica's files are
    numbered past the master's here, so the master's exit point says nothing on the replica."""
    schema = f"ur{uniq}"
    with master_and_replica(tmp_path, stack, f"ur{uniq}", schema, source="master", master_id=13,
                            replica_id=14) as (master, replica, task, store, sid):
        _replicated_table(master, replica, schema, 50)
        replica.sql("STOP SLAVE", *["FLUSH BINARY LOGS"] * 3,
                    "SET SESSION gtid_domain_id = 7",   # the replica's own write, ordered before the master's next
                    f"INSERT INTO {qt(schema, 'tb')} VALUES (500, 500)")
        insert_rows(master, schema, range(51, 61))
        replica.sql("START SLAVE")
        replicated(replica, schema, 61)
        r = _sync(task, store, sid)   # the source reads the master's 60 rows
        assert r.caught_up and not r.paused, r

        with _master_gone(master):
            register_source(store, sid, replica, True)
            insert_rows(replica, schema, range(61, 71))
            with caplog.at_level(logging.INFO, logger="shardflow.sync"):
                r = _sync(task, store, sid)
            assert r.caught_up and not r.paused, (r, store.source_state(task.name, sid)["error"])
            assert r.safe_mode and "safe mode on up to" in caplog.text, caplog.text
            assert "rejected" not in caplog.text, caplog.text   # not a duplicate key met and worked around
            _equal(task, store, 71)   # the replica's rows: the master's 70 and its own


def test_a_replica_promoted_while_it_still_applies_its_relay_log_is_waited_for(stack, uniq, tmp_path):
    """The source switches to a replica whose SQL thread had not applied what it received: the
    checkpoint's GTID state holds transactions the replica logs only as it catches up. The
    source must say so and retry (not pause for good telling the user to run the full phase
    again), then start after those transactions once the replica has logged them: none is
    applied twice, none lost."""
    schema = f"ul{uniq}"
    with master_and_replica(tmp_path, stack, f"ul{uniq}", schema, source="master", master_id=15,
                            replica_id=16) as (master, replica, task, store, sid):
        _replicated_table(master, replica, schema, 50)
        replica.sql("STOP SLAVE SQL_THREAD")
        insert_rows(master, schema, range(51, 61))
        received(replica, one(master, "SELECT @@gtid_binlog_pos")[0])
        r = _sync(task, store, sid)   # the source reads the master's 60 rows
        assert r.caught_up and not r.paused, r
        gtid = store.source_state(task.name, sid)["binlog_gtid"]

        with _master_gone(master):
            register_source(store, sid, replica, True)
            session = SyncSession(task, sid, store, clocks=Clocks(sleep=lambda s: None))   # as the sync sensor runs it
            out = session.step()
            st = store.source_state(task.name, sid)
            assert out.state == "retrying" and st["error_code"] == ErrorCode.UPSTREAM_BEHIND.number, (out.state, st)
            assert "server_id=16" in st["error"] and f"has not logged all of the checkpoint's GTID state {gtid}" in \
                st["error"] and "(its binlog is at 0-15-52 in domain 0)" in st["error"], st["error"]

            replica.sql("START SLAVE SQL_THREAD")
            replicated(replica, schema, 60)
            insert_rows(replica, schema, range(61, 71))
            for _ in range(5):
                out = session.step()
                if store.source_state(task.name, sid)["binlog_server"] == "server_id=16" and out.state == "caught_up":
                    break
            st = store.source_state(task.name, sid)
            assert st["binlog_server"] == "server_id=16" and st["stage"] != "paused", st
            _equal(task, store, 70)   # the replica's 10 rows after the master's 60, each once
