"""The full load's text path (lines built by the upstream, dm_core/full/text_rows.py, into
LOAD DATA) carries every value exactly: the ones a LOAD DATA text format gives meaning to --
a tab, a newline, a backslash, ``\\N``, the word NULL, a double quote (also before a tab or a
newline), the empty string -- and every byte value in binary columns, beside real NULLs.

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
]
ALL_BYTES = bytes(range(256))


def test_text_path_carries_every_value_exactly(stack, uniq, tmp_path):
    schema, tdb, name, sid = f"tv{uniq}", f"tvt{uniq}", f"tv{uniq}", f"tv-{uniq}"
    up, down = stack["up1"], stack["down"]
    # no FLOAT/DOUBLE column: the table takes the text path (text_rows.py)
    execute(up, f"CREATE DATABASE {schema}",
            f"CREATE TABLE {schema}.t (id int NOT NULL PRIMARY KEY, s varchar(64) NULL, "
            "b varbinary(300) NULL, c char(20) NULL, nn varchar(64) NOT NULL, j json NULL, "
            "e enum('x','y\"z') NULL)")
    for i, v in VALUES:
        execute(up, f"INSERT INTO {schema}.t VALUES (%s, %s, %s, %s, %s, %s, %s)",
                args=(i, v, v.encode(), v[:20], v, None, "y\"z" if i % 2 else None))
    execute(up, f"INSERT INTO {schema}.t VALUES (100, NULL, %s, NULL, '', %s, NULL)",
            args=(ALL_BYTES, '{"k": "a\\"b\\tc"}'))
    text = task_yaml(name, down, [(sid, schema)], tdb)
    store = StateStore()
    try:
        task = register(store, name, text, {sid: up})
        prepare(task, store)
        report = tmp_path / "report.json"
        r = run_load(name, "--chunk-rows", "7", "--report", str(report))
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
        assert read_report(report)["rows"] == len(VALUES) + 1
        got = {row[0]: row[1:] for row in execute(down, f"SELECT id, s, b, c, nn, j, e FROM {tdb}.t")}
        for i, v in VALUES:
            s, b, c, nn, _j, e = got[i]
            assert (s, bytes(b), nn) == (v, v.encode(), v), f"row {i}: {v!r} arrived as {(s, b, nn)!r}"
            assert c == v[:20].rstrip(" "), f"row {i} CHAR: {v!r} arrived as {c!r}"
            assert e == ("y\"z" if i % 2 else None), f"row {i} ENUM"
        s, b, c, nn, j, e = got[100]
        assert s is None and c is None and e is None, "real NULLs must stay NULL"
        assert nn == "" and bytes(b) == ALL_BYTES
        assert j is not None and '\\"' in j and "\\t" in j
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
    finally:
        cleanup(store, name, text)
        store.close()
        drop(up, schema)
        drop(down, tdb)
