"""An XA transaction prepared on the upstream when the full phase reads its starting
position (dm_core/full/xa_wait.py): its rows are in the binlog before the start and in no
snapshot, so a commit after the start was lost without a word. The full phase now waits for
it to end before it records the start, and fails naming it when it does not."""

import threading

import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, qi, qt
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.full import xa_wait
from dm_core.full.phase import prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore

from .helpers import drop_schemas, one_source_task, register
from .helpers import run_sql as run

pytestmark = pytest.mark.integration


def _prepare_and_leave(ep, xid, sql):
    """XA START .. PREPARE, then the client goes away: MariaDB keeps the transaction prepared."""
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute("XA START %s", (xid,))
            cur.execute(sql)
            cur.execute("XA END %s", (xid,))
            cur.execute("XA PREPARE %s", (xid,))
    finally:
        conn.close()


def test_the_full_phase_waits_for_an_xa_transaction_prepared_at_its_start(stack, uniq, monkeypatch):
    up, down = stack["up1"], stack["down"]
    db, tdb, name, sid = f"xs{uniq}", f"txs{uniq}", f"xs{uniq}", f"xs-{uniq}"
    xid = f"orphan-{uniq}"
    run(up, f"CREATE DATABASE {qi(db)}", f"CREATE TABLE {qt(db, 't')} (id int PRIMARY KEY, name varchar(20))")
    text = one_source_task(name, sid, db, tdb, down)
    task = parse_task(text, "xa.yaml")
    store = StateStore()
    register(store, {sid: up}, name, text)
    probe = connect(up)
    try:
        _prepare_and_leave(up, xid, f"INSERT INTO {qt(db, 't')} VALUES (1, 'prepared')")
        monkeypatch.setattr(xa_wait, "XA_WAIT_SECONDS", 1.0)
        with pytest.raises(ShardflowError) as got:
            prepare(task, store)
        assert got.value.code is ErrorCode.XA_PREPARED_AT_START
        assert xid in str(got.value) and "XA COMMIT" in got.value.code.workaround
        assert not store.source_state(name, sid)["low_file"], "nothing recorded: the next run reads a new start"

        # its coordinator comes back while the next run waits
        monkeypatch.setattr(xa_wait, "XA_WAIT_SECONDS", 120.0)
        timer = threading.Timer(1.0, run, (up, f"XA COMMIT '{xid}'"))
        timer.start()
        try:
            prepare(task, store)
            pending = xa_wait.prepared_xids(probe)
        finally:
            timer.join()
        assert not any(xid in x for x in pending), f"prepare returned while {xid} was still prepared: {pending}"
        assert store.source_state(name, sid)["low_file"]
    finally:
        try:
            run(up, f"XA ROLLBACK '{xid}'")
        except Exception:
            pass
        probe.close()
        reset_task(store, name)
        store.close()
        drop_schemas(up, [db])
        drop_schemas(down, [tdb])
