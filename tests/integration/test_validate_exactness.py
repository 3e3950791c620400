"""The row image (dm_core/validate/image.py) on a real MariaDB: pairs of values that differ in
exactly one way that matters give different images (so different checksums), and pairs that
are the same value written differently -- across two sides with different column types too --
give the same image."""

import pytest

from dm_core.db import connect, qi
from dm_core.validate.image import Source, column_infos, common, render, row_sql

pytestmark = pytest.mark.integration

# (case, column definitions, row a, row b): the images must differ
DIFFERENT = [
    ("decimal last digit", ["DECIMAL(30,10)"], ("1.0000000001",), ("1.0000000002",)),
    ("decimal 65 digits", ["DECIMAL(65,0)"], ("9" * 65,), ("9" * 64 + "8",)),
    ("float bits past 6 digits", ["FLOAT"], (1.0000001,), (1.0000002,)),
    ("double last bit", ["DOUBLE"], (0.30000000000000004,), (0.3,)),
    ("ci case", ["VARCHAR(10) COLLATE utf8mb4_general_ci"], ("a",), ("A",)),
    ("ci trailing space", ["VARCHAR(10) COLLATE utf8mb4_general_ci"], ("a",), ("a ",)),
    ("ci accent", ["VARCHAR(10) COLLATE utf8mb4_unicode_ci"], ("e",), ("é",)),
    ("ci sharp s", ["VARCHAR(10) COLLATE utf8mb4_unicode_ci"], ("ß",), ("ss",)),
    ("latin1 ci case", ["VARCHAR(10) CHARACTER SET latin1"], ("ä",), ("Ä",)),
    ("NULL vs empty", ["VARCHAR(10) NULL"], (None,), ("",)),
    ("NULL vs 'NULL'", ["VARCHAR(10) NULL"], (None,), ("NULL",)),
    ("NULL vs 0", ["INT NULL"], (None,), (0,)),
    ("NULL moved", ["VARCHAR(10) NULL", "VARCHAR(10) NULL"], (None, ""), ("", None)),
    ("separator moved", ["VARCHAR(10)", "VARCHAR(10)"], ("a,b", "c"), ("a", "b,c")),
    ("separator moved past a number", ["VARCHAR(10)", "INT", "VARCHAR(10)"], ("a,1", 2, "b"), ("a", 1, "2,b")),
    ("trailing zero byte", ["VARBINARY(10)"], (b"a",), (b"a\x00",)),
    ("blob byte", ["BLOB"], (b"\x00\xff",), (b"\x00\xfe",)),
    ("json value", ["JSON"], ('{"a": 1}',), ('{"a": 2}',)),
    ("json string vs number", ["JSON"], ('{"a": "1"}',), ('{"a": 1}',)),
    ("json big integers", ["JSON"], ("[12345678901234567890]",), ("[12345678901234567891]",)),
    ("json null vs SQL NULL", ["JSON NULL"], ("null",), (None,)),
    ("datetime microsecond", ["DATETIME(6)"], ("2024-01-01 00:00:00.000001",), ("2024-01-01 00:00:00.000002",)),
    ("timestamp second", ["TIMESTAMP NULL"], ("2024-01-01 00:00:01",), ("2024-01-01 00:00:02",)),
    ("time sign", ["TIME"], ("01:00:00",), ("-01:00:00",)),
    ("bit", ["BIT(8)"], (1,), (2,)),
    ("enum", ["ENUM('a','b')"], ("a",), ("b",)),
    ("set member", ["SET('a','b','c')"], ("a,b",), ("a,c",)),
    ("bigint unsigned top", ["BIGINT UNSIGNED"], (2**64 - 1,), (2**64 - 2,)),
]

# (case, side 1 column, side 2 column, value on side 1, value on side 2): one value, one image
SAME = [
    ("decimal scales", "DECIMAL(10,1)", "DECIMAL(12,3)", "1.5", "1.5"),
    ("int vs decimal", "INT", "DECIMAL(10,2)", "7", "7"),
    ("float vs double", "FLOAT", "DOUBLE", 0.1, 0.10000000149011612),   # the FLOAT's value exactly
    ("datetime precisions", "DATETIME", "DATETIME(6)", "2024-01-01 10:00:00", "2024-01-01 10:00:00"),
    ("timestamp vs datetime", "TIMESTAMP NULL", "DATETIME(3)", "2024-01-01 10:00:00", "2024-01-01 10:00:00"),
    ("latin1 vs utf8mb4", "VARCHAR(10) CHARACTER SET latin1", "VARCHAR(10) CHARACTER SET utf8mb4", "é", "é"),
    ("ci vs bin", "VARCHAR(10) COLLATE utf8mb4_general_ci", "VARCHAR(10) COLLATE utf8mb4_bin", "aB", "aB"),
    ("json key order and spaces", "JSON", "JSON", '{"b": [1, 2.50], "a": "x"}', '{"a":"x","b":[1,2.50]}'),
    ("bit vs int", "BIT(8)", "INT", 5, 5),
]


@pytest.fixture(scope="module")
def db(stack):
    conn = connect(stack["down"])
    schema = "vexact"
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {schema}")
        cur.execute(f"CREATE DATABASE {schema}")
    yield conn, schema
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {schema}")
    conn.close()


def _table(conn, schema: str, name: str, types: list[str], rows: list[tuple]) -> list[str]:
    cols = [f"c{i}" for i in range(len(types))]
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {schema}.{name} (id INT PRIMARY KEY, "
                    + ", ".join(f"{c} {t}" for c, t in zip(cols, types)) + ")")
        for i, r in enumerate(rows, 1):
            cur.execute(f"INSERT INTO {schema}.{name} VALUES (%s{', %s' * len(r)})", (i, *r))
    return cols


def _images(conn, schema: str, tables: list[str], cols: list[str]) -> list[bytes]:
    """The image of every row of ``tables`` (one side each), rendered with what all sides agree on."""
    infos = [column_infos(conn, schema, t) for t in tables]
    sides = [[Source("column", qi(c), i[c]) for c in cols] for i in infos]
    commons = [common([side[k] for side in sides]) for k in range(len(cols))]
    out = []
    for t, side in zip(tables, sides):
        sql = row_sql([render(s, c, True) for s, c in zip(side, commons)], commons)
        with conn.cursor() as cur:
            cur.execute(f"SELECT {sql}, CRC32({sql}) FROM {schema}.{t} ORDER BY id")
            out += [(bytes(img), crc) for img, crc in cur.fetchall()]
    return out


@pytest.mark.parametrize("case, types, a, b", DIFFERENT, ids=[c[0] for c in DIFFERENT])
def test_values_that_differ_in_one_way_have_different_images(db, case, types, a, b):
    conn, schema = db
    name = f"d{[c[0] for c in DIFFERENT].index(case)}"
    cols = _table(conn, schema, name, types, [a, b])
    with conn.cursor() as cur:   # the server kept the two values apart (else the case tests nothing)
        cur.execute(f"SELECT COUNT(DISTINCT CONCAT_WS('|', {', '.join(f'HEX({c}), ISNULL({c}), {c} + 0' for c in cols)})) "
                    f"FROM {schema}.{name}")
        assert cur.fetchone()[0] == 2, case
    (img_a, crc_a), (img_b, crc_b) = _images(conn, schema, [name], cols)
    assert img_a != img_b and crc_a != crc_b, (case, img_a, img_b)


@pytest.mark.parametrize("case, t1, t2, v1, v2", SAME, ids=[c[0] for c in SAME])
def test_the_same_value_in_other_types_has_the_same_image(db, case, t1, t2, v1, v2):
    conn, schema = db
    n = [c[0] for c in SAME].index(case)
    _table(conn, schema, f"s{n}a", [t1], [(v1,)])
    cols = _table(conn, schema, f"s{n}b", [t2], [(v2,)])
    (img_a, _), (img_b, _) = _images(conn, schema, [f"s{n}a", f"s{n}b"], cols)
    assert img_a == img_b, (case, img_a, img_b)
