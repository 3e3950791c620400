"""Statement text filled in C (dm_core/sync/sqltext.pyx) is byte for byte the Python path's
(``literal.Renderer._fill``): every value type the binlog decoder yields, their subclasses, values
the driver refuses, and templates with ``%%``. Escaping is mysqlclient's own, without a server.

`make setup` builds it with the binlog reader; these tests fail, not skip, where it did not build
(unless SHARDFLOW_PURE_PYTHON asks for pure Python).
"""

import datetime as dt
import enum
import random
from decimal import Decimal

import pytest
from MySQLdb import _mysql

from dm_core import compiled_build
from dm_core.binlog import compiled
from dm_core.bits import Bits
from dm_core.jsondoc import JsonText
from dm_core.sync import literal
from dm_core.sync.literal import Renderer


class _Conn:
    string_literal = staticmethod(_mysql.string_literal)

    def cursor(self):
        return self

    def execute(self, sql):
        raise OSError("no server")

    def close(self):
        pass


class _Str(str):
    pass


class _Int(int):
    pass


class _Color(enum.IntEnum):
    RED = 3


class _Zone(dt.tzinfo):
    def utcoffset(self, d):
        return dt.timedelta(hours=2)


VALUES = [
    0, -1, 7, 9, 10, -10, 1234567890123, 2**63 - 1, -2**63, -2**63 + 1, 2**64 - 1, 10**40, -10**40, True, False, None,
    0.1, -1e-300, 1.7976931348623157e308, 5e-324, -0.0, 123456789.12345679,
    Decimal("1E+3"), Decimal("-0E-2"), Decimal("12345678901234567890.0123456789"), Decimal("-0.0000000001"),
    Decimal("12345678901234567E+3"), Decimal("0.00"),
    "", "it's", 'a"b', "back\\slash", "nul\x00byte", "ünïcödé 日本 🐬", "%s %% %(x)s", "\n\r\t\x1a",
    b"", b"\x00\xff\xfe'\\", b"\xc3\x28", bytearray(b"ab'"),
    dt.datetime(2024, 2, 29, 23, 59, 59, 999999), dt.datetime(1000, 1, 1), dt.datetime(5, 1, 2, 3, 4, 5, 6),
    dt.datetime(9999, 12, 31, 1, 2, 3), dt.datetime(2024, 1, 1, 12, tzinfo=_Zone()),
    dt.date(2024, 2, 29), dt.date(1, 1, 1), dt.date(987, 6, 5),
    dt.timedelta(hours=-838, minutes=-59, seconds=-59), dt.timedelta(seconds=-1, microseconds=500000),
    dt.timedelta(0), dt.timedelta(microseconds=1), dt.timedelta(microseconds=-1), dt.timedelta(hours=838, seconds=59.5),
    dt.timedelta(days=34, hours=22, minutes=59, seconds=59, microseconds=999999), dt.timedelta(days=-1),
    dt.timedelta(days=999999, seconds=1), dt.timedelta(days=-999999, microseconds=3), dt.timedelta.max, dt.timedelta.min,
    {"it's", "b\\"}, frozenset(),
    {"k": [1, "é", None]}, [1, 2.5, {"a": "b"}], JsonText("null"), {"c", "a"}, set(), frozenset({"b"}),
    Bits("0101"), _Str("sub'class"), _Int(42), _Color.RED, ValueError("odd value"),
]
REFUSED = [float("nan"), float("inf"), float("-inf")]


def _both(r: Renderer, sql: str, params):
    """(C path, Python path) for one statement, each an outcome: bytes or the error's type and text."""
    def outcome(fn):
        try:
            return fn()
        except Exception as e:
            return type(e).__name__, str(e)
    return (outcome(lambda: r.render(sql, params)),
            outcome(lambda: r._fill(r._template(sql), params)))


@pytest.fixture
def renderer():
    if compiled_build.forced_pure():
        pytest.skip("SHARDFLOW_PURE_PYTHON=1: the Python path only")
    assert literal.sqltext is not None, f"make setup did not build it: {compiled.reason}"
    r = Renderer(_Conn())
    assert r._c is not None
    return r


def test_every_value_type_renders_as_the_python_path(renderer):
    sql = "INSERT INTO `s`.`t` VALUES (%s)"
    for v in VALUES + REFUSED:
        c, py = _both(renderer, sql, (v,))
        assert c == py, v


def test_random_rows_of_mixed_values(renderer):
    rnd = random.Random(5)
    for n in range(300):
        k = rnd.randrange(0, 12)
        sql = "UPDATE `s`.`t` SET " + ", ".join(f"`c{i}` = %s" for i in range(k)) + " WHERE 100%% = %s"
        params = tuple(rnd.choice(VALUES) for _ in range(k + 1))
        c, py = _both(renderer, sql, params)
        assert c == py and isinstance(c, bytes), params


def test_multi_row_statements_match(renderer):
    rows = [(i, v, None) for i, v in enumerate(VALUES)]
    shape = ("INSERT INTO `s`.`t` (`a`, `b`, `c`) VALUES ", "(%s, %s, %s)", " ON DUPLICATE KEY UPDATE `b` = 100%%")
    fast = renderer._rows(shape, rows)
    renderer._c = None
    assert fast == renderer._rows(shape, rows)
    assert fast[0].endswith(b" ON DUPLICATE KEY UPDATE `b` = 100%")


@pytest.mark.parametrize("sql, params", [
    ("SELECT %s, %s", (1,)),            # too few values
    ("SELECT %s", (1, 2)),              # too many
    ("SELECT %d", (1,)),                # another directive: bytes % reads it
    ("SELECT 5%", ()),                  # a lone % at the end
    ("SELECT '%%s' + %s", ("x",)),
])
def test_templates_and_argument_counts_behave_as_bytes_formatting(renderer, sql, params):
    c, py = _both(renderer, sql, params)
    assert c == py


class _Counted:
    """A connection whose driver quoting is counted: the C path's own escaping calls it only to ask
    how the driver escapes (one call per statement), never per value."""

    def __init__(self, quote, charset="utf8mb4"):
        self.calls = 0
        self._quote, self._charset = quote, charset

    def string_literal(self, v):
        self.calls += 1
        return self._quote(v)

    def character_set_name(self):
        return self._charset

    cursor, execute, close = _Conn.cursor, _Conn.execute, _Conn.close


def _doubling(v) -> bytes:
    """The driver's quoting in a NO_BACKSLASH_ESCAPES session: quotes doubled, nothing else."""
    b = v.encode() if isinstance(v, str) else bytes(v)
    return b"'" + b.replace(b"'", b"''") + b"'"


def _random_texts(seed: int, n: int):
    rnd = random.Random(seed)
    pool = b"\x00\n\r\x1a\"'\\%abc \x80\xbf\xc3\xe3\xf0\xff"
    for _ in range(n):
        raw = bytes(rnd.choice(pool) if rnd.random() < .7 else rnd.randrange(256) for _ in range(rnd.randrange(40)))
        yield raw
        yield raw.decode("utf-8", "replace") + rnd.choice(["", "日本", "🐬", "\ud800"])


@pytest.mark.parametrize("charset, quote, asks, own", [
    ("utf8mb4", _mysql.string_literal, True, True),
    ("utf8mb3", _mysql.string_literal, True, True),
    ("gbk", _mysql.string_literal, False, False),    # a trail byte may be 0x5C: the driver escapes
    ("utf8mb4", _doubling, True, False),            # NO_BACKSLASH_ESCAPES: the driver quotes
])
def test_strings_escaped_in_c_only_where_that_is_exact(charset, quote, asks, own):
    if compiled_build.forced_pure():
        pytest.skip("SHARDFLOW_PURE_PYTHON=1: the Python path only")
    conn = _Counted(quote, charset)
    r = Renderer(conn)
    values = list(_random_texts(7, 400)) + [v for v in VALUES if type(v) in (str, bytes, set, frozenset)]
    conn.calls = 0
    got = [_both(r, "SELECT %s, %s", (v, 1)) for v in values]
    fast = conn.calls
    for (c, py), v in zip(got, values):
        assert c == py, v
    surrogates = sum(isinstance(v, str) and "\ud800" in v for v in values)
    # the Python path quotes each value; the C path asks once per statement (a UTF-8 connection),
    # then quotes only what it cannot escape itself
    c_calls = (len(values) if asks else 0) + (surrogates if own else len(values))
    assert fast == len(values) + c_calls


def test_rows_after_a_large_one_are_written_afresh():
    """A row over the buffer a connection keeps (1 MB) is written whole, and the rows after it
    are not left with any of its bytes."""
    if compiled_build.forced_pure():
        pytest.skip("SHARDFLOW_PURE_PYTHON=1: the Python path only")
    r = Renderer(_Counted(_mysql.string_literal))
    shape = ("INSERT INTO `s`.`t` (`a`, `b`) VALUES ", "(%s, %s)", "")
    rows = [(1, b"'\\" * 1_500_000), (2, "x"), (3, "日本" * 400_000), (4, None)]
    fast = r._rows(shape, rows)
    r._c = None
    assert fast == r._rows(shape, rows)
