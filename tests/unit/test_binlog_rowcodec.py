"""The compiled row decoder (dm_core/binlog/rowcodec.pyx) reads every row image as the generated
Python decoder of the same table does: the same values of the same types, the same error where
Python refuses a value, for every column type, nullable or not, whole images and partial ones.

`make setup` builds it with the binlog reader; these tests fail, not skip, where it did not build
(unless SHARDFLOW_PURE_PYTHON asks for pure Python), so a machine that lost it is noticed.
"""

import random
import re
import struct

import pytest

from dm_core import compiled_build
from dm_core.binlog import compiled, decode, row_plan
from dm_core.binlog import events as ev
from dm_core.binlog.codec import TableCodec

UTF8MB4, LATIN1, GBK, BINARY = 45, 8, 28, 63
CHARSETS = {UTF8MB4: "utf8mb4", LATIN1: "latin1", GBK: "gbk", BINARY: "binary"}

# (type, unsigned, length, precision, scale, collation, values) of the column shapes tried
SHAPES = [
    (ev.T_TINY, False, 0, 0, 0, None, None), (ev.T_TINY, True, 0, 0, 0, None, None),
    (ev.T_SHORT, False, 0, 0, 0, None, None), (ev.T_SHORT, True, 0, 0, 0, None, None),
    (ev.T_INT24, False, 0, 0, 0, None, None), (ev.T_INT24, True, 0, 0, 0, None, None),
    (ev.T_LONG, False, 0, 0, 0, None, None), (ev.T_LONG, True, 0, 0, 0, None, None),
    (ev.T_LONGLONG, False, 0, 0, 0, None, None), (ev.T_LONGLONG, True, 0, 0, 0, None, None),
    (ev.T_FLOAT, False, 4, 0, 0, None, None), (ev.T_DOUBLE, False, 8, 0, 0, None, None),
    (ev.T_YEAR, False, 0, 0, 0, None, None),
    (ev.T_NEWDECIMAL, False, 0, 12, 2, None, None), (ev.T_NEWDECIMAL, False, 0, 14, 4, None, None),
    (ev.T_NEWDECIMAL, False, 0, 65, 30, None, None), (ev.T_NEWDECIMAL, False, 0, 10, 0, None, None),
    (ev.T_NEWDECIMAL, False, 0, 30, 9, None, None), (ev.T_NEWDECIMAL, False, 0, 5, 5, None, None),
    (ev.T_DATETIME2, False, 0, 0, 0, None, None), (ev.T_DATETIME2, False, 0, 0, 3, None, None),
    (ev.T_DATETIME2, False, 0, 0, 6, None, None), (ev.T_DATETIME2, False, 0, 0, 1, None, None),
    (ev.T_TIMESTAMP2, False, 0, 0, 0, None, None), (ev.T_TIMESTAMP2, False, 0, 0, 3, None, None),
    (ev.T_TIMESTAMP2, False, 0, 0, 5, None, None),
    *((ev.T_TIME2, False, 0, 0, fsp, None, None) for fsp in range(7)),
    (ev.T_DATE, False, 0, 0, 0, None, None), (ev.T_TIME, False, 0, 0, 0, None, None),
    (ev.T_DATETIME, False, 0, 0, 0, None, None), (ev.T_TIMESTAMP, False, 0, 0, 0, None, None),
    (ev.T_BIT, False, 1, 0, 0, None, None), (ev.T_BIT, False, 13, 0, 0, None, None),
    (ev.T_ENUM, False, 1, 0, 0, UTF8MB4, ("a", "b", "c")), (ev.T_ENUM, False, 2, 0, 0, UTF8MB4, None),
    (ev.T_SET, False, 1, 0, 0, UTF8MB4, ("x", "y", "z")), (ev.T_SET, False, 2, 0, 0, UTF8MB4, None),
    (ev.T_SET, False, 8, 0, 0, UTF8MB4, tuple(f"m{i}" for i in range(64))),
    (ev.T_SET, False, 3, 0, 0, UTF8MB4, tuple(f"m{i}" for i in range(20))),
    (ev.T_VARCHAR, False, 120, 0, 0, UTF8MB4, None), (ev.T_VARCHAR, False, 1200, 0, 0, UTF8MB4, None),
    (ev.T_VARCHAR, False, 64, 0, 0, LATIN1, None), (ev.T_VARCHAR, False, 64, 0, 0, GBK, None),
    (ev.T_VARCHAR, False, 64, 0, 0, BINARY, None), (ev.T_VARCHAR, False, 64, 0, 0, 9999, None),
    (ev.T_STRING, False, 60, 0, 0, UTF8MB4, None), (ev.T_STRING, False, 16, 0, 0, BINARY, None),
    (ev.T_BLOB, False, 2, 0, 0, BINARY, None), (ev.T_BLOB, False, 3, 0, 0, UTF8MB4, None),
    (ev.T_BLOB, False, 4, 0, 0, BINARY, None), (ev.T_BLOB, False, 1, 0, 0, LATIN1, None),
    (ev.T_GEOMETRY, False, 4, 0, 0, None, None), (ev.T_JSON, False, 4, 0, 0, None, None),
]
_JSON_DOCS = [b"\x04\x01", b"\x04\x00", b"\x05\x07\x00", b"\x0c\x03abc",
              b"\x00\x01\x00\x0c\x00\x0b\x00\x01\x00\x05\x07\x00k"]   # {"k": 7}


def _dig2bytes(d):
    return (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)[d]


def _decimal_bytes(rnd, precision, scale):
    ip, fp = precision - scale, scale
    groups = ([ip % 9] if ip % 9 else []) + [9] * (ip // 9) + [9] * (fp // 9) + ([fp % 9] if fp % 9 else [])
    zero = rnd.random() < 0.1
    raw = b"".join((0 if zero else rnd.randrange(10 ** d)).to_bytes(_dig2bytes(d), "big") for d in groups)
    if not raw:
        return raw
    if rnd.random() < 0.5:    # negative: stored bit-inverted, sign bit clear
        raw = bytes(b ^ 0xFF for b in raw)
        return bytes([raw[0] & 0x7F]) + raw[1:]
    return bytes([raw[0] | 0x80]) + raw[1:]


def _datetime2_bytes(rnd, fsp):
    fb = (fsp + 1) // 2
    if rnd.random() < 0.2:
        return bytes(rnd.randrange(256) for _ in range(5 + fb))
    y, mo, d = rnd.choice([(rnd.randrange(1, 10000), rnd.randrange(1, 13), rnd.randrange(1, 29)),
                           (0, 0, 0), (2024, 2, 31), (2024, 2, 29), (2023, 2, 29)])
    ip = 1 << 39 | (y * 13 + mo) << 22 | d << 17 | rnd.randrange(24) << 12 | rnd.randrange(60) << 6 | rnd.randrange(60)
    frac = rnd.randrange(10 ** fsp) * (10 if fsp % 2 else 1) if fb else 0
    return ip.to_bytes(5, "big") + frac.to_bytes(fb, "big")


def _timestamp2_bytes(rnd, fsp):
    fb = (fsp + 1) // 2
    secs = rnd.choice([0, rnd.randrange(1 << 31), 1_700_000_000])
    frac = 0 if secs == 0 else rnd.randrange(10 ** fsp) * (10 if fsp % 2 else 1) if fb else 0
    return secs.to_bytes(4, "big") + frac.to_bytes(fb, "big")


def _text(rnd, n):
    return "".join(rnd.choice("aZ09 _-é汉€😀") for _ in range(n))


def _prefixed(data, prefix):
    return len(data).to_bytes(prefix, "little") + data


def _value_bytes(rnd, c):
    t = c.type
    fixed = {ev.T_TINY: 1, ev.T_SHORT: 2, ev.T_INT24: 3, ev.T_LONG: 4, ev.T_LONGLONG: 8, ev.T_FLOAT: 4,
             ev.T_DOUBLE: 8, ev.T_YEAR: 1, ev.T_TIME: 3, ev.T_DATETIME: 8, ev.T_TIMESTAMP: 4}
    if t in fixed:
        if t == ev.T_DATETIME and rnd.random() < 0.7:
            return (rnd.randrange(1000, 9999) * 10**10 + 1231 * 10**6 + 235959).to_bytes(8, "little")
        return bytes(rnd.randrange(256) for _ in range(fixed[t]))
    if t == ev.T_NEWDECIMAL:
        if rnd.random() < 0.1:   # groups past their digits: not MySQL's, read by the Python reader
            return bytes(rnd.randrange(256) for _ in range(decode.decimal_size(c.precision, c.scale)))
        return _decimal_bytes(rnd, c.precision, c.scale)
    if t == ev.T_DATETIME2:
        return _datetime2_bytes(rnd, c.scale)
    if t == ev.T_TIMESTAMP2:
        return _timestamp2_bytes(rnd, c.scale)
    if t == ev.T_TIME2:
        return bytes(rnd.randrange(256) for _ in range(3 + (c.scale + 1) // 2))
    if t == ev.T_DATE:
        if rnd.random() < 0.3:
            return bytes(rnd.randrange(256) for _ in range(3))
        return (rnd.randrange(1, 10000) << 9 | rnd.randrange(1, 13) << 5 | rnd.randrange(1, 29)).to_bytes(3, "little")
    if t == ev.T_BIT:
        return bytes(rnd.randrange(256) for _ in range((c.length + 7) // 8))
    if t == ev.T_ENUM:
        return rnd.randrange(5 if rnd.random() < 0.05 else 4).to_bytes(c.length, "little")
    if t == ev.T_SET:
        return rnd.randrange(1 << (8 * c.length)).to_bytes(c.length, "little")
    if t in (ev.T_VARCHAR, ev.T_STRING, ev.T_BLOB):
        prefix = c.length if t == ev.T_BLOB else 2 if c.length > 255 else 1
        n = rnd.choice([0, 1, 5, 40])
        if rnd.random() < 0.03 or c.collation in (BINARY, GBK):
            data = bytes(rnd.randrange(256) for _ in range(n))
        else:
            data = _text(rnd, n).encode("utf-8" if c.collation != LATIN1 else "cp1252", errors="replace")
        return _prefixed(data, prefix)
    if t == ev.T_GEOMETRY:
        return _prefixed(bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 25]))), c.length)
    if t == ev.T_JSON:
        return _prefixed(rnd.choice([b""] + _JSON_DOCS), c.length)
    raise AssertionError(t)


def _table(rnd, ncols):
    cols = []
    for i in range(ncols):
        t, unsigned, length, precision, scale, collation, values = rnd.choice(SHAPES)
        cols.append(ev.ColumnDef(i, t, f"c{i}", rnd.random() < 0.4, unsigned, length, precision, scale,
                                 collation, values))
    return ev.TableDef("s", "t", cols, True)


def _image(rnd, cols, present):
    shown = [c for c in cols if present >> c.index & 1]
    nulls = [c.nullable and rnd.random() < 0.3 for c in shown]
    bitmap = sum(1 << k for k, null in enumerate(nulls) if null).to_bytes((len(shown) + 7) // 8, "little")
    return bitmap + b"".join(_value_bytes(rnd, c) for c, null in zip(shown, nulls) if not null)


def _typed(rows):
    """Rows as what must match: each value's type and repr (NaN floats compare by repr)."""
    return [(r.op, r.schema, r.table, *({k: (type(v).__name__, repr(v)) for k, v in img.items()} if img else None
                                        for img in (r.before, r.after))) for r in rows]


def _outcome(fn, buf, p, end):
    try:
        return "ok", _typed(fn(buf, p, end))
    except Exception as exc:
        return "error", type(exc).__name__


def test_the_compiled_decoder_is_built_and_used():
    if compiled_build.forced_pure():
        assert row_plan.rowcodec is None
        return
    assert row_plan.rowcodec is not None, f"make setup did not build it: {compiled.reason}"


@pytest.mark.parametrize("seed", range(40))
def test_compiled_and_generated_decoders_read_the_same(seed):
    if compiled_build.forced_pure():
        pytest.skip("SHARDFLOW_PURE_PYTHON=1: the generated decoders only")
    assert row_plan.rowcodec is not None, f"no compiled decoder: {compiled.reason}"
    rnd = random.Random(seed)
    seen = {"ok": 0, "error": 0}
    for _ in range(25):
        td = _table(rnd, rnd.randrange(1, 31))
        codec = TableCodec(td, CHARSETS, mariadb=False)
        every = (1 << len(td.columns)) - 1
        op = rnd.choice(["insert", "update", "delete"])
        present = every if rnd.random() < 0.6 else rnd.randrange(every + 1)
        present2 = (every if rnd.random() < 0.6 else rnd.randrange(every + 1)) if op == "update" else 0
        rows = []
        for _ in range(rnd.randrange(1, 6)):
            rows.append(_image(rnd, td.columns, present))
            if op == "update":
                rows.append(_image(rnd, td.columns, present2))
        head = b"\xee" * 7
        buf = head + b"".join(rows) + b"\xcc" * 4    # the event around the images, the checksum after
        fast = codec._compile(op, present, present2)
        slow = codec._generate(op, present, present2)
        assert type(fast).__name__ == "Rows"
        got, want = _outcome(fast, buf, len(head), len(buf) - 4), _outcome(slow, buf, len(head), len(buf) - 4)
        assert got == want, [(c.name, c.type, c.nullable) for c in td.columns]
        seen[want[0]] += 1
    assert seen["ok"] >= 10     # most events decode: the comparison is of values, not of errors


def test_a_row_past_its_event_is_refused_not_read_beyond():
    if row_plan.rowcodec is None:
        pytest.skip("the generated decoders read past the event's end (the compiled one refuses)")
    td = ev.TableDef("s", "t", [ev.ColumnDef(0, ev.T_LONG, "id", False),
                                ev.ColumnDef(1, ev.T_VARCHAR, "c", False, length=64, collation=UTF8MB4)], True)
    codec = TableCodec(td, CHARSETS, mariadb=False)
    image = b"\x00" + struct.pack("<i", 7) + _prefixed(b"hello", 1)
    fn = codec._compile("insert", 3, 0)
    assert [r.after for r in fn(image, 0, len(image))] == [{"id": 7, "c": "hello"}]
    with pytest.raises(ValueError, match="runs past its event"):
        fn(image + image[:6], 0, len(image) + 6)


def test_values_of_the_common_types():
    """A few values by hand, beside the comparison above: what the user's rows hold."""
    import datetime
    from decimal import Decimal
    cols = [ev.ColumnDef(0, ev.T_NEWDECIMAL, "amount", False, precision=12, scale=2),
            ev.ColumnDef(1, ev.T_DATETIME2, "at", True, scale=6),
            ev.ColumnDef(2, ev.T_LONGLONG, "big", False, unsigned=True),
            ev.ColumnDef(3, ev.T_NEWDECIMAL, "neg", False, precision=5, scale=2)]
    codec = TableCodec(ev.TableDef("s", "t", cols, True), CHARSETS, mariadb=False)
    amount = bytes([0x80]) + (1234567).to_bytes(4, "big") + bytes([89])   # groups 0 | 001234567 | 89
    at = (1 << 39 | (2024 * 13 + 2) << 22 | 29 << 17 | 23 << 12 | 59 << 6 | 58).to_bytes(5, "big") + (123456).to_bytes(3, "big")
    neg = bytes(b ^ 0xFF for b in (123).to_bytes(2, "big") + bytes([45]))
    neg = bytes([neg[0] & 0x7F]) + neg[1:]
    image = b"\x00" + amount + at + struct.pack("<Q", 2**64 - 1) + neg
    [row] = codec._compile("insert", 15, 0)(image, 0, len(image))
    assert row.after == {"amount": Decimal("1234567.89"), "at": datetime.datetime(2024, 2, 29, 23, 59, 58, 123456),
                         "big": 2**64 - 1, "neg": Decimal("-123.45")}
    assert str(row.after["amount"]) == "1234567.89" and str(row.after["neg"]) == "-123.45"


@pytest.mark.parametrize("column, said", [
    (ev.ColumnDef(0, ev.T_NEWDECIMAL, "amount", False, precision=200, scale=2), "DECIMAL(200, 2)"),
    (ev.ColumnDef(0, ev.T_NEWDECIMAL, "amount", False, precision=5, scale=9), "DECIMAL(5, 9)"),
    (ev.ColumnDef(0, ev.T_DATETIME2, "at", False, scale=9), "9 fractional digits"),
    (ev.ColumnDef(0, ev.T_TIMESTAMP2, "at", False, scale=200), "200 fractional digits"),
    (ev.ColumnDef(0, ev.T_SET, "tags", False, length=9, values=("a",)), "9 storage bytes"),
    (ev.ColumnDef(0, ev.T_BLOB, "doc", False, length=7), "a 7-byte length"),
])
def test_metadata_no_server_writes_is_refused_naming_the_column(column, said):
    """A damaged TABLE_MAP must not size the C loop's reads: the column is refused (the window
    delivers the transaction as undecodable: the source pauses naming table and event)."""
    if row_plan.rowcodec is None:
        pytest.skip("the generated decoders read such columns as Python reads them")
    codec = TableCodec(ev.TableDef("s", "t", [column], True), CHARSETS, mariadb=False)
    with pytest.raises(decode.UnsupportedColumn, match=f"column {column.name}: .*{re.escape(said)}"):
        codec._compile("insert", 1, 0)


def test_any_bytes_decode_or_raise_never_crash():
    """Damaged row images (random bytes where the images should be): the C loop reads only inside
    the event, so each call returns rows or raises; the test process surviving is the check."""
    if row_plan.rowcodec is None:
        pytest.skip("no compiled decoder")
    rnd = random.Random(11)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(400):
        td = _table(rnd, rnd.randrange(1, 12))
        codec = TableCodec(td, CHARSETS, mariadb=False)
        op = rnd.choice(["insert", "update", "delete"])
        every = (1 << len(td.columns)) - 1
        fn = codec._compile(op, every, every if op == "update" else 0)
        buf = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 300)))
        for end in (len(buf), len(buf) // 2, rnd.randrange(len(buf) + 1)):
            outcomes[_outcome(fn, buf, 0, end)[0]] += 1
    assert outcomes["error"] > 100 and outcomes["ok"] > 10, outcomes
