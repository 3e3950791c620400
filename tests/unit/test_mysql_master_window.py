"""shardflow's own binlog reader (dm_core.binlog.window.BinlogWindow, on its COM_BINLOG_DUMP
client) against the test MySQL master: MySQL 5.7 / 8.0 / 8.4 streams, GTID and ANONYMOUS_GTID
transactions, rows of every type, positions, a blocking dump with heartbeats.

MySQL GTID sets in positions and TRANSACTION_PAYLOAD are being added to dm_core/binlog:
the tests that need them are marked xfail ("reader support in progress") while the reader
in the tree lacks them.
"""

from __future__ import annotations

import importlib.util
import struct

import pymysql
import pytest

import dm_core.db
from dm_core.binlog import events as ev
from dm_core.binlog.window import BinlogWindow
from dm_core.position import Position
from tests.mysql_master import JSON_NULL, BinlogBuilder, MysqlMaster
from tests.unit.test_mysql_master_oracle import NO_METADATA, NULLS, ROW, ROW2, SPEC

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
MYSQL_GTID = importlib.util.find_spec("dm_core.binlog.mysql_gtid") is not None
PAYLOAD = ev.TRANSACTION_PAYLOAD not in ev.UNSUPPORTED
gtid_support = pytest.mark.xfail(not MYSQL_GTID, reason="reader support in progress", strict=True)
payload_support = pytest.mark.xfail(not PAYLOAD, reason="reader support in progress", strict=True)
ONE_COL = ["id INT PRIMARY KEY"]


def expected(name: str, v):
    """A value as the window yields it (mysql-replication's types: BIT as a bit string, FLOAT
    as the 4-byte float, empty BLOB as "", JSON as Python with text keys)."""
    if v is None:
        return None
    if name == "bits":
        return format(v, "012b")
    if name == "f":
        return struct.unpack("<f", struct.pack("<f", v))[0]
    if v == b"":
        return ""
    if name == "doc":
        return _json(v)
    return v


def _json(v):
    if v is JSON_NULL:
        return None
    if isinstance(v, dict):
        return {k: _json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json(x) for x in v]
    return v


def window(m, start: Position, until: Position, **kw) -> tuple[BinlogWindow, list]:
    w = BinlogWindow(m.endpoint(), start, until, server_id=4321, heartbeat=0.05, **kw)
    return w, list(w)


def rows_for(metadata: str | None):
    """ROW, ROW2, NULLS; without FULL metadata the window (with no schema tracker, which would
    name the columns and give their charsets) reads every string as UTF-8: no latin1 or
    binary bytes that are not UTF-8 then."""
    if metadata == "FULL":
        return ROW, ROW2, NULLS
    i, j = [s.split()[0] for s in SPEC].index("code"), [s.split()[0] for s in SPEC].index("bin")
    row = list(ROW)
    row[i], row[j] = "Deja", b"bin"
    return tuple(row), ROW2, NULLS


def build(flavour: str, metadata: str | None, gtid: bool) -> BinlogBuilder:
    ROW, ROW2, NULLS = rows_for(metadata)
    b = BinlogBuilder(flavour, row_metadata=metadata, gtid_mode=gtid, server_uuid=UUID)
    b.ddl("shop", "CREATE TABLE t (id INT UNSIGNED NOT NULL PRIMARY KEY)")
    b.insert("shop", "t", SPEC, [ROW, ROW2])
    b.commit()
    b.rotate()
    b.update("shop", "t", SPEC, [(ROW2, NULLS[:1] + ROW2[1:])])
    b.delete("shop", "t", SPEC, [ROW])
    b.insert("shop", "t", SPEC, [NULLS])
    b.commit()
    return b


CASES = [("5.7", None, False), ("5.7", None, True), ("8.0", "MINIMAL", False), ("8.0", "FULL", True),
         ("8.4", "MINIMAL", True), ("8.4", "FULL", False)]


@pytest.mark.parametrize("flavour, metadata, gtid", CASES)
def test_window_reads_every_type_across_files(flavour, metadata, gtid):
    b = build(flavour, metadata, gtid)
    first = next(iter(b.files))
    with MysqlMaster(flavour, binlog=b) as m:
        w, txns = window(m, Position(first, 4), Position(*b.position))
        assert m.unanswered == []
    assert [t.ddl or [r.op for r in t.rows] for t in txns] == [
        "CREATE TABLE t (id INT UNSIGNED NOT NULL PRIMARY KEY)", ["insert", "insert"],
        ["update", "delete", "insert"]]
    assert [(t.end.file, t.end.pos) for t in txns] == [(mk.file, mk.pos) for mk in b.marks]
    assert (w.position.file, w.position.pos) == b.position
    ROW, ROW2, NULLS = rows_for(metadata)
    images = [txns[1].rows[0].after, txns[1].rows[1].after, txns[2].rows[0].before, txns[2].rows[0].after,
              txns[2].rows[1].before, txns[2].rows[2].after]
    want = [ROW, ROW2, ROW2, NULLS[:1] + ROW2[1:], ROW, NULLS]
    names = [s.split()[0] for s in SPEC]
    full = metadata == "FULL"
    for got, row in zip(images, want):
        keys = names if full else [f"UNKNOWN_COL{i}" for i in range(len(names))]
        assert list(got) == keys
        for name, key, v in zip(names, keys, row):
            if full or name in NO_METADATA:
                assert got[key] == expected(name, v), (name, v)


@gtid_support
@pytest.mark.parametrize("flavour", ["5.7", "8.0", "8.4"])
def test_window_positions_carry_the_mysql_gtid_set(flavour):
    b = build(flavour, "FULL" if flavour != "5.7" else None, True)
    with MysqlMaster(flavour, binlog=b) as m:
        _, txns = window(m, Position(next(iter(b.files)), 4, ""), Position(*b.position))
    assert [t.end.gtid for t in txns] == [mk.gtid_set for mk in b.marks]


@payload_support
@pytest.mark.parametrize("flavour", ["8.0", "8.4"])
def test_window_reads_compressed_transactions(flavour):
    b = BinlogBuilder(flavour, row_metadata="FULL", server_uuid=UUID)
    b.insert("shop", "t", SPEC, [ROW2])
    b.commit()
    mark = b.compressed_transaction([("update", "shop", "t", SPEC, [(ROW2, ROW)]),
                                     ("insert", "shop", "t", SPEC, [NULLS])])
    b.insert("shop", "t", ONE_COL, [(1,)])
    last = b.commit()
    with MysqlMaster(flavour, binlog=b) as m:
        _, txns = window(m, Position(b.file, 4), Position(*b.position))
    assert [[r.op for r in t.rows] for t in txns] == [["insert"], ["update", "insert"], ["insert"]]
    assert (txns[1].end.file, txns[1].end.pos) == (mark.file, mark.pos)
    assert (txns[2].end.file, txns[2].end.pos) == (last.file, last.pos)
    names = [s.split()[0] for s in SPEC]
    assert txns[1].rows[0].after == {n: expected(n, v) for n, v in zip(names, ROW)}


def test_window_waits_at_the_end_with_heartbeats_then_reads_more():
    b = BinlogBuilder("8.0", row_metadata="FULL", server_uuid=UUID)
    b.insert("shop", "t", ONE_COL, [(1,)])
    b.commit()
    with MysqlMaster("8.0", binlog=b) as m:
        # until lies past the end: the dump blocks, and the window ends at a heartbeat past its budget
        w, txns = window(m, Position(b.file, 4), Position(b.file, 1 << 30), budget_seconds=0.2)
        assert len(txns) == 1 and (w.position.file, w.position.pos) == b.position
        b.insert("shop", "t", ONE_COL, [(2,)])
        mark = b.commit()
        m.publish()
        w2, more = window(m, w.position, Position(mark.file, mark.pos))
        assert [r.after for t in more for r in t.rows] == [{"id": 2}]
        assert len(m.dumps) == 2


@gtid_support
@pytest.mark.parametrize("flavour", ["5.7", "8.0", "8.4"])
def test_position_of_a_gtid_set_is_the_next_transaction(flavour):
    from dm_core.binlog.gtid import position_of_gtid

    b = build(flavour, None if flavour == "5.7" else "MINIMAL", True)
    with MysqlMaster(flavour, binlog=b) as m:
        got = position_of_gtid(m.endpoint(), b.marks[1].gtid_set, server_id=4322)
        assert (got.file, got.pos) == b.marks[2].start
        end = position_of_gtid(m.endpoint(), b.marks[2].gtid_set, server_id=4322)
        assert (end.file, end.pos) == b.position


@pytest.mark.parametrize("flavour", [
    "5.7", "8.0",
    pytest.param("8.4", marks=pytest.mark.xfail(not hasattr(dm_core.db, "binlog_status_sql"), strict=True,
                                                reason="reader support in progress")),
])
def test_master_position_on_every_flavour(flavour):
    b = build(flavour, None if flavour == "5.7" else "MINIMAL", True)
    with MysqlMaster(flavour, binlog=b) as m:
        conn = dm_core.db.connect(m.endpoint())
        try:
            file, pos, gtid = dm_core.db.master_position(conn)
        finally:
            conn.close()
    assert (file, pos) == b.position and gtid == b.gtid_set


def test_mysql_answers_what_the_reader_asks():
    """The statements BinlogDump sends before dumping are all answered by the master itself."""
    b = BinlogBuilder("8.0", server_uuid=UUID)
    b.insert("shop", "t", ONE_COL, [(1,)])
    b.commit()
    with MysqlMaster("8.0", binlog=b) as m:
        assert len(window(m, Position(b.file, 4), Position(*b.position))[1]) == 1
        conn = pymysql.connect(host=m.host, port=m.port, user="shardflow", password="shardflow-local")
        conn.close()
        assert m.unanswered == [] and m.forwarded == []
        assert any("@@global.binlog_checksum" in q for q in m.queries)
