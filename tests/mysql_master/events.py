"""Binlog event framing and the control events (binlog format v4, as MySQL 5.7/8.x write it).

Every event: a 19-byte header (timestamp u32, type u8, server_id u32, event size u32,
log_pos u32 = where the next event starts, flags u16), the post-header and body, and a CRC32
of all that when the file's FORMAT_DESCRIPTION says binlog_checksum=CRC32 (the
FORMAT_DESCRIPTION itself always ends with one: its algorithm byte says 0 or 1). Events inside a
TRANSACTION_PAYLOAD carry no checksum and log_pos 0: only the payload event itself is
placed in the file.
"""

from __future__ import annotations

import struct
import zlib

from tests.mysql_master.flavours import Flavour
from tests.mysql_master.gtidset import GtidSet
from tests.mysql_master.protocol import lenenc_int

QUERY, ROTATE, FORMAT_DESCRIPTION, XID, TABLE_MAP = 2, 4, 15, 16, 19
WRITE_ROWS, UPDATE_ROWS, DELETE_ROWS = 30, 31, 32
HEARTBEAT, GTID, ANONYMOUS_GTID, PREVIOUS_GTIDS, TRANSACTION_PAYLOAD = 27, 33, 34, 35, 40
HEADER_LEN = 19
LOG_EVENT_ARTIFICIAL_F = 0x20
BINLOG_MAGIC = b"\xfebin"

# QUERY status variable codes (Q_*) MySQL writes.
Q_FLAGS2, Q_SQL_MODE, Q_CATALOG_NZ, Q_CHARSET = 0, 1, 6, 4
Q_UPDATED_DB_NAMES, Q_DDL_LOGGED_WITH_XID, Q_DEFAULT_COLLATION_FOR_UTF8MB4 = 12, 17, 18
Q_SQL_REQUIRE_PRIMARY_KEY, Q_DEFAULT_TABLE_ENCRYPTION = 19, 20


def frame(typ: int, body: bytes, *, ts: int, server_id: int, log_pos: int, flags: int = 0,
          checksum: bool = True) -> bytes:
    """One whole event: header, ``body`` (post-header included), CRC32 if ``checksum``."""
    size = HEADER_LEN + len(body) + (4 if checksum else 0)
    data = struct.pack("<IBIIIH", ts, typ, server_id, size, log_pos, flags) + body
    return data + struct.pack("<I", zlib.crc32(data)) if checksum else data


def event_size(body_len: int, checksum: bool) -> int:
    return HEADER_LEN + body_len + (4 if checksum else 0)


def format_description(fl: Flavour, created: int, checksum: bool) -> bytes:
    """FORMAT_DESCRIPTION body: binlog version 4, server version (50 bytes), create time,
    header length 19, the flavour's post-header lengths, the checksum algorithm (1 = CRC32)."""
    return (struct.pack("<H", 4) + fl.version.encode().ljust(50, b"\x00") + struct.pack("<I", created)
            + bytes([HEADER_LEN]) + bytes(fl.post_header) + bytes([1 if checksum else 0]))


def previous_gtids(gtids: GtidSet) -> bytes:
    return gtids.encode()


def gtid(fl: Flavour, sid: bytes, gno: int, *, last_committed: int, sequence_number: int,
         commit_us: int, transaction_length: int, may_have_sbr: bool = False) -> bytes:
    """GTID (or, with a zero sid and gno 0, ANONYMOUS_GTID) body.

    Post-header (42 bytes): flags (1 = may have statement-logged changes), sid, gno,
    logical-timestamp type 2, last_committed, sequence_number. MySQL >= 8.0.2 adds:
    immediate commit timestamp (7 bytes, µs; its top bit would announce a different original
    timestamp), the transaction length (packed integer, the whole group including this
    event), the immediate server version (4 bytes; top bit likewise for the original's).
    """
    body = struct.pack("<B16sqBqq", 1 if may_have_sbr else 0, sid, gno, 2, last_committed, sequence_number)
    if fl.gtid_event_extras:
        body += commit_us.to_bytes(7, "little") + lenenc_int(transaction_length) + struct.pack("<I", fl.version_number)
    return body


def gtid_body_len(fl: Flavour, transaction_length: int) -> int:
    return 42 + (7 + len(lenenc_int(transaction_length)) + 4 if fl.gtid_event_extras else 0)


def query(fl: Flavour, schema: str, sql: str, *, thread_id: int, sql_mode: int, ddl: bool,
          collation: int, server_collation: int) -> bytes:
    """QUERY body: thread id, exec time, schema length, error code, status-vars length, the
    status variables, the schema (NUL-terminated), the statement.

    Status variables as MySQL writes them: Q_FLAGS2 (4 bytes), Q_SQL_MODE (8), Q_CATALOG_NZ
    ("std"), Q_CHARSET (client charset, connection collation, server collation: 2 bytes
    each); for a DDL also Q_UPDATED_DB_NAMES and, on 8.0+, Q_DDL_LOGGED_WITH_XID (8 bytes),
    Q_DEFAULT_COLLATION_FOR_UTF8MB4, Q_SQL_REQUIRE_PRIMARY_KEY, Q_DEFAULT_TABLE_ENCRYPTION.
    """
    sv = bytearray()
    sv += bytes([Q_FLAGS2]) + struct.pack("<I", 0)
    sv += bytes([Q_SQL_MODE]) + struct.pack("<Q", sql_mode)
    sv += bytes([Q_CATALOG_NZ, 3]) + b"std"
    sv += bytes([Q_CHARSET]) + struct.pack("<HHH", collation, collation, server_collation)
    if ddl:
        names = [schema.encode()] if schema else []
        sv += bytes([Q_UPDATED_DB_NAMES, len(names)]) + b"".join(n + b"\x00" for n in names)
        if fl.v >= (8, 0):
            sv += bytes([Q_DDL_LOGGED_WITH_XID]) + struct.pack("<Q", thread_id)
            sv += bytes([Q_DEFAULT_COLLATION_FOR_UTF8MB4]) + struct.pack("<H", fl.utf8mb4_collation)
            sv += bytes([Q_SQL_REQUIRE_PRIMARY_KEY, 0, Q_DEFAULT_TABLE_ENCRYPTION, 0])
    db = schema.encode()
    return (struct.pack("<IIBHH", thread_id, 0, len(db), 0, len(sv)) + bytes(sv) + db + b"\x00"
            + sql.encode("utf-8"))


def xid(n: int) -> bytes:
    return struct.pack("<Q", n)


def rotate(position: int, next_file: str) -> bytes:
    return struct.pack("<Q", position) + next_file.encode()


def heartbeat(file: str) -> bytes:
    return file.encode()


def transaction_payload(compressed: bytes, uncompressed_size: int) -> bytes:
    """TRANSACTION_PAYLOAD body (no post-header): TLV fields (type, length, value, all packed
    integers) in MySQL's order — compression type (0 = ZSTD), uncompressed size, payload
    size — then the end mark 0, then the compressed events."""
    out = bytearray()
    for field, value in ((2, 0), (3, uncompressed_size), (1, len(compressed))):
        enc = lenenc_int(value)
        out += lenenc_int(field) + lenenc_int(len(enc)) + enc
    out += b"\x00"
    return bytes(out) + compressed


def iter_events(data: bytes, start: int = 4):
    """(start, end, type) of each event of a binlog file from ``start``, by their sizes."""
    p = start
    while p + HEADER_LEN <= len(data):
        typ = data[p + 4]
        size = struct.unpack_from("<I", data, p + 9)[0]
        if size < HEADER_LEN or p + size > len(data):
            return
        yield p, p + size, typ
        p += size


def payload_fields(data: bytes, b: int) -> tuple[dict[int, int], int]:
    """The TLV fields of a TRANSACTION_PAYLOAD body at ``b`` and where the compressed data starts."""
    from tests.mysql_master.protocol import read_lenenc_int

    fields = {}
    while True:
        kind, b = read_lenenc_int(data, b)
        if kind == 0:
            return fields, b
        length, b = read_lenenc_int(data, b)
        fields[kind], _ = read_lenenc_int(data, b)
        b += length
