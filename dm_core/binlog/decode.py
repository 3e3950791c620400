"""Row images → Python values, through one decoder generated per table.

Why generated code: a ROWS event is a run of row images whose layout is fixed by the
TABLE_MAP (column types, lengths, nullability), so the per-column "what type is this?"
dispatch that a generic decoder pays on every value is paid here once, when the table is
first seen. ``generate`` turns a TABLE_MAP's columns and a ROWS event's column bitmaps into
a function ``(buf, p, end) -> list[RowChange]`` that is plain straight-line Python (one
struct call for adjacent fixed-width NOT NULL columns, slices for strings, DECIMAL/DATETIME2/TIMESTAMP2 inlined as integer arithmetic, small helpers for
the rarer TIME/BIT/SET/JSON values), built with ``exec`` and cached by the TABLE_MAP
bytes by ``codec.compile_table``, so a table costs one compile per process. While the compiled
build is active ``row_plan.py`` and ``rowcodec.pyx`` read the images in C instead, calling
back into the readers here for the rarer values. NULL bits are tested only for columns
the TABLE_MAP marks nullable.

Values are those mysql-replication 1.0.17 yields (the reader this replaces), except where
the library changes a value (negative TIME with a fraction, YEAR 0, the zero TIMESTAMP, the
five latin1 bytes Windows-1252 leaves undefined) or leaves it raw (MySQL JSON):

- integers signed/unsigned per binlog_row_metadata signedness; FLOAT widened from single;
- DECIMAL → ``Decimal`` with the column's scale as exponent;
- DATE / DATETIME(2) → ``date`` / naive ``datetime``; zero or invalid dates (``0000-00-00``,
  ``2024-02-31`` under ALLOW_INVALID_DATES) → their text, written back as they were (NULL would
  break a NOT NULL column, and is another value);
- TIMESTAMP(2) → naive UTC ``datetime`` (``utcfromtimestamp``), whatever the session zone; the
  zero TIMESTAMP (0 seconds) → its text ``0000-00-00 00:00:00`` (the epoch is not a TIMESTAMP
  value: the library's 1970-01-01 00:00:00 is refused downstream);
- TIME(2) → ``timedelta`` (negative values with fractions are decoded right, which the
  library does not do: see ``make_time2``);
- YEAR → stored byte + 1900, and 0 for YEAR 0000 (stored as 0; the library reads 1900);
- CHAR/VARCHAR/TEXT → ``str`` in the column charset (latin1 read as the server reads it:
  Windows-1252 with its five undefined bytes as U+0081, U+008D, U+008F, U+0090, U+009D); binary
  charsets (BINARY, VARBINARY, BLOB) and charsets Python lacks → ``bytes``, except that
  an empty value is ``''``; GEOMETRY → ``bytes``;
- ENUM → member string ('' for the error value 0); SET → ``set`` of members, empty → ``None``;
- BIT → ``Bits``: a string of '0'/'1' digits, one per bit, written back as a bit literal;
- MySQL binary JSON (the library gives bytes keys and strings) → ``dict`` / ``list`` holding ``str``
  keys in stored order, ``str`` strings, ``int`` (int16 to uint64, exact), ``float`` (double),
  ``True`` / ``False`` / ``None``; opaque DECIMAL → ``Decimal`` with its scale; opaque DATE / TIME /
  DATETIME / TIMESTAMP → the text MySQL shows for them (``2024-02-29``, ``-838:59:59.000000``,
  ``2024-02-29 12:34:56.000000``); other opaque values → ``base64:type<N>:…``, as MySQL shows them.
  A document that is a bare scalar → ``jsondoc.JsonText``, its JSON text (JSON ``null`` is not SQL
  NULL). MariaDB has no binary JSON: its JSON is LONGTEXT → ``str``.
- without logged column names (binlog_row_metadata=MINIMAL) columns are named
  ``UNKNOWN_COLn`` and read as signed / utf-8, again like the library.
"""

from __future__ import annotations

import base64
import codecs
import datetime
import decimal
import struct
from decimal import Decimal
from typing import Callable

from dm_core.binlog import events as ev
from dm_core.binlog.txn import RowChange
from dm_core.bits import Bits
from dm_core.jsondoc import JsonText, json_text

_EPOCH = datetime.datetime(1970, 1, 1)
_TD = datetime.timedelta
_DT = datetime.datetime
_DATE = datetime.date
_ifb = int.from_bytes

# ---- charsets ---------------------------------------------------------------------------------


def _server_latin1():
    """MySQL's and MariaDB's latin1: Windows-1252, whose five undefined bytes the server maps to
    the C1 control characters of the same number (Python's cp1252 refuses them).

    >>> bytes(range(0x80, 0xa0)).decode("mysql_latin1")[:3], b"\\x81\\x8d".decode("mysql_latin1")
    ('€\\x81‚', '\\x81\\x8d')
    >>> "\\x81€".encode("mysql_latin1")
    b'\\x81\\x80'
    """
    table = "".join(bytes([b]).decode("cp1252", errors="ignore") or chr(b) for b in range(256))
    enc = codecs.charmap_build(table)

    class Codec(codecs.Codec):
        def encode(self, text, errors="strict"):
            return codecs.charmap_encode(text, errors, enc)

        def decode(self, data, errors="strict"):
            return codecs.charmap_decode(data, errors, table)

    return codecs.CodecInfo(name="mysql_latin1", encode=Codec().encode, decode=Codec().decode)


_LATIN1 = _server_latin1()
codecs.register(lambda name: _LATIN1 if name == "mysql_latin1" else None)


def python_codec(charset: str | None) -> str | None:
    """A MySQL charset name → the Python codec that decodes it (None: keep bytes)."""
    if charset is None:
        return "utf-8"
    name = {"utf8mb4": "utf8", "utf8mb3": "utf8", "latin1": "mysql_latin1",
            "koi8r": "koi8_r", "koi8u": "koi8_u"}.get(charset, charset)
    try:
        return codecs.lookup(name).name
    except LookupError:  # "binary", and charsets Python does not have (swe7, dec8, ...)
        return None


# ---- value readers (inlined line generators, or helpers cached per column shape) ---------------
def _fsp(fsp: int) -> tuple[int, int, int]:
    """Fractional seconds: (bytes, odd, multiplier to microseconds)."""
    return (fsp + 1) // 2, fsp % 2, 10 ** (6 - fsp) if fsp else 0


def _frac_expr(fsp: int) -> str:
    """Microseconds from the low ``(fsp + 1) // 2`` bytes of ``x`` (odd fsp: stored x10)."""
    fb, odd, mult = _fsp(fsp)
    e = f"(x & {(1 << 8 * fb) - 1})"
    if odd:
        e += " // 10"
    return e + (f" * {mult}" if mult != 1 else "")


def datetime2_lines(v: str, fsp: int) -> list[str]:
    """DATETIME2: 5 bytes big-endian (sign 1, year*13+month 17, day 5, hour 5, minute 6,
    second 6) + fraction; a zero or invalid date reads as its text."""
    fb = (fsp + 1) // 2
    sh = 8 * fb
    micro = f", {_frac_expr(fsp)}" if fb else ""
    return [f"x = _ifb(buf[p:p + {5 + fb}], 'big')",
            f"ym = x >> {22 + sh} & 131071",
            "try:",
            f"    {v} = _DT(ym // 13, ym % 13, x >> {17 + sh} & 31, x >> {12 + sh} & 31, "
            f"x >> {6 + sh} & 63, x >> {sh} & 63{micro})",
            "except ValueError:",
            f"    {v} = _invalid_dt(ym // 13, ym % 13, x >> {17 + sh} & 31, x >> {12 + sh} & 31, x >> {6 + sh} & 63, "
            f"x >> {sh} & 63, {_frac_expr(fsp) if fb else 0}, {fsp})",
            f"p += {5 + fb}"]


UTC_CACHE: dict[int, datetime.datetime] = {}


ZERO_TIMESTAMP = "0000-00-00 00:00:00"


def utc_miss(secs: int) -> datetime.datetime | str:
    """Seconds since the epoch (u32 as read) → naive UTC datetime, remembered; 0 is the zero
    TIMESTAMP, kept as its text as zero DATETIMEs are.

    >>> utc_miss(1), utc_miss(0)
    (datetime.datetime(1970, 1, 1, 0, 0, 1), '0000-00-00 00:00:00')
    """
    if len(UTC_CACHE) > 65536:
        UTC_CACHE.clear()
    d = UTC_CACHE[secs] = _EPOCH + _TD(0, secs - (1 << 32) if secs >> 31 else secs) if secs else ZERO_TIMESTAMP
    return d


def timestamp2_lines(v: str, fsp: int) -> list[str]:
    """TIMESTAMP2: 4 bytes big-endian seconds + fraction → naive UTC datetime.

    Rows written in one second share their seconds, so the datetime is cached by them.
    """
    fb = (fsp + 1) // 2
    sh = 8 * fb
    sec = f"x >> {sh}" if fb else "x"
    lines = [f"x = _ifb(buf[p:p + {4 + fb}], 'big')",
             f"{v} = _utc.get({sec})",
             f"if {v} is None:",
             f"    {v} = _utc_miss({sec})"]
    if fb:
        lines += [f"m = {_frac_expr(fsp)}", "if m:", f"    {v} = {v}.replace(microsecond=m)"]
    return lines + [f"p += {4 + fb}"]


def make_time2(fsp: int) -> Callable:
    """TIME2: 3 bytes big-endian (sign 1, unused 1, hour 10, minute 6, second 6), offset by
    0x800000, + fraction; a negative time with a fraction stores the integral part one
    lower and the fraction as its complement (MySQL's my_time_packed_from_binary).

    This is the one value where we part from mysql-replication 1.0.17 on purpose: it
    negates the 3 integral bytes and adds the raw fraction, so e.g. '-01:00:00.25' came
    back as -1:00:00.75. Non-negative times and negative whole seconds read the same.
    """
    fb = (fsp + 1) // 2

    def packed(buf, p):  # → (integral part, microseconds), both signed
        ip = (buf[p] << 16 | buf[p + 1] << 8 | buf[p + 2]) - 0x800000
        if fb == 0:
            return ip, 0
        if fb == 3:
            v = _ifb(buf[p:p + 6], "big") - 0x800000000000
            return v >> 24, v & 0xFFFFFF  # floor split: v = ip * 2**24 + frac, 0 <= frac
        frac = _ifb(buf[p + 3:p + 3 + fb], "big")
        if ip < 0 and frac:
            ip += 1
            frac -= 1 << (8 * fb)
        return ip, frac * (10000 if fb == 1 else 100)

    def time2(buf, p):
        ip, frac = packed(buf, p)
        v = (ip << 24) + frac
        if v < 0:
            v = -v
            h = v >> 24
            return -_TD(0, (h >> 12 & 0x3FF) * 3600 + (h >> 6 & 63) * 60 + (h & 63), v & 0xFFFFFF)
        h = v >> 24
        return _TD(0, (h >> 12 & 0x3FF) * 3600 + (h >> 6 & 63) * 60 + (h & 63), v & 0xFFFFFF)
    return time2


def read_date(buf, p):
    v = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
    y, m, d = v >> 9 & 0x7FFF, v >> 5 & 15, v & 31
    try:
        return _DATE(y, m, d)
    except ValueError:  # zero or invalid: its text
        return f"{y:04d}-{m:02d}-{d:02d}"


def invalid_datetime(y: int, mo: int, d: int, h: int, mi: int, s: int, micro: int = 0, fsp: int = 0) -> str:
    """The text of a DATETIME the ``datetime`` type cannot hold (zero or invalid date).

    >>> invalid_datetime(0, 0, 0, 0, 0, 1), invalid_datetime(2024, 2, 31, 12, 0, 0, 500000, 3)
    ('0000-00-00 00:00:01', '2024-02-31 12:00:00.500')
    """
    text = f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}"
    return f"{text}.{micro:06d}"[:20 + fsp] if fsp else text


def text_or_bytes(raw, codec: str):
    """Text in a charset Python reads differently from the server: the ``str``, or the value's
    bytes when Python's codec refuses them (GBK's user-defined area, which the server keeps and
    Unicode lacks). Bytes are written back as a binary string, which lands in a column of the
    same charset as the same bytes.

    >>> text_or_bytes(b"\\xba\\xba", "gbk"), text_or_bytes(b"\\xaa\\xa1", "gbk")
    ('汉', b'\\xaa\\xa1')
    """
    try:
        return raw.decode(codec)
    except UnicodeDecodeError:
        return bytes(raw)


def read_time(buf, p):
    t = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
    return _TD(hours=t // 10000, minutes=t % 10000 // 100, seconds=t % 100)


def read_datetime(buf, p):
    v = _ifb(buf[p:p + 8], "little")
    d, t = divmod(v, 1000000)
    y, m, day = d // 10000, d % 10000 // 100, d % 100
    try:
        return _DT(y, m, day, t // 10000, t % 10000 // 100, t % 100)
    except ValueError:  # zero or invalid: its text
        return invalid_datetime(y, m, day, t // 10000, t % 10000 // 100, t % 100)


def read_timestamp(buf, p):
    secs = _ifb(buf[p:p + 4], "little")
    return UTC_CACHE.get(secs) or utc_miss(secs)


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_size(precision: int, scale: int) -> int:
    ip, fp = precision - scale, scale
    return ip // 9 * 4 + _DIG2BYTES[ip % 9] + fp // 9 * 4 + _DIG2BYTES[fp % 9]


_DEC_CTX = decimal.Context(prec=100)  # exact for DECIMAL(65, 30); user contexts never apply


def decimal_lines(v: str, precision: int, scale: int) -> list[str]:
    """DECIMAL(precision, scale): big-endian base-10^9 groups, sign in the top bit.

    The integral digits are a short leading group plus whole 9-digit groups, the fraction
    whole groups plus a short trailing group; negative values are stored bit-inverted.
    The coefficient is the digits read in order; the exponent is -scale.
    """
    ip, fp = precision - scale, scale
    groups: list[tuple[int, int]] = []  # (bytes, decimal digits)
    if ip % 9:
        groups.append((_DIG2BYTES[ip % 9], ip % 9))
    groups += [(4, 9)] * (ip // 9) + [(4, 9)] * (fp // 9)
    if fp % 9:
        groups.append((_DIG2BYTES[fp % 9], fp % 9))
    size = sum(b for b, _ in groups)
    parts = []  # (shift, mask, decimal multiplier), least significant group first
    shift = digits = 0
    for b, d in reversed(groups):
        parts.append((shift, (1 << (b * 8)) - 1, 10 ** digits))
        shift += b * 8
        digits += d
    terms = " + ".join(("(x & {m})" if not s else "(x >> {s} & {m})").format(s=s, m=m)
                       + (f" * {mul}" if mul != 1 else "") for s, m, mul in reversed(parts)) or "0"
    scaled = (lambda n: f"_D({n}).scaleb({-scale}, _dctx)") if scale else (lambda n: f"_D({n})")
    return [f"x = _ifb(buf[p:p + {size}], 'big') ^ {1 << (size * 8 - 1)}",
            f"if x >> {size * 8 - 1}:",
            f"    x ^= {(1 << (size * 8)) - 1}",
            f"    n = {terms}",
            # a negative zero keeps its sign, as Decimal('-0.00') would
            f"    {v} = {scaled('-n')} if n else _D({'-0E-%d' % scale if scale else '-0'!r})",
            "else:",
            f"    {v} = {scaled(terms)}",
            f"p += {size}"]


def make_decimal(precision: int, scale: int) -> Callable:
    """A ``(buf, p) -> Decimal`` reader (for JSON opaque values; rows inline the lines)."""
    body = "\n".join("    " + ln for ln in decimal_lines("v", precision, scale)[:-1])
    ns = {"_ifb": _ifb, "_D": Decimal, "_dctx": _DEC_CTX}
    exec(f"def dec(buf, p):\n{body}\n    return v\n", ns)
    return ns["dec"]


def make_bit(bits: int) -> Callable:
    nbytes, mask, fmt = (bits + 7) // 8, (1 << bits) - 1, f"0{bits}b"

    def bit(buf, p):
        return Bits(format(_ifb(buf[p:p + nbytes], "big") & mask, fmt))
    return bit


def make_set(values: tuple[str, ...] | None) -> Callable:
    members = tuple((1 << i, v) for i, v in enumerate(values or ()))

    def set_(mask):  # no member is the empty set '' (SQL NULL never gets here: the null bitmap says so)
        return {v for b, v in members if mask & b}
    return set_


# ---- MySQL binary JSON ----------------------------------------------------------------------
_J_SMALL_OBJ, _J_LARGE_OBJ, _J_SMALL_ARR, _J_LARGE_ARR, _J_LITERAL = 0, 1, 2, 3, 4
_J_INT16, _J_UINT16, _J_INT32, _J_UINT32, _J_INT64, _J_UINT64, _J_DOUBLE = 5, 6, 7, 8, 9, 10, 11
_J_STRING, _J_OPAQUE = 12, 15
_S_h, _S_H, _S_i, _S_I = (struct.Struct(f).unpack_from for f in ("<h", "<H", "<i", "<I"))
_S_q, _S_Q, _S_d = (struct.Struct(f).unpack_from for f in ("<q", "<Q", "<d"))


def json_value(data: bytes):
    """A MySQL JSON column value (type byte + body) → ``dict`` / ``list``, or ``JsonText`` for a
    document that is a bare scalar (see dm_core/jsondoc.py: the applier must not take JSON
    ``null`` for SQL NULL)."""
    mv = memoryview(data)  # slices without copying: offsets nest, a large document is sliced often
    v = _jvalue(mv[0], mv[1:])
    return v if type(v) in (dict, list) else JsonText(json_text(v))


def _varlen(data) -> tuple[int, int]:
    length = 0
    for i in range(min(5, len(data))):
        b = data[i]
        length |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            if i + 1 + length > len(data):
                break
            return length, i + 1
    raise ValueError("JSON length runs past its value")


def _jvalue(t: int, data):
    if t <= _J_LARGE_ARR:
        return _jcontainer(data, t in (_J_SMALL_OBJ, _J_SMALL_ARR), t in (_J_SMALL_OBJ, _J_LARGE_OBJ))
    if t == _J_LITERAL:
        lit = data[0]
        if lit > 2:
            raise ValueError(f"bad JSON literal {lit}")
        return (None, True, False)[lit]
    if t == _J_INT16:
        return _S_h(data)[0]
    if t == _J_UINT16:
        return _S_H(data)[0]
    if t == _J_INT32:
        return _S_i(data)[0]
    if t == _J_UINT32:
        return _S_I(data)[0]
    if t == _J_INT64:
        return _S_q(data)[0]
    if t == _J_UINT64:
        return _S_Q(data)[0]
    if t == _J_DOUBLE:
        return _S_d(data)[0]
    if t == _J_STRING:  # utf8mb4: bad bytes raise rather than reach the target changed
        length, n = _varlen(data)
        return str(data[n:n + length], "utf-8")
    if t == _J_OPAQUE:
        return _jopaque(data)
    raise ValueError(f"JSON type {t} is not handled")


def _jcontainer(data, small: bool, is_object: bool):
    osz = 2 if small else 4
    u = _S_H if small else _S_I
    count, size = u(data, 0)[0], u(data, osz)[0]
    if len(data) < size:
        raise ValueError("JSON container shorter than its declared size")
    key_entry, value_entry = osz + 2, osz + 1
    header = 2 * osz + count * value_entry + (count * key_entry if is_object else 0)
    if header > size:
        raise ValueError("JSON header size > size")
    values = []
    base = 2 * osz + (count * key_entry if is_object else 0)
    for i in range(count):
        e = base + value_entry * i
        t = data[e]
        if t in (_J_INT16, _J_UINT16, _J_LITERAL) or (not small and t in (_J_INT32, _J_UINT32)):
            values.append(_jvalue(t, data[e + 1:e + value_entry]))
            continue
        off = u(data, e + 1)[0]
        if off >= size:  # the library returns None for the whole container: a changed value
            raise ValueError("JSON value offset past its container")
        values.append(_jvalue(t, data[off:size]))
    if not is_object:
        return values
    out = {}
    for i in range(count):  # keys in stored order (MySQL sorts them by length, then bytes)
        e = 2 * osz + key_entry * i
        ko, kl = u(data, e)[0], _S_H(data, e + osz)[0]
        if ko + kl > size:
            raise ValueError("JSON key past its container")
        out[str(data[ko:ko + kl], "utf-8")] = values[i]
    return out


# Opaque values are typed by the field type MySQL stored with them (sql-common/json_dom.cc). It
# reads only these as values, and shows them as below; any other type it shows as
# "base64:type<N>:<data>", so that is their value here too.
_J_DATE_TYPES = frozenset((ev.T_DATE, ev.T_DATETIME, ev.T_TIMESTAMP))


def _jopaque(data):
    t = data[0]
    length, n = _varlen(data[1:])
    body = bytes(data[1 + n:1 + n + length])
    if t == ev.T_NEWDECIMAL:  # precision, scale, then the DECIMAL column's binary form
        return cached_reader("dec", body[0], body[1])(body[2:], 0)
    if t == ev.T_TIME or t in _J_DATE_TYPES:
        return _jtemporal(t, _S_q(body)[0])
    if t == ev.T_VAR_STRING:  # MySQL reads a string kept as opaque as a plain JSON string
        return body.decode()
    return f"base64:type{t}:{base64.b64encode(body).decode()}"


def _jtemporal(t: int, packed: int) -> str:
    """A packed temporal (MySQL's longlong packed form: integer part << 24 | microseconds,
    negated when negative) as MySQL prints it in JSON: always six fractional digits, TIME hours
    past 24 and signed, a zero or invalid date as its digits."""
    sign, v = "-" if packed < 0 else "", abs(packed)
    ip, us = v >> 24, v & 0xFFFFFF
    if t == ev.T_TIME:
        return f"{sign}{ip >> 12 & 0x3FF:02d}:{ip >> 6 & 63:02d}:{ip & 63:02d}.{us:06d}"
    ym, day, hms = ip >> 22, ip >> 17 & 31, ip & 0x1FFFF
    date = f"{ym // 13:04d}-{ym % 13:02d}-{day:02d}"
    if t == ev.T_DATE:
        return date
    return f"{date} {hms >> 12:02d}:{hms >> 6 & 63:02d}:{hms & 63:02d}.{us:06d}"


# ---- code generation ------------------------------------------------------------------------
_STRUCT_CODE = {ev.T_TINY: ("b", "B"), ev.T_SHORT: ("h", "H"), ev.T_LONG: ("i", "I"),
                ev.T_LONGLONG: ("q", "Q"), ev.T_FLOAT: ("f", "f"), ev.T_DOUBLE: ("d", "d"),
                ev.T_YEAR: ("B", "B")}
_STRUCT_SIZE = {"b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "Q": 8, "f": 4, "d": 8}


class UnsupportedColumn(ev.BinlogFormatError):
    pass


class _Gen:
    """Collects helper objects for one generated function (passed in as default args)."""

    def __init__(self):
        self.names: dict[str, object] = {}
        self._by_id: dict[int, str] = {}

    def ref(self, obj, hint: str = "h") -> str:
        key = id(obj)
        if key not in self._by_id:
            name = f"_{hint}{len(self.names)}"
            self.names[name] = obj
            self._by_id[key] = name
        return self._by_id[key]


_FACTORY_CACHE: dict[tuple, Callable] = {}


def cached_reader(kind: str, *args) -> Callable:
    key = (kind, *args)
    fn = _FACTORY_CACHE.get(key)
    if fn is None:
        fn = {"time2": make_time2, "bit": make_bit, "dec": make_decimal}[kind](*args)
        _FACTORY_CACHE[key] = fn
    return fn


def _column_code(c: ev.ColumnDef, v: str, g: _Gen, codec_of: Callable[[int | None], str | None]) -> list[str]:
    """Lines that set ``v`` from ``buf`` at ``p`` and move ``p`` past the value."""
    t = c.type
    if t == ev.T_TINY:
        return [f"{v} = buf[p]" if c.unsigned else f"{v} = (buf[p] ^ 128) - 128", "p += 1"]
    if t == ev.T_YEAR:
        return [f"{v} = buf[p] and buf[p] + 1900", "p += 1"]   # YEAR 0000 is stored as 0
    if t in _STRUCT_CODE:
        code = _STRUCT_CODE[t][1 if c.unsigned else 0]
        return [f"{v}, = {g.ref(struct.Struct('<' + code).unpack_from, 's')}(buf, p)",
                f"p += {_STRUCT_SIZE[code]}"]
    if t == ev.T_INT24:
        expr = "buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16"
        return [f"{v} = {expr}" if c.unsigned else f"{v} = (({expr}) ^ 8388608) - 8388608", "p += 3"]
    if t == ev.T_NEWDECIMAL:
        return decimal_lines(v, c.precision, c.scale)
    if t == ev.T_DATETIME2:
        return datetime2_lines(v, c.scale)
    if t == ev.T_TIMESTAMP2:
        return timestamp2_lines(v, c.scale)
    if t == ev.T_TIME2:
        return [f"{v} = {g.ref(cached_reader('time2', c.scale))}(buf, p)", f"p += {3 + (c.scale + 1) // 2}"]
    if t in (ev.T_DATE, ev.T_NEWDATE):
        return [f"{v} = {g.ref(read_date)}(buf, p)", "p += 3"]
    if t == ev.T_TIME:
        return [f"{v} = {g.ref(read_time)}(buf, p)", "p += 3"]
    if t == ev.T_DATETIME:
        return [f"{v} = {g.ref(read_datetime)}(buf, p)", "p += 8"]
    if t == ev.T_TIMESTAMP:
        return [f"{v} = {g.ref(read_timestamp)}(buf, p)", "p += 4"]
    if t == ev.T_BIT:
        return [f"{v} = {g.ref(cached_reader('bit', c.length))}(buf, p)", f"p += {(c.length + 7) // 8}"]
    if t == ev.T_ENUM:
        if c.values is None:
            return [f"{v} = None", f"p += {c.length}"]
        idx = "buf[p]" if c.length == 1 else f"_ifb(buf[p:p + {c.length}], 'little')"
        return [f"{v} = {g.ref(('',) + tuple(c.values), 'e')}[{idx}]", f"p += {c.length}"]
    if t == ev.T_SET:
        if c.values is None:
            return [f"{v} = None", f"p += {c.length}"]
        idx = "buf[p]" if c.length == 1 else f"_ifb(buf[p:p + {c.length}], 'little')"
        return [f"{v} = {g.ref(make_set(c.values), 'set')}({idx})", f"p += {c.length}"]
    if t in (ev.T_VARCHAR, ev.T_STRING):
        prefix = 2 if c.length > 255 else 1
        if t == ev.T_STRING and c.collation == BINARY_COLLATION:
            # BINARY(n): the binlog drops trailing 0x00 bytes, the column holds them (DM pads too)
            return _length_prefixed(prefix) + [f"{v} = buf[p:n].ljust({c.length}, b'\\x00')", "p = n"]
        return _string_code(v, prefix, codec_of(c.collation))
    if t == ev.T_BLOB:
        return _string_code(v, c.length, codec_of(c.collation))
    if t == ev.T_GEOMETRY:
        return _length_prefixed(c.length) + [f"{v} = buf[p:n]", "p = n"]
    if t == ev.T_JSON:
        return _length_prefixed(c.length) + [
            f"{v} = {g.ref(json_value, 'json')}(buf[p:n]) if n > p else None", "p = n"]
    raise UnsupportedColumn(f"column {c.name}: binlog column type {t} is not supported")


BINARY_COLLATION = 63  # the `binary` character set's only collation


def _length_prefixed(prefix: int) -> list[str]:
    """Set ``p`` to the value start and ``n`` to its end."""
    if prefix == 1:
        return ["n = buf[p] + p + 1", "p += 1"]
    if prefix == 2:
        return ["n = (buf[p] | buf[p + 1] << 8) + p + 2", "p += 2"]
    return [f"n = _ifb(buf[p:p + {prefix}], 'little') + p + {prefix}", f"p += {prefix}"]


def _string_code(v: str, prefix: int, codec: str | None) -> list[str]:
    if codec is None:
        # bytes; but an empty value is '' (str): Python decodes b"" without looking the
        # codec up, so the library's "unknown codec → bytes" fallback never fires for it
        conv = "buf[p:n] if n > p else ''"
    elif codec == "utf-8":
        conv = "buf[p:n].decode()"
    else:
        conv = f"_tob(buf[p:n], {codec!r})"
    return _length_prefixed(prefix) + [f"{v} = {conv}", "p = n"]


def _image_code(cols: list[ev.ColumnDef], present: int, tag: str, g: _Gen,
                codec_of: Callable) -> tuple[list[str], str]:
    """Lines decoding one row image; returns (lines, dict expression)."""
    shown = [c for c in cols if present >> c.index & 1]
    nbytes = (len(shown) + 7) // 8
    lines: list[str] = []
    if any(c.nullable for c in shown):
        lines.append("nb = buf[p]" if nbytes == 1 else f"nb = _ifb(buf[p:p + {nbytes}], 'little')")
    lines.append(f"p += {nbytes}")
    var = {c.index: f"{tag}{c.index}" for c in cols}
    run: list[ev.ColumnDef] = []

    def flush_run():
        if not run:
            return
        if len(run) == 1:
            lines.extend(_column_code(run[0], var[run[0].index], g, codec_of))
        else:
            fmt = "".join(_STRUCT_CODE[c.type][1 if c.unsigned or c.type == ev.T_YEAR else 0] for c in run)
            size = sum(_STRUCT_SIZE[ch] for ch in fmt)
            names = ", ".join(var[c.index] for c in run)
            lines.append(f"{names}, = {g.ref(struct.Struct('<' + fmt).unpack_from, 's')}(buf, p)")
            lines.append(f"p += {size}")
            lines.extend(f"{var[c.index]} = {var[c.index]} and {var[c.index]} + 1900" for c in run
                         if c.type == ev.T_YEAR)
        run.clear()

    for k, c in enumerate(shown):
        if not c.nullable and c.type in _STRUCT_CODE:
            run.append(c)
            continue
        flush_run()
        body = _column_code(c, var[c.index], g, codec_of)
        if c.nullable:
            lines.append(f"if nb & {1 << k}:")
            lines.append(f"    {var[c.index]} = None")
            lines.append("else:")
            lines.extend("    " + ln for ln in body)
        else:
            lines.extend(body)
    flush_run()
    items = ", ".join(f"{c.name!r}: {var[c.index] if present >> c.index & 1 else 'None'}" for c in cols)
    return lines, "{" + items + "}"


def generate(schema: str, table: str, cols: list[ev.ColumnDef], op: str, present: int, present2: int,
             codec_of: Callable) -> Callable:
    """The pure-Python decoder of one ROWS event shape: straight-line code built with ``exec``."""
    g = _Gen()
    body, d1 = _image_code(cols, present, "a", g, codec_of)
    if op == "update":
        body2, d2 = _image_code(cols, present2, "b", g, codec_of)
        body += body2
        make = f"_RC('update', _S, _T, {d1}, {d2})"
    elif op == "insert":
        make = f"_RC('insert', _S, _T, None, {d1})"
    else:
        make = f"_RC('delete', _S, _T, {d1}, None)"
    defaults = {"_RC": RowChange, "_S": schema, "_T": table, "_ifb": _ifb, "_D": Decimal,
                "_dctx": _DEC_CTX, "_DT": _DT, "_invalid_dt": invalid_datetime, "_tob": text_or_bytes, "_utc": UTC_CACHE,
                "_utc_miss": utc_miss, **g.names}
    args = ", ".join(f"{k}={k}" for k in defaults)
    src = [f"def rows(buf, p, end, {args}):",
           "    out = []",
           "    add = out.append",
           "    while p < end:"]
    src += ["        " + ln for ln in body]
    src.append(f"        add({make})")
    src.append("    return out")
    text = "\n".join(src) + "\n"
    ns = dict(defaults)
    exec(compile(text, f"<binlog rows {schema}.{table} {op}>", "exec"), ns)
    fn = ns["rows"]
    fn.source = text  # for debugging and the tests
    return fn
