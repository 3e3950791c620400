"""Hand-encoded MySQL binlog streams (5.7, 8.0, 8.4 shapes) for the reader's unit tests, and
mysql-replication's parser as an oracle for them.

No MySQL server runs on the test machines (Debian's packages are MariaDB): the events MySQL writes
and MariaDB does not (GTID 33, ANONYMOUS_GTID 34, PREVIOUS_GTIDS 35, TRANSACTION_PAYLOAD 40)
are encoded here from the format (libbinlogevents control_events.h, codecs/binary.cpp;
MySQL's manual), independently of the reader's own code, and checked against
mysql-replication where it reads them (it has no TRANSACTION_PAYLOAD: the events inside one
are checked one by one instead).

``MysqlBinlog`` extends the window tests' ``Binlog`` (sizes, positions, CRCs): events are
added in stream order, ``rotate`` moves to the next file the way the server's dump does (a
real ROTATE, then the server's artificial one, the new file's FORMAT_DESCRIPTION and
PREVIOUS_GTIDS).
"""

from __future__ import annotations

import struct
import zlib

from dm_core.binlog import events as ev
from tests.unit.test_binlog_window import Binlog, lenenc

# FORMAT_DESCRIPTION post-header lengths by event type (index = type - 1), as MySQL 8.0.35
# writes them (41 types; read from a real 8.0.35 FDE). 5.7 writes the first 38 (its FDE
# itself: 57 + 38 = 95); 8.4 adds GTID_TAGGED (42; its entry is not read by the reader).
PHL_80 = bytes([0, 13, 0, 8, 0, 0, 0, 0, 4, 0, 4, 0, 0, 0, 98, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0,
                10, 10, 10, 42, 42, 0, 18, 52, 0, 10, 40, 0])
PHL = {"5.7.44-log": PHL_80[:14] + bytes([95]) + PHL_80[15:38],
       "8.0.36": PHL_80,
       "8.4.3": PHL_80[:14] + bytes([99]) + PHL_80[15:] + bytes([0])}

UUID_A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
UUID_B = "a1b2c3d4-0000-4000-8000-00000000000b"


def uuid_bytes(uuid: str) -> bytes:
    return bytes.fromhex(uuid.replace("-", ""))


def gtid_set_bytes(sets: dict[str, list[tuple[int, int]]]) -> bytes:
    """Gtid_set::encode: n_sids u64, per sid: uuid, n_intervals u64, [start, end) u64 pairs."""
    out = struct.pack("<Q", len(sets))
    for uuid, ivs in sets.items():
        out += uuid_bytes(uuid) + struct.pack("<Q", len(ivs))
        out += b"".join(struct.pack("<QQ", lo, hi + 1) for lo, hi in ivs)
    return out


def gtid_body(uuid: str | None, gno: int, version: str, *, last_committed=0, sequence_number=1,
              flags=1, commit_ts=1_700_000_000_123_456, trx_length=0) -> bytes:
    """GTID / ANONYMOUS_GTID (uuid None: zeros, gno 0). Post-header (42 bytes): flags, sid,
    gno, logical-clock type 2, last_committed, sequence_number; 8.0+ bodies add the commit
    timestamps (7 bytes each, bit 55: the original one follows), the transaction length
    (length-encoded) and the server versions (bit 31: the original one follows)."""
    body = bytes([flags]) + (uuid_bytes(uuid) if uuid else bytes(16)) + struct.pack("<q", gno)
    body += bytes([2]) + struct.pack("<qq", last_committed, sequence_number)
    if not version.startswith("5."):
        body += (commit_ts | 1 << 55).to_bytes(7, "little") + (commit_ts - 10).to_bytes(7, "little")
        body += lenenc(trx_length)
        v = int("".join(f"{int(p):02d}" for p in version.split("-")[0].split(".")))
        body += struct.pack("<I", v)
    return body


def inner_event(typ: int, body: bytes, ts=1_700_000_000, server_id=1) -> bytes:
    """An event as it sits inside a TRANSACTION_PAYLOAD: no checksum, log_pos 0."""
    return struct.pack("<IBIIIH", ts, typ, server_id, 19 + len(body), 0, 0) + body


def query_body(sql: str, schema=b"db") -> bytes:
    return struct.pack("<IIBHH", 1, 0, len(schema), 0, 0) + schema + b"\0" + sql.encode()


def table_map_body(table_id, schema, table, types, meta, nullable, optional=b"") -> bytes:
    body = table_id.to_bytes(6, "little") + b"\x01\x00"
    body += bytes([len(schema)]) + schema + b"\0" + bytes([len(table)]) + table + b"\0"
    body += lenenc(len(types)) + bytes(types) + lenenc(len(meta)) + meta
    body += sum(1 << i for i, n in enumerate(nullable) if n).to_bytes((len(types) + 7) // 8, "little")
    return body + optional


def rows_body(typ, table_id, ncols, images) -> bytes:
    body = table_id.to_bytes(6, "little") + b"\x01\x00" + struct.pack("<H", 2)
    full = ((1 << ncols) - 1).to_bytes((ncols + 7) // 8, "little")
    return body + lenenc(ncols) + full + (full if typ in ev.UPDATE_ROWS else b"") + b"".join(images)


def payload_body(inner: bytes, *, compression: int = 0, frames: int = 1, uncompressed: int | None = None) -> bytes:
    """TRANSACTION_PAYLOAD body: fields (type, length, value; length-encoded) as the server
    writes them, compression type, uncompressed size (compressed only), payload size, end
    mark 0; then the payload (zstd, in ``frames`` frames, or as it is)."""
    import zstandard

    if compression != 255:
        step = -(-len(inner) // frames)
        c = zstandard.ZstdCompressor(write_content_size=False)
        data = b"".join(c.compress(inner[k:k + step]) for k in range(0, len(inner), step))
    else:
        data = inner

    def field(kind, value):
        v = lenenc(value) if value < 0xFFFF else b"\xfe" + struct.pack("<Q", value)
        return lenenc(kind) + lenenc(len(v)) + v

    head = field(2, compression)
    if compression != 255:
        head += field(3, len(inner) if uncompressed is None else uncompressed)
    return head + field(1, len(data)) + b"\x00" + data


class MysqlBinlog(Binlog):
    def __init__(self, file="binlog.000001", version="8.0.36", checksum=True, start=4):
        super().__init__(file=file, start=start, checksum=checksum, version=version)
        self.first = file

    def fde(self, *, log_pos=None):
        body = struct.pack("<H", 4) + self.version.encode().ljust(50, b"\0") + struct.pack("<I", 0) + bytes([19])
        body += PHL[self.version] + bytes([1 if self.checksum else 0])
        return self.add(ev.FORMAT_DESCRIPTION, body, log_pos=log_pos, flags=1)

    def start_stream(self):
        """What the server sends first: its artificial ROTATE, then the file's FDE (log_pos 0
        when the dump starts past it)."""
        self.add(ev.ROTATE, struct.pack("<Q", self.pos) + self.file.encode(), artificial=True)
        self.fde(log_pos=0 if self.pos > 4 else None)

    def file_start(self, previous: dict):
        """A whole file's beginning, dumped from position 4: ROTATE (artificial), FDE, PREVIOUS_GTIDS."""
        self.add(ev.ROTATE, struct.pack("<Q", 4) + self.file.encode(), artificial=True)
        self.fde()
        return self.add(ev.PREVIOUS_GTIDS, gtid_set_bytes(previous))

    def rotate(self, nxt: str, previous: dict):
        """End this file with a real ROTATE, then the next one's beginning."""
        self.add(ev.ROTATE, struct.pack("<Q", 4) + nxt.encode())
        self.file, self.pos = nxt, 4
        return self.file_start(previous)

    def gtid(self, uuid: str, gno: int, **kw) -> int:
        return self.add(ev.GTID, gtid_body(uuid, gno, self.version, **kw))

    def anonymous(self, **kw) -> int:
        return self.add(ev.ANONYMOUS_GTID, gtid_body(None, 0, self.version, **kw))

    def payload(self, inner: list[bytes], **kw) -> int:
        return self.add(ev.TRANSACTION_PAYLOAD, payload_body(b"".join(inner), **kw))


def oracle(events: list[bytes], checksum: bool = True, version=(8, 0, 36)) -> list:
    """mysql-replication's parse of each event (its event object, None where it has none)."""
    from pymysql.protocol import MysqlPacket
    from pymysqlreplication import event as e
    from pymysqlreplication import row_event as r
    from pymysqlreplication.packet import BinLogPacketWrapper

    class Ctl:
        charset = "utf8mb4"

        @staticmethod
        def _get_dbms():
            return "mysql"

    allowed = {e.QueryEvent, e.RotateEvent, e.FormatDescriptionEvent, e.XidEvent, e.GtidEvent,
               e.PreviousGtidsEvent, e.HeartbeatLogEvent, r.WriteRowsEvent, r.UpdateRowsEvent, r.DeleteRowsEvent,
               r.TableMapEvent}
    table_map: dict = {}
    out = []
    for data in events:
        if checksum:
            assert zlib.crc32(data[:-4]) == int.from_bytes(data[-4:], "little")
        w = BinLogPacketWrapper(MysqlPacket(b"\x00" + data, "utf8mb4"), table_map, Ctl(), version, checksum,
                                allowed, None, None, None, None, False, False, checksum, True, False)
        out.append(w.event)
    return out
