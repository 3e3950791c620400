"""Row value decoders against mysql-replication's own functions (DECIMAL, MySQL binary JSON)
and against values encoded here from the format (temporal, bit, set, charsets)."""

import datetime
import decimal
import random
import struct

import pytest
from pymysqlreplication.json_binary import parse_json
from pymysqlreplication.util.bytes import parse_decimal_from_bytes

from dm_core.binlog import decode
from dm_core.binlog import events as ev
from dm_core.jsondoc import JsonText, json_text

DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def encode_decimal(value: decimal.Decimal, precision: int, scale: int) -> bytes:
    """MySQL's binary DECIMAL: base-10^9 groups big-endian, sign bit flipped, negatives inverted."""
    neg = value < 0
    digits = str(int(value.copy_abs().scaleb(scale, decimal.Context(prec=100)))).rjust(precision, "0")
    ip, fp = precision - scale, scale
    ints, fracs = digits[:ip], digits[ip:]
    out = b""
    if ip % 9:
        out += int(ints[:ip % 9]).to_bytes(DIG2BYTES[ip % 9], "big")
    for k in range(ip % 9, ip, 9):
        out += int(ints[k:k + 9]).to_bytes(4, "big")
    for k in range(0, fp - fp % 9, 9):
        out += int(fracs[k:k + 9]).to_bytes(4, "big")
    if fp % 9:
        out += int(fracs[fp - fp % 9:]).to_bytes(DIG2BYTES[fp % 9], "big")
    out = bytes([out[0] | 0x80]) + out[1:]
    return bytes(b ^ 0xFF for b in out) if neg else out


@pytest.mark.parametrize("precision,scale", [(1, 0), (5, 5), (10, 2), (12, 2), (18, 0), (18, 9), (19, 10),
                                             (27, 13), (30, 30), (38, 4), (65, 0), (65, 30)])
def test_decimal_matches_the_library_and_the_value(precision, scale):
    rng = random.Random(precision * 100 + scale)
    exact = decimal.Context(prec=100)
    largest = decimal.Decimal(10 ** precision - 1).scaleb(-scale, exact)
    values = [decimal.Decimal(0).scaleb(-scale, exact), largest, largest.copy_negate()]
    for _ in range(200):
        n = rng.randrange(10 ** precision) * rng.choice((1, -1))
        values.append(decimal.Decimal(n).scaleb(-scale, exact))
    read = decode.make_decimal(precision, scale)
    assert decode.decimal_size(precision, scale) == len(encode_decimal(values[0], precision, scale))
    raws = [encode_decimal(v, precision, scale) for v in values]
    with decimal.localcontext() as ctx:
        ctx.prec = 3  # a caller's context must not round what we read
        for v, raw in zip(values, raws):
            got = read(b"\x07" + raw, 1)
            lib = parse_decimal_from_bytes(raw, precision, scale)
            assert got == v and got.as_tuple() == lib.as_tuple(), (v, raw.hex())
            assert str(got) == str(lib)


# ---- MySQL binary JSON --------------------------------------------------------------------
def _varlen(n: int) -> bytes:
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def encode_json(v, large=False) -> tuple[int, bytes]:
    """(type, body) in MySQL's binary JSON layout (containers small unless ``large``).
    ``("opaque", field type, data)`` is an opaque value; ``("u16" | "u32", n)`` an unsigned one
    (plain ints take the smallest of int16, int32, int64, uint64)."""
    if v is None or v is True or v is False:
        return 4, bytes([{None: 0, True: 1, False: 2}[v]])
    if isinstance(v, int):
        for t, fmt, lo, hi in ((5, "<h", -2**15, 2**15), (7, "<i", -2**31, 2**31), (9, "<q", -2**63, 2**63),
                               (10, "<Q", 0, 2**64)):
            if lo <= v < hi:
                return t, struct.pack(fmt, v)
    if isinstance(v, float):
        return 11, struct.pack("<d", v)
    if isinstance(v, (str, bytes)):
        b = v.encode() if isinstance(v, str) else v
        return 12, _varlen(len(b)) + b
    if isinstance(v, tuple) and v[0] == "opaque":
        return 15, bytes([v[1]]) + _varlen(len(v[2])) + v[2]
    if isinstance(v, tuple):
        return (6, struct.pack("<H", v[1])) if v[0] == "u16" else (8, struct.pack("<I", v[1]))
    is_obj = isinstance(v, dict)
    items = list(v.items()) if is_obj else [(None, x) for x in v]
    osz = 4 if large else 2
    pack = (lambda n: struct.pack("<I", n)) if large else (lambda n: struct.pack("<H", n))
    inline = {4, 5, 6} | ({7, 8} if large else set())
    header = 2 * osz + len(items) * (1 + osz) + (len(items) * (osz + 2) if is_obj else 0)
    keys = b""
    key_entries = b""
    for k, _ in items if is_obj else ():
        kb = k.encode()
        key_entries += pack(header + len(keys)) + struct.pack("<H", len(kb))
        keys += kb
    data = b""
    value_entries = b""
    base = header + len(keys)
    for _, x in items:
        t, body = encode_json(x, large)
        if t in inline:
            value_entries += bytes([t]) + body[:osz].ljust(osz, b"\0")
        else:
            value_entries += bytes([t]) + pack(base + len(data))
            data += body
    total = base + len(data)
    t = (0 if is_obj else 2) + (1 if large else 0)
    return t, pack(len(items)) + pack(total) + key_entries + value_entries + keys + data


def packed_datetime(y, mo, d, h=0, mi=0, s=0, us=0) -> int:
    """MySQL's packed DATETIME / DATE (the form a JSON opaque temporal holds, 8 bytes little-endian)."""
    return ((((y * 13 + mo) << 5 | d) << 17 | h << 12 | mi << 6 | s) << 24) + us


def packed_time(h, mi, s, us=0, neg=False) -> int:
    v = ((h << 12 | mi << 6 | s) << 24) + us
    return -v if neg else v


def opaque_decimal(text: str, precision: int, scale: int) -> tuple:
    return ("opaque", ev.T_NEWDECIMAL, bytes([precision, scale]) + encode_decimal(D(text), precision, scale))


def opaque_temporal(field_type: int, packed: int) -> tuple:
    return ("opaque", field_type, struct.pack("<q", packed))


D, J = decimal.Decimal, JsonText
NESTED = {"a": 1, "b": [1.5, "s", False], "c": {"d": {"e": None}}, "long": "y" * 200, "big": 2**35}
JSON_CASES = [  # value encoded, what json_value gives
    (None, J("null")), (True, J("true")), (False, J("false")),   # a bare scalar document: its JSON text
    (0, J("0")), (-1, J("-1")), (32767, J("32767")), (-32768, J("-32768")), (70000, J("70000")),
    (-(2**31), J("-2147483648")), (2**40, J("1099511627776")), (-(2**63), J("-9223372036854775808")),
    (2**64 - 1, J("18446744073709551615")), (("u16", 65535), J("65535")), (("u32", 2**32 - 1), J("4294967295")),
    (1.5, J("1.5")), (0.1, J("0.1")), (-0.25, J("-0.25")), (1e300, J("1e+300")),
    ("", J('""')), ("ü€😀", J('"ü€😀"')), ('say "hi"\n', J('"say \\"hi\\"\\n"')), ("x" * 300, J('"' + "x" * 300 + '"')),
    (opaque_decimal("-123.45", 10, 2), J("-123.45")),
    ([], []), ({}, {}),
    ([1, "a", None, True, [2, [3]], {"k": -7}], [1, "a", None, True, [2, [3]], {"k": -7}]),
    (NESTED, NESTED),
    ({"é": "ü", "日本": ["😀", ""], "": 0}, {"é": "ü", "日本": ["😀", ""], "": 0}),
    ({"zz": 1, "a": 2, "m": 3}, {"zz": 1, "a": 2, "m": 3}),       # keys in stored order
    ([32767, -32768, ("u16", 65535), 2**31 - 1, -(2**31), ("u32", 2**32 - 1), 2**31, 2**63 - 1, -(2**63),
      2**63, 2**64 - 1], [32767, -32768, 65535, 2**31 - 1, -(2**31), 2**32 - 1, 2**31, 2**63 - 1, -(2**63),
                          2**63, 2**64 - 1]),
    ([0.1, 1e-300, -1.7976931348623157e308, 5e-324, -0.0, 3.0], [0.1, 1e-300, -1.7976931348623157e308, 5e-324, -0.0, 3.0]),
    ([opaque_decimal("-123.45", 10, 2), opaque_decimal("1.50", 5, 2), opaque_decimal("0", 3, 0),
      opaque_decimal("12345678901234567890.123456789", 65, 30)],
     [D("-123.45"), D("1.50"), D("0"), D("12345678901234567890.123456789000000000000000000000")]),
    ({"n": opaque_decimal("99.9", 3, 1), "s": "x"}, {"n": D("99.9"), "s": "x"}),
]


def _lib_as_ours(v):
    """mysql-replication's value with its bytes keys and strings as text."""
    if isinstance(v, dict):
        return {k.decode(): _lib_as_ours(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_lib_as_ours(x) for x in v]
    return v.decode() if isinstance(v, bytes) else v


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("value,want", JSON_CASES, ids=range(len(JSON_CASES)))
def test_mysql_json(value, want, large):
    t, body = encode_json(value, large)
    got = decode.json_value(bytes([t]) + body)
    assert got == want and type(got) is type(want)
    assert repr(got) == repr(want)  # Decimal scale, -0.0, int vs float: as encoded
    if isinstance(want, dict):
        assert list(got) == list(want)
    lib = _lib_as_ours(parse_json(t, body))  # an independent reader of the same bytes
    assert (json_text(lib) if isinstance(got, JsonText) else lib) == got


def test_mysql_json_large_document():
    """Over 64 KiB MySQL writes large containers; a value deep in one reads the same."""
    doc = {"pad": "p" * 70000, "list": [{"i": i, "s": "é" * (i % 5)} for i in range(2000)], "end": 2**64 - 1}
    t, body = encode_json(doc, large=True)
    assert t == 1 and len(body) > 70000
    got = decode.json_value(bytes([t]) + body)
    assert got == doc and _lib_as_ours(parse_json(t, body)) == doc


TIME, DATE, DATETIME, TIMESTAMP = ev.T_TIME, ev.T_DATE, ev.T_DATETIME, ev.T_TIMESTAMP
TEMPORAL_CASES = [  # field type, packed value, the text MySQL's JSON shows (six fractional digits, TIME signed)
    (DATETIME, packed_datetime(2024, 2, 29, 12, 34, 56, 5), "2024-02-29 12:34:56.000005"),
    (DATETIME, packed_datetime(1000, 1, 1), "1000-01-01 00:00:00.000000"),
    (DATETIME, packed_datetime(9999, 12, 31, 23, 59, 59, 999999), "9999-12-31 23:59:59.999999"),
    (DATETIME, 0, "0000-00-00 00:00:00.000000"),
    (TIMESTAMP, packed_datetime(2038, 1, 19, 3, 14, 7, 120000), "2038-01-19 03:14:07.120000"),
    (DATE, packed_datetime(2024, 2, 29), "2024-02-29"),
    (DATE, packed_datetime(2024, 2, 31), "2024-02-31"),              # ALLOW_INVALID_DATES
    (DATE, 0, "0000-00-00"),
    (TIME, packed_time(1, 2, 3, 7), "01:02:03.000007"),
    (TIME, packed_time(0, 0, 0), "00:00:00.000000"),
    (TIME, packed_time(838, 59, 59), "838:59:59.000000"),
    (TIME, packed_time(838, 59, 59, neg=True), "-838:59:59.000000"),
    (TIME, packed_time(0, 0, 1, 500000, neg=True), "-00:00:01.500000"),
]


@pytest.mark.parametrize("field_type,packed,text", TEMPORAL_CASES)
def test_mysql_json_opaque_temporal(field_type, packed, text):
    t, body = encode_json([opaque_temporal(field_type, packed)])
    assert decode.json_value(bytes([t]) + body) == [text]
    try:  # the library reads DATE/DATETIME/TIME (not TIMESTAMP) as Python values, where they can be one
        lib = parse_json(t, body)[0]
    except ValueError:  # 2024-02-31, TIME past 23:59:59
        lib = None
    if isinstance(lib, datetime.datetime):
        assert text in (lib.isoformat(" ", "microseconds"), lib.date().isoformat())
    elif isinstance(lib, datetime.time) and not text.startswith("-"):
        assert text == lib.isoformat("microseconds")


@pytest.mark.parametrize("field_type,data,want", [
    (ev.T_VAR_STRING, "plain é".encode(), "plain é"),               # MySQL reads it as a JSON string
    (ev.T_BLOB, b"\x00\xff", "base64:type252:AP8="),                # the rest as MySQL shows them
    (ev.T_BIT, b"\x05", "base64:type16:BQ=="),
    (ev.T_YEAR, b"", "base64:type13:"),
])
def test_mysql_json_other_opaque(field_type, data, want):
    t, body = encode_json({"o": ("opaque", field_type, data)})
    assert decode.json_value(bytes([t]) + body) == {"o": want}


@pytest.mark.parametrize("raw", [
    bytes([12, 5]) + b"abc",                   # a string longer than its bytes
    bytes([12, 2]) + b"\xc3(",                 # not utf-8
    bytes([0]) + struct.pack("<HH", 1, 20),    # a container shorter than its size
    bytes([2]) + struct.pack("<HH", 1, 9) + bytes([12]) + struct.pack("<H", 9) + b"\x01a",  # offset past the end
    bytes([4, 3]),                             # no such literal
])
def test_mysql_json_malformed_is_refused(raw):
    """Refused (the window hands the event on undecodable), never read as another value."""
    with pytest.raises((ValueError, struct.error)):
        decode.json_value(raw)


# ---- temporal, bit, set, strings ----------------------------------------------------------
def _dt2(y, mo, d, h, mi, s):
    ym = y * 13 + mo
    return ((1 << 39) | ym << 22 | d << 17 | h << 12 | mi << 6 | s).to_bytes(5, "big")


def _run_lines(lines, buf):
    src = "def f(buf, p):\n" + "\n".join("    " + ln for ln in lines) + "\n    return v, p\n"
    ns = {"_ifb": int.from_bytes, "_DT": datetime.datetime, "_D": decimal.Decimal, "_dctx": decode._DEC_CTX,
          "_utc": decode.UTC_CACHE, "_utc_miss": decode.utc_miss, "_invalid_dt": decode.invalid_datetime}
    exec(src, ns)
    return ns["f"](buf, 0)


@pytest.mark.parametrize("fsp,frac,micro", [(0, b"", 0), (1, b"\x32", 500000), (2, b"\x63", 990000),
                                            (3, (123 * 10).to_bytes(2, "big"), 123000),
                                            (4, (1234).to_bytes(2, "big"), 123400),
                                            (5, (123450).to_bytes(3, "big"), 123450),
                                            (6, (999999).to_bytes(3, "big"), 999999)])
def test_datetime2_and_timestamp2_fractions(fsp, frac, micro):
    raw = _dt2(2024, 2, 29, 23, 59, 58) + frac
    assert _run_lines(decode.datetime2_lines("v", fsp), raw) == (
        datetime.datetime(2024, 2, 29, 23, 59, 58, micro), 5 + len(frac))
    ts = (1709251198).to_bytes(4, "big") + frac
    assert _run_lines(decode.timestamp2_lines("v", fsp), ts) == (
        datetime.datetime.utcfromtimestamp(1709251198).replace(microsecond=micro), 4 + len(frac))


def test_zero_and_invalid_dates_read_as_their_text():
    """Written back as they were: NULL would break a NOT NULL column (DM's sharding case)."""
    assert _run_lines(decode.datetime2_lines("v", 0), _dt2(0, 0, 0, 0, 0, 0))[0] == "0000-00-00 00:00:00"
    assert _run_lines(decode.datetime2_lines("v", 0), _dt2(0, 0, 0, 0, 0, 1))[0] == "0000-00-00 00:00:01"
    assert _run_lines(decode.datetime2_lines("v", 6), _dt2(2020, 0, 10, 0, 0, 0) + b"\0\0\1")[0] == \
        "2020-00-10 00:00:00.000001"
    assert decode.read_date(b"\0\0\0", 0) == "0000-00-00"
    assert decode.read_date((2024 << 9 | 2 << 5 | 29).to_bytes(3, "little"), 0) == datetime.date(2024, 2, 29)


@pytest.mark.parametrize("text,fsp,raw", [
    ("-01:00:00.25", 2, (0x800000 - (1 << 12) - 1).to_bytes(3, "big") + bytes([0x100 - 25])),
    ("-00:00:01.5", 1, (0x800000 - 1 - 1).to_bytes(3, "big") + bytes([0x100 - 50])),
    ("-00:00:00.001", 3, (0x800000 - 1).to_bytes(3, "big") + (0x10000 - 10).to_bytes(2, "big")),
    ("12:34:56.000001", 6, ((12 << 12 | 34 << 6 | 56) * (1 << 24) + 1 + 0x800000000000).to_bytes(6, "big")),
    ("-12:34:56.000001", 6, (0x800000000000 - ((12 << 12 | 34 << 6 | 56) * (1 << 24) + 1)).to_bytes(6, "big")),
    ("-838:59:59", 0, (0x800000 - (838 << 12 | 59 << 6 | 59)).to_bytes(3, "big")),
])
def test_time2_reads_negative_fractions_right(text, fsp, raw):
    neg = text.startswith("-")
    h, m, s = text.lstrip("-").split(":")
    sec, _, frac = s.partition(".")
    want = datetime.timedelta(hours=int(h), minutes=int(m), seconds=int(sec),
                              microseconds=int(frac.ljust(6, "0")) if frac else 0)
    assert decode.make_time2(fsp)(raw, 0) == (-want if neg else want)


def test_bit_and_set():
    assert decode.make_bit(1)(b"\x01", 0) == "1"
    assert decode.make_bit(12)(b"\x0a\xbc", 0) == "101010111100"
    assert decode.make_bit(64)(b"\xff" * 8, 0) == "1" * 64
    assert decode.make_set(("x", "y", "z"))(0b101) == {"x", "z"}
    assert decode.make_set(("x", "y", "z"))(0) == set()  # the value '', not NULL


def test_charsets_map_to_python_codecs_like_the_server():
    assert decode.python_codec("utf8mb4") == "utf-8" and decode.python_codec("utf8mb3") == "utf-8"
    assert decode.python_codec("latin1") == "mysql_latin1"  # Windows-1252, the server's five extra bytes too
    assert decode.python_codec("gbk") == "gbk"
    assert decode.python_codec("binary") is None and decode.python_codec("swe7") is None
    assert decode.python_codec(None) == "utf-8"


def _query_event(status: bytes, schema=b"db", sql=b"ALTER TABLE t ADD x datetime DEFAULT now()") -> bytes:
    from dm_core.binlog.events import HEADER_LEN

    post = (7).to_bytes(4, "little") + (0).to_bytes(4, "little") + bytes([len(schema)]) + b"\0\0" + \
        len(status).to_bytes(2, "little")
    return b"\0" * HEADER_LEN + post + status + schema + b"\0" + sql


QUERY_STATUS = [  # status variables -> (zone, sql_mode bitmap) read (None: not recorded / cannot walk)
    (b"\x00" + b"\0" * 4 + b"\x01" + (1 << 20 | 4).to_bytes(8, "little") + b"\x04" + b"\0" * 6 + b"\x05\x06+02:00",
     ("+02:00", 1 << 20 | 4, 0, 0)),                                      # flags2, sql_mode, charsets, zone
    (b"\x0c\x02ab\0cd\0" + b"\x05\x06SYSTEM", ("SYSTEM", None, None, None)),  # updated-db names, then the zone
    (b"\x0b\x01u\x01h" + b"\x05\x0dEurope/Berlin", ("Europe/Berlin", None, None, None)),  # invoker
    (b"\x00" + b"\0" * 4 + b"\x80\0\0\0", (None, None, None, None)),       # MariaDB's HRNOW, no zone
    (b"\x01" + (0).to_bytes(8, "little"), (None, 0, None, None)),     # sql_mode '' is recorded as 0
    (b"\x01" + (3).to_bytes(8, "little") + b"\xfe\x05\x06+02:00", (None, 3, None, None)),  # an unknown code ends the walk
    (b"\x04" + (28).to_bytes(2, "little") + (28).to_bytes(2, "little") + (45).to_bytes(2, "little"),
     (None, None, 28, 45)),                      # charsets: client gbk_chinese_ci, server utf8mb4_general_ci
]


@pytest.mark.parametrize("status, want", QUERY_STATUS)
def test_query_event_status(status, want):
    from dm_core.binlog.events import parse_query, query_status

    buf = _query_event(status)
    assert query_status(buf, 0, 13) == want
    assert parse_query(buf, 0, len(buf), 13) == (b"db", "ALTER TABLE t ADD x datetime DEFAULT now()")
