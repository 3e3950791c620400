"""Every column type at its extremes arrives exactly, on each path a value can take: the full
load's text path (the default), its JDBC path (``--read jdbc``: Spark's JDBC source, Arrow and
LOAD DATA), the JDBC path with the staging write (Spark's JDBC writer), and the binlog sync.

Each column is compared by an exact form of its value, read the same way upstream and
downstream (``EXACT``): the bytes of strings, the digits of decimals, the widened bits of a
FLOAT, a DOUBLE's shortest round-trip text, temporal values as text at UTC (zero and partial
zero dates included), YEAR as its 4 digits. Before: DECIMAL(65,30) was rounded on the JDBC path
and beyond 38 digits failed the load, FLOAT lost all but 6 digits there, YEAR 0000 became 2000
there and 1900 in sync (the downstream refused it), the zero TIMESTAMP reached sync as the
epoch (refused), five latin1 bytes stopped the sync with UnicodeDecodeError, and GBK characters
Unicode lacks (its user-defined area) became '?' in the full load and stopped the sync."""

import pytest

from dm_core.db import connect, qi, qt
from dm_core.full.phase import finish, forget, prepare
from dm_core.state import StateStore
from dm_core.sync.syncer import Syncer

from .helpers import drop_schemas
from .test_full_support import cleanup, register, run_load, task_yaml

pytestmark = pytest.mark.integration

COLUMNS = {   # name: (definition, exact form of its value as SQL over `{c}`)
    "ti": ("tinyint", "{c}"), "tiu": ("tinyint unsigned", "{c}"),
    "si": ("smallint", "{c}"), "siu": ("smallint unsigned", "{c}"),
    "mi": ("mediumint", "{c}"), "miu": ("mediumint unsigned", "{c}"),
    "i": ("int", "{c}"), "iu": ("int unsigned", "{c}"),
    "bi": ("bigint", "{c}"), "biu": ("bigint unsigned", "{c}"),
    "d0": ("decimal(10,0)", "CAST({c} AS CHAR)"),
    "d38": ("decimal(38,10)", "CAST({c} AS CHAR)"),
    "d39": ("decimal(39,3)", "CAST({c} AS CHAR)"),
    "d65": ("decimal(65,30)", "CAST({c} AS CHAR)"),
    "f": ("float", "CAST({c} AS DOUBLE)"),
    "fmd": ("float(10,3)", "CAST({c} AS DOUBLE)"),
    "db": ("double", "CAST({c} AS CHAR)"),
    "b1": ("bit(1)", "CAST({c} AS UNSIGNED)"), "b64": ("bit(64)", "CAST({c} AS UNSIGNED)"),
    "y": ("year", "CAST({c} AS CHAR)"),
    "da": ("date", "CAST({c} AS CHAR)"),
    "dt": ("datetime", "CAST({c} AS CHAR)"), "dt6": ("datetime(6)", "CAST({c} AS CHAR)"),
    "ts": ("timestamp NULL", "CAST({c} AS CHAR)"), "ts6": ("timestamp(6) NULL", "CAST({c} AS CHAR)"),
    "tm": ("time", "CAST({c} AS CHAR)"), "tm6": ("time(6)", "CAST({c} AS CHAR)"),
    "c": ("char(10)", "HEX({c})"), "vc": ("varchar(255)", "HEX({c})"),
    "l1": ("varchar(300) CHARACTER SET latin1", "HEX({c})"),
    "gb": ("varchar(20) CHARACTER SET gbk", "HEX({c})"),
    "bn": ("binary(8)", "HEX({c})"), "vb": ("varbinary(300)", "HEX({c})"),
    "bl": ("blob", "HEX({c})"), "tx": ("text", "HEX({c})"),
    "e": ("enum('a','ç','z')", "CONCAT(HEX({c}), '/', {c} + 0)"),
    "st": ("set('x','y','z')", "CONCAT(HEX({c}), '/', {c} + 0)"),
    "j": ("json", "HEX({c})"),
}
GEO = {"g": ("geometry", "HEX({c})"), "p": ("point", "HEX({c})")}

LATIN1_HIGH = "UNHEX('" + "".join(f"{b:02X}" for b in range(0x80, 0x100)) + "')"   # 0x81, 0x8D ... included
ALL_BYTES = "UNHEX('" + "".join(f"{b:02X}" for b in range(256)) + "')"
ROWS = [   # (id, {column: SQL literal}); columns not named are NULL
    (1, dict(ti="127", tiu="255", si="32767", siu="65535", mi="8388607", miu="16777215", i="2147483647",
             iu="4294967295", bi="9223372036854775807", biu="18446744073709551615", d0="9999999999",
             d38="9999999999999999999999999999.9999999999", d39="999999999999999999999999999999999999.999",
             d65="99999999999999999999999999999999999.999999999999999999999999999999",
             f="3.4028234663852886e38", fmd="99999.125", db="1.7976931348623157e308", b1="1",
             b64="18446744073709551615", y="2155", da="'9999-12-31'", dt="'9999-12-31 23:59:59'",
             dt6="'9999-12-31 23:59:59.999999'", ts="'2038-01-19 03:14:07'", ts6="'2038-01-19 03:14:07.999999'",
             tm="'838:59:59'", tm6="'838:59:59.000000'", c="'ꝏ😀ab'", vc="CONCAT(REPEAT('é', 250), '😀')",
             l1=LATIN1_HIGH, gb="'汉字测试'", bn="UNHEX('00FF00FF00FF00FF')", vb=ALL_BYTES, bl=ALL_BYTES,
             tx="'tab\\there\\nnewline \\\\ backslash \\' quote'", e="'ç'", st="'x,y,z'",
             j="'{\"k\": [1, 2.5, \"é\", null, true], \"big\": 18446744073709551615}'")),
    (2, dict(ti="-128", tiu="0", si="-32768", siu="0", mi="-8388608", miu="0", i="-2147483648", iu="0",
             bi="-9223372036854775808", biu="0", d0="-9999999999", d38="-0.0000000001",
             d39="-999999999999999999999999999999999999.999",
             d65="-99999999999999999999999999999999999.999999999999999999999999999999",
             f="-3.4028234663852886e38", fmd="-0.001", db="-1.7976931348623157e308", b1="0", b64="0",
             y="1901", da="'1000-01-01'", dt="'1000-01-01 00:00:00'", dt6="'1000-01-01 00:00:00.000000'",
             ts="'1970-01-01 00:00:01'", ts6="'1970-01-01 00:00:01.000001'", tm="'-838:59:59'",
             tm6="'-00:00:00.000001'", c="''", vc="''", l1="''", gb="''", bn="UNHEX('')", vb="UNHEX('')",
             bl="UNHEX('')", tx="''", e="'a'", st="''", j="'[]'")),
    (3, dict(ti="0", d38="0.0000000001", d65="0.000000000000000000000000000001", f="1.401298464324817e-45",
             fmd="0", db="4.9406564584124654e-324", y="0", da="'0000-00-00'", dt="'0000-00-00 00:00:00'",
             dt6="'0000-00-00 00:00:00.000000'", ts="'0000-00-00 00:00:00'", ts6="'0000-00-00 00:00:00.000000'",
             tm="'00:00:00'", tm6="'00:00:00.000000'", l1="UNHEX('818D8F909D')", gb="UNHEX('AAA1A2E3FE50')", vc="'NULL'", tx="'\\\\N'",
             j="'\"\"'")),
    (4, dict(f="0.1", fmd="1234567.125", db="0.1", d65="12345.678912345678901234567890123456", y="1999",
             da="'2024-02-00'", dt="'2024-00-10 10:00:00'", dt6="'2024-02-31 23:59:59.5'", tm="'-00:00:01'",
             c="'trailing  '", vc="'trailing  '", st="'z'", j="'{\"n\": -0.0, \"e\": 1e308}'")),
    (5, {}),
]
GEO_ROWS = [(1, dict(g="ST_GeomFromText('POLYGON((0 0, 1e300 0, 0 -1e-300, 0 0))')",
                     p="ST_GeomFromText('POINT(-0.1 3.4028234663852886e38)')")),
            (2, dict(g="ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 2), LINESTRING(0 0, 1 1))', 4326)",
                     p="ST_GeomFromText('POINT(0 0)')")),
            (3, {})]


def _insert(conn, schema: str, table: str, rows, offset: int = 0) -> None:
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")   # zero dates, the ENUM error value
        for rid, values in rows:
            cols = ["id", *values]
            cur.execute(f"INSERT INTO {qt(schema, table)} ({', '.join(qi(c) for c in cols)}) "
                        f"VALUES ({', '.join([str(rid + offset), *values.values()])})")


def _exact(ep, schema: str, table: str, columns: dict) -> dict:
    """{id: (column, exact form), ...} of every row, read at UTC."""
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
            exprs = ", ".join(form.format(c=qi(c)) for c, (_, form) in columns.items())
            cur.execute(f"SELECT id, {exprs} FROM {qt(schema, table)} ORDER BY id")
            return {r[0]: tuple(zip(columns, r[1:])) for r in cur.fetchall()}
    finally:
        conn.close()


def _assert_exact(stack, schema, tdb, what: str) -> None:
    for table, columns in (("vals", COLUMNS), ("geo", GEO)):
        up, down = _exact(stack["up1"], schema, table, columns), _exact(stack["down"], tdb, table, columns)
        assert sorted(down) == sorted(up), f"{what}: rows of {table}"
        for rid in up:
            wrong = [(c, u, d) for (c, u), (_, d) in zip(up[rid], down[rid]) if u != d]
            assert not wrong, f"{what}: {table} id {rid}: (column, upstream, downstream): {wrong}"


def test_every_type_at_its_extremes_arrives_exactly_on_every_path(stack, uniq):
    schema, tdb, name, sid = f"ex{uniq}", f"ext{uniq}", f"ex{uniq}", f"ex-{uniq}"
    up = stack["up1"]
    conn = connect(up)
    text = task_yaml(name, stack["down"], [(sid, schema)], tdb).replace("task-mode: full", "task-mode: all")
    store = StateStore()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {qi(schema)}")
            cur.execute(f"CREATE TABLE {qt(schema, 'vals')} (id int PRIMARY KEY, "
                        + ", ".join(f"{qi(c)} {d}" for c, (d, _) in COLUMNS.items()) + ") DEFAULT CHARSET=utf8mb4")
            cur.execute(f"CREATE TABLE {qt(schema, 'geo')} (id int PRIMARY KEY, g geometry NULL, p point NULL)")
        _insert(conn, schema, "vals", ROWS)
        _insert(conn, schema, "geo", GEO_ROWS)
        for how in (("--read", "auto"), ("--read", "jdbc"), ("--read", "jdbc", "--write-mode", "staging")):
            task = register(store, name, text, {sid: up})
            forget(task, store)
            drop_schemas(stack["down"], [tdb])
            prepare(task, store)
            r = run_load(name, *how)
            assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
            _assert_exact(stack, schema, tdb, f"full load {' '.join(how)}")
        finish(task, store)
        _insert(conn, schema, "vals", ROWS, offset=100)   # the same values, through the binlog
        _insert(conn, schema, "geo", GEO_ROWS, offset=100)
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {qt(schema, 'vals')} SET y = 0, ts = '0000-00-00 00:00:00', l1 = UNHEX('9D81') "
                        "WHERE id IN (1, 101)")
            cur.execute(f"DELETE FROM {qt(schema, 'vals')} WHERE id IN (2, 102)")
        res = Syncer(task, sid, store).run_until(float("inf"), max_windows=20)
        assert not res.paused and res.caught_up, res.paused
        _assert_exact(stack, schema, tdb, "sync")
    finally:
        cleanup(store, name, text)
        store.close()
        conn.close()
        drop_schemas(up, [schema])
        drop_schemas(stack["down"], [tdb])


def test_text_a_target_charset_cannot_hold_is_refused_naming_it_on_both_paths(stack, uniq):
    """A GBK value with a character Unicode lacks, into a target column the user made utf8mb4:
    the precheck warns of the column, and no path may write '?' for it. Each refuses the chunk,
    naming table, column (and on the JDBC path key and value), and nothing lands."""
    schema, tdb, name, sid = f"cv{uniq}", f"cvt{uniq}", f"cv{uniq}", f"cv-{uniq}"
    up, down = stack["up1"], stack["down"]
    conn = connect(up)
    text = task_yaml(name, down, [(sid, schema)], tdb)
    store = StateStore()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {qi(schema)}")
            cur.execute(f"CREATE TABLE {qt(schema, 'conv')} (id int PRIMARY KEY, gb varchar(20) CHARACTER SET gbk)")
            cur.execute(f"INSERT INTO {qt(schema, 'conv')} VALUES (1, '汉字'), (7, UNHEX('BABAAAA1'))")
        dconn = connect(down)
        with dconn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {qi(tdb)}")
            cur.execute(f"CREATE TABLE {qt(tdb, 'conv')} (id int PRIMARY KEY, gb varchar(20) CHARACTER SET utf8mb4)")
        from dm_core.check import run_prechecks
        from dm_core.sources import target_endpoint

        task = register(store, name, text, {sid: up})
        report = run_prechecks(task, {sid: up}, target_endpoint(task)).render()
        assert f"column gb of `{schema}`.`conv` is gbk and its target" in report and "is utf8mb4" in report, report
        for how, said in ((("--read", "auto"), "Cannot convert 'gbk' character 0xAAA1 to 'utf8mb4'"),
                          (("--read", "jdbc"), f"`{schema}`.`conv`.`gb` (gbk) of the row with id = 7 holds 0xBABAAAA1")):
            task = register(store, name, text, {sid: up})
            forget(task, store)
            prepare(task, store)
            r = run_load(name, *how)
            assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
            assert said in r.stdout + r.stderr and f"{schema}.conv" in r.stdout + r.stderr, r.stderr[-3000:]
            with dconn.cursor() as cur:
                cur.execute(f"SELECT COUNT(*) FROM {qt(tdb, 'conv')}")
                assert cur.fetchone()[0] == 0, "a chunk landed (changed)"
        dconn.close()
    finally:
        cleanup(store, name, text)
        store.close()
        conn.close()
        drop_schemas(up, [schema])
        drop_schemas(down, [tdb])


def test_a_narrower_target_column_is_named_by_the_precheck_refused_by_the_load_and_pauses_the_sync(stack, uniq):
    """A target table the user made with narrower columns (VARCHAR(3) for VARCHAR(20), TINYINT
    for INT, DECIMAL(5,2) for DECIMAL(10,4)): the precheck names each column; the full load on
    either read path refuses the chunk naming column and row (with REPLACE the strict session's
    error; with on-duplicate ignore the LOCAL load's warnings, which a strict session does not
    turn into errors) and nothing lands; and with the downstream server at sql_mode='' a row
    that does not fit pauses the sync instead of landing cut short."""
    schema, tdb, name, sid = f"nw{uniq}", f"nwt{uniq}", f"nw{uniq}", f"nw-{uniq}"
    up, down = stack["up1"], stack["down"]
    conn, dconn = connect(up), connect(down)
    base = task_yaml(name, down, [(sid, schema)], tdb)
    store = StateStore()
    with dconn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.sql_mode")
        server_mode = cur.fetchone()[0]
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {qi(schema)}")
            cur.execute(f"CREATE TABLE {qt(schema, 'nar')} (id int PRIMARY KEY, v varchar(20), n int, d decimal(10,4))")
            cur.execute(f"INSERT INTO {qt(schema, 'nar')} VALUES (1, 'ab', 5, 1.5), (7, 'abcdef', 1000, 12.3456)")
        with dconn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {qi(tdb)}")
            cur.execute(f"CREATE TABLE {qt(tdb, 'nar')} (id int PRIMARY KEY, v varchar(3), n tinyint, d decimal(5,2))")
        from dm_core.check import run_prechecks
        from dm_core.sources import target_endpoint

        task = register(store, name, base, {sid: up})
        report = run_prechecks(task, {sid: up}, target_endpoint(task)).render()
        for col, up_type, down_type in (("v", "varchar(20)", "varchar(3)"), ("n", "int", "tinyint"),
                                        ("d", "decimal(10,4)", "decimal(5,2)")):
            assert f"column {col} of `{schema}`.`nar` is {up_type} and its target `{tdb}`.`nar`.{col} is {down_type}" \
                in report, report
        ignore = task_yaml(name, down, [(sid, schema)], tdb, loader="{on-duplicate-logical: ignore}")
        for text, how in ((base, ("--read", "auto")), (base, ("--read", "jdbc")), (ignore, ("--read", "auto"))):
            task = register(store, name, text, {sid: up})
            forget(task, store)
            prepare(task, store)
            r = run_load(name, *how)
            said = r.stdout + r.stderr
            assert r.returncode == 1, said[-3000:]
            assert "for column 'v' at row" in said and "abcdef" in said and "The target column cannot hold" in said, \
                (how, said[-4000:])
            with dconn.cursor() as cur:
                cur.execute(f"SELECT COUNT(*) FROM {qt(tdb, 'nar')}")
                assert cur.fetchone()[0] == 0, f"{how}: a chunk landed changed"
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM {qt(schema, 'nar')} WHERE id = 7")
        text = base.replace("task-mode: full", "task-mode: all")
        task = register(store, name, text, {sid: up})
        forget(task, store)
        prepare(task, store)
        r = run_load(name)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        finish(task, store)
        with dconn.cursor() as cur:
            cur.execute("SET GLOBAL sql_mode = ''")
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {qt(schema, 'nar')} VALUES (8, 'toolong', 2, 2.5)")
        res = Syncer(task, sid, store).run_until(float("inf"), max_windows=20)
        assert res.paused and "Data too long for column 'v'" in str(res.paused), res.paused
        with dconn.cursor() as cur:
            cur.execute(f"SELECT id, v FROM {qt(tdb, 'nar')} ORDER BY id")
            assert cur.fetchall() == ((1, "ab"),), "a row landed cut short"
    finally:
        with dconn.cursor() as cur:
            cur.execute("SET GLOBAL sql_mode = %s", (server_mode,))
        cleanup(store, name, base)
        store.close()
        conn.close()
        dconn.close()
        drop_schemas(up, [schema])
        drop_schemas(down, [tdb])

