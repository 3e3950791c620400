"""Row values in MySQL's binlog row format, one encoder per column type.

Facts from MySQL's field and row-event documentation (storage formats of MySQL >= 5.6.4):
- integers: little-endian, two's complement, 1/2/3/4/8 bytes; FLOAT/DOUBLE IEEE little-endian;
- YEAR: one byte, year - 1900 (0 for the zero year); DATE: 3 bytes little-endian,
  day | month << 5 | year << 9;
- DATETIME2: 5 bytes big-endian of 0x8000000000 + (((year*13 + month) << 5 | day) << 17 |
  hour << 12 | minute << 6 | second), then the fraction: 1 byte (fsp 1-2, hundredths),
  2 bytes (fsp 3-4, 1/10000 s) or 3 bytes (fsp 5-6, microseconds), big-endian;
- TIMESTAMP2: 4 bytes big-endian seconds since the epoch, then the fraction as DATETIME2;
- TIME2: the packed time ``(hms << 24) + microseconds`` (negative for negative times) stored as
  0x800000 + its integer part in 3 bytes and its fraction, or as 0x800000000000 + the packed
  value in 6 bytes for fsp 5-6; negative fractions are stored in reverse order (C's ``%``);
- DECIMAL: groups of 9 digits in 4 bytes big-endian, a partial leading/trailing group in
  1-4 bytes, all bytes inverted for negatives, then the first bit flipped;
- strings: 1-byte length below 256 bytes of declared maximum, else 2 bytes; BLOB/TEXT and
  JSON: a 1-4 byte length (the column's pack length); ENUM 1-2 bytes index; SET a bitmap of
  its pack length; BIT big-endian in (bits + 7) // 8 bytes.
"""

from __future__ import annotations

import datetime
import decimal
import struct

DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def packed_datetime(dt: datetime.datetime) -> int:
    ymd = ((dt.year * 13 + dt.month) << 5) | dt.day
    hms = (dt.hour << 12) | (dt.minute << 6) | dt.second
    return (((ymd << 17) | hms) << 24) + dt.microsecond


def packed_time(td: datetime.timedelta) -> int:
    neg = td < datetime.timedelta(0)
    us = abs(td.days * 86_400_000_000 + td.seconds * 1_000_000 + td.microseconds)
    secs, frac = divmod(us, 1_000_000)
    h, rest = divmod(secs, 3600)
    hms = (h << 12) | ((rest // 60) << 6) | (rest % 60)
    v = (hms << 24) + frac
    return -v if neg else v


def _c_rem(a: int, b: int) -> int:
    """C's ``a % b`` (the sign of the dividend), which MySQL's packing relies on."""
    r = abs(a) % b
    return -r if a < 0 else r


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def _fraction(frac: int, fsp: int) -> bytes:
    """The fraction bytes of DATETIME2/TIMESTAMP2/TIME2 (``frac`` in microseconds, may be negative)."""
    if fsp <= 0:
        return b""
    if fsp <= 2:
        return bytes([_c_div(frac, 10000) & 0xFF])
    if fsp <= 4:
        return (_c_div(frac, 100) & 0xFFFF).to_bytes(2, "big")
    return (frac & 0xFFFFFF).to_bytes(3, "big")


def _truncate_us(us: int, fsp: int) -> int:
    step = 10 ** (6 - max(0, min(fsp, 6)))
    return us - us % step


def datetime2(dt: datetime.datetime, fsp: int) -> bytes:
    dt = dt.replace(microsecond=_truncate_us(dt.microsecond, fsp))
    packed = packed_datetime(dt)
    return ((packed >> 24) + 0x8000000000).to_bytes(5, "big") + _fraction(packed & 0xFFFFFF, fsp)


def timestamp2(v, fsp: int) -> bytes:
    if isinstance(v, datetime.datetime):
        aware = v if v.tzinfo else v.replace(tzinfo=datetime.timezone.utc)   # naive = UTC
        delta = aware - _EPOCH
        secs, us = delta.days * 86400 + delta.seconds, delta.microseconds
    else:
        secs = int(v)
        us = round((v - secs) * 1_000_000)
    return secs.to_bytes(4, "big") + _fraction(_truncate_us(us, fsp), fsp)


def time2(td: datetime.timedelta, fsp: int) -> bytes:
    us = td.days * 86_400_000_000 + td.seconds * 1_000_000 + td.microseconds
    us = _truncate_us(abs(us), fsp) * (-1 if us < 0 else 1)          # MySQL rounds on insert
    packed = packed_time(datetime.timedelta(microseconds=us))
    if fsp >= 5:
        return (packed + 0x800000000000).to_bytes(6, "big")
    return ((packed >> 24) + 0x800000).to_bytes(3, "big") + _fraction(_c_rem(packed, 1 << 24), fsp)


def date3(d: datetime.date) -> bytes:
    return (d.day | d.month << 5 | d.year << 9).to_bytes(3, "little")


def decimal_shape(v: decimal.Decimal) -> tuple[int, int]:
    """(precision, scale) just large enough for ``v``."""
    _, digits, exp = v.as_tuple()
    if exp >= 0:
        return max(len(digits) + exp, 1), 0
    scale = -exp
    return max(len(digits) - scale, 0) + scale or 1, scale


def decimal_bytes(v, precision: int, scale: int) -> bytes:
    # DECIMAL(65, 30) holds more digits than the default context's 28
    v = decimal.Decimal(v).quantize(decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP,
                                    context=decimal.Context(prec=100))
    neg = v < 0
    intg = precision - scale
    text = format(v.copy_abs(), "f")   # abs() rounds to the context's 28 digits
    ipart, _, fpart = text.partition(".")
    ipart = ipart.lstrip("0")
    if len(ipart) > intg:
        raise ValueError(f"{v} does not fit DECIMAL({precision},{scale})")
    ipart = ipart.rjust(intg, "0")
    fpart = fpart.ljust(scale, "0")
    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(ipart[:lead]).to_bytes(DIG2BYTES[lead], "big")
    for i in range(lead, intg, 9):
        out += int(ipart[i:i + 9]).to_bytes(4, "big")
    full = scale // 9
    for i in range(full):
        out += int(fpart[i * 9:i * 9 + 9]).to_bytes(4, "big")
    trail = scale % 9
    if trail:
        out += int(fpart[full * 9:]).to_bytes(DIG2BYTES[trail], "big")
    if neg:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


def integer(v: int, size: int, unsigned: bool) -> bytes:
    if unsigned and v < 0:
        raise ValueError(f"{v} in an unsigned column")
    return int(v).to_bytes(size, "little", signed=not unsigned)


def real(v: float, size: int) -> bytes:
    return struct.pack("<f" if size == 4 else "<d", v)


def year(v: int) -> bytes:
    return bytes([0 if not v else int(v) - 1900])


def length_prefixed(data: bytes, prefix: int) -> bytes:
    return len(data).to_bytes(prefix, "little") + data


def bit(v, nbits: int) -> bytes:
    size = (nbits + 7) // 8
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).rjust(size, b"\x00")
    return int(v).to_bytes(size, "big")


def enum_index(v, members: tuple[str, ...]) -> int:
    return v if isinstance(v, int) else members.index(v) + 1


def set_bits(v, members: tuple[str, ...]) -> int:
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        v = [m for m in v.split(",") if m]
    return sum(1 << members.index(m) for m in v)
