"""DM's mariadb_master_down_and_up case: the source is a MariaDB replica (GTID, log_slave_updates)
of another MariaDB; its master goes down (frozen, as `docker pause` does) while rows are
written on the replica, then comes back and writes again.

The replica's binlog then holds GTIDs of two server ids in one domain, and the master's new
sequence numbers start below the replica's own (0-2-202, then 0-1-153): a syncer that took
a lower sequence number for a transaction it has already applied would drop the master's
rows. Each step ends with the downstream equal to the replica.
"""

import os
import signal

import pytest

from dm_core.db import qi, qt
from dm_core.sync.syncer import Syncer
from dm_core.validate.compare import compare_task, render

from .replication import insert_rows, master_and_replica, one, replicated

pytestmark = pytest.mark.integration


def _synced(task, store, sid, rows: int) -> None:
    r = Syncer(task, sid, store, budget_events=200).run_until(float("inf"), max_windows=100)
    assert not r.paused, r.paused
    assert r.caught_up, "did not catch up"
    diffs = compare_task(task, store)
    assert diffs and all(d.equal for d in diffs), render(diffs)
    assert sum(d.upstream_rows for d in diffs) == rows


def test_replica_source_keeps_every_row_while_its_master_goes_down_and_up(stack, uniq, tmp_path):
    schema = f"mdu{uniq}"
    with master_and_replica(tmp_path, stack, f"mdu{uniq}", schema, source="replica") as (master, replica, task,
                                                                                          store, sid):
        master.sql(f"CREATE DATABASE {qi(schema)} COLLATE latin1_bin",
                   f"CREATE TABLE {qt(schema, 'tb')} (id int PRIMARY KEY, a int)")
        insert_rows(master, schema, range(1, 101))
        replicated(replica, schema, 100)
        _synced(task, store, sid, 100)
        insert_rows(master, schema, range(201, 251))
        replicated(replica, schema, 150)
        _synced(task, store, sid, 150)

        os.kill(master.proc.pid, signal.SIGSTOP)   # the master is down; the replica takes writes
        try:
            insert_rows(replica, schema, range(401, 451))
            _synced(task, store, sid, 200)
        finally:
            os.kill(master.proc.pid, signal.SIGCONT)

        insert_rows(master, schema, range(501, 551))   # sequence numbers below the replica's own
        replicated(replica, schema, 250)
        _synced(task, store, sid, 250)
        st = store.source_state(task.name, sid)
        # a resume by GTID (the replica promoted, its files gone) lands where the checkpoint is
        at = one(replica, "SELECT BINLOG_GTID_POS(%s, %s)", (st["binlog_file"], st["binlog_pos"]))[0]
        assert set(st["binlog_gtid"].split(",")) == set(at.split(",")), (st, at)   # domains in any order
