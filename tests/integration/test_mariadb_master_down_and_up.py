"""DM's mariadb_master_down_and_up case: the source is a MariaDB replica (GTID, log_slave_updates)
of another MariaDB; its master goes down (frozen, as `docker pause` does) while rows are
written on the replica, then comes back and writes again.

The replica's binlog then holds GTIDs of two server ids in one domain, and the master's new
sequence numbers start below the replica's own (0-2-300, then 0-1-251): a syncer that took
a lower sequence number for a transaction it has already applied would drop the master's
rows. Each step ends with the downstream equal to the replica.
"""

import os
import signal
import time

import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, master_position, qi, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.syncer import Syncer
from dm_core.validate.compare import compare_task, render

from .helpers import drop_schemas, target_database
from .mariadb_fixture import free_port, private_port, start_mariadb

pytestmark = pytest.mark.integration

GTID_ARGS = ("--log-slave-updates=ON", "--gtid-domain-id=0")


def _insert(db, schema: str, ids) -> None:
    conn = db.connect()
    with conn.cursor() as cur:
        for i in ids:   # one transaction each, as DM's case writes them
            cur.execute(f"INSERT INTO {qt(schema, 'tb')} VALUES (%s, %s)", (i, i))
    conn.close()


def _one(db, sql: str, args=()):
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchone()
    finally:
        conn.close()


def _replicated(replica, schema: str, rows: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if replica.sql(f"SELECT COUNT(*) FROM {qt(schema, 'tb')}")[0][0] == rows:
                return
        except Exception:  # noqa: BLE001 - the database is not replicated yet
            pass
        time.sleep(0.2)
    status = replica.sql("SHOW SLAVE STATUS")
    raise AssertionError(f"the replica does not hold {rows} rows after {timeout}s: {status}")


def _synced(task, store, sid, rows: int) -> None:
    r = Syncer(task, sid, store, budget_events=200).run_until(float("inf"), max_windows=100)
    assert not r.paused, r.paused
    assert r.caught_up, "did not catch up"
    diffs = compare_task(task, store)
    assert diffs and all(d.equal for d in diffs), render(diffs)
    assert sum(d.upstream_rows for d in diffs) == rows


def test_replica_source_keeps_every_row_while_its_master_goes_down_and_up(stack, uniq, tmp_path):
    ports = [free_port(private_port(i) for i in range(8, 10))]
    master = start_mariadb(tmp_path, ports[0], 1, GTID_ARGS)
    replica = start_mariadb(tmp_path, free_port(p for p in (private_port(9), private_port(8)) if p != ports[0]), 2,
                            GTID_ARGS)
    schema, name, sid = f"mdu{uniq}", f"mdu{uniq}", f"mdu-{uniq}"
    store = StateStore()
    try:
        file, pos = master_position(connect(master.endpoint()))[:2]
        gtid = _one(master, "SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))[0]
        _one(replica, "SET GLOBAL gtid_slave_pos = %s", (gtid,))
        replica.sql(f"CHANGE MASTER TO master_host='127.0.0.1', master_port={master.port}, master_user='root', "
                    "master_password='', master_use_gtid=slave_pos",
                    "START SLAVE")
        text = (f"name: {name}\ntask-mode: incremental\n"
                f"target-database: {target_database(stack['down'])}\n"
                f"mysql-instances:\n  - source-id: {sid}\n    block-allow-list: ba\n"
                f"block-allow-list:\n  ba: {{do-dbs: [{schema}]}}\n")
        task = parse_task(text, "task-pessimistic.yaml")
        ep = replica.endpoint()
        store.put_source(sid, {"source-id": sid, "host": ep.host, "port": ep.port, "user": ep.user,
                               "enable-gtid": True}, ep.password)
        reset_task(store, name)
        store.put_task(name, text, "running")
        prepare(task, store)   # the task starts before the database exists: it comes through the binlog
        finish(task, store)

        master.sql(f"CREATE DATABASE {qi(schema)} COLLATE latin1_bin",
                   f"CREATE TABLE {qt(schema, 'tb')} (id int PRIMARY KEY, a int)")
        _insert(master, schema, range(1, 101))
        _replicated(replica, schema, 100)
        _synced(task, store, sid, 100)
        _insert(master, schema, range(201, 251))
        _replicated(replica, schema, 150)
        _synced(task, store, sid, 150)

        os.kill(master.proc.pid, signal.SIGSTOP)   # the master is down; the replica takes writes
        try:
            _insert(replica, schema, range(401, 451))
            _synced(task, store, sid, 200)
        finally:
            os.kill(master.proc.pid, signal.SIGCONT)

        _insert(master, schema, range(501, 551))   # sequence numbers below the replica's own
        _replicated(replica, schema, 250)
        _synced(task, store, sid, 250)
        st = store.source_state(name, sid)
        # a resume by GTID (the replica promoted, its files gone) lands where the checkpoint is
        at = _one(replica, "SELECT BINLOG_GTID_POS(%s, %s)", (st["binlog_file"], st["binlog_pos"]))[0]
        assert st["binlog_gtid"] == at, (st, at)
    finally:
        reset_task(store, name)
        store.close()
        replica.stop()
        master.stop()
        drop_schemas(stack["down"], [schema])
