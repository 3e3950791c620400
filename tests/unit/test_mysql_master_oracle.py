"""The test MySQL master's binlogs, read by an independent reader: mysql-replication's
BinLogStreamReader connects to the master over TCP, as to a real MySQL, and must get back
every event and every value the BinlogBuilder encoded (checksums verified).

mysql-replication 1.0.17 names columns and knows unsigned/ENUM/SET only from
binlog_row_metadata=FULL; with MINIMAL (MySQL 8's default) and on 5.7 the values that need no
metadata are compared by position. Its two known misreadings are kept out of the values:
negative TIME with a fraction (read as the wrong second), and it has no TRANSACTION_PAYLOAD
support: the payload is opened here with zstandard and its events read from a file of their
own.
"""

from __future__ import annotations

import datetime
import struct
from decimal import Decimal

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (FormatDescriptionEvent, GtidEvent, PreviousGtidsEvent, QueryEvent,
                                      RotateEvent, XidEvent)
from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

from tests.mysql_master import JSON_NULL, BinlogBuilder, MysqlMaster

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
SPEC = ["id INT UNSIGNED NOT NULL PRIMARY KEY", "tiny TINYINT", "small SMALLINT UNSIGNED", "med MEDIUMINT",
        "big BIGINT UNSIGNED", "neg BIGINT", "price DECIMAL(20,6)", "f FLOAT", "d DOUBLE", "dt DATE",
        "ts DATETIME(3)", "stamp TIMESTAMP(6)", "t TIME(2)", "y YEAR", "u8 INT UNSIGNED",
        "name VARCHAR(300)", "code CHAR(4) CHARSET latin1", "txt TEXT", "bin BLOB", "vb VARBINARY(8)",
        "e ENUM('red','green','blue')", "s SET('a','b','c','d')", "bits BIT(12)", "doc JSON"]

ROW = (4_000_000_000, -128, 65535, -8_388_608, 2**64 - 1, -(2**63), Decimal("-12345678901234.123456"), 1.5,
       -2.25e-300, datetime.date(2024, 2, 29), datetime.datetime(1999, 12, 31, 23, 59, 59, 999000),
       datetime.datetime(2038, 1, 19, 3, 14, 7, 123456), datetime.timedelta(hours=-838, minutes=-59, seconds=-59),
       1901, 4_294_967_295, "é" * 299 + "😀", "Déjà", "long text ✓", b"\x00\xffbin", b"\x01\x02",
       "blue", {"a", "d"}, 0b100000000001,
       {"k": [1, -1, 70000, -(2**40), 2**64 - 1, 2.5, "s", True, False, JSON_NULL, {"nested": []}],
        "longer key": {"x": "y"}})
ROW2 = (7, 127, 0, 1, 0, 0, Decimal("0.000001"), -0.0, 0.0, datetime.date(1000, 1, 1),
        datetime.datetime(1970, 1, 1, 0, 0, 1), datetime.datetime(1970, 1, 1, 0, 0, 1),
        datetime.timedelta(hours=12, minutes=34, seconds=56, microseconds=780000), 2155, 0, "", "", "", b"", b"",
        "red", set(), 0, [])
NULLS = (8,) + (None,) * (len(SPEC) - 1)
# columns whose decoding needs no optional metadata (mysql-replication without FULL)
NO_METADATA = {"tiny", "med", "neg", "price", "f", "d", "dt", "ts", "stamp", "t", "y", "name", "txt", "bits",
               "doc"}


def reader(master, file: str, pos: int = 4, **kw) -> BinLogStreamReader:
    return BinLogStreamReader(
        connection_settings={"host": master.host, "port": master.port, "user": "shardflow",
                             "passwd": "shardflow-local"},
        server_id=901, blocking=False, resume_stream=True, log_file=file, log_pos=pos, verify_checksum=True,
        enable_logging=False, filter_non_implemented_events=False, **kw)


def read_all(master, file: str, pos: int = 4, **kw) -> list:
    r = reader(master, file, pos, **kw)
    try:
        return list(r)
    finally:
        r.close()


def expected(value):
    """A value as mysql-replication gives it back."""
    if value == b"":
        return ""                           # it reads an empty BLOB as ""
    if value == set():
        return None                         # and an empty SET as None
    if isinstance(value, set):
        return value
    if isinstance(value, (dict, list)):
        return _json(value)
    return value


def _json(v):
    if v is JSON_NULL:
        return None
    if isinstance(v, dict):
        return {k.encode(): _json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json(x) for x in v]
    if isinstance(v, str):
        return v.encode()
    return v


def as_read(spec_name: str, value):
    if spec_name == "bits" and value is not None:
        return format(value, "012b")
    if spec_name == "f" and value is not None:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    return expected(value)


def names() -> list[str]:
    return [s.split()[0] for s in SPEC]


def build(flavour: str, metadata: str | None, gtid: bool = True) -> BinlogBuilder:
    b = BinlogBuilder(flavour, row_metadata=metadata, gtid_mode=gtid, server_uuid=UUID)
    b.ddl("shop", "CREATE TABLE t (...)")
    b.insert("shop", "t", SPEC, [ROW, ROW2, NULLS])
    b.update("shop", "t", SPEC, [(ROW2, ROW2[:15] + ("changed",) + ROW2[16:])])
    b.delete("shop", "t", SPEC, [NULLS])
    b.commit()
    return b


CASES = [("5.7", None), ("8.0", "MINIMAL"), ("8.0", "FULL"), ("8.4", "MINIMAL"), ("8.4", "FULL")]


@pytest.mark.parametrize("flavour, metadata", CASES)
def test_rows_of_every_type_read_back(flavour, metadata):
    b = build(flavour, metadata)
    full = metadata == "FULL"
    with MysqlMaster(flavour, binlog=b) as m:   # without charsets it reads every string as UTF-8
        events = read_all(m, b.file, ignore_decode_errors=not full)
    rows = [e for e in events if isinstance(e, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent))]
    assert [type(e).__name__ for e in rows] == ["WriteRowsEvent", "UpdateRowsEvent", "DeleteRowsEvent"]
    cols = names()
    if full:
        assert [c.name for c in rows[0].columns] == cols
    got = [list(r["values"].values()) for r in rows[0].rows]
    got.append(list(rows[1].rows[0]["after_values"].values()))
    got.append(list(rows[2].rows[0]["values"].values()))
    want = [ROW, ROW2, NULLS, ROW2[:15] + ("changed",) + ROW2[16:], NULLS]
    for g, w in zip(got, want):
        for name, gv, wv in zip(cols, g, w):
            if full or name in NO_METADATA or wv is None:
                assert gv == as_read(name, wv), (flavour, metadata, name)


@pytest.mark.parametrize("flavour", ["5.7", "8.0", "8.4"])
@pytest.mark.parametrize("gtid", [True, False])
def test_event_sequence_positions_and_gtids(flavour, gtid):
    b = BinlogBuilder(flavour, gtid_mode=gtid, server_uuid=UUID)
    first = b.ddl("shop", "CREATE TABLE t (id INT PRIMARY KEY)")
    b.insert("shop", "t", ["id INT PRIMARY KEY"], [(1,)])
    second = b.commit()
    nxt = b.rotate()
    b.insert("shop", "t", ["id INT PRIMARY KEY"], [(2,)])
    third = b.commit()
    with MysqlMaster(flavour, binlog=b) as m:
        events = read_all(m, "mysql-bin.000001" if flavour == "5.7" else "binlog.000001")
    kinds = [type(e).__name__ for e in events]
    per_txn = ["GtidEvent"] if gtid else ["NotImplementedEvent"]   # ANONYMOUS_GTID: no class in 1.0.17
    assert kinds == (["RotateEvent", "FormatDescriptionEvent", "PreviousGtidsEvent"] + per_txn + ["QueryEvent"]
                     + per_txn + ["QueryEvent", "TableMapEvent", "WriteRowsEvent", "XidEvent", "RotateEvent",
                                  "RotateEvent", "FormatDescriptionEvent", "PreviousGtidsEvent"] + per_txn
                     + ["QueryEvent", "TableMapEvent", "WriteRowsEvent", "XidEvent"])
    fde = next(e for e in events if isinstance(e, FormatDescriptionEvent))
    assert fde.mysql_version_str == b.flavour.version and fde.binlog_version == (4,)
    queries = [e.query for e in events if isinstance(e, QueryEvent)]
    assert queries == ["CREATE TABLE t (id INT PRIMARY KEY)", "BEGIN", "BEGIN"]
    gtids = [e.gtid for e in events if isinstance(e, GtidEvent)]
    assert gtids == ([first.gtid, second.gtid, third.gtid] if gtid else [])
    rotates = [e for e in events if isinstance(e, RotateEvent)]
    assert (rotates[1].next_binlog, rotates[1].position) == (nxt, 4)       # the real one, at the file's end
    xids = [e for e in events if isinstance(e, XidEvent)]
    assert [x.packet.log_pos for x in xids] == [second.pos, third.pos]
    prev = [e for e in events if isinstance(e, PreviousGtidsEvent)]
    assert len(prev) == 2


def test_statements_split_into_row_events_of_8k():
    b = BinlogBuilder("8.0", row_metadata="FULL")
    b.insert("shop", "wide", ["id INT PRIMARY KEY", "pad VARCHAR(1000)"], [(i, "x" * 900) for i in range(40)])
    b.commit()
    with MysqlMaster("8.0", binlog=b) as m:
        events = read_all(m, b.file)
    writes = [e for e in events if isinstance(e, WriteRowsEvent)]
    assert len(writes) > 3
    assert [r["values"]["id"] for w in writes for r in w.rows] == list(range(40))
    assert [w.flags & 1 for w in writes] == [0] * (len(writes) - 1) + [1]   # STMT_END_F on the last


def test_year_before_numeric_columns_keeps_signedness():
    """MySQL gives YEAR a (zero) bit in the signedness metadata: the columns after it keep theirs."""
    b = BinlogBuilder("8.0", row_metadata="FULL")
    b.insert("shop", "t", ["y YEAR", "u INT UNSIGNED", "s INT"], [(2024, 4_000_000_000, -5)])
    b.commit()
    with MysqlMaster("8.0", binlog=b) as m:
        events = read_all(m, b.file)
    tm = next(e for e in events if isinstance(e, TableMapEvent))
    assert tm.optional_metadata.unsigned_column_list == [False, True, False]
    w = next(e for e in events if isinstance(e, WriteRowsEvent))
    assert w.rows[0]["values"] == {"y": 2024, "u": 4_000_000_000, "s": -5}


def _payload_events(file_bytes: bytes) -> bytes:
    """The events inside the file's TRANSACTION_PAYLOAD, opened with zstandard: the header's
    fields are (type, length, value) packed integers up to type 0 (MySQL's
    Transaction_payload codec: 1 payload size, 2 compression type, 3 uncompressed size)."""
    import zstandard

    p = 4
    while p < len(file_bytes):
        typ, size = file_bytes[p + 4], struct.unpack_from("<I", file_bytes, p + 9)[0]
        if typ == 40:
            q, fields = p + 19, {}
            while file_bytes[q] != 0:
                kind, length = file_bytes[q], file_bytes[q + 1]
                fields[kind] = int.from_bytes(file_bytes[q + 2 + (length > 1):q + 2 + length], "little") \
                    if length > 1 else file_bytes[q + 2]
                q += 2 + length
            assert fields[2] == 0                                  # ZSTD
            data = file_bytes[q + 1:q + 1 + fields[1]]
            assert q + 1 + fields[1] == p + size - 4               # then the event's CRC32
            raw = zstandard.ZstdDecompressor().decompress(data, max_output_size=fields[3])
            assert len(raw) == fields[3]
            return raw
        p += size
    raise AssertionError("no TRANSACTION_PAYLOAD in the file")


@pytest.mark.parametrize("flavour", ["8.0", "8.4"])
def test_compressed_transaction_holds_the_transaction(flavour):
    spec = ["id INT UNSIGNED PRIMARY KEY", "name VARCHAR(20)", "doc JSON"]
    b = BinlogBuilder(flavour, row_metadata="FULL")
    mark = b.compressed_transaction([("insert", "shop", "t", spec, [(1, "a", {"x": 1}), (2, "b", None)]),
                                     ("update", "shop", "t", spec, [((1, "a", {"x": 1}), (1, "A", [True]))]),
                                     ("delete", "shop", "t", spec, [(2, "b", None)])])
    with MysqlMaster(flavour, binlog=b) as m:
        outer = read_all(m, b.file)
    kinds = [type(e).__name__ for e in outer]
    assert kinds[3:] == ["GtidEvent", "NotImplementedEvent"]           # GTID, then the payload
    assert outer[3].gtid == mark.gtid and outer[4].packet.log_pos == mark.pos
    # the payload's events, served as a file of their own (no checksums inside a payload)
    plain = BinlogBuilder(flavour, checksum=False)
    head = plain.files[plain.file]
    with MysqlMaster(flavour) as m:
        m.load_files({"inner.000001": head + _payload_events(b.files[b.file])}, checksum=False, row_metadata="FULL")
        inner = read_all(m, "inner.000001")
    rows = [e for e in inner if isinstance(e, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent))]
    assert [type(e).__name__ for e in inner][3:] == ["QueryEvent", "TableMapEvent", "WriteRowsEvent",
                                                    "TableMapEvent", "UpdateRowsEvent", "TableMapEvent",
                                                    "DeleteRowsEvent", "XidEvent"]
    assert [r["values"] for r in rows[0].rows] == [{"id": 1, "name": "a", "doc": {b"x": 1}},
                                                   {"id": 2, "name": "b", "doc": None}]
    assert rows[1].rows[0]["after_values"] == {"id": 1, "name": "A", "doc": [True]}
    assert rows[2].rows[0]["values"] == {"id": 2, "name": "b", "doc": None}
