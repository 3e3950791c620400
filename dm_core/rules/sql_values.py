"""MySQL value semantics for expression filters: how values print, count, compare and add up.

Used by ``sql_eval`` (operators) and ``sql_funcs`` (functions); one place decides that
``'12abc' = 12``, that ``1 / 0`` is NULL and that a DATETIME compares with a string.

    >>> num("12abc"), num("x"), text(True), compare("2024-01-02", dt.date(2024, 1, 1)), compare(None, 1)
    (12, 0, '1', 1, None)
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any, Callable, Mapping

from dm_core.bits import Bits
from dm_core.jsondoc import json_text

Row = Mapping[str, Any]
Fn = Callable[[Row], Any]
MASK64 = (1 << 64) - 1


class UnsupportedExpression(ValueError):
    """The expression uses SQL this evaluator does not implement."""


class HexLiteral(bytes):
    """``x'1234'`` / ``0x1234``: a binary string, which MySQL reads as a number only in a numeric
    context. Against a string or binary column it compares byte for byte (``blob = x'1234'``),
    against a number as the number (``int_col = x'41'`` is ``int_col = 65``).

    >>> compare(b"\\x124", HexLiteral(b"\\x124")), compare(4660, HexLiteral(b"\\x124")), compare("A", HexLiteral(b"A"))
    (0, 0, 0)
    """

    __slots__ = ()

    @property
    def number(self) -> int:
        return int.from_bytes(self, "big")


_NUM_PREFIX = re.compile(r"\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)")


def text(v: Any) -> str | None:
    """A value as MySQL would print it in a string context."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        s = int(v.total_seconds())
        return f"{'-' if s < 0 else ''}{abs(s) // 3600:02d}:{abs(s) % 3600 // 60:02d}:{abs(s) % 60:02d}"
    if isinstance(v, (dict, list)):  # a decoded MySQL JSON document: its JSON text, as MariaDB's is
        return json_text(v)
    return str(v)


def num(v: Any) -> Any:
    """A value in a numeric context: strings by their numeric prefix ('12abc' -> 12, 'x' -> 0)."""
    if v is None or isinstance(v, (int, float, Decimal)):
        return v
    if isinstance(v, (Bits, HexLiteral)):  # a BIT column: its number, as b'1111' = 15; x'41' = 65
        return v.number
    if isinstance(v, (bytes, bytearray, str)):
        m = _NUM_PREFIX.match(text(v))
        if not m:
            return 0
        t = m.group(1)
        return float(t) if any(ch in t for ch in ".eE") else int(t)
    if isinstance(v, dt.datetime):
        return int(v.strftime("%Y%m%d%H%M%S"))
    if isinstance(v, dt.date):
        return int(v.strftime("%Y%m%d"))
    if isinstance(v, dt.timedelta):
        return int(v.total_seconds())
    return v


def truth(v: Any) -> bool | None:
    """MySQL truth value: None for NULL, else non-zero."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, (dt.date, dt.time)):
        return True
    return num(v) != 0


def truthy(v: Any) -> bool:
    """Whether a condition holds: NULL does not."""
    return truth(v) is True


def temporal(v: Any) -> dt.datetime | None:
    """A naive datetime; a literal with a zone offset becomes UTC, the zone of the values the
    binlog reader hands over (TIMESTAMPs are UTC instants; every session runs at '+00:00').

    >>> temporal("2021-01-01 12:34:56.5678+08:00")
    datetime.datetime(2021, 1, 1, 4, 34, 56, 567800)
    """
    if isinstance(v, dt.datetime):
        out = v
    elif isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day)
    elif isinstance(v, str):
        try:
            out = dt.datetime.fromisoformat(v.strip())
        except ValueError:
            return None
    else:
        return None
    return out.astimezone(dt.timezone.utc).replace(tzinfo=None) if out.tzinfo else out


def compare(a: Any, b: Any) -> int | None:
    """-1, 0, 1 or None (NULL), with MySQL's type coercion."""
    if a is None or b is None:
        return None
    if isinstance(a, (set, frozenset)) or isinstance(b, (set, frozenset)):
        return _compare_sets(a, b)
    if isinstance(a, dt.timedelta) or isinstance(b, dt.timedelta):  # a TIME column
        x, y = duration(a), duration(b)
        if x is not None and y is not None:
            return (x > y) - (x < y)
    if isinstance(a, HexLiteral) or isinstance(b, HexLiteral):
        got = _compare_hex(a, b)
        if got is None:             # against a number (or a date): the literal's number
            x, y = num(a), num(b)
            got = (x > y) - (x < y)
        return got
    if isinstance(a, (bytes, bytearray, dict, list)):  # a whole JSON document compares as its text,
        a = text(a)                                      # as MariaDB's JSON (text) does
    if isinstance(b, (bytes, bytearray, dict, list)):
        b = text(b)
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    if isinstance(a, (dt.date, dt.time)) or isinstance(b, (dt.date, dt.time)):
        x, y = temporal(a), temporal(b)
        if x is None or y is None:
            x, y = text(a), text(b)
        return (x > y) - (x < y)
    x, y = num(a), num(b)
    return (x > y) - (x < y)


def _compare_hex(a: Any, b: Any) -> int | None:
    """A hex literal against a string or binary value: byte for byte; None: compare otherwise."""
    def raw(v):
        if isinstance(v, Bits):         # a BIT column compares as its number
            return None
        if isinstance(v, str):
            return v.encode("utf-8")
        return bytes(v) if isinstance(v, (bytes, bytearray)) else None
    x, y = raw(a), raw(b)
    if x is None or y is None:
        return None
    return (x > y) - (x < y)


_DURATION = re.compile(r"^\s*(-)?(\d+):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6}))?)?\s*$")


def duration(v: Any) -> dt.timedelta | None:
    """A TIME value: the reader's timedelta, or a literal '[-]H:MM[:SS[.frac]]' (hours up to 838).

    >>> duration("-838:58:50.12345") == -dt.timedelta(hours=838, minutes=58, seconds=50, microseconds=123450)
    True
    """
    if isinstance(v, dt.timedelta):
        return v
    if isinstance(v, dt.time):
        return dt.timedelta(hours=v.hour, minutes=v.minute, seconds=v.second, microseconds=v.microsecond)
    m = _DURATION.match(text(v)) if isinstance(v, (str, bytes, bytearray)) else None
    if not m:
        return None
    sign, h, mi, sec, frac = m.groups()
    d = dt.timedelta(hours=int(h), minutes=int(mi), seconds=int(sec or 0), microseconds=int((frac or "0").ljust(6, "0")))
    return -d if sign else d


def _compare_sets(a: Any, b: Any) -> int:
    """A SET column's value (the binlog reader's set of members) against a string of members
    ('b,c') or another set: equal when the members are; otherwise ordered by the sorted text.

    >>> _compare_sets({"b", "c"}, "b,c"), _compare_sets({"b"}, "b,c"), _compare_sets("a", {"a"})
    (0, -1, 0)
    """
    def members(v):
        return frozenset(v) if isinstance(v, (set, frozenset)) else frozenset(m for m in text(v).split(",") if m)
    x, y = members(a), members(b)
    if x == y:
        return 0
    x, y = ",".join(sorted(x)), ",".join(sorted(y))
    return (x > y) - (x < y)


def arith(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def apply(a, b):
        a, b = num(a), num(b)
        if a is None or b is None:
            return None
        if isinstance(a, float) or isinstance(b, float):
            return op(float(a), float(b))
        if isinstance(a, Decimal) or isinstance(b, Decimal):
            return op(Decimal(a), Decimal(b))
        return op(int(a), int(b))
    return apply


def div(a, b):
    if b == 0:
        return None
    return a / b if isinstance(a, float) else Decimal(a) / Decimal(b)


def intdiv(a, b):
    return None if b == 0 else int(a / b if isinstance(a, float) else Decimal(a) / Decimal(b))


def mod(a, b):
    if b == 0:
        return None
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def bits(op):
    def apply(a, b):
        a, b = num(a), num(b)
        return None if a is None or b is None else op(int(a) & MASK64, int(b) & MASK64) & MASK64
    return apply
