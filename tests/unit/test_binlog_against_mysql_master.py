"""shardflow's binlog reader over TCP against the test MySQL master (tests/mysql_master: a
MySQL 5.7 / 8.0 / 8.4 impersonation serving binlog files its own encoder wrote): the dump
(COM_BINLOG_DUMP, and COM_BINLOG_DUMP_GTID to find a GTID set's place), the window's
transactions with their positions and GTID sets, compressed transactions, a rotation, the
GTID set at a position, and the binlog status statement each version takes. Two encoders
written apart from each other (tests/mysql_binlog.py is the other) must agree."""

from decimal import Decimal

import pytest

from dm_core.binlog.gtid import mysql_gtid_at, position_of_gtid
from dm_core.binlog.window import BinlogWindow
from dm_core.db import binlog_status_sql, connect, master_position
from dm_core.position import Position
from tests.mysql_master import BinlogBuilder, MysqlMaster

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
SPEC = ["id INT UNSIGNED PRIMARY KEY", "name VARCHAR(32)", "price DECIMAL(10,2)"]


def _binlog(flavour: str, gtid_mode: bool, checksum: bool):
    b = BinlogBuilder(flavour=flavour, server_uuid=UUID, gtid_mode=gtid_mode, checksum=checksum)
    marks = [b.ddl("shop", "CREATE TABLE t (id INT UNSIGNED PRIMARY KEY, name VARCHAR(32), price DECIMAL(10,2))")]
    b.begin("shop")
    b.insert("shop", "t", SPEC, [(1, "a", Decimal("1.50")), (2, "b", Decimal("2.50"))])
    marks.append(b.commit())
    b.begin("shop")
    b.update("shop", "t", SPEC, [((1, "a", Decimal("1.50")), (1, "c", Decimal("3.00")))])
    marks.append(b.commit())
    if flavour != "5.7":   # binlog_transaction_compression: MySQL 8.0.20+
        marks.append(b.compressed_transaction([("delete", "shop", "t", SPEC, [(2, "b", Decimal("2.50"))])]))
    b.rotate()
    b.begin("shop")
    b.insert("shop", "t", SPEC, [(3, "d", Decimal("0.01"))])
    marks.append(b.commit())
    return b, marks


def _rows(t):
    return [(r.op, (r.before or {}).get("UNKNOWN_COL1"), (r.after or {}).get("UNKNOWN_COL1")) for r in t.rows]


@pytest.mark.parametrize("flavour, gtid_mode, checksum", [
    ("5.7", True, True), ("8.0", True, True), ("8.0", False, False), ("8.4", True, True), ("8.4", False, True)])
def test_the_reader_against_a_mysql_master(flavour, gtid_mode, checksum):
    b, marks = _binlog(flavour, gtid_mode, checksum)
    master = MysqlMaster(flavour, binlog=b)
    ep = master.endpoint()
    conn = connect(ep)
    try:
        assert binlog_status_sql(conn) == ("SHOW BINARY LOG STATUS" if flavour == "8.4" else "SHOW MASTER STATUS")
        assert master_position(conn) == (marks[-1].file, marks[-1].pos, marks[-1].gtid_set)
    finally:
        conn.close()
    first = sorted(b.files)[0]
    start = Position(first, 4, "" if gtid_mode else None)
    w = BinlogWindow(ep, start, Position(marks[-1].file, marks[-1].pos), server_id=77, verify_checksum=checksum)
    txns = list(w)
    # gtid_mode OFF: the start knows no set, the file's PREVIOUS_GTIDS says it is empty, and it stays so
    assert [(t.end.file, t.end.pos, t.end.gtid) for t in txns] == [(m.file, m.pos, m.gtid_set) for m in marks]
    assert [t.gtid if t.ddl is None else None for t in txns] == [None if t.ddl else m.gtid for t, m in zip(txns, marks)]
    assert [t.ddl or _rows(t) for t in txns] == [
        "CREATE TABLE t (id INT UNSIGNED PRIMARY KEY, name VARCHAR(32), price DECIMAL(10,2))",
        [("insert", None, "a"), ("insert", None, "b")], [("update", "a", "c")],
        *([[("delete", "b", None)]] if flavour != "5.7" else []), [("insert", None, "d")]]
    assert w.position == Position(marks[-1].file, marks[-1].pos)
    if not gtid_mode:
        return
    for m, nxt in zip(marks, marks[1:]):
        found = position_of_gtid(ep, m.gtid_set, server_id=78)     # COM_BINLOG_DUMP_GTID
        assert (found.file, found.pos) in ((m.file, m.pos), nxt.start) and found.gtid == m.gtid_set
        assert mysql_gtid_at(ep, m.file, m.pos, server_id=79) == m.gtid_set
    found = position_of_gtid(ep, marks[-1].gtid_set, server_id=78)
    assert (found.file, found.pos) == (marks[-1].file, marks[-1].pos)
