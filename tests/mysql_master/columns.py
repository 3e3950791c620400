"""Column specs: from ``"price DECIMAL(10,2) UNSIGNED NOT NULL"`` to what TABLE_MAP and row
events need (type code, metadata bytes, charset, members) and to the value encoder.

TABLE_MAP column types and metadata, as MySQL writes them (binlog_type() of each field):
- integers: TINY 1, SHORT 2, INT24 9, LONG 3, LONGLONG 8; YEAR 13; DATE 10 — no metadata;
- FLOAT 4 / DOUBLE 5: 1 byte, the pack length (4 / 8);
- NEWDECIMAL 246: precision, scale;
- TIMESTAMP2 17, DATETIME2 18, TIME2 19: 1 byte, the fractional-second precision;
- VARCHAR/VARBINARY 15: 2 bytes little-endian, the maximum length in bytes;
- CHAR/BINARY, ENUM, SET: STRING 254 with 2 bytes: for CHAR the real type 254 with bits 8-9
  of the byte length XORed into its bits 4-5, then the low byte; for ENUM/SET the real type
  (247/248) and the pack length;
- BLOB/TEXT (all four sizes) 252 and JSON 245: 1 byte, the length prefix size (1-4 / 4);
- BIT 16: bits % 8, bits // 8.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pymysql.charset import charset_by_id, charset_by_name

from tests.mysql_master import jsonbin, values

T_DECIMAL, T_TINY, T_SHORT, T_LONG, T_FLOAT, T_DOUBLE = 0, 1, 2, 3, 4, 5
T_LONGLONG, T_INT24, T_DATE, T_YEAR, T_VARCHAR, T_BIT = 8, 9, 10, 13, 15, 16
T_TIMESTAMP2, T_DATETIME2, T_TIME2 = 17, 18, 19
T_JSON, T_NEWDECIMAL, T_ENUM, T_SET, T_BLOB, T_STRING = 245, 246, 247, 248, 252, 254

# Columns with a bit in the signedness metadata: MySQL's has_signedess_information_type()
# (sql/field_common_properties.h), which counts YEAR (MySQL writes its bit as 0, MariaDB as 1)
# and the old DECIMAL; a reader that skips YEAR assigns every later bit to the wrong column.
SIGNEDNESS_TYPES = frozenset((T_DECIMAL, T_TINY, T_SHORT, T_INT24, T_LONG, T_LONGLONG, T_YEAR, T_NEWDECIMAL,
                              T_FLOAT, T_DOUBLE))
# Character columns in the charset metadata (ENUM/SET count separately, JSON not at all).
CHARACTER_TYPES = frozenset((T_STRING, T_VARCHAR, T_BLOB))

_INTS = {"tinyint": (T_TINY, 1), "smallint": (T_SHORT, 2), "mediumint": (T_INT24, 3), "int": (T_LONG, 4),
         "integer": (T_LONG, 4), "bigint": (T_LONGLONG, 8)}
_BLOBS = {"tinyblob": 1, "blob": 2, "mediumblob": 3, "longblob": 4,
          "tinytext": 1, "text": 2, "mediumtext": 3, "longtext": 4}
_MBMAX = {"utf8mb4": 4, "utf8mb3": 3, "utf8": 3, "gbk": 2, "gb18030": 4, "ucs2": 2, "utf16": 4, "utf32": 4}


@dataclass
class Column:
    name: str
    sql_type: str                 # lower-case base type: "int", "varchar", "enum", ...
    type: int                     # TABLE_MAP type code
    meta: bytes                   # TABLE_MAP metadata bytes
    nullable: bool = True
    unsigned: bool = False
    primary: bool = False
    visible: bool = True
    collation: int | None = None  # character, ENUM and SET columns
    members: tuple[str, ...] = ()
    size: int = 0                 # ints/floats: bytes; strings: max bytes; blobs: prefix; bit: bits
    precision: int = 0
    scale: int = 0                # DECIMAL scale; temporal fsp
    text: str = ""                # the spec as given (for CREATE TABLE)

    @property
    def real_type(self) -> int:
        return self.meta[0] if self.type == T_STRING and self.meta[0] in (T_ENUM, T_SET) else self.type

    @property
    def encoding(self) -> str:
        cs = charset_by_id(self.collation) if self.collation is not None else None
        return "latin1" if cs and cs.name == "latin1" else (cs.encoding if cs else "utf-8")

    def encode(self, v) -> bytes:
        """The value's bytes in a row image (never called for NULL)."""
        t = self.real_type
        if t in (T_TINY, T_SHORT, T_INT24, T_LONG, T_LONGLONG):
            return values.integer(v, self.size, self.unsigned)
        if t in (T_FLOAT, T_DOUBLE):
            return values.real(v, self.size)
        if t == T_NEWDECIMAL:
            return values.decimal_bytes(v, self.precision, self.scale)
        if t == T_YEAR:
            return values.year(v)
        if t == T_DATE:
            return values.date3(v)
        if t == T_DATETIME2:
            return values.datetime2(v, self.scale)
        if t == T_TIMESTAMP2:
            return values.timestamp2(v, self.scale)
        if t == T_TIME2:
            return values.time2(v, self.scale)
        if t == T_ENUM:
            return values.enum_index(v, self.members).to_bytes(self.size, "little")
        if t == T_SET:
            return values.set_bits(v, self.members).to_bytes(self.size, "little")
        if t == T_BIT:
            return values.bit(v, self.size)
        if t == T_JSON:
            return values.length_prefixed(v if isinstance(v, bytes) else jsonbin.encode(v), 4)
        data = v.encode(self.encoding) if isinstance(v, str) else bytes(v)
        if t == T_BLOB:
            return values.length_prefixed(data, self.size)
        return values.length_prefixed(data, 1 if self.size < 256 else 2)   # CHAR, VARCHAR


_SPEC = re.compile(r"^\s*(`(?:[^`]|``)+`|\w+)\s+(\w+)\s*(\((?:'(?:[^']|'')*'|[^)'])*\))?\s*(.*)$", re.S | re.I)


def parse(spec: str, utf8mb4_collation: int) -> Column:
    """One column from ``"name TYPE[(args)] [UNSIGNED] [CHARSET x] [COLLATE y] [NOT NULL]
    [PRIMARY KEY] [INVISIBLE]"``; character columns default to utf8mb4 (``utf8mb4_collation``)."""
    m = _SPEC.match(spec)
    if not m:
        raise ValueError(f"cannot read column spec {spec!r}")
    name = m[1].strip("`").replace("``", "`")
    base = m[2].lower()
    args = m[3][1:-1] if m[3] else ""
    rest = " " + m[4].upper() + " "
    collation = _collation(m[4], utf8mb4_collation, binary=base in ("binary", "varbinary") or base.endswith("blob"))
    col = Column(name, base, 0, b"", nullable=" NOT NULL " not in rest and " PRIMARY KEY " not in rest,
                 unsigned=" UNSIGNED " in rest, primary=" PRIMARY KEY " in rest, visible=" INVISIBLE " not in rest,
                 text=spec.strip())
    mbmax = _mbmax(collation)
    nums = [int(x) for x in re.findall(r"\d+", args)] if base not in ("enum", "set") else []
    if base in _INTS:
        col.type, col.size = _INTS[base]
    elif base in ("decimal", "numeric", "dec"):
        col.precision = nums[0] if nums else 10
        col.scale = nums[1] if len(nums) > 1 else 0
        col.type, col.meta = T_NEWDECIMAL, bytes([col.precision, col.scale])
    elif base == "float":
        col.type, col.size, col.meta = T_FLOAT, 4, b"\x04"
    elif base in ("double", "real"):
        col.type, col.size, col.meta = T_DOUBLE, 8, b"\x08"
    elif base == "year":
        col.type = T_YEAR
    elif base == "date":
        col.type = T_DATE
    elif base in ("datetime", "timestamp", "time"):
        col.scale = nums[0] if nums else 0
        col.type = {"datetime": T_DATETIME2, "timestamp": T_TIMESTAMP2, "time": T_TIME2}[base]
        col.meta = bytes([col.scale])
    elif base in ("char", "binary"):
        col.size = (nums[0] if nums else 1) * mbmax
        col.type = T_STRING
        col.meta = bytes([T_STRING ^ ((col.size & 0x300) >> 4), col.size & 0xFF])
        col.collation = collation
    elif base in ("varchar", "varbinary"):
        col.size = nums[0] * mbmax
        col.type, col.meta, col.collation = T_VARCHAR, col.size.to_bytes(2, "little"), collation
    elif base in _BLOBS:
        col.size = _BLOBS[base]
        col.type, col.meta, col.collation = T_BLOB, bytes([col.size]), collation
    elif base == "json":
        col.type, col.size, col.meta = T_JSON, 4, b"\x04"
    elif base in ("enum", "set"):
        col.members = tuple(v.replace("''", "'") for v in re.findall(r"'((?:[^']|'')*)'", args))
        n = len(col.members)
        if base == "enum":
            col.size = 1 if n < 256 else 2
        else:
            col.size = (n + 7) // 8
            col.size = 8 if col.size > 4 else col.size
        col.type = T_STRING
        col.meta = bytes([T_ENUM if base == "enum" else T_SET, col.size])
        col.collation = collation
    elif base == "bit":
        col.size = nums[0] if nums else 1
        col.type, col.meta = T_BIT, bytes([col.size % 8, col.size // 8])
    else:
        raise ValueError(f"column type {base!r} is not supported by the encoder")
    return col


def _collation(rest: str, utf8mb4_collation: int, binary: bool) -> int:
    m = re.search(r"\bCOLLATE\s+(\w+)", rest, re.I)
    if m:
        from pymysql.charset import _charsets

        for cs in _charsets._by_id.values():
            if cs.collation == m[1].lower():
                return cs.id
        raise ValueError(f"unknown collation {m[1]}")
    m = re.search(r"\b(?:CHARSET|CHARACTER\s+SET)\s+(\w+)", rest, re.I)
    name = m[1].lower() if m else ("binary" if binary else "utf8mb4")
    if name == "binary":
        return 63
    if name == "utf8mb4":
        return utf8mb4_collation
    if name in ("utf8", "utf8mb3"):
        return 33
    cs = charset_by_name(name)
    if cs is None:
        raise ValueError(f"unknown charset {name}")
    return cs.id


def _mbmax(collation: int) -> int:
    cs = charset_by_id(collation)
    return _MBMAX.get(cs.name, 1) if cs else 1


def create_table_sql(schema: str, table: str, columns: list[Column]) -> str:
    """A CREATE TABLE statement for the spec (to log as DDL, or to run on the backing server)."""
    defs = [c.text for c in columns]
    return f"CREATE TABLE `{schema}`.`{table}` ({', '.join(defs)})"
