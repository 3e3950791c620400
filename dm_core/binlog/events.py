"""Binlog event layouts: the common header, the control events, and TABLE_MAP.

Written from the MySQL/MariaDB binlog v4 format. Every event is

    header (19 bytes, little-endian): timestamp u32, type u8, server_id u32,
                                      event_size u32, log_pos u32 (end of this event), flags u16
    post-header (length per type, from FORMAT_DESCRIPTION)
    body
    CRC32 (4 bytes) when the file's FORMAT_DESCRIPTION says binlog_checksum=CRC32

The functions here take ``(buf, start, end)``: ``buf[start:end]`` is one whole event
*without* its checksum, so no event is ever copied out of the network buffer.
Only TABLE_MAP is parsed into objects (once per table, see ``codec.compile_table``);
row events are decoded by the code generated there.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

# ---- event types --------------------------------------------------------------------------
QUERY = 2
STOP = 3
ROTATE = 4
FORMAT_DESCRIPTION = 15
XID = 16
EXECUTE_LOAD_QUERY = 18        # a LOAD DATA logged as a statement (its rows are not in the binlog)
INCIDENT = 26                  # the server lost events (LOST_EVENTS): a replica stops here
TABLE_MAP = 19
WRITE_ROWS_V1, UPDATE_ROWS_V1, DELETE_ROWS_V1 = 23, 24, 25
HEARTBEAT = 27
WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2 = 30, 31, 32
GTID = 33                      # MySQL: a transaction's GTID (uuid:gno) before its BEGIN or its DDL
ANONYMOUS_GTID = 34            # MySQL with gtid_mode OFF (or mixed): marks a transaction's start, no GTID
PREVIOUS_GTIDS = 35            # MySQL: the GTID set of all binlogs before this file (after its FORMAT_DESCRIPTION)
XA_PREPARE = 38                # ends the event group of an XA transaction's PREPARE (MySQL 5.7+, MariaDB 10.5+)
PARTIAL_UPDATE_ROWS = 39       # MySQL 8 partial JSON updates
TRANSACTION_PAYLOAD = 40       # MySQL 8.0.20+ binlog_transaction_compression: a whole transaction, zstd
HEARTBEAT_V2 = 41              # MySQL 8.0.26+, only to replicas that ask for it (we do not)
GTID_TAGGED = 42               # MySQL 8.3+: a tagged GTID (uuid:tag:gno), in another serialization
MARIADB_ANNOTATE_ROWS = 160
MARIADB_BINLOG_CHECKPOINT = 161
MARIADB_GTID = 162
MARIADB_GTID_LIST = 163
MARIADB_START_ENCRYPTION = 164
MARIADB_QUERY_COMPRESSED = 165
MARIADB_ROWS_COMPRESSED = frozenset(range(166, 172))  # v1 write/update/delete, compressed

WRITE_ROWS = frozenset((WRITE_ROWS_V1, WRITE_ROWS_V2))
UPDATE_ROWS = frozenset((UPDATE_ROWS_V1, UPDATE_ROWS_V2))
DELETE_ROWS = frozenset((DELETE_ROWS_V1, DELETE_ROWS_V2))
ROWS_V2 = frozenset((WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2))
ROWS = WRITE_ROWS | UPDATE_ROWS | DELETE_ROWS

# Events a reader must refuse instead of skipping: skipping them would lose rows silently.
# (Encrypted binlogs are fine: the server decrypts what it sends to replicas.)
# type → (what the event is, what to do about it)
_TURN_OFF = ("Turn the feature off on the upstream ({}), then run the full phase again or start from a "
             "newer `meta` position.")
UNSUPPORTED = {
    MARIADB_QUERY_COMPRESSED: ("a compressed QUERY event (log_bin_compress=ON)",
                               _TURN_OFF.format("SET GLOBAL log_bin_compress=OFF")),
    PARTIAL_UPDATE_ROWS: ("a partial JSON update (binlog_row_value_options=PARTIAL_JSON)",
                          _TURN_OFF.format("SET GLOBAL binlog_row_value_options=''")),
    GTID_TAGGED: ("a transaction with a tagged GTID (MySQL 8.3+, `SET gtid_next = 'AUTOMATIC:<tag>'`)",
                  "Stop assigning tagged GTIDs upstream, then run the full phase again or start from a newer "
                  "`meta` position."),
    INCIDENT: ("an incident: the upstream says events may be missing from its binlog here (a replica "
               "stops at it too)",
               "Read the upstream's error log at that time for what was lost, then run the full phase again, "
               "or start the task again from a `meta` position past the incident and re-sync the tables that "
               "lost changes (trigger dm_TASK_resync)."),
    **{t: ("a compressed ROWS event (log_bin_compress=ON)", _TURN_OFF.format("SET GLOBAL log_bin_compress=OFF"))
       for t in MARIADB_ROWS_COMPRESSED},
}

HEADER_LEN = 19
HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server_id, event_size, log_pos, flags

# MariaDB GTID event flag: the group is a single statement (a DDL), not BEGIN ... COMMIT.
GTID_FL_STANDALONE = 0x01
# Event header flag (MySQL and MariaDB): the statement depends on its session: it used one of
# the session's temporary tables (or its thread id), which only a STATEMENT/MIXED session logs.
LOG_EVENT_THREAD_SPECIFIC_F = 0x04

# ---- column types (as written in TABLE_MAP) -------------------------------------------------
T_DECIMAL, T_TINY, T_SHORT, T_LONG, T_FLOAT, T_DOUBLE, T_NULL = 0, 1, 2, 3, 4, 5, 6
T_TIMESTAMP, T_LONGLONG, T_INT24, T_DATE, T_TIME, T_DATETIME, T_YEAR = 7, 8, 9, 10, 11, 12, 13
T_NEWDATE, T_VARCHAR, T_BIT, T_TIMESTAMP2, T_DATETIME2, T_TIME2 = 14, 15, 16, 17, 18, 19
T_JSON, T_NEWDECIMAL, T_ENUM, T_SET = 245, 246, 247, 248
T_TINY_BLOB, T_MEDIUM_BLOB, T_LONG_BLOB, T_BLOB = 249, 250, 251, 252
T_VAR_STRING, T_STRING, T_GEOMETRY = 253, 254, 255

NUMERIC_TYPES = frozenset((T_TINY, T_SHORT, T_INT24, T_LONG, T_LONGLONG, T_NEWDECIMAL,
                           T_FLOAT, T_DOUBLE, T_YEAR))
CHARACTER_TYPES = frozenset((T_STRING, T_VAR_STRING, T_VARCHAR, T_BLOB))

# Optional metadata (binlog_row_metadata=FULL) field types.
OM_SIGNEDNESS, OM_DEFAULT_CHARSET, OM_COLUMN_CHARSET, OM_COLUMN_NAME = 1, 2, 3, 4
OM_SET_STR_VALUE, OM_ENUM_STR_VALUE, OM_GEOMETRY_TYPE, OM_SIMPLE_PRIMARY_KEY = 5, 6, 7, 8
OM_PRIMARY_KEY_WITH_PREFIX, OM_ENUM_AND_SET_DEFAULT_CHARSET = 9, 10
OM_ENUM_AND_SET_COLUMN_CHARSET, OM_COLUMN_VISIBILITY = 11, 12


class BinlogFormatError(Exception):
    """An event does not parse as the binlog format says it should."""


def lenenc(buf: bytes, p: int) -> tuple[int, int]:
    """A length-encoded integer at ``p`` → (value, next offset)."""
    c = buf[p]
    if c < 0xFB:
        return c, p + 1
    if c == 0xFC:
        return buf[p + 1] | buf[p + 2] << 8, p + 3
    if c == 0xFD:
        return buf[p + 1] | buf[p + 2] << 8 | buf[p + 3] << 16, p + 4
    if c == 0xFE:
        return int.from_bytes(buf[p + 1:p + 9], "little"), p + 9
    raise BinlogFormatError(f"bad length-encoded integer prefix {c:#x}")


# ---- FORMAT_DESCRIPTION ----------------------------------------------------------------------
@dataclass(slots=True)
class FormatDescription:
    server_version: str
    post_header_len: bytes       # index = event type - 1
    checksum: bool               # events of this file end with a CRC32

    def post_header(self, event_type: int, default: int) -> int:
        i = event_type - 1
        return self.post_header_len[i] if 0 <= i < len(self.post_header_len) else default


def parse_format_description(buf: bytes, s: int, e: int, checksum_hint: bool) -> FormatDescription:
    """``buf[s:e]`` is the whole FDE *including* its trailing CRC if any.

    The FDE carries its own checksum algorithm byte just before the CRC: 1 = CRC32, 0 = off.
    Which layout applies is settled by checking the CRC itself; ``checksum_hint`` (the
    server's binlog_checksum) decides only if neither layout is self-consistent.
    """
    import zlib

    b = s + HEADER_LEN
    version = buf[b + 2:b + 52].split(b"\0", 1)[0].decode("ascii", "replace")
    hdr_len = buf[b + 56]
    if hdr_len != HEADER_LEN:
        raise BinlogFormatError(f"unsupported common header length {hdr_len}")
    table = b + 57
    crc_ok = e - s >= HEADER_LEN + 62 and buf[e - 5] == 1 and \
        zlib.crc32(buf[s:e - 4]) == int.from_bytes(buf[e - 4:e], "little")
    if crc_ok:
        checksum, types_end = True, e - 5
    elif buf[e - 1] == 0 and not checksum_hint:
        checksum, types_end = False, e - 1
    else:
        checksum = checksum_hint
        types_end = e - 5 if checksum else e - 1
    return FormatDescription(version, bytes(buf[table:types_end]), checksum)


# ---- small control events ------------------------------------------------------------------
def parse_rotate(buf: bytes, s: int, e: int) -> tuple[int, str]:
    """ROTATE → (position in the next file, next file name)."""
    b = s + HEADER_LEN
    return int.from_bytes(buf[b:b + 8], "little"), buf[b + 8:e].decode()


def parse_mariadb_gtid(buf: bytes, s: int, server_id: int) -> tuple[str, int]:
    """MariaDB GTID event → ("domain-server-seq", flags2)."""
    b = s + HEADER_LEN
    seq = int.from_bytes(buf[b:b + 8], "little")
    domain = int.from_bytes(buf[b + 8:b + 12], "little")
    return f"{domain}-{server_id}-{seq}", buf[b + 12]


def parse_query(buf: bytes, s: int, e: int, post_header_len: int, codec: str = "utf-8") -> tuple[bytes, str]:
    """QUERY → (default schema as bytes, statement text decoded with ``codec``: the client's
    charset, ``query_status``; a client writing gbk logs gbk bytes).

    Post-header: thread id u32, exec time u32, schema length u8, error code u16,
    status-vars length u16 (13 bytes; the FDE may declare more).
    """
    b = s + HEADER_LEN
    schema_len = buf[b + 8]
    status_len = buf[b + 11] | buf[b + 12] << 8
    p = b + post_header_len + status_len
    schema = buf[p:p + schema_len]
    return schema, buf[p + schema_len + 1:e].decode(codec, "backslashreplace")


# QUERY status variables: code → bytes after the code (None: a length byte then that many bytes;
# "names": Q_UPDATED_DB_NAMES; "invoker": two length-prefixed strings). An unknown code ends the
# walk: its length cannot be known, and nothing after it is needed badly enough to guess.
_STATUS_SIZES = {0: 4, 1: 8, 3: 4, 4: 6, 5: None, 6: None, 7: 2, 8: 2, 9: 8, 10: 4, 11: "invoker", 12: "names",
                 13: 3, 16: 1, 17: 8, 18: 2, 19: 1, 20: 1, 128: 3, 129: 8}
Q_SQL_MODE_CODE = 1
Q_CHARSET_CODE = 4
Q_TIME_ZONE_CODE = 5


class QueryStatus(NamedTuple):
    """The session a QUERY event was logged in, as far as its status variables say (None: not
    recorded). A DDL means what it meant there: ``DEFAULT CURRENT_TIMESTAMP`` filled existing
    rows in ``zone``, a backslash in a string is itself under NO_BACKSLASH_ESCAPES
    (``sql_mode``, the server's own bit numbering), the text's bytes are in the client's
    charset, and CREATE DATABASE without a charset takes ``server_collation``."""

    zone: str | None                 # Q_TIME_ZONE_CODE, written when the statement used the zone
    sql_mode: int | None             # Q_SQL_MODE_CODE
    client_charset: int | None       # Q_CHARSET_CODE: character_set_client (a collation id)
    server_collation: int | None     # Q_CHARSET_CODE: collation_server


def query_status(buf: bytes, s: int, post_header_len: int) -> QueryStatus:
    """The ``QueryStatus`` of the QUERY event at ``s``."""
    b = s + HEADER_LEN
    status_len = buf[b + 11] | buf[b + 12] << 8
    p, end = b + post_header_len, b + post_header_len + status_len
    zone = mode = client = server = None
    while p < end:
        code = buf[p]
        p += 1
        size = _STATUS_SIZES.get(code, "unknown")
        if code == Q_TIME_ZONE_CODE:
            zone = buf[p + 1:p + 1 + buf[p]].decode("ascii", "replace")
        elif code == Q_SQL_MODE_CODE:
            mode = int.from_bytes(buf[p:p + 8], "little")
        elif code == Q_CHARSET_CODE:
            client = int.from_bytes(buf[p:p + 2], "little")
            server = int.from_bytes(buf[p + 4:p + 6], "little")
        if size is None:
            p += 1 + buf[p]
        elif size == "invoker":
            p += 1 + buf[p]
            p += 1 + buf[p]
        elif size == "names":
            count = buf[p]
            p += 1
            if count != 254:
                for _ in range(count):
                    p = buf.index(0, p, end) + 1
        elif size == "unknown":
            break
        else:
            p += size
    return QueryStatus(zone, mode, client, server)


# ---- TABLE_MAP -------------------------------------------------------------------------------
@dataclass(slots=True)
class ColumnDef:
    """One column as TABLE_MAP describes it (``type`` is the real type: ENUM/SET unwrapped)."""

    index: int
    type: int
    name: str
    nullable: bool
    unsigned: bool = False
    length: int = 0              # VARCHAR/CHAR max bytes; BLOB/JSON/GEOMETRY length-prefix size;
                                 # ENUM/SET storage bytes; BIT bit count; FLOAT/DOUBLE pack length
    precision: int = 0           # NEWDECIMAL
    scale: int = 0               # NEWDECIMAL scale; TIME2/DATETIME2/TIMESTAMP2 fsp
    collation: int | None = None  # character columns, ENUM/SET: collation id
    values: tuple[str, ...] | None = None  # ENUM/SET member strings


@dataclass(slots=True)
class TableDef:
    schema: str
    table: str
    columns: list[ColumnDef]
    full_metadata: bool           # column names were logged (binlog_row_metadata=FULL)
    primary_key: tuple[int, ...] = ()


def _character(t: int, mariadb: bool) -> bool:
    # MariaDB counts GEOMETRY among character columns when it logs charsets.
    return t in CHARACTER_TYPES or (mariadb and t == T_GEOMETRY)


def parse_table_map(body: bytes, *, mariadb: bool) -> TableDef:
    """``body``: a TABLE_MAP after its post-header (table id, flags), without checksum.

    Layout: schema (u8 len, bytes, NUL), table (u8 len, bytes, NUL), column count (lenenc),
    column types (1 byte each), metadata block (lenenc length; per type 0-2 bytes),
    nullability bitmap, then the optional metadata TLVs (type u8, lenenc length, value).
    """
    sl = body[0]
    schema = body[1:1 + sl].decode()
    p = sl + 2
    tl = body[p]
    table = body[p + 1:p + 1 + tl].decode()
    p += tl + 2
    n, p = lenenc(body, p)
    types = body[p:p + n]
    p += n
    mlen, p = lenenc(body, p)
    meta_end = p + mlen
    cols: list[ColumnDef] = []
    for i, t in enumerate(types):
        c = ColumnDef(i, t, f"UNKNOWN_COL{i}", False)
        if t == T_VARCHAR:
            c.length = body[p] | body[p + 1] << 8
            p += 2
        elif t in (T_STRING, T_VAR_STRING, T_ENUM, T_SET):
            b0, b1 = body[p], body[p + 1]
            p += 2
            if b0 in (T_ENUM, T_SET):
                c.type, c.length = b0, b1
            else:
                # CHAR lengths above 255 borrow two high bits, inverted, from the type byte.
                c.length = ((((b0 << 8 | b1) >> 4) & 0x300) ^ 0x300) + b1
        elif t in (T_FLOAT, T_DOUBLE, T_BLOB, T_GEOMETRY, T_JSON,
                   T_TINY_BLOB, T_MEDIUM_BLOB, T_LONG_BLOB):
            c.length = body[p]
            p += 1
        elif t == T_NEWDECIMAL:
            c.precision, c.scale = body[p], body[p + 1]
            p += 2
        elif t == T_BIT:
            c.length = body[p + 1] * 8 + body[p]
            p += 2
        elif t in (T_TIMESTAMP2, T_DATETIME2, T_TIME2):
            c.scale = body[p]
            p += 1
        cols.append(c)
    if p != meta_end:
        raise BinlogFormatError(f"{schema}.{table}: column metadata is {mlen} bytes, parsed {p - meta_end + mlen}")
    nb = (n + 7) // 8
    nulls = int.from_bytes(body[p:p + nb], "little")
    for c in cols:
        c.nullable = bool(nulls >> c.index & 1)
    p += nb
    td = TableDef(schema, table, cols, False)
    _parse_optional_metadata(td, body, p, mariadb)
    return td


def _parse_optional_metadata(td: TableDef, body: bytes, p: int, mariadb: bool) -> None:
    cols = td.columns
    numeric = [c for c in cols if c.type in NUMERIC_TYPES]
    character = [c for c in cols if _character(c.type, mariadb)]
    enum_set = [c for c in cols if c.type in (T_ENUM, T_SET)]
    names: list[str] = []
    unsigned: list[bool] = []
    charsets: list[int | None] = []
    es_charsets: list[int | None] = []
    enum_values: list[tuple[str, ...]] = []
    set_values: list[tuple[str, ...]] = []
    end = len(body)
    while p < end:
        kind = body[p]
        length, p = lenenc(body, p + 1)
        q, stop = p, p + length
        if kind == OM_SIGNEDNESS:
            bits = int.from_bytes(body[q:stop], "big")
            width = length * 8
            unsigned = [bool(bits >> (width - 1 - k) & 1) for k in range(len(numeric))]
        elif kind in (OM_DEFAULT_CHARSET, OM_ENUM_AND_SET_DEFAULT_CHARSET):
            default, q = lenenc(body, q)
            target = character if kind == OM_DEFAULT_CHARSET else enum_set
            found = [default] * len(target)
            while q < stop:
                k, q = lenenc(body, q)
                coll, q = lenenc(body, q)
                if k < len(found):
                    found[k] = coll
            if kind == OM_DEFAULT_CHARSET:
                charsets = found
            else:
                es_charsets = found
        elif kind in (OM_COLUMN_CHARSET, OM_ENUM_AND_SET_COLUMN_CHARSET):
            found = []
            while q < stop:
                coll, q = lenenc(body, q)
                found.append(coll)
            if kind == OM_COLUMN_CHARSET:
                charsets = found
            else:
                es_charsets = found
        elif kind == OM_COLUMN_NAME:
            while q < stop:
                ln, q = lenenc(body, q)
                names.append(body[q:q + ln].decode())
                q += ln
        elif kind in (OM_SET_STR_VALUE, OM_ENUM_STR_VALUE):
            lists = []
            while q < stop:
                count, q = lenenc(body, q)
                vals = []
                for _ in range(count):
                    ln, q = lenenc(body, q)
                    try:
                        vals.append(body[q:q + ln].decode())
                    except UnicodeDecodeError:
                        vals.append("")
                    q += ln
                lists.append(tuple(vals))
            if kind == OM_SET_STR_VALUE:
                set_values = lists
            else:
                enum_values = lists
        elif kind == OM_SIMPLE_PRIMARY_KEY:
            pk = []
            while q < stop:
                k, q = lenenc(body, q)
                pk.append(k)
            td.primary_key = tuple(pk)
        elif kind == OM_PRIMARY_KEY_WITH_PREFIX:
            pk = []
            while q < stop:
                k, q = lenenc(body, q)
                _, q = lenenc(body, q)
                pk.append(k)
            td.primary_key = tuple(pk)
        p = stop
    if len(names) != len(cols):
        # Without names (binlog_row_metadata != FULL) mysql-replication also drops the
        # signedness and charsets: columns come back as UNKNOWN_COLn, signed, utf-8.
        return
    td.full_metadata = True
    for c, name in zip(cols, names):
        c.name = name
    for c, u in zip(numeric, unsigned):
        c.unsigned = u
    for c, coll in zip(character, charsets):
        c.collation = coll
    for c, coll in zip(enum_set, es_charsets):
        c.collation = coll
    for c, vals in zip((c for c in cols if c.type == T_ENUM), enum_values):
        c.values = vals
    for c, vals in zip((c for c in cols if c.type == T_SET), set_values):
        c.values = vals
