"""BinlogWindow on MySQL binlog streams as 5.7, 8.0 and 8.4 write them (tests/mysql_binlog.py):
GTID / ANONYMOUS_GTID transaction starts, PREVIOUS_GTIDS, the running GTID set in every
position, DDLs (GTID, QUERY), CREATE TABLE ... SELECT, files rotating, compressed
transactions (TRANSACTION_PAYLOAD); each stream cross-checked with mysql-replication's parser."""

import struct

import pytest

from dm_core.binlog import events as ev
from dm_core.binlog.window import BinlogWindow
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.position import Position
from tests.mysql_binlog import (UUID_A, UUID_B, MysqlBinlog, inner_event, oracle, payload_body, query_body,
                                rows_body, table_map_body)
from tests.unit.test_binlog_window import EP, FakeDump, lstr

VERSIONS = ["5.7.44-log", "8.0.36", "8.4.3"]

# id int, name varchar(20): with binlog_row_metadata=FULL (names) or MINIMAL (none)
TYPES, META, NULLABLE = [ev.T_LONG, ev.T_VARCHAR], struct.pack("<H", 80), [False, True]
UTF8MB4 = b"\xfc\xff\x00"   # collation 255, length-encoded
MINIMAL = bytes([ev.OM_SIGNEDNESS]) + lstr(b"\x00") + bytes([ev.OM_DEFAULT_CHARSET]) + lstr(UTF8MB4)
FULL = MINIMAL + bytes([ev.OM_COLUMN_NAME]) + lstr(lstr(b"id") + lstr(b"name"))


def row(id_, name):
    return bytes([0 if name is not None else 2]) + struct.pack("<i", id_) + (lstr(name.encode()) if name else b"")


def window(b, start=None, until=None, **kw):
    start = start or Position(b.first, 4)
    until = until or Position(b.file, b.pos)
    w = BinlogWindow(EP, start, until, server_id=9, **kw)
    return list(w._run(FakeDump(b))), w


def one_row(b, id_, name="x", typ=ev.WRITE_ROWS_V2, optional=FULL):
    b.table_map(42, b"db", b"t", TYPES, META, NULLABLE, optional)
    images = [row(id_, name)] if typ != ev.UPDATE_ROWS_V2 else [row(id_, name) + row(id_, name + "!")]
    b.rows(typ, 42, 2, images)


def summary(txns):
    """(what, rows, start, end, end's GTID set, the transaction's own GTID) per delivered Txn."""
    return [(t.ddl or ",".join(f"{r.op}:{next(iter((r.after or r.before).values()))}" for r in t.rows),
             (t.start.file, t.start.pos),
             (t.end.file, t.end.pos), t.end.gtid, t.gtid if t.ddl is None else None) for t in txns]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("known", [True, False], ids=["start-with-set", "start-without-set"])
def test_a_mysql_stream_of_gtid_transactions_ddl_and_anonymous_ones(version, known):
    opt = b"" if version.startswith("5.") else FULL   # 5.7 writes no optional metadata: columns by position
    b = MysqlBinlog(version=version)
    b.file_start({UUID_A: [(1, 5)]})
    at = [4]   # the first transaction starts where the window does: FDE and PREVIOUS_GTIDS read again are harmless
    b.gtid(UUID_A, 6)
    b.query("BEGIN")
    one_row(b, 1, optional=opt)
    at.append(b.xid(10))
    b.gtid(UUID_A, 7)                          # a DDL: GTID, QUERY, no BEGIN
    at.append(b.query("ALTER TABLE t ADD COLUMN z int"))
    b.anonymous()                              # gtid_mode ON_PERMISSIVE: one without a GTID
    b.query("BEGIN")
    one_row(b, 2, typ=ev.UPDATE_ROWS_V2, optional=opt)
    at.append(b.xid(11))
    b.gtid(UUID_B, 1)                          # a second server UUID
    b.query("BEGIN")
    one_row(b, 1, typ=ev.DELETE_ROWS_V2, optional=opt)
    at.append(b.xid(12))
    b.gtid(UUID_A, 9)                          # A:8 never came here: a gap
    b.query("BEGIN")
    one_row(b, 3, optional=opt)
    at.append(b.xid(13))
    start = Position(b.file, 4, f"{UUID_A}:1-5" if known else None)
    txns, w = window(b, start=start)
    s1 = f"{UUID_A}:1-6"
    s2 = f"{UUID_A}:1-7"
    s3 = f"{UUID_A}:1-7,{UUID_B}:1"
    s4 = f"{UUID_A}:1-7:9,{UUID_B}:1"
    f = b.file
    assert summary(txns) == [
        ("insert:1", (f, at[0]), (f, at[1]), s1, f"{UUID_A}:6"),
        ("ALTER TABLE t ADD COLUMN z int", (f, at[1]), (f, at[2]), s2, None),
        ("update:2", (f, at[2]), (f, at[3]), s2, None),
        ("delete:1", (f, at[3]), (f, at[4]), s3, f"{UUID_B}:1"),
        ("insert:3", (f, at[4]), (f, at[5]), s4, f"{UUID_A}:9"),
    ]
    assert txns[1].ddl_schema == "db" and txns[1].start.gtid == s1 and txns[0].start.gtid == f"{UUID_A}:1-5"
    names = ("UNKNOWN_COL0", "UNKNOWN_COL1") if version.startswith("5.") else ("id", "name")
    assert [r.after for r in txns[2].rows] == [dict(zip(names, (2, "x!")))]
    assert w.position == Position(f, b.pos) and w.position.gtid == s4
    # what mysql-replication reads in the same bytes: the GTIDs and statements, in order
    got = [(type(e).__name__, getattr(e, "gtid", None) or getattr(e, "query", None))
           for e in oracle(b.events) if type(e).__name__ in ("GtidEvent", "QueryEvent")]
    assert got == [("GtidEvent", f"{UUID_A}:6"), ("QueryEvent", "BEGIN"), ("GtidEvent", f"{UUID_A}:7"),
                   ("QueryEvent", "ALTER TABLE t ADD COLUMN z int"), ("QueryEvent", "BEGIN"),
                   ("GtidEvent", f"{UUID_B}:1"), ("QueryEvent", "BEGIN"), ("GtidEvent", f"{UUID_A}:9"),
                   ("QueryEvent", "BEGIN")]


def test_a_window_from_mid_file_without_a_set_learns_it_at_the_next_file():
    """A start without a GTID set (enable-gtid turned on later, a meta without binlog-gtid)
    stays without one -- one GTID alone is not the set -- until a file's PREVIOUS_GTIDS says it."""
    b = MysqlBinlog(file="binlog.000007", start=1000)
    b.start_stream()
    b.gtid(UUID_A, 40)
    b.query("BEGIN")
    one_row(b, 1)
    first = b.xid()
    b.rotate("binlog.000008", {UUID_A: [(1, 40)], UUID_B: [(1, 3)]})
    b.gtid(UUID_A, 41)
    b.query("BEGIN")
    one_row(b, 2)
    second = b.xid()
    txns, w = window(b, start=Position("binlog.000007", 1000), until=Position("binlog.000008", second))
    assert [(t.end.file, t.end.pos, t.end.gtid, t.start.pos, t.start.gtid) for t in txns] == [
        ("binlog.000007", first, None, 1000, None),
        ("binlog.000008", second, f"{UUID_A}:1-41,{UUID_B}:1-3", 4, f"{UUID_A}:1-40,{UUID_B}:1-3")]
    assert w.position == Position("binlog.000008", second) and w.position.gtid == f"{UUID_A}:1-41,{UUID_B}:1-3"
    lib = [e for e in oracle(b.events) if type(e).__name__ == "PreviousGtidsEvent"]
    assert len(lib) == 1 and UUID_B in lib[0]._previous_gtids


def test_a_known_set_is_kept_across_files_and_rotations_move_the_position():
    b = MysqlBinlog(file="binlog.000001")
    b.file_start({})
    ddl_start = 4
    b.gtid(UUID_A, 1)
    ddl_end = b.query("CREATE TABLE t (id int primary key, name varchar(20))")
    b.rotate("binlog.000002", {UUID_A: [(1, 1)]})
    at = 4   # from the ROTATE on, the new file's start is a safe place
    b.gtid(UUID_A, 2)
    b.query("BEGIN")
    one_row(b, 1)
    end = b.xid()
    txns, w = window(b, start=Position("binlog.000001", 4, ""), until=Position("binlog.000002", end))
    assert summary(txns) == [
        ("CREATE TABLE t (id int primary key, name varchar(20))", ("binlog.000001", ddl_start),
         ("binlog.000001", ddl_end), f"{UUID_A}:1", None),
        ("insert:1", ("binlog.000002", at), ("binlog.000002", end), f"{UUID_A}:1-2", f"{UUID_A}:2")]
    assert w.position == Position("binlog.000002", end)


def test_create_table_select_is_one_group_its_gtid_joins_with_the_rows():
    """MySQL 8.0.21+: GTID, `CREATE TABLE ... START TRANSACTION`, rows without BEGIN, XID. The
    DDL goes on without the clause; no position between it and the rows claims the group."""
    b = MysqlBinlog()
    b.file_start({UUID_A: [(1, 5)]})
    b.gtid(UUID_A, 6)
    ddl_end = b.query("CREATE TABLE c (id int, name varchar(20)) START TRANSACTION")
    one_row(b, 1)
    end = b.xid()
    txns, w = window(b, start=Position(b.file, 4, f"{UUID_A}:1-5"))
    assert [(t.ddl, t.end.pos, t.end.gtid) for t in txns] == [
        ("CREATE TABLE c (id int, name varchar(20))", ddl_end, f"{UUID_A}:1-5"),
        (None, end, f"{UUID_A}:1-6")]
    assert [r.after for r in txns[1].rows] == [{"id": 1, "name": "x"}] and txns[1].gtid == f"{UUID_A}:6"
    assert txns[1].start == txns[0].end


def test_minimal_metadata_rows_come_by_position():
    """MySQL 8.0's default binlog_row_metadata=MINIMAL (and 5.7) names no columns."""
    b = MysqlBinlog()
    b.file_start({})
    b.anonymous()
    b.query("BEGIN")
    one_row(b, 5, optional=MINIMAL)
    b.xid()
    txns, _ = window(b)
    assert [r.after for r in txns[0].rows] == [{"UNKNOWN_COL0": 5, "UNKNOWN_COL1": "x"}]
    lib = [e for e in oracle(b.events) if type(e).__name__ == "WriteRowsEvent"]
    assert [r["values"] for r in lib[0].rows] == [{"UNKNOWN_COL0": 5, "UNKNOWN_COL1": "x"}]


def _compressed_txn(ids, *, table_id=42):
    """A transaction's events as they sit inside a TRANSACTION_PAYLOAD."""
    inner = [inner_event(ev.QUERY, query_body("BEGIN")),
             inner_event(ev.TABLE_MAP, table_map_body(table_id, b"db", b"t", TYPES, META, NULLABLE, FULL))]
    inner += [inner_event(ev.WRITE_ROWS_V2, rows_body(ev.WRITE_ROWS_V2, table_id, 2, [row(i, f"n{i}") for i in ids]))]
    update = rows_body(ev.UPDATE_ROWS_V2, table_id, 2, [row(ids[0], "a") + row(ids[0], "b")])
    inner += [inner_event(ev.UPDATE_ROWS_V2, update)]
    inner += [inner_event(ev.XID, struct.pack("<Q", 77))]
    return inner


@pytest.mark.parametrize("compression,frames", [(0, 1), (0, 3), (255, 1)], ids=["zstd", "zstd-3-frames", "none"])
@pytest.mark.parametrize("checksum", [True, False])
@pytest.mark.parametrize("verify", [False, True])
def test_a_compressed_transaction_reads_as_if_its_events_came_in_the_stream(compression, frames, checksum, verify):
    b = MysqlBinlog(checksum=checksum)
    b.file_start({UUID_A: [(1, 5)]})
    start = 4
    b.gtid(UUID_A, 6)
    inner = _compressed_txn([1, 2, 3])
    end = b.payload(inner, compression=compression, frames=frames)
    b.gtid(UUID_A, 7)
    b.query("BEGIN")
    one_row(b, 4)
    last = b.xid()
    txns, w = window(b, start=Position(b.file, 4, f"{UUID_A}:1-5"), verify_checksum=verify)
    assert summary(txns) == [
        ("insert:1,insert:2,insert:3,update:1", (b.file, start), (b.file, end), f"{UUID_A}:1-6", f"{UUID_A}:6"),
        ("insert:4", (b.file, end), (b.file, last), f"{UUID_A}:1-7", f"{UUID_A}:7")]
    assert txns[0].rows[3].before == {"id": 1, "name": "a"} and txns[0].rows[3].after == {"id": 1, "name": "b"}
    assert w.position == Position(b.file, last) and w.position.gtid == f"{UUID_A}:1-7"
    assert w.events_read == 8   # the ROTATE; BEGIN, 2 row events, XID from the payload; BEGIN, rows, XID
    # the events inside, one by one, as mysql-replication reads them
    lib = oracle(inner, checksum=False)
    assert [type(e).__name__ for e in lib] == ["QueryEvent", "TableMapEvent", "WriteRowsEvent", "UpdateRowsEvent",
                                               "XidEvent"]
    assert [r["values"]["id"] for r in lib[2].rows] == [r.after["id"] for r in txns[0].rows[:3]]


def _three_compressed() -> tuple[MysqlBinlog, list[int]]:
    b = MysqlBinlog()
    b.file_start({UUID_A: [(1, 5)]})
    ends = []
    for gno in (6, 7, 8):
        b.gtid(UUID_A, gno)
        ends.append(b.payload(_compressed_txn([gno])))
    return b, ends


def test_a_budget_ends_a_window_after_a_compressed_transaction_not_inside_it():
    b, ends = _three_compressed()
    txns, w = window(b, start=Position(b.file, 4, f"{UUID_A}:1-5"), budget_events=1)
    assert [(t.end.pos, t.end.gtid) for t in txns] == [(ends[0], f"{UUID_A}:1-6")]
    assert w.position == Position(b.file, ends[0]) and w.position.gtid == f"{UUID_A}:1-6"
    # the next window, from there (the server starts the dump at that position)
    b2 = MysqlBinlog(start=ends[0])
    b2.start_stream()                            # its artificial ROTATE to ends[0], the file's FDE ...
    b2.events += b.events[-4:]                   # ... then the events from ends[0] on
    rest, _ = window(b2, start=w.position, until=Position(b.file, ends[2]))
    assert [(t.start.pos, t.end.pos, t.end.gtid) for t in rest] == [
        (ends[0], ends[1], f"{UUID_A}:1-7"), (ends[1], ends[2], f"{UUID_A}:1-8")]


@pytest.mark.parametrize("damage, says", [
    (lambda inner: payload_body(inner)[:-3] + b"\x00\x00\x00", "zstd"),          # the frame's end broken
    (lambda inner: payload_body(inner)[:-1], "payload size"),                       # a byte short
    (lambda inner: payload_body(inner, uncompressed=len(inner) + 1), "header says"),
    (lambda inner: payload_body(inner, compression=1), "compression type 1"),      # not ZSTD, not none
    (lambda inner: payload_body(inner[:-3], compression=255), "bytes at offset"),  # the last event cut short
])
def test_a_damaged_compressed_transaction_is_refused_with_its_position(damage, says):
    b = MysqlBinlog()
    b.file_start({})
    b.gtid(UUID_A, 1)
    at = b.pos
    b.add(ev.TRANSACTION_PAYLOAD, damage(b"".join(_compressed_txn([1]))))
    w = BinlogWindow(EP, Position(b.file, 4, ""), Position(b.file, b.pos), server_id=9)
    delivered = []
    with pytest.raises(ShardflowError) as exc:
        for t in w._run(FakeDump(b)):
            delivered.append(t)
    assert exc.value.code is ErrorCode.BINLOG_UNREADABLE and f"({b.file}, {at})" in str(exc.value)
    assert says in str(exc.value) and "binlog_transaction_compression" in exc.value.workaround
    assert delivered == [] and w.position == Position(b.file, 4)   # the XID never went through


def test_a_large_compressed_transaction_comes_in_pieces():
    """Decompressed as read, and handed on in pieces like any large transaction (PIECE_BYTES)."""
    b = MysqlBinlog()
    b.file_start({UUID_A: [(1, 5)]})
    b.gtid(UUID_A, 6)
    inner = [inner_event(ev.QUERY, query_body("BEGIN")),
             inner_event(ev.TABLE_MAP, table_map_body(42, b"db", b"t", TYPES, META, NULLABLE, FULL))]
    inner += [inner_event(ev.WRITE_ROWS_V2, rows_body(ev.WRITE_ROWS_V2, 42, 2, [row(k * 10 + i, "x" * 20)
                                                                             for i in range(10)]))
              for k in range(30)]
    end = b.payload(inner + [inner_event(ev.XID, struct.pack("<Q", 5))])
    txns, w = window(b, start=Position(b.file, 4, f"{UUID_A}:1-5"), piece_bytes=2000)
    assert len(txns) > 3 and all(t.more for t in txns[:-1]) and not txns[-1].more
    assert [t.piece for t in txns] == list(range(len(txns)))
    assert [r.after["id"] for t in txns for r in t.rows] == list(range(300))
    assert {(t.end.pos, t.end.gtid) for t in txns[:-1]} == {(4, f"{UUID_A}:1-5")}   # no checkpoint inside it
    assert (txns[-1].end.pos, txns[-1].end.gtid) == (end, f"{UUID_A}:1-6") and w.position.pos == end


def test_a_tagged_gtid_is_refused():
    b = MysqlBinlog(version="8.4.3")
    b.file_start({})
    at = b.pos
    b.add(ev.GTID_TAGGED, b"\x02" + bytes(40))
    with pytest.raises(ShardflowError) as exc:
        window(b)
    assert exc.value.code is ErrorCode.BINLOG_UNREADABLE and f"({b.file}, {at})" in str(exc.value)
    assert "tagged GTIDs" in exc.value.workaround


def test_a_start_that_is_not_a_mysql_gtid_set_fails_before_reading():
    b = MysqlBinlog()
    b.file_start({})
    with pytest.raises(ShardflowError) as exc:
        window(b, start=Position(b.file, 4, "0-1-5"))
    assert exc.value.code is ErrorCode.CONFIG_INVALID and "'0-1-5' is not a MySQL GTID set" in str(exc.value)
