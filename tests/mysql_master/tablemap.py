"""TABLE_MAP and v2 row event bodies for a table given as column specs.

TABLE_MAP body: table id (6 bytes), flags (2; MySQL writes 1, TM_BIT_LEN_EXACT_F), schema
and table (length byte, name, NUL), column count (packed), one type byte per column, the
metadata block (packed length, bytes), the nullability bitmap, then optional metadata as
TLVs (type byte, packed length, value).

Optional metadata, following MySQL 8's Table_map_log_event::init_metadata_fields:
binlog_row_metadata=MINIMAL writes SIGNEDNESS (one bit per numeric column, most significant
bit first, 1 = unsigned) and the charsets of character columns; FULL adds COLUMN_NAME, the
ENUM/SET charsets, SET_STR_VALUE, ENUM_STR_VALUE, SIMPLE_PRIMARY_KEY and COLUMN_VISIBILITY
(8.0.23+), in that order. A charset field is DEFAULT_CHARSET (the most used collation, then
(index, collation) pairs for the others) unless listing every column (COLUMN_CHARSET) is
shorter by MySQL's estimate: ``n < 1 + 2 * (n - uses of the most used)``.

Row events v2: table id, flags (STMT_END_F = 1 on a statement's last event), extra-data
length 2 (none), column count, the columns-present bitmap (twice for UPDATE: before and
after image), then per row a NULL bitmap over the present columns and the non-NULL values.
"""

from __future__ import annotations

import struct
from collections import Counter

from tests.mysql_master.columns import CHARACTER_TYPES, SIGNEDNESS_TYPES, T_ENUM, T_SET, Column
from tests.mysql_master.protocol import lenenc_int, lenenc_str

OM_SIGNEDNESS, OM_DEFAULT_CHARSET, OM_COLUMN_CHARSET, OM_COLUMN_NAME = 1, 2, 3, 4
OM_SET_STR_VALUE, OM_ENUM_STR_VALUE, OM_SIMPLE_PRIMARY_KEY = 5, 6, 8
OM_ENUM_AND_SET_DEFAULT_CHARSET, OM_ENUM_AND_SET_COLUMN_CHARSET, OM_COLUMN_VISIBILITY = 10, 11, 12
STMT_END_F = 1


def table_map(table_id: int, schema: str, table: str, cols: list[Column], row_metadata: str,
              visibility: bool = True) -> bytes:
    """``row_metadata``: "NONE" (5.7: no optional metadata), "MINIMAL" or "FULL"."""
    meta = b"".join(c.meta for c in cols)
    nulls = sum(1 << i for i, c in enumerate(cols) if c.nullable).to_bytes((len(cols) + 7) // 8, "little")
    s, t = schema.encode(), table.encode()
    body = (table_id.to_bytes(6, "little") + struct.pack("<H", 1) + bytes([len(s)]) + s + b"\x00"
            + bytes([len(t)]) + t + b"\x00" + lenenc_int(len(cols)) + bytes(c.type for c in cols)
            + lenenc_str(meta) + nulls)
    return body + optional_metadata(cols, row_metadata, visibility)


def optional_metadata(cols: list[Column], level: str, visibility: bool = True) -> bytes:
    level = level.upper()
    if level not in ("MINIMAL", "FULL"):
        return b""
    out = bytearray()
    numeric = [c for c in cols if c.type in SIGNEDNESS_TYPES]
    if numeric:
        bits = bytearray((len(numeric) + 7) // 8)
        for i, c in enumerate(numeric):
            if c.unsigned:
                bits[i // 8] |= 0x80 >> (i % 8)
        out += _tlv(OM_SIGNEDNESS, bytes(bits))
    character = [c for c in cols if c.type in CHARACTER_TYPES and c.real_type not in (T_ENUM, T_SET)]
    out += _charsets(character, OM_DEFAULT_CHARSET, OM_COLUMN_CHARSET)
    if level != "FULL":
        return bytes(out)
    out += _tlv(OM_COLUMN_NAME, b"".join(lenenc_str(c.name.encode()) for c in cols))
    enum_set = [c for c in cols if c.real_type in (T_ENUM, T_SET)]
    out += _charsets(enum_set, OM_ENUM_AND_SET_DEFAULT_CHARSET, OM_ENUM_AND_SET_COLUMN_CHARSET)
    for kind, real in ((OM_SET_STR_VALUE, T_SET), (OM_ENUM_STR_VALUE, T_ENUM)):
        members = [c for c in cols if c.real_type == real]
        if members:
            out += _tlv(kind, b"".join(lenenc_int(len(c.members)) + b"".join(
                lenenc_str(m.encode(c.encoding)) for m in c.members) for c in members))
    pk = [i for i, c in enumerate(cols) if c.primary]
    if pk:
        out += _tlv(OM_SIMPLE_PRIMARY_KEY, b"".join(lenenc_int(i) for i in pk))
    if visibility:
        bits = bytearray((len(cols) + 7) // 8)
        for i, c in enumerate(cols):
            if c.visible:
                bits[i // 8] |= 0x80 >> (i % 8)
        out += _tlv(OM_COLUMN_VISIBILITY, bytes(bits))
    return bytes(out)


def _tlv(kind: int, value: bytes) -> bytes:
    return bytes([kind]) + lenenc_int(len(value)) + value


def _charsets(cols: list[Column], default_kind: int, column_kind: int) -> bytes:
    if not cols:
        return b""
    counts = Counter(c.collation for c in cols)
    default, uses = counts.most_common(1)[0]
    n = len(cols)
    if n < 1 + (n - uses) * 2:
        return _tlv(column_kind, b"".join(lenenc_int(c.collation) for c in cols))
    pairs = b"".join(lenenc_int(i) + lenenc_int(c.collation) for i, c in enumerate(cols) if c.collation != default)
    return _tlv(default_kind, lenenc_int(default) + pairs)


def _bitmap(n: int) -> bytes:
    return bytes([0xFF] * (n // 8) + ([(1 << (n % 8)) - 1] if n % 8 else []))


def _image(cols: list[Column], row) -> bytes:
    vals = [row.get(c.name) for c in cols] if isinstance(row, dict) else list(row)
    if len(vals) != len(cols):
        raise ValueError(f"row has {len(vals)} values for {len(cols)} columns")
    nbytes = (len(cols) + 7) // 8
    # as MySQL's pack_row: the unused high bits of the last byte are set, like NULLs
    bits = sum(1 << i for i, v in enumerate(vals) if v is None) | (((1 << (8 * nbytes)) - 1) ^ ((1 << len(cols)) - 1))
    return bits.to_bytes(nbytes, "little") + b"".join(c.encode(v) for c, v in zip(cols, vals) if v is not None)


def rows(table_id: int, cols: list[Column], images: list, *, update: bool, last: bool) -> bytes:
    """A WRITE/DELETE (``images``: rows) or UPDATE (``images``: (before, after) pairs) body."""
    head = table_id.to_bytes(6, "little") + struct.pack("<HH", STMT_END_F if last else 0, 2)
    head += lenenc_int(len(cols)) + _bitmap(len(cols)) + (_bitmap(len(cols)) if update else b"")
    if update:
        data = b"".join(_image(cols, b) + _image(cols, a) for b, a in images)
    else:
        data = b"".join(_image(cols, r) for r in images)
    return head + data
