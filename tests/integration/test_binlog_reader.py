"""OracleBinlogWindow against a real MariaDB over TCP: file/pos resume, budgets, rotation, volume."""

import pytest

from dm_core.db import connect, master_position, qt
from dm_core.position import Position
from tests.oracle_binlog import OracleBinlogWindow

pytestmark = pytest.mark.integration


def _read_all(ep, start, until, **budget):
    """Read [start, until) in as many windows as the budget needs, resuming each from the last."""
    rows, pos, windows = [], start, 0
    while pos.key() < until.key():
        w = OracleBinlogWindow(ep, pos, until, server_id=4242, **budget)
        for txn in w:
            rows.extend(txn.rows)
        assert w.position.key() > pos.key(), "a window must make progress"
        pos = w.position
        windows += 1
    return rows, pos, windows


@pytest.fixture
def table(stack, uniq):
    ep = stack["up1"]
    conn = connect(ep)
    schema = f"rd_{uniq}"
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {schema}")
        cur.execute(f"CREATE TABLE {qt(schema, 't')} (id int primary key, v varchar(255), u int unsigned, j json)")
    yield ep, conn, schema
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE {schema}")
    conn.close()


def test_window_delivers_each_change_once_across_budgeted_windows(table):
    ep, conn, schema = table
    start = Position(*master_position(conn)[:2])
    with conn.cursor() as cur:
        for i in range(50):
            cur.executemany(f"INSERT INTO {qt(schema, 't')} VALUES (%s, %s, %s, %s)",
                            [(i * 10 + k, f"v{i}-{k}", 4_000_000_000, '{"a": 1}') for k in range(10)])
        cur.execute(f"UPDATE {qt(schema, 't')} SET v = 'upd' WHERE id < 5")
        cur.execute(f"DELETE FROM {qt(schema, 't')} WHERE id >= 490")
    until = Position(*master_position(conn)[:2])
    rows, end, windows = _read_all(ep, start, until, budget_events=40)
    assert end.key() >= until.key()
    assert windows > 3
    mine = [r for r in rows if r.schema == schema]
    assert [r.op for r in mine].count("insert") == 500
    assert [r.op for r in mine].count("update") == 5
    assert [r.op for r in mine].count("delete") == 10
    ins = {r.after["id"]: r.after for r in mine if r.op == "insert"}
    assert sorted(ins) == list(range(500))
    assert ins[7]["u"] == 4_000_000_000  # unsigned decoded as unsigned (binlog_row_metadata=FULL)
    upd = [r for r in mine if r.op == "update"]
    assert upd[0].before["v"] == "v0-0" and upd[0].after["v"] == "upd"


def test_window_follows_binlog_rotation(table):
    ep, conn, schema = table
    start = Position(*master_position(conn)[:2])
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {qt(schema, 't')} VALUES (1, 'before', 1, NULL)")
        cur.execute("FLUSH BINARY LOGS")
        cur.execute(f"INSERT INTO {qt(schema, 't')} VALUES (2, 'after', 2, NULL)")
    until = Position(*master_position(conn)[:2])
    assert until.file != start.file
    rows, end, _ = _read_all(ep, start, until)
    assert [r.after["v"] for r in rows if r.schema == schema] == ["before", "after"]
    assert end.file == until.file


def test_window_streams_well_over_10_mb(table):
    ep, conn, schema = table
    start = Position(*master_position(conn)[:2])
    payload = "x" * 200
    with conn.cursor() as cur:
        for b in range(60):
            cur.executemany(f"INSERT INTO {qt(schema, 't')} (id, v) VALUES (%s, %s)",
                            [(b * 1000 + k, payload) for k in range(1000)])
    until = Position(*master_position(conn)[:2])
    span = until.pos - start.pos if until.file == start.file else None
    assert span is None or span > 10 * 1024 * 1024, f"only {span} bytes of binlog"
    rows, end, _ = _read_all(ep, start, until, budget_events=100_000)
    assert sum(1 for r in rows if r.schema == schema) == 60_000
