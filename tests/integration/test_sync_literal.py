"""The executors' statement text (literal.Renderer) stores every value type the binlog
decoder yields exactly as the driver's own parameter binding stores it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from dm_core.db import connect, connect_native, qi, qt
from dm_core.sync.applier import Applier
from dm_core.sync.dml import DMLBuilder, Stmt, to_db_value
from dm_core.sync.job import RowJob
from dm_core.sync.merger import merge
from dm_core.sync.literal import MAX_STATEMENT_BYTES, Renderer
from dm_core.target import TargetTable

pytestmark = pytest.mark.integration

# column, type, values the decoder can yield for it
CASES = [
    ("i", "BIGINT NULL", [0, -1, 2 ** 63 - 1, -2 ** 63, None]),
    ("u", "BIGINT UNSIGNED NULL", [2 ** 64 - 1]),
    ("b", "TINYINT(1) NULL", [True, False]),
    ("f", "DOUBLE NULL", [0.1, -1e-300, 1.7976931348623157e308, 5e-324, 123456789.12345679]),
    ("d", "DECIMAL(30,10) NULL", [Decimal("1E+3"), Decimal("-0E-2"), Decimal("12345678901234567890.0123456789"),
                                  Decimal("-0.0000000001"),
                                  Decimal("12345678901234567E+3")]),
    ("s", "VARCHAR(64) CHARACTER SET utf8mb4 NULL",
     ["", "it's", 'a"b', "back\\slash", "nul\x00byte", "ünïcödé 日本 🐬", "%s %% %(x)s", "\n\r\t\x1a", "'; DROP TABLE x; --"]),
    ("y", "VARBINARY(16) NULL", [b"", b"\x00\xff\xfe'\\", b"\xc3\x28"]),
    ("t", "DATETIME(6) NULL", [dt.datetime(2024, 2, 29, 23, 59, 59, 999999), dt.datetime(1000, 1, 1),
                               dt.datetime(9999, 12, 31, 1, 2, 3, 4)]),
    ("dd", "DATE NULL", [dt.date(2024, 2, 29), dt.date(1, 1, 1)]),
    ("tm", "TIME(6) NULL", [dt.timedelta(0), dt.timedelta(hours=-838, minutes=-59, seconds=-59),
                            dt.timedelta(hours=838, minutes=59, seconds=59), dt.timedelta(seconds=-1, microseconds=500000),
                            dt.timedelta(days=2, seconds=3, microseconds=7)]),
    ("j", "LONGTEXT NULL", [{"k": [1, "é", None]}, [1, 2.5, {"a": "b"}]]),
    ("st", "SET('a','b','c') NULL", [{"c", "a"}, set()]),
]


@pytest.fixture
def tables(stack, uniq):
    schema = f"lit_{uniq}"
    conn = connect(stack["down"])
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {qi(schema)} CHARACTER SET utf8mb4")
        for name in ("want", "got"):
            cols = ", ".join(f"{qi(c)} {t}" for c, t, _ in CASES)
            cur.execute(f"CREATE TABLE {qt(schema, name)} (n INT NOT NULL PRIMARY KEY, {cols})")
    native = connect_native(stack["down"])
    try:
        yield conn, native, schema
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {qi(schema)}")
        conn.close()
        native.close()


# pymysql binds a negative timedelta wrongly ('-839:00:01' for -838:59:59): the reference
# for TIME is the value written out as text.
TIME_TEXT = {dt.timedelta(0): "00:00:00", dt.timedelta(hours=-838, minutes=-59, seconds=-59): "-838:59:59",
             dt.timedelta(hours=838, minutes=59, seconds=59): "838:59:59",
             dt.timedelta(seconds=-1, microseconds=500000): "-00:00:00.5", dt.timedelta(days=2, seconds=3, microseconds=7): "48:00:03.000007"}


def _reference(c: str, v):
    return TIME_TEXT[v] if c == "tm" else to_db_value(v)


def _rows() -> list[dict]:
    width = max(len(vals) for _, _, vals in CASES)
    return [{"n": i, **{c: vals[i % len(vals)] for c, _, vals in CASES}} for i in range(width)]


def test_every_value_type_lands_as_the_driver_binds_it(tables):
    conn, native, schema = tables
    cols = ["n"] + [c for c, _, _ in CASES]
    rows = _rows()
    ins = lambda t: f"INSERT INTO {qt(schema, t)} ({', '.join(qi(c) for c in cols)}) VALUES ({', '.join(['%s'] * len(cols))})"
    with conn.cursor() as cur:  # the reference: pymysql's own parameter binding
        for r in rows:
            cur.execute(ins("want"), tuple(_reference(c, r[c]) for c in cols))
    Applier(native).apply([Stmt(ins("got"), tuple(r[c] for c in cols)) for r in rows])
    with conn.cursor() as cur:
        for c in cols:
            cur.execute(f"SELECT n, {qi(c)} FROM {qt(schema, 'want')} ORDER BY n")
            want = cur.fetchall()
            cur.execute(f"SELECT n, {qi(c)} FROM {qt(schema, 'got')} ORDER BY n")
            assert cur.fetchall() == want, c


def test_nan_is_refused_with_the_value_named(tables):
    _, native, _ = tables
    with pytest.raises(ValueError, match="nan"):
        Renderer(native).render("SELECT %s", (float("nan"),))


def test_a_run_of_single_row_inserts_becomes_capped_multi_row_statements(tables):
    conn, native, schema = tables
    r = Renderer(native, max_bytes=MAX_STATEMENT_BYTES // 8)
    build = DMLBuilder(TargetTable(schema, "got", ("n", "s"), ("n",), True)).build
    stmts = [s for i in range(40_000) for s in build("insert", None, {"n": i, "s": "x" * 60}, False)]
    sql = stmts[0].sql
    assert sql == f"INSERT INTO {qt(schema, 'got')} (`n`, `s`) VALUES (%s, %s)"
    texts = r.render_run(sql, stmts)
    assert 1 < len(texts) < 10 and all(len(t) <= r.max_bytes for t in texts)
    Applier(native).apply(stmts)
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*), COUNT(DISTINCT n), MIN(s) = MAX(s) FROM {qt(schema, 'got')}")
        assert cur.fetchone() == (40_000, 40_000, 1)


def test_identifiers_with_percent_signs_survive(tables):
    conn, native, schema = tables
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {qt(schema, 'p%s%%')} (`a%s` INT PRIMARY KEY)")
    t = TargetTable(schema, "p%s%%", ("a%s",), ("a%s",), True)
    Applier(native).apply(DMLBuilder(t).build("insert", None, {"a%s": 7}, False) * 1 +
                          DMLBuilder(t).build("insert", None, {"a%s": 8}, False))
    with conn.cursor() as cur:
        cur.execute(f"SELECT {qi('a%s')} FROM {qt(schema, 'p%s%%')} ORDER BY 1")
        assert cur.fetchall() == ((7,), (8,))


def test_merged_statements_of_large_rows_stay_under_max_allowed_packet(tables):
    """300 rows of 200 KB merged into one REPLACE would be a 60 MB statement, which the
    server refuses on every retry: the applier sends it in pieces, in order."""
    conn, native, schema = tables
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {qt(schema, 'big')} (id INT PRIMARY KEY, b LONGBLOB, s LONGTEXT)")
        cur.execute("SELECT @@max_allowed_packet")
        packet = int(cur.fetchone()[0])
    t = TargetTable(schema, "big", ("id", "b", "s"), ("id",), True, True)
    rows = [{"id": i, "b": bytes([i % 256]) * 100_000, "s": chr(0x4e00 + i) * 35_000} for i in range(300)]
    jobs = [RowJob("insert", t, None, r, True) for r in rows]
    jobs += [RowJob("update", t, rows[i], {**rows[i], "s": "changed"}, False) for i in range(0, 300, 7)]
    stmts = merge(jobs, multiple_rows=True)
    assert sum(len(s.sql) + sum(len(v) for v in s.params if isinstance(v, (str, bytes))) for s in stmts) > packet
    Applier(native).apply(stmts)
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*), SUM(LENGTH(b)), SUM(s = 'changed'), MIN(id), MAX(id) FROM {qt(schema, 'big')}")
        assert cur.fetchone() == (300, 300 * 100_000, len(range(0, 300, 7)), 0, 299)


def test_per_row_statements_go_joined_and_a_failure_inside_a_join_undoes_the_whole_batch(stack, tables):
    """DM's default statements (one UPDATE / DELETE per row) on an executor's connection go
    several to a round trip; a statement failing inside a joined send still fails the batch
    whole, with the server's code, and leaves the connection usable."""
    from dm_core.errors import ShardflowError

    conn, _, schema = tables
    native = connect_native(stack["down"], multi_statements=True)
    try:
        t = TargetTable(schema, "got", ("n", "s"), ("n",), True, True)
        build = DMLBuilder(t).build
        applier = Applier(native)
        applier.apply([s for i in range(3000) for s in build("insert", None, {"n": i, "s": "a"}, False)])
        stmts = [s for i in range(3000) for s in (
            build("update", {"n": i, "s": "a"}, {"n": i, "s": "b"}, False) if i % 3 else
            build("delete", {"n": i, "s": "a"}, None, False))]
        texts = [x for s in stmts for x in applier._render.render_run(s.sql, [s])]
        sends = applier._round_trips(texts)
        assert len(sends) < len(texts) // 50 and all(len(x) <= applier._render.max_bytes for x in sends)
        applier.apply(stmts)
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*), SUM(s = 'b') FROM {qt(schema, 'got')}")
            assert cur.fetchone() == (2000, 2000)
        # the 1062 sits between two updates in one send: neither update may stay
        bad = (build("update", {"n": 1, "s": "b"}, {"n": 1, "s": "c"}, False)
               + build("update", {"n": 2, "s": "b"}, {"n": 3, "s": "c"}, False)   # 3 was deleted: fine
               + build("update", {"n": 4, "s": "b"}, {"n": 5, "s": "c"}, False)   # 5 exists: 1062
               + build("update", {"n": 7, "s": "b"}, {"n": 7, "s": "c"}, False))
        with pytest.raises(ShardflowError) as e:
            applier.apply(bad)
        assert e.value.errno == 1062
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {qt(schema, 'got')} WHERE s = 'c' OR n = 3")
            assert cur.fetchone() == (0,)
        applier.apply(build("update", {"n": 1, "s": "b"}, {"n": 1, "s": "d"}, False))
        with conn.cursor() as cur:
            cur.execute(f"SELECT s FROM {qt(schema, 'got')} WHERE n = 1")
            assert cur.fetchone() == ("d",)
    finally:
        native.close()


def test_strings_escaped_in_c_are_the_drivers_bytes_and_land_exactly(tables):
    """On a real utf8mb4 connection the C path's own escaping is libmariadb's, byte for byte, also
    for byte strings that are not UTF-8; after SET sql_mode = NO_BACKSLASH_ESCAPES it quotes as the
    driver then does; and the values read back equal what was written, in both modes."""
    import random

    conn, native, schema = tables
    r = Renderer(native)
    rnd = random.Random(11)
    pool = b"\x00\n\r\x1a\"'\\%ab \x80\xbf\xc3\xe3\xf0\xff"
    blobs = [bytes(rnd.choice(pool) for _ in range(rnd.randrange(16))) for _ in range(300)]
    texts = [b.decode("utf-8", "replace")[:20] + rnd.choice(["", "日本", "🐬"]) for b in blobs]
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {qt(schema, 'esc')} (n INT PRIMARY KEY, s VARCHAR(64) CHARACTER SET utf8mb4, "
                    f"y VARBINARY(16))")
    ins = f"INSERT INTO {qt(schema, 'esc')} (n, s, y) VALUES (%s, %s, %s)"
    applier = Applier(native)
    for mode, base in (("backslashes", 0), ("NO_BACKSLASH_ESCAPES", 1000)):
        if base:
            with native.cursor() as cur:
                cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
        for v in blobs + texts:
            assert r.render("SELECT %s", (v,)) == r._fill(r._template("SELECT %s"), (v,)), (mode, v)
        applier.apply([Stmt(ins, (base + i, s, y)) for i, (s, y) in enumerate(zip(texts, blobs))])
        with conn.cursor() as cur:
            cur.execute(f"SELECT s, y FROM {qt(schema, 'esc')} WHERE n >= %s AND n < %s ORDER BY n", (base, base + 1000))
            assert cur.fetchall() == tuple(zip(texts, blobs)), mode
