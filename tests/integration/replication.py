"""A MariaDB master and its GTID replica (private servers, mariadb_fixture.py) and a task in
incremental mode on a source that points at one of them: the set-up of DM's cases where the
server behind a source changes (mariadb_master_down_and_up, upstream_switch)."""

from __future__ import annotations

import time
from contextlib import contextmanager

from dm_core.config.task import parse_task
from dm_core.db import connect, master_position, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore

from .helpers import drop_schemas, target_database
from .mariadb_fixture import free_port, private_port, start_mariadb

GTID_ARGS = ("--log-slave-updates=ON", "--gtid-domain-id=0")


def one(db, sql: str, args=()):
    """The first row of ``sql`` run with ``args`` on private server ``db``."""
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchone()
    finally:
        conn.close()


def insert_rows(db, schema: str, ids) -> None:
    """Rows (id, id) into ``schema``.tb, one transaction each, as DM's cases write them."""
    conn = db.connect()
    with conn.cursor() as cur:
        for i in ids:
            cur.execute(f"INSERT INTO {qt(schema, 'tb')} VALUES (%s, %s)", (i, i))
    conn.close()


def replicated(replica, schema: str, rows: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if replica.sql(f"SELECT COUNT(*) FROM {qt(schema, 'tb')}")[0][0] == rows:
                return
        except Exception:  # noqa: BLE001 - the database is not replicated yet
            pass
        time.sleep(0.2)
    raise AssertionError(f"the replica does not hold {rows} rows after {timeout}s: {replica.sql('SHOW SLAVE STATUS')}")


def received(replica, gtid: str, timeout: float = 60) -> None:
    """Until the replica's IO thread has received the master's transactions up to ``gtid``
    (with its SQL thread stopped, they wait in its relay log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = {k.lower(): v for k, v in zip(*_status(replica))}
        if gtid in str(status.get("gtid_io_pos", "")).split(","):
            return
        time.sleep(0.1)
    raise AssertionError(f"the replica has not received {gtid} after {timeout}s: {_status(replica)}")


def _status(replica):
    conn = replica.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SLAVE STATUS")
            return [d[0] for d in cur.description], cur.fetchone() or ()
    finally:
        conn.close()


def register_source(store, sid: str, db, gtid: bool) -> None:
    """Source ``sid`` points at private server ``db`` (registered again: the address moved)."""
    ep = db.endpoint()
    store.put_source(sid, {"source-id": sid, "host": ep.host, "port": ep.port, "user": ep.user,
                           "enable-gtid": gtid}, ep.password)


@contextmanager
def master_and_replica(tmp_path, stack, name: str, schema: str, *, source: str, gtid: bool = True,
                       master_id: int = 1, replica_id: int = 2, before=()):
    """Yield (master, replica, task, store, source id): the replica follows the master by GTID
    from the master's position after ``before`` (statements the replica never sees), and task
    ``name`` (incremental, ``schema`` only, started before the schema exists) reads the server
    ``source`` names ("master" or "replica")."""
    master = start_mariadb(tmp_path, free_port(private_port(i) for i in range(8, 10)), master_id, GTID_ARGS)
    try:
        replica = start_mariadb(tmp_path, free_port(p for p in (private_port(9), private_port(8)) if p != master.port),
                                replica_id, GTID_ARGS)
    except BaseException:   # the next test needs the master's port
        master.stop()
        raise
    sid = f"{name}-src"
    store = StateStore()
    try:
        if before:
            master.sql(*before)
        file, pos = master_position(connect(master.endpoint()))[:2]
        one(replica, "SET GLOBAL gtid_slave_pos = %s", (one(master, "SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))[0],))
        replica.sql(f"CHANGE MASTER TO master_host='127.0.0.1', master_port={master.port}, master_user='root', "
                    "master_password='', master_use_gtid=slave_pos", "START SLAVE")
        text = (f"name: {name}\ntask-mode: incremental\n"
                f"target-database: {target_database(stack['down'])}\n"
                f"mysql-instances:\n  - source-id: {sid}\n    block-allow-list: ba\n"
                f"block-allow-list:\n  ba: {{do-dbs: [{schema}]}}\n")
        task = parse_task(text, "task-pessimistic.yaml")
        register_source(store, sid, master if source == "master" else replica, gtid)
        reset_task(store, name)
        store.put_task(name, text, "running")
        prepare(task, store)   # the task starts before the database exists: it comes through the binlog
        finish(task, store)
        yield master, replica, task, store, sid
    finally:
        reset_task(store, name)
        store.close()
        replica.stop()
        master.stop()
        drop_schemas(stack["down"], [schema])
