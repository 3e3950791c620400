"""BinlogWindow against a real MariaDB over TCP: budgets and resume, rotation, idle
heartbeats, volume (> 10 MB, one event > 16 MB), a lost position, an early stop."""

import time

import pytest

from dm_core.binlog import BinlogWindow
from dm_core.db import connect, master_position, qt
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.position import Position
from tests.oracle_binlog import OracleBinlogWindow

pytestmark = pytest.mark.integration


def _read_all(ep, start, until, cls=BinlogWindow, server_id=4242, **budget):
    """Read [start, until) in as many windows as the budget needs, resuming each from the last."""
    txns, pos, windows = [], start, []
    while pos.key() < until.key():
        w = cls(ep, pos, until, server_id=server_id, **budget)
        txns.extend(w)
        assert w.position.key() > pos.key(), "a window must make progress"
        pos = w.position
        windows.append(w.events_read)
    return txns, pos, windows


def _rows(txns, schema):
    return [r for t in txns for r in t.rows if r.schema == schema]


@pytest.fixture
def table(stack, uniq):
    ep = stack["up1"]
    conn = connect(ep)
    schema = f"fb_{uniq}"
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {schema}")
        cur.execute(f"CREATE TABLE {qt(schema, 't')} (id int primary key, v varchar(255), u int unsigned, j json)")
    yield ep, conn, schema
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE {schema}")
    conn.close()


def test_budgeted_windows_deliver_each_change_once_like_the_old_reader(table):
    ep, conn, schema = table
    start = Position(*master_position(conn)[:2])
    with conn.cursor() as cur:
        for i in range(50):
            cur.executemany(f"INSERT INTO {qt(schema, 't')} VALUES (%s, %s, %s, %s)",
                            [(i * 10 + k, f"v{i}-{k}", 4_000_000_000, '{"a": 1}') for k in range(10)])
        cur.execute(f"UPDATE {qt(schema, 't')} SET v = 'upd' WHERE id < 5")
        cur.execute(f"DELETE FROM {qt(schema, 't')} WHERE id >= 490")
    until = Position(*master_position(conn)[:2])
    txns, end, windows = _read_all(ep, start, until, budget_events=40)
    assert end.key() >= until.key()
    assert len(windows) > 3
    mine = _rows(txns, schema)
    assert [r.op for r in mine].count("insert") == 500
    assert [r.op for r in mine].count("update") == 5
    assert [r.op for r in mine].count("delete") == 10
    ins = {r.after["id"]: r.after for r in mine if r.op == "insert"}
    assert sorted(ins) == list(range(500))
    assert ins[7]["u"] == 4_000_000_000 and ins[7]["j"] == '{"a": 1}'
    upd = [r for r in mine if r.op == "update"]
    assert upd[0].before["v"] == "v0-0" and upd[0].after["v"] == "upd"
    # the same windows, cut at the same transactions, as OracleBinlogWindow's
    old = _read_all(ep, start, until, cls=OracleBinlogWindow, server_id=4243, budget_events=40)
    assert (txns, end, windows) == old


def test_time_budget_ends_windows_between_transactions(table):
    ep, conn, schema = table
    start = Position(*master_position(conn)[:2])
    with conn.cursor() as cur:
        for i in range(30):
            cur.execute(f"INSERT INTO {qt(schema, 't')} (id, v) VALUES (%s, 'x')", (i,))
    until = Position(*master_position(conn)[:2])
    txns, end, windows = _read_all(ep, start, until, budget_seconds=0.0)
    # every window stops at its first boundary past its start: one transaction each
    assert len(windows) >= 30
    assert sorted(r.after["id"] for r in _rows(txns, schema)) == list(range(30))
    one, _, _ = _read_all(ep, start, until, budget_events=1)
    assert one == txns
    assert all(t.end.key() <= until.key() for t in txns)


def test_window_follows_binlog_rotation(table):
    ep, conn, schema = table
    start = Position(*master_position(conn)[:2])
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {qt(schema, 't')} VALUES (1, 'before', 1, NULL)")
        cur.execute("FLUSH BINARY LOGS")
        cur.execute(f"INSERT INTO {qt(schema, 't')} VALUES (2, 'after', 2, NULL)")
    until = Position(*master_position(conn)[:2])
    assert until.file != start.file
    txns, end, _ = _read_all(ep, start, until)
    assert [r.after["v"] for r in _rows(txns, schema)] == ["before", "after"]
    assert end.file == until.file
    assert (txns, end) == _read_all(ep, start, until, cls=OracleBinlogWindow, server_id=4243)[:2]


def test_idle_end_of_a_fresh_binlog_is_reached_by_heartbeat(table):
    """After FLUSH BINARY LOGS the new file starts with events no window counts (GTID list,
    checkpoint): the window reaches `until` only by the server's heartbeat."""
    ep, conn, schema = table
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {qt(schema, 't')} VALUES (1, 'x', 1, NULL)")
    start = Position(*master_position(conn)[:2])
    with conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
    until = Position(*master_position(conn)[:2])
    t0 = time.monotonic()
    w = BinlogWindow(ep, start, until, server_id=4242, budget_seconds=10)
    assert list(w) == []
    assert w.position.key() >= until.key() and w.position.file == until.file
    assert time.monotonic() - t0 < 5


def test_window_streams_well_over_10_mb_and_one_event_over_16_mb(table):
    ep, conn, schema = table
    t = qt(schema, "big")
    payload = "x" * 200
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {t} (id int primary key, a longtext, b longtext)")
        start = Position(*master_position(conn)[:2])
        for b in range(60):
            cur.executemany(f"INSERT INTO {qt(schema, 't')} (id, v) VALUES (%s, %s)",
                            [(b * 1000 + k, payload) for k in range(1000)])
        # one row of two 9 MB values: its UPDATE event (before + after) is ~36 MB, so the
        # server sends it as several 16 MB packets
        cur.execute(f"INSERT INTO {t} VALUES (1, REPEAT('a', 9000000), REPEAT('b', 9000000))")
        cur.execute(f"UPDATE {t} SET a = REPEAT('c', 9000000) WHERE id = 1")
    until = Position(*master_position(conn)[:2])
    span = until.pos - start.pos if until.file == start.file else None
    assert span is None or span > 10 * 1024 * 1024, f"only {span} bytes of binlog"
    txns, end, _ = _read_all(ep, start, until, budget_events=100_000)
    assert sum(1 for r in _rows(txns, schema) if r.table == "t") == 60_000
    big = [r for r in _rows(txns, schema) if r.table == "big"]
    assert [r.op for r in big] == ["insert", "update"]
    assert big[1].before["a"] == "a" * 9000000 and big[1].after["a"] == "c" * 9000000
    assert big[1].after["b"] == "b" * 9000000
    assert end.key() >= until.key()


def test_a_position_the_server_does_not_have_is_terminal(table):
    ep, conn, _ = table
    here = Position(*master_position(conn)[:2])
    gone = Position("mysql-bin.999998", 4)
    with pytest.raises(ShardflowError) as exc:
        list(BinlogWindow(ep, gone, Position("mysql-bin.999999", 4), server_id=4242))
    assert exc.value.code is ErrorCode.BINLOG_POSITION_LOST
    assert list(BinlogWindow(ep, here, here, server_id=4242)) == []  # empty range: no connection


def test_consumer_may_stop_early_and_resume_from_the_last_txn(table):
    ep, conn, schema = table
    start = Position(*master_position(conn)[:2])
    with conn.cursor() as cur:
        for i in range(20):
            cur.execute(f"INSERT INTO {qt(schema, 't')} (id, v) VALUES (%s, 'x')", (i,))
    until = Position(*master_position(conn)[:2])
    w = BinlogWindow(ep, start, until, server_id=4242)
    seen = []
    for txn in w:
        seen.extend(_rows([txn], schema))
        if len(seen) == 5:
            break
    assert w.position == txn.end
    rest, _, _ = _read_all(ep, w.position, until)
    assert [r.after["id"] for r in seen + _rows(rest, schema)] == list(range(20))


def _dump_threads(conn, thread_id: int) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.processlist WHERE id = %s", (thread_id,))
        return cur.fetchone()[0]


def test_closing_a_dump_ends_its_server_thread(table):
    """A dump waiting at the end of the binlog notices a closed socket only when it next
    writes; until then a new dump with the same server id (the next window) must kill it
    and wait. close() ends it at once. Without heartbeats, nothing else would."""
    from dm_core.binlog.dump import BinlogDump

    ep, conn, _ = table
    f, p, _ = master_position(conn)
    dump = BinlogDump(ep, f, p, server_id=4243, heartbeat=None)
    next(dump.events())  # the server's ROTATE: the dump thread runs and waits for more
    thread = dump.conn.thread_id()
    assert _dump_threads(conn, thread) == 1
    dump.close()
    deadline = time.monotonic() + 10
    while _dump_threads(conn, thread) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _dump_threads(conn, thread) == 0, "the server still runs the dump of a closed stream"


def test_row_images_without_every_column_are_named_on_their_transaction(table):
    """binlog_row_image MINIMAL (set by a session): the images lack columns, and the window says
    which on the transaction (the syncer pauses there); FULL images say nothing."""
    ep, conn, schema = table
    start = Position(*master_position(conn)[:2])
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {qt(schema, 't')} VALUES (1, 'a', 1, NULL), (2, 'b', 2, NULL)")
        cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
        cur.execute(f"UPDATE {qt(schema, 't')} SET v = 'x' WHERE id = 1")
        cur.execute(f"DELETE FROM {qt(schema, 't')} WHERE id = 2")
        cur.execute("SET SESSION binlog_row_image = 'FULL'")
    until = Position(*master_position(conn)[:2])
    txns, _, _ = _read_all(ep, start, until)
    mine = [t for t in txns if any(r.schema == schema for r in t.rows)]
    assert [t.partial_images is None for t in mine] == [True, False, False]
    (s, t, what), = mine[1].partial_images
    assert (s, t) == (schema, "t") and "update row image" in what and "lacks column(s) id, j, u, v" in what, what  # the before image has id only, the after image v
    assert "lacks column(s) j, u, v" in mine[2].partial_images[0][2]
