"""The full load's text path (lines built by the upstream, dm_core/full/text_rows.py, into
LOAD DATA) carries every value exactly: the ones a LOAD DATA text format gives meaning to --
a tab, a newline, a backslash, ``\\N``, the word NULL, a double quote (also before a tab or a
newline), a single quote (the enclosure; also first, last and escaped), NUL and Ctrl-Z (which
``QUOTE()`` escapes), the empty string -- and every byte value in binary columns, beside real
NULLs; also in a latin1 column and in columns of two collations that may not meet in one
expression (utf8mb4_bin and utf8mb4_general_ci).

Each value is checked downstream by itself (a row compared as a whole would hide which one
broke), and the table as a whole against the upstream with the validation's comparison.
"""

import pytest

from dm_core.full.phase import prepare
from dm_core.state import StateStore
from dm_core.validate.compare import compare_task, render

from .test_full_support import cleanup, drop, execute, read_report, register, run_load, task_yaml

pytestmark = pytest.mark.integration

# (id, text value); every one also goes into the binary and the CHAR column
VALUES = [
    (1, '"'), (2, '""'), (3, 'a"\tb'), (4, 'a"\nb'), (5, '"\t"'), (6, 'ends with quote"'), (7, '"starts'),
    (8, "tab\there"), (9, "new\nline"), (10, "back\\slash"), (11, "\\N"), (12, "NULL"), (13, ""),
    (14, "\\"), (15, '\\"'), (16, "crlf\r\n"), (17, "ünïcödé ✓ 𝄞"), (18, "\t"), (19, "\n"), (20, ",;'"),
    (21, "'"), (22, "it's"), (23, "'starts"), (24, "ends'"), (25, "\\'"), (26, "''"), (27, "nul\x00byte"),
    (28, "ctrl\x1az"), (29, "'\t'"), (30, "'NULL'"), (31, "\\0"), (32, "\\Z"),
]
ALL_BYTES = bytes(range(256))


def _latin1(v: str) -> str:
    """What a latin1 column holds of ``v`` (characters latin1 lacks become '?')."""
    return v.encode("latin1", "replace").decode("latin1")


@pytest.mark.parametrize("l_charset", ["latin1", "utf8mb4"])
def test_text_path_carries_every_value_exactly(stack, uniq, tmp_path, l_charset):
    """``l_charset``: a latin1 column goes as stored into its latin1 target (extract._raw), and
    utf8mb4 columns are utf8mb4 already: in both, every value is in its column's character set
    and LOAD DATA reads the lines as binary (extract.ChunkShape.same_bytes)."""
    schema, tdb, name, sid = f"tv{uniq}", f"tvt{uniq}", f"tv{uniq}", f"tv-{uniq}"
    expect = _latin1 if l_charset == "latin1" else (lambda v: v)
    up, down = stack["up1"], stack["down"]
    # no FLOAT/DOUBLE column: the table takes the text path (text_rows.py)
    execute(up, f"CREATE DATABASE {schema}",
            f"CREATE TABLE {schema}.t (id int NOT NULL PRIMARY KEY, s varchar(64) NULL, "
            "b varbinary(300) NULL, c char(20) NULL, nn varchar(64) NOT NULL, j json NULL, "
            f"e enum('x','y\"z', 'q''t') NULL, l varchar(64) CHARACTER SET {l_charset} NULL, "
            "ub varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL)")
    for i, v in VALUES:
        execute(up, f"INSERT INTO {schema}.t VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                args=(i, v, v.encode(), v[:20], v, None, ("y\"z", "q't")[i % 3 == 0] if i % 2 else None,
                      expect(v), v))
    execute(up, f"INSERT INTO {schema}.t VALUES (100, NULL, %s, NULL, '', %s, NULL, NULL, NULL)",
            args=(ALL_BYTES, '{"k": "a\\"b\\tc"}'))
    text = task_yaml(name, down, [(sid, schema)], tdb)
    store = StateStore()
    try:
        task = register(store, name, text, {sid: up})
        prepare(task, store)
        report = tmp_path / "report.json"
        r = run_load(name, "--chunk-rows", "7", "--report", str(report))
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
        assert "text read as binary" in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
        assert read_report(report)["rows"] == len(VALUES) + 1
        got = {row[0]: row[1:] for row in execute(down, f"SELECT id, s, b, c, nn, j, e, l, ub FROM {tdb}.t")}
        for i, v in VALUES:
            s, b, c, nn, _j, e, lat, ub = got[i]
            assert (s, bytes(b), nn, ub) == (v, v.encode(), v, v), f"row {i}: {v!r} arrived as {(s, b, nn, ub)!r}"
            assert c == v[:20].rstrip(" "), f"row {i} CHAR: {v!r} arrived as {c!r}"
            assert e == (("y\"z", "q't")[i % 3 == 0] if i % 2 else None), f"row {i} ENUM"
            assert lat == expect(v), f"row {i} {l_charset}: {expect(v)!r} arrived as {lat!r}"
        s, b, c, nn, j, e, lat, ub = got[100]
        assert s is None and c is None and e is None and lat is None and ub is None, "real NULLs must stay NULL"
        assert nn == "" and bytes(b) == ALL_BYTES
        assert j is not None and '\\"' in j and "\\t" in j
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
    finally:
        cleanup(store, name, text)
        store.close()
        drop(up, schema)
        drop(down, tdb)


def test_text_path_without_binary_columns_mixes_collations(stack, uniq, tmp_path):
    """Only text and numbers, in two utf8mb4 collations and latin1: the line must still be
    bytes (a line taking a column's collation came back as str and failed the load) and every
    value exact."""
    schema, tdb, name, sid = f"tc{uniq}", f"tct{uniq}", f"tc{uniq}", f"tc-{uniq}"
    up, down = stack["up1"], stack["down"]
    execute(up, f"CREATE DATABASE {schema}",
            f"CREATE TABLE {schema}.t (id int NOT NULL PRIMARY KEY, n int NULL, "
            "a varchar(64) COLLATE utf8mb4_bin NULL, g varchar(64) COLLATE utf8mb4_general_ci NOT NULL, "
            "l varchar(64) CHARACTER SET latin1 NULL) DEFAULT CHARSET=utf8mb4")
    for i, v in VALUES:
        execute(up, f"INSERT INTO {schema}.t VALUES (%s, %s, %s, %s, %s)",
                args=(i, None if i % 3 else i, v if i % 4 else None, v, _latin1(v)))
    text = task_yaml(name, down, [(sid, schema)], tdb)
    store = StateStore()
    try:
        task = register(store, name, text, {sid: up})
        prepare(task, store)
        r = run_load(name, "--chunk-rows", "9")
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
        got = {row[0]: row[1:] for row in execute(down, f"SELECT id, n, a, g, l FROM {tdb}.t")}
        assert sorted(got) == [i for i, _ in VALUES]
        for i, v in VALUES:
            assert got[i] == (None if i % 3 else i, v if i % 4 else None, v, _latin1(v)), f"row {i}: {v!r}"
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
    finally:
        cleanup(store, name, text)
        store.close()
        drop(up, schema)
        drop(down, tdb)
