"""The compiled row decoder's plan (dm_core/binlog/rowcodec.pyx): per column of a row image, the
kind of value and how ``decode.py``'s generated decoder would read it.

Why a plan: the C loop dispatches on a small integer per column and calls back into the Python
readers (``decode.py``) for the rare or possibly invalid values, so both decoders share one
definition of every value; ``tests/unit/test_binlog_rowcodec.py`` holds them to each other.
"""

from __future__ import annotations

import datetime
import importlib
from decimal import Decimal
from typing import Callable

from dm_core.binlog import compiled
from dm_core.binlog import events as ev
from dm_core.binlog.decode import (BINARY_COLLATION, UTC_CACHE, UnsupportedColumn, cached_reader, utc_miss,
                                   invalid_datetime, json_value, read_date, read_datetime, read_time,
                                   read_timestamp, text_or_bytes)
from dm_core.binlog.txn import RowChange

# The kinds the compiled decoder reads, in its ``KINDS`` order.
ROW_KINDS = ("absent", "int8", "uint8", "int16", "uint16", "int24", "uint24", "int32", "uint32",
             "int64", "uint64", "float", "double", "year", "decimal", "datetime2", "timestamp2", "date",
             "call", "enum", "set", "utf8", "bytes", "codec", "binary", "geometry", "json", "time2")
_K = {name: i for i, name in enumerate(ROW_KINDS)}
_INT_KIND = {ev.T_TINY: ("int8", "uint8", 1), ev.T_SHORT: ("int16", "uint16", 2),
             ev.T_INT24: ("int24", "uint24", 3), ev.T_LONG: ("int32", "uint32", 4),
             ev.T_LONGLONG: ("int64", "uint64", 8)}
# columns whose plan is the same whatever their metadata: (kind, a, b, aux)
_FIXED = {ev.T_FLOAT: ("float", 4, 0, None), ev.T_DOUBLE: ("double", 8, 0, None), ev.T_YEAR: ("year", 1, 0, None),
          ev.T_DATE: ("date", 3, 0, read_date), ev.T_NEWDATE: ("date", 3, 0, read_date),
          ev.T_TIME: ("call", 3, 0, read_time), ev.T_DATETIME: ("call", 8, 0, read_datetime),
          ev.T_TIMESTAMP: ("call", 4, 0, read_timestamp)}


def _datetime_or_text(y: int, mo: int, d: int, h: int, mi: int, s: int, micro: int, fsp: int):
    """DATETIME2 fields the compiled decoder did not take for a valid datetime."""
    try:
        return datetime.datetime(y, mo, d, h, mi, s, micro)
    except ValueError:
        return invalid_datetime(y, mo, d, h, mi, s, micro, fsp)


def _beyond_mysql(c: ev.ColumnDef) -> str | None:
    """What in a column's TABLE_MAP metadata no MySQL or MariaDB server writes (a damaged event),
    which the C loop must not take as sizes: refused, naming the column."""
    t = c.type
    if t == ev.T_NEWDECIMAL and not (0 <= c.scale <= 30 and 1 <= c.precision <= 65 and c.scale <= c.precision):
        return f"DECIMAL({c.precision}, {c.scale})"
    if t in (ev.T_DATETIME2, ev.T_TIMESTAMP2, ev.T_TIME2) and not 0 <= c.scale <= 6:
        return f"{c.scale} fractional digits"
    if t in (ev.T_ENUM, ev.T_SET) and not 1 <= c.length <= (2 if t == ev.T_ENUM else 8):
        return f"{c.length} storage bytes"
    if t in (ev.T_BLOB, ev.T_GEOMETRY, ev.T_JSON) and not 1 <= c.length <= 4:
        return f"a {c.length}-byte length"
    return None


def _column_plan(c: ev.ColumnDef, codec_of: Callable) -> tuple[str, int, int, object]:
    """(kind, a, b, aux) of one present column, read as ``_column_code`` reads it."""
    odd = _beyond_mysql(c)
    if odd is not None:
        raise UnsupportedColumn(f"column {c.name}: binlog column type {c.type} with {odd}, which no server writes "
                                f"(a damaged TABLE_MAP?)")
    t = c.type
    if t in _INT_KIND:
        signed, unsigned, size = _INT_KIND[t]
        return unsigned if c.unsigned else signed, size, 0, None
    if t in _FIXED:
        return _FIXED[t]
    if t == ev.T_NEWDECIMAL:
        return "decimal", c.precision, c.scale, (Decimal, cached_reader("dec", c.precision, c.scale))
    if t == ev.T_DATETIME2:
        return "datetime2", c.scale, 0, _datetime_or_text
    if t == ev.T_TIMESTAMP2:
        return "timestamp2", c.scale, 0, (UTC_CACHE, utc_miss)
    if t == ev.T_TIME2:
        return "time2", 3 + (c.scale + 1) // 2, c.scale, None
    if t == ev.T_BIT:
        return "call", (c.length + 7) // 8, 0, cached_reader("bit", c.length)
    if t == ev.T_ENUM:
        return "enum", c.length, 0, None if c.values is None else ("",) + tuple(c.values)
    if t == ev.T_SET:
        return "set", c.length, 0, None if c.values is None else tuple(c.values)
    if t in (ev.T_VARCHAR, ev.T_STRING, ev.T_BLOB):
        prefix = c.length if t == ev.T_BLOB else 2 if c.length > 255 else 1
        if t == ev.T_STRING and c.collation == BINARY_COLLATION:
            return "binary", prefix, c.length, None
        codec = codec_of(c.collation)
        if codec is None:
            return "bytes", prefix, 0, None
        return ("utf8", prefix, 0, None) if codec == "utf-8" else ("codec", prefix, 0, (text_or_bytes, codec))
    if t == ev.T_GEOMETRY:
        return "geometry", c.length, 0, None
    if t == ev.T_JSON:
        return "json", c.length, 0, json_value
    raise UnsupportedColumn(f"column {c.name}: binlog column type {t} is not supported")


def row_plan(cols: list[ev.ColumnDef], present: int, codec_of: Callable) -> list[tuple]:
    """One row image's plan for the compiled decoder: ``(name, kind, a, b, nullable, aux)`` per column."""
    plan = []
    for c in cols:
        if present >> c.index & 1:
            kind, a, b, aux = _column_plan(c, codec_of)
            plan.append((c.name, _K[kind], a, b, bool(c.nullable), aux))
        else:
            plan.append((c.name, _K["absent"], 0, 0, False, None))
    return plan


def _load_rowcodec():
    """The compiled decoder module while the binlog build is active (dm_core/binlog/compiled.py), else None."""
    if not compiled.active:
        return None
    # by name: an extension module of this package, found on the path compiled.activate set
    module = importlib.import_module("dm_core.binlog.rowcodec")
    if tuple(module.KINDS) != ROW_KINDS:
        raise ImportError("dm_core/binlog/rowcodec.pyx and row_plan.ROW_KINDS list different kinds")
    return module


rowcodec = _load_rowcodec()


def compiled_decoder(schema: str, table: str, cols: list[ev.ColumnDef], op: str, present: int, present2: int,
                     codec_of: Callable) -> Callable | None:
    """The compiled decoder of one ROWS event shape (``decode.generate``'s twin), or None while
    the build is not active."""
    if rowcodec is None:
        return None
    return rowcodec.Rows(op, schema, table, RowChange, rowcodec.Image(row_plan(cols, present, codec_of)),
                         rowcodec.Image(row_plan(cols, present2, codec_of)) if op == "update" else None)
