"""MySQL's binary JSON (the storage format of JSON columns, as row events carry it).

Written from the format's description in MySQL's json_binary.h: a document is a type byte
and a value. Objects and arrays come in a small (2-byte counts and offsets) and a large
(4-byte) form: element count, total size, then entries (objects: key offset + key length;
both: value type + offset, or the value itself when it fits the offset field), then the keys,
then the values; offsets count from the first byte after the type byte. Object keys are
sorted shortest first, then bytewise. Strings and opaque data are prefixed by a variable
length, 7 bits per byte, low bits first, high bit set on every byte but the last.

Python → JSON: dict, list/tuple, str, bool, int (int16/int32/int64, uint64 above 2**63-1),
float (double), None or ``JSON_NULL`` (the JSON literal null), and as MySQL's opaque
scalars: ``decimal.Decimal``, ``datetime.datetime``, ``datetime.date``, ``datetime.timedelta``
(a TIME).
"""

from __future__ import annotations

import datetime
import decimal
import struct

from tests.mysql_master.values import decimal_bytes, decimal_shape, packed_datetime, packed_time

SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY, LITERAL = 0x0, 0x1, 0x2, 0x3, 0x4
INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING, OPAQUE = 0x5, 0x6, 0x7, 0x8, 0x9, 0xA, 0xB, 0xC, 0xF
LIT_NULL, LIT_TRUE, LIT_FALSE = 0x0, 0x1, 0x2


class _JsonNull:
    """The JSON literal null inside a document (Python None at the top of a row is SQL NULL)."""

    def __repr__(self):
        return "JSON_NULL"


JSON_NULL = _JsonNull()


def encode(doc) -> bytes:
    """The binary JSON of ``doc`` (type byte first)."""
    t, body = _value(doc)
    return bytes([t]) + body


def var_length(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _value(v) -> tuple[int, bytes]:
    if v is None or v is JSON_NULL:
        return LITERAL, bytes([LIT_NULL])
    if v is True:
        return LITERAL, bytes([LIT_TRUE])
    if v is False:
        return LITERAL, bytes([LIT_FALSE])
    if isinstance(v, int):
        if -(1 << 15) <= v < 1 << 15:
            return INT16, struct.pack("<h", v)
        if -(1 << 31) <= v < 1 << 31:
            return INT32, struct.pack("<i", v)
        if -(1 << 63) <= v < 1 << 63:
            return INT64, struct.pack("<q", v)
        return UINT64, struct.pack("<Q", v)
    if isinstance(v, float):
        return DOUBLE, struct.pack("<d", v)
    if isinstance(v, str):
        data = v.encode("utf-8")
        return STRING, var_length(len(data)) + data
    if isinstance(v, dict):
        return _container(list(v.items()), True)
    if isinstance(v, (list, tuple)):
        return _container(list(v), False)
    if isinstance(v, (decimal.Decimal, datetime.date, datetime.timedelta)):
        ftype, data = _opaque(v)
        return OPAQUE, bytes([ftype]) + var_length(len(data)) + data
    raise TypeError(f"cannot encode {type(v).__name__} as MySQL JSON")


def _inlined(t: int, large: bool) -> bool:
    return t in (LITERAL, INT16, UINT16) or (large and t in (INT32, UINT32))


def _container(items: list, is_object: bool) -> tuple[int, bytes]:
    if is_object:
        items = sorted(((str(k).encode("utf-8"), val) for k, val in items), key=lambda kv: (len(kv[0]), kv[0]))
    for large in (False, True):
        out = _layout(items, is_object, large)
        if out is not None:
            kind = (LARGE_OBJECT if large else SMALL_OBJECT) if is_object else (LARGE_ARRAY if large else SMALL_ARRAY)
            return kind, out
    raise ValueError("JSON document too large")


def _layout(items: list, is_object: bool, large: bool) -> bytes | None:
    """The object/array body in the small or large form; None if it does not fit the small one."""
    w = 4 if large else 2
    limit = 1 << (8 * w)
    n = len(items)
    header = 2 * w + (n * (w + 2) if is_object else 0) + n * (1 + w)
    keys = [k for k, _ in items] if is_object else []
    values = [val for _, val in items] if is_object else items
    encoded = [_value(val) for val in values]
    offset = header
    key_entries, key_bytes = [], []
    for k in keys:
        if offset >= limit or len(k) > 0xFFFF:
            return None
        key_entries.append(offset.to_bytes(w, "little") + struct.pack("<H", len(k)))
        key_bytes.append(k)
        offset += len(k)
    value_entries, value_bytes = [], []
    for t, body in encoded:
        if _inlined(t, large):
            value_entries.append(bytes([t]) + body.ljust(w, b"\x00"))
            continue
        if offset >= limit:
            return None
        value_entries.append(bytes([t]) + offset.to_bytes(w, "little"))
        value_bytes.append(body)
        offset += len(body)
    if offset >= limit:
        return None
    return (n.to_bytes(w, "little") + offset.to_bytes(w, "little") + b"".join(key_entries)
            + b"".join(value_entries) + b"".join(key_bytes) + b"".join(value_bytes))


def _opaque(v) -> tuple[int, bytes]:
    """MySQL's opaque scalars: (field type, data). Dates and times as their 8-byte packed
    integer (little-endian), a DECIMAL as precision, scale and its binary form."""
    if isinstance(v, decimal.Decimal):
        precision, scale = decimal_shape(v)
        return 246, bytes([precision, scale]) + decimal_bytes(v, precision, scale)
    if isinstance(v, datetime.datetime):
        return 12, struct.pack("<q", packed_datetime(v))
    if isinstance(v, datetime.date):
        return 10, struct.pack("<q", packed_datetime(datetime.datetime(v.year, v.month, v.day)))
    return 11, struct.pack("<q", packed_time(v))
