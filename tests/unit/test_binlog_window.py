"""BinlogWindow on synthetic streams: the MySQL 8 shapes the local stack cannot produce
(v2 row events with extra data, binary JSON, GTID-less BEGIN/COMMIT), TABLE_MAP metadata,
and the refusals (compressed events, bad CRCs)."""

import datetime
import struct
import zlib

import pytest

from dm_core.binlog import events as ev
from dm_core.binlog.txn import RowChange, Txn
from dm_core.binlog.window import BinlogWindow
from dm_core.db import Endpoint
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.position import Position

from tests.unit.test_binlog_decode import encode_json

EP = Endpoint("127.0.0.1", 1, "u", "p", name="fake")
UTF8MB4 = 255


def lenenc(n: int) -> bytes:
    return bytes([n]) if n < 251 else b"\xfc" + struct.pack("<H", n)


def lstr(b: bytes) -> bytes:
    return lenenc(len(b)) + b


class Binlog:
    """Builds one binlog file's events with correct sizes, positions and CRCs."""

    def __init__(self, file="mysql-bin.000007", start=4, checksum=True, version="8.0.36"):
        self.file, self.pos, self.checksum = file, start, checksum
        self.events: list[bytes] = []
        self.version = version

    def add(self, typ, body, *, ts=1_700_000_000, server_id=1, log_pos=None, artificial=False, flags=0) -> int:
        size = 19 + len(body) + (4 if self.checksum else 0)
        end = 0 if artificial else self.pos + size
        data = struct.pack("<IBIIIH", 0 if artificial else ts, typ, server_id, size,
                           end if log_pos is None else log_pos, 0x20 if artificial else flags) + body
        if self.checksum:
            data += zlib.crc32(data).to_bytes(4, "little")
        self.events.append(data)
        if not artificial:
            self.pos = end
        return end

    def start_stream(self):
        self.add(ev.ROTATE, struct.pack("<Q", self.pos) + self.file.encode(), artificial=True)
        phl = [0] * 41
        for t, n in {ev.QUERY: 13, ev.ROTATE: 8, ev.TABLE_MAP: 8, ev.XID: 0, **{t: 8 for t in (23, 24, 25)},
                     **{t: 10 for t in (30, 31, 32)}}.items():
            phl[t - 1] = n
        body = struct.pack("<H", 4) + self.version.encode().ljust(50, b"\0") + struct.pack("<I", 0) + bytes([19])
        body += bytes(phl) + bytes([1 if self.checksum else 0])
        self.add(ev.FORMAT_DESCRIPTION, body, log_pos=0)

    def query(self, sql, schema=b"db", ts=1_700_000_000, flags=0):
        status = b""
        body = struct.pack("<IIBHH", 1, 0, len(schema), 0, len(status)) + status + schema + b"\0" + sql.encode()
        return self.add(ev.QUERY, body, ts=ts, flags=flags)

    def xid(self, n=1):
        return self.add(ev.XID, struct.pack("<Q", n))

    def table_map(self, table_id, schema, table, types, meta, nullable, optional=b""):
        body = table_id.to_bytes(6, "little") + b"\x01\x00"
        body += bytes([len(schema)]) + schema + b"\0" + bytes([len(table)]) + table + b"\0"
        body += lenenc(len(types)) + bytes(types) + lstr(meta)
        body += sum(1 << i for i, n in enumerate(nullable) if n).to_bytes((len(types) + 7) // 8, "little")
        return self.add(ev.TABLE_MAP, body + optional)

    def rows(self, typ, table_id, ncols, images, extra=b""):
        body = table_id.to_bytes(6, "little") + b"\x01\x00"
        if typ in ev.ROWS_V2:
            body += struct.pack("<H", 2 + len(extra)) + extra
        full = ((1 << ncols) - 1).to_bytes((ncols + 7) // 8, "little")
        body += lenenc(ncols) + full + (full if typ in ev.UPDATE_ROWS else b"") + b"".join(images)
        return self.add(typ, body)


class FakeDump:
    def __init__(self, binlog: Binlog, mariadb=False):
        self.ep, self.mariadb, self.checksum = EP, mariadb, binlog.checksum
        self.charsets = {UTF8MB4: "utf8mb4", 63: "binary", 8: "latin1"}
        self.binlog = binlog

    def events(self):
        for data in self.binlog.events:
            yield data, 0, len(data)


def run(binlog, start=None, until=None, **kw):
    start = start or Position(binlog.file, 4)
    until = until or Position(binlog.file, binlog.pos)
    w = BinlogWindow(EP, start, until, server_id=9, **kw)
    return list(w._run(FakeDump(binlog))), w


# A MySQL 8 table: id int, u int unsigned, j json, v varchar(40), ts timestamp(3), e enum, s set
TYPES = [ev.T_LONG, ev.T_LONG, ev.T_JSON, ev.T_VARCHAR, ev.T_TIMESTAMP2, ev.T_STRING, ev.T_STRING]
META = bytes([4]) + struct.pack("<H", 160) + bytes([3, ev.T_ENUM, 1, ev.T_SET, 1])
NULLABLE = [False, True, True, True, True, True, True]
NAMES = [b"id", b"u", b"j", b"v", b"ts", b"e", b"s"]
OPTIONAL = (bytes([ev.OM_SIGNEDNESS]) + lstr(bytes([0b01000000]))
            + bytes([ev.OM_DEFAULT_CHARSET]) + lstr(lenenc(UTF8MB4))
            + bytes([ev.OM_COLUMN_NAME]) + lstr(b"".join(lstr(n) for n in NAMES))
            + bytes([ev.OM_SET_STR_VALUE]) + lstr(lenenc(2) + lstr(b"x") + lstr(b"y"))
            + bytes([ev.OM_ENUM_STR_VALUE]) + lstr(lenenc(2) + lstr(b"a") + lstr(b"b"))
            + bytes([ev.OM_ENUM_AND_SET_DEFAULT_CHARSET]) + lstr(lenenc(UTF8MB4))
            + bytes([ev.OM_SIMPLE_PRIMARY_KEY]) + lstr(lenenc(0)))


def image(id_, u, j, v, ts_ms, e, s):
    vals = [id_, u, j, v, ts_ms, e, s]
    nulls = sum(1 << i for i, x in enumerate(vals) if x is None)
    out = bytes([nulls])
    out += struct.pack("<i", id_)
    if u is not None:
        out += struct.pack("<I", u)
    if j is not None:
        t, body = encode_json(j)
        out += struct.pack("<I", 1 + len(body)) + bytes([t]) + body
    if v is not None:
        out += lstr(v.encode())
    if ts_ms is not None:
        out += struct.pack(">I", ts_ms // 1000) + struct.pack(">H", ts_ms % 1000 * 10)
    if e is not None:
        out += bytes([e])
    if s is not None:
        out += bytes([s])
    return out


def test_mysql8_v2_rows_json_and_metadata():
    b = Binlog()
    b.start_stream()
    b.query("BEGIN")
    b.table_map(77, b"db", b"t", TYPES, META, NULLABLE, OPTIONAL)
    b.rows(ev.WRITE_ROWS_V2, 77, 7, [image(1, 4_000_000_000, {"k": [1, "x"]}, "héllo", 1_700_000_000_123, 2, 3),
                                     image(-2, None, None, None, None, None, None)],
           extra=bytes([1]) + struct.pack("<H", 5))  # partition info, as MySQL writes it
    b.rows(ev.UPDATE_ROWS_V2, 77, 7, [image(1, 1, None, "a", 0, 1, 0) + image(1, 2, [], "b", 1000, 0, 2)])
    b.rows(ev.DELETE_ROWS_V2, 77, 7, [image(-2, None, None, None, None, None, None)])
    first = b.xid()
    b.query("ALTER TABLE t ADD COLUMN z int", schema=b"db")
    txns, w = run(b)
    assert [t.ddl for t in txns] == [None, "ALTER TABLE t ADD COLUMN z int"]
    t = txns[0]
    assert t.end == Position(b.file, first) and t.start == Position(b.file, 4) and t.gtid is None
    assert [(r.op, r.schema, r.table) for r in t.rows] == [("insert", "db", "t")] * 2 + [("update", "db", "t"), ("delete", "db", "t")]
    ins = t.rows[0].after
    assert ins == {"id": 1, "u": 4_000_000_000, "j": {"k": [1, "x"]}, "v": "héllo",
                   "ts": datetime.datetime(2023, 11, 14, 22, 13, 20, 123000), "e": "b", "s": {"x", "y"}}
    assert t.rows[1].after == {"id": -2, **{n.decode(): None for n in NAMES[1:]}}
    upd = t.rows[2]
    assert upd.before["e"] == "a" and upd.before["s"] == set() and upd.after["e"] == "" and upd.after["j"] == []
    assert upd.after["ts"] == datetime.datetime(1970, 1, 1, 0, 0, 1)
    assert t.rows[3] == RowChange("delete", "db", "t", t.rows[1].after, None)
    assert txns[1].ddl_schema == "db" and txns[1].start == t.end
    assert w.position == Position(b.file, b.pos) and w.events_read == 7  # rotate, begin, 3 rows, xid, ddl


def _one_row_insert(b, id_):
    b.table_map(77, b"db", b"t", TYPES, META, NULLABLE, OPTIONAL)
    b.rows(ev.WRITE_ROWS_V2, 77, 7, [image(id_, None, None, None, None, None, None)])


def _in_savepoint() -> Binlog:
    """A stream inside BEGIN: row 1, SAVEPOINT `s1`, row 2."""
    b = Binlog()
    b.start_stream()
    b.query("BEGIN")
    _one_row_insert(b, 1)
    b.query("SAVEPOINT `s1`")
    _one_row_insert(b, 2)
    return b


def test_savepoints_inside_a_transaction_keep_its_rows():
    """SAVEPOINT (ORMs' nested transactions) inside BEGIN ... COMMIT is part of the group; it
    ended it before, dropping the rows read so far, as if it were DDL."""
    b = _in_savepoint()
    b.query("SAVEPOINT `s2`")
    _one_row_insert(b, 3)
    b.xid()
    txns, w = run(b)
    assert [t.ddl for t in txns] == [None]
    assert [r.after["id"] for r in txns[0].rows] == [1, 2, 3]
    assert w.position == Position(b.file, b.pos)


def test_a_logged_rollback_to_savepoint_is_refused():
    """The server logs ROLLBACK TO only for a transaction that changed a non-transactional table;
    which rows after the savepoint it kept depends on engines the binlog does not name."""
    b = _in_savepoint()
    at = b.pos
    b.query("ROLLBACK TO `s1`")
    b.xid()
    with pytest.raises(ShardflowError) as exc:
        run(b)
    assert exc.value.code is ErrorCode.BINLOG_UNREADABLE and f"({b.file}, {at})" in str(exc.value)
    assert "ROLLBACK TO" in str(exc.value) and "ENGINE=InnoDB" in exc.value.workaround


def test_statements_among_the_rows_of_a_transaction_keep_it_whole():
    """A MIXED session logs some changes of a transaction as rows and others as statements
    (and a temporary table's CREATE inside it): the statements ended the group as if they were
    DDL, and the rows before them were dropped. They now ride on the transaction, each with
    its own offset and the session's flag."""
    b = _in_savepoint()
    at = b.pos
    b.query("INSERT INTO o VALUES (1)", schema=b"other")
    temp_at = b.pos
    b.query("CREATE TEMPORARY TABLE tmp (id int)", flags=ev.LOG_EVENT_THREAD_SPECIFIC_F)
    _one_row_insert(b, 3)
    b.xid()
    txns, w = run(b)
    assert [t.ddl for t in txns] == [None], "one transaction"
    t = txns[0]
    assert [r.after["id"] for r in t.rows] == [1, 2, 3]
    assert [(s.ddl, s.ddl_schema, s.event_start, s.start, s.thread_specific) for s in t.statements] == [
        ("INSERT INTO o VALUES (1)", "other", Position(b.file, at), t.start, False),
        ("CREATE TEMPORARY TABLE tmp (id int)", "db", Position(b.file, temp_at), t.start, True)]
    assert w.position == t.end == Position(b.file, b.pos)


def test_a_ddl_that_opens_its_group_goes_on_alone():
    """CREATE TABLE ... SELECT in ROW format: the CREATE opens the group, its rows follow; the
    table must exist downstream before them."""
    b = Binlog()
    b.start_stream()
    b.query("BEGIN")
    b.query("CREATE TABLE c (id int)")
    _one_row_insert(b, 1)
    b.xid()
    txns, _ = run(b)
    assert [(t.ddl, len(t.rows), t.statements) for t in txns] == [("CREATE TABLE c (id int)", 0, None), (None, 1, None)]


@pytest.mark.parametrize("rows", [False, True])
def test_a_group_the_session_rolled_back(rows):
    """A STATEMENT session's rolled-back transaction is logged when it touched a
    non-transactional table: its statements are judged as any others. Rows in such a group
    (which MariaDB's ROW format does not write) are refused: which were kept is the engines'."""
    b = Binlog()
    b.start_stream()
    b.query("BEGIN")
    if rows:
        _one_row_insert(b, 1)
    b.query("INSERT INTO m VALUES (30)")
    b.query("ROLLBACK")
    if rows:
        with pytest.raises(ShardflowError) as exc:
            run(b)
        assert exc.value.code is ErrorCode.BINLOG_UNREADABLE and "ROLLBACK" in str(exc.value)
        return
    txns, w = run(b)
    assert [(t.ddl, t.rows, [s.ddl for s in t.statements]) for t in txns] == [(None, [], ["INSERT INTO m VALUES (30)"])]
    assert w.position == Position(b.file, b.pos)


def test_an_xa_transaction_is_delivered_at_its_prepare_or_at_its_one_phase_commit():
    """MySQL logs XA START / XA END as statements around the rows and ends the group with an
    XA_PREPARE event; XA COMMIT follows as a statement of its own, which only moves the
    position (an XA-heavy upstream would otherwise pay a DDL's barrier per transaction).
    XA COMMIT ... ONE PHASE ends the group itself. XA ROLLBACK after a PREPARE is handed on
    (the syncer pauses on it)."""
    b = Binlog()
    b.start_stream()
    b.query("XA START X'7831',X'',1")
    _one_row_insert(b, 1)
    b.query("XA END X'7831',X'',1")
    prepared = b.add(ev.XA_PREPARE, bytes([0]) + struct.pack("<iii", 1, 2, 0) + b"x1")
    b.query("XA COMMIT X'7831',X'',1")
    b.query("XA START X'7832',X'',1")
    _one_row_insert(b, 2)
    b.query("XA END X'7832',X'',1")
    one_phase = b.query("XA COMMIT X'7832',X'',1 ONE PHASE")
    b.query("XA START X'7833',X'',1")
    _one_row_insert(b, 3)
    b.query("XA END X'7833',X'',1")
    b.add(ev.XA_PREPARE, bytes([0]) + struct.pack("<iii", 1, 2, 0) + b"x3")
    b.query("XA ROLLBACK X'7833',X'',1")
    txns, w = run(b)
    assert [t.ddl for t in txns] == [None, None, None, "XA ROLLBACK X'7833',X'',1"]
    assert [[r.after["id"] for r in t.rows] for t in txns[:3]] == [[1], [2], [3]]
    assert txns[0].end == Position(b.file, prepared) and txns[1].end == Position(b.file, one_phase)
    # the XID as the later XA ROLLBACK names it: the syncer pauses on it only if the rows moved
    assert [t.xid for t in txns] == ["X'7831',X'',1", None, "X'7833',X'',1", None]
    assert w.position == Position(b.file, b.pos)


def test_table_map_metadata_and_minimal_metadata():
    full = ev.parse_table_map(_table_map_body(OPTIONAL), mariadb=False)
    assert [c.name for c in full.columns] == [n.decode() for n in NAMES]
    assert [c.unsigned for c in full.columns][:2] == [False, True]
    assert full.columns[5].type == ev.T_ENUM and full.columns[5].values == ("a", "b")
    assert full.columns[6].type == ev.T_SET and full.columns[3].collation == UTF8MB4
    assert full.primary_key == (0,) and full.full_metadata
    minimal = ev.parse_table_map(_table_map_body(OPTIONAL[:3]), mariadb=False)  # signedness only
    assert [c.name for c in minimal.columns] == [f"UNKNOWN_COL{i}" for i in range(7)]
    assert not any(c.unsigned for c in minimal.columns)  # as mysql-replication: no names, no metadata


def _table_map_body(optional):
    b = Binlog(checksum=False)
    b.table_map(1, b"db", b"t", TYPES, META, NULLABLE, optional)
    return b.events[0][19 + 8:]


def test_char_lengths_over_255_use_two_length_bytes():
    # CHAR(100) utf8mb4 = 400 bytes: the metadata borrows bits of the type byte
    meta_char = bytes([ev.T_STRING ^ ((400 >> 4) & 0x30), 400 & 0xFF])
    b = Binlog(checksum=False)
    body_opt = (bytes([ev.OM_COLUMN_NAME]) + lstr(lstr(b"c")) + bytes([ev.OM_DEFAULT_CHARSET]) + lstr(lenenc(UTF8MB4)))
    b.table_map(1, b"db", b"t", [ev.T_STRING], meta_char, [False], body_opt)
    td = ev.parse_table_map(b.events[0][19 + 8:], mariadb=True)
    assert td.columns[0].length == 400


def test_begin_commit_without_xid_and_heartbeats():
    b = Binlog()
    b.start_stream()
    b.query("BEGIN")
    b.table_map(5, b"db", b"m", [ev.T_LONG], b"", [False], bytes([ev.OM_COLUMN_NAME]) + lstr(lstr(b"id")))
    b.rows(ev.WRITE_ROWS_V1, 5, 1, [b"\x00" + struct.pack("<i", 9)])
    end = b.query("COMMIT")
    b.add(ev.HEARTBEAT, b.file.encode(), log_pos=end + 100, ts=0)  # the server is further on
    txns, w = run(b, until=Position(b.file, end + 100))
    assert len(txns) == 1 and txns[0].rows[0].after == {"id": 9} and txns[0].end == Position(b.file, end)
    assert w.position == Position(b.file, end + 100)


def test_rows_without_table_map_are_skipped_like_the_old_reader():
    b = Binlog()
    b.start_stream()
    b.query("BEGIN")
    b.rows(ev.WRITE_ROWS_V1, 5, 1, [b"\x00" + struct.pack("<i", 9)])
    b.xid()
    txns, w = run(b)
    assert [t.rows for t in txns] == [[]] and w.events_read == 3


@pytest.mark.parametrize("typ, names", [
    (166, "log_bin_compress"), (165, "log_bin_compress"), (ev.PARTIAL_UPDATE_ROWS, "binlog_row_value_options"),
    (ev.GTID_TAGGED, "tagged GTIDs"), (ev.INCIDENT, "error log"),
])
def test_events_that_would_lose_rows_are_refused(typ, names):
    """Each refusal names the event's position (where it starts, as SHOW BINLOG EVENTS lists it)
    and a workaround for that event, not another's."""
    b = Binlog()
    b.start_stream()
    at = b.pos
    b.add(typ, b"\x00" * 20)
    with pytest.raises(ShardflowError) as exc:
        run(b)
    assert exc.value.code is ErrorCode.BINLOG_UNREADABLE and exc.value.code.terminal
    assert f"({b.file}, {at})" in str(exc.value) and names in exc.value.workaround, (str(exc.value), exc.value.workaround)


def test_crc_is_checked_when_asked():
    b = Binlog()
    b.start_stream()
    b.query("BEGIN")
    b.xid()
    bad = bytearray(b.events[-1])
    bad[-1] ^= 0xFF
    b.events[-1] = bytes(bad)
    assert len(run(b)[0]) == 1  # not checked by default, like the old reader
    with pytest.raises(ShardflowError, match="CRC32"):
        run(b, verify_checksum=True)


def test_a_window_without_checksums():
    b = Binlog(checksum=False)
    b.start_stream()
    b.query("BEGIN")
    b.table_map(5, b"db", b"m", [ev.T_LONG], b"", [False], bytes([ev.OM_COLUMN_NAME]) + lstr(lstr(b"id")))
    b.rows(ev.WRITE_ROWS_V1, 5, 1, [b"\x00" + struct.pack("<i", 1), b"\x00" + struct.pack("<i", 2)])
    b.xid()
    txns, _ = run(b)
    assert [r.after["id"] for r in txns[0].rows] == [1, 2]


def test_budgets_stop_only_after_progress():
    b = Binlog()
    b.start_stream()
    ends = []
    for k in range(3):
        b.query("BEGIN")
        ends.append(b.xid(k))
    txns, w = run(b, budget_events=1)
    assert len(txns) == 1 and w.position == Position(b.file, ends[0])
    txns, w = run(b, budget_seconds=0)
    assert len(txns) == 1
    assert isinstance(txns[0], Txn)


def test_start_time_never_lands_inside_an_xa_group(monkeypatch):
    """`--start-time` on a MySQL binlog without GTIDs: XA START ... XA END ... XA_PREPARE is one
    group (its XA END read as a DDL of its own made a start inside it), and the prepared XA's
    XA COMMIT is a group of its own."""
    from dm_core.binlog import by_time

    b = Binlog()
    b.start_stream()
    b.query("XA START X'7831',X'',1", ts=100)
    b.table_map(77, b"db", b"t", TYPES, META, NULLABLE, OPTIONAL)
    b.rows(ev.WRITE_ROWS_V2, 77, 7, [image(1, None, None, None, None, None, None)])
    b.query("XA END X'7831',X'',1", ts=200)
    b.add(ev.XA_PREPARE, bytes([0]) + struct.pack("<iii", 1, 2, 0) + b"x1", ts=200)
    commit_at = b.pos
    b.query("XA COMMIT X'7831',X'',1", ts=300)

    class Dump(FakeDump):
        def __init__(self, *args, **kw):
            super().__init__(b)

        def close(self):
            pass

    monkeypatch.setattr(by_time, "BinlogDump", Dump)
    got = by_time._scan(EP, b.file, 150, Position(b.file, b.pos), server_id=9)
    assert got == Position(b.file, commit_at)


def test_a_source_of_thousands_of_tables_keeps_every_tables_codec():
    """Met round after round (a fleet's source of 5,000 shard tables, each written in turn), every
    TABLE_MAP is compiled once: the second round finds each table's codec as the first left it."""
    from dm_core.binlog.codec import compile_table

    def body(i: int) -> bytes:
        b = Binlog(checksum=False)
        b.table_map(1, b"db", f"t_{i:05d}".encode(), TYPES, META, NULLABLE, OPTIONAL)
        return b.events[0][19 + 8:]

    bodies = [body(i) for i in range(5000)]
    first = [compile_table(x, {}, mariadb=True) for x in bodies]
    again = [compile_table(x, {}, mariadb=True) for x in bodies]
    assert all(a is b for a, b in zip(first, again))
    assert again[4999].td.table == "t_04999"
