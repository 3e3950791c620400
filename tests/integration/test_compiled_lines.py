"""The full load's line read in C (dm_core/full/compiled_lines.py) sends the bytes the
pure-Python read sends, for every value the text format gives meaning to, for rows larger
than a block and blocks of more rows than its first buffers hold; a connection lost
mid-read is an error, never a short chunk; a refused row is still named by its values.

`make setup` builds the module; these tests fail, not skip, where it did not build, so a
machine that silently lost the fast path is noticed.
"""

import json

import MySQLdb
import pytest

from dm_core.db import connect_native
from dm_core.full import compiled_lines, load_data, text_rows

from .test_full_support import drop, execute
from .test_full_text_values import ALL_BYTES, VALUES

pytestmark = pytest.mark.integration


class _St:
    columns = ["id", "s", "b", "n"]
    column_types = ["int", "varchar", "longblob", "int"]
    column_nullable = [False, True, True, True]
    column_charsets = [None, "utf8mb4", None, None]
    extract = {}

    def __init__(self, schema):
        self.schema, self.table = schema, "t"


def _read(ep, query, pure: bool, monkeypatch) -> tuple[bytes, int, list]:
    with monkeypatch.context() as m:
        if pure:
            m.setenv("SHARDFLOW_PURE_PYTHON", "1")
            m.setattr(compiled_lines, "_loaded", None)
        conn = connect_native(ep, downstream=False)
        try:
            items = list(text_rows.read_lines(conn, query))
        finally:
            conn.close()
    encoded = [text_rows.as_text(i) for i in items]
    return b"".join(t for t, _ in encoded), sum(n for _, n in encoded), items


@pytest.fixture
def table(stack, uniq):
    schema = f"lc{uniq}"
    up = stack["up1"]
    execute(up, f"CREATE DATABASE {schema}",
            f"CREATE TABLE {schema}.t (id int NOT NULL PRIMARY KEY, s varchar(64) NULL, b longblob NULL, n int NULL)")
    for i, v in VALUES:
        execute(up, f"INSERT INTO {schema}.t VALUES (%s, %s, %s, %s)", args=(i, v, v.encode(), i if i % 3 else None))
    execute(up, f"INSERT INTO {schema}.t VALUES (100, NULL, %s, NULL)", args=(ALL_BYTES,))
    # a row of 3 MB (past a 1 MB block), then 40,000 short rows (past the first offsets buffer)
    execute(up, f"INSERT INTO {schema}.t VALUES (200, 'big', REPEAT(X'00095C0A27', 600000), 1)")
    execute(up, f"INSERT INTO {schema}.t (id, s, n) SELECT 1000 + seq, 'r', seq FROM {schema}.seq_1_to_40000")
    yield up, schema
    drop(up, schema)


def test_the_compiled_read_is_built_and_used():
    assert compiled_lines.module() is not None, f"make setup did not build it: {compiled_lines.reason()}"


def test_compiled_and_python_reads_send_the_same_bytes(table, monkeypatch):
    up, schema = table
    query = text_rows.line_query(_St(schema), [], repr, "1")
    fast, fast_rows, items = _read(up, query, False, monkeypatch)
    slow, slow_rows, _ = _read(up, query, True, monkeypatch)
    assert all(isinstance(i, compiled_lines.LineBlock) for i in items)
    assert (fast_rows, len(fast)) == (slow_rows, len(slow)) == (len(VALUES) + 40_002, len(slow))
    assert fast == slow
    assert max(len(i.text) for i in items) > 3_000_000    # the big row grew its block
    assert any(i.rows > 16_384 for i in items)             # a block of more rows than the first offsets buffer


def test_a_line_in_a_block_is_named_by_its_values(table, monkeypatch):
    """load_data._Sent names a row the target refused by its values, read back from the block."""
    up, schema = table
    query = text_rows.line_query(_St(schema), [], repr, "`id` IN (9, 22, 1005)")
    _, _, items = _read(up, query, False, monkeypatch)
    sent = load_data._Sent(text_rows.as_text)
    for i in items:
        sent(i)
    assert sent.row(1) == ["9", "'new\nline'", "'new\nline'", "\\N"]   # a newline inside an enclosed field
    assert sent.row(2) == ["22", "'it\\'s'", "'it\\'s'", "22"]
    assert sent.row(3) == ["1005", "'r'", "NULL", "5"]
    assert sent.row(4) is None


def test_a_connection_lost_mid_read_is_an_error_not_a_short_chunk(stack):
    """The server ends the connection after the first block, while millions of rows are still to
    come (more than socket buffers hold, so the read cannot finish before the KILL lands)."""
    up = stack["up1"]
    total = 5_000_000
    query = f"SELECT CONCAT_WS(X'09' COLLATE 'binary', seq, REPEAT('x', 20)) FROM mysql.seq_1_to_{total}"
    conn = connect_native(up, downstream=False)
    got = 0
    with pytest.raises(MySQLdb.OperationalError) as err:
        for block in text_rows.read_lines(conn, query):
            if not got:
                execute(up, f"KILL {int(conn.thread_id())}")
            got += block.rows
    assert err.value.args[0] in (2013, 2026, 1927, 1053), err.value.args
    assert 0 < got < total
    conn.close()


def test_a_build_for_another_client_library_is_not_used(tmp_path, monkeypatch):
    root = tmp_path / "build"
    root.mkdir()
    want = compiled_lines._want()
    (root / f"{compiled_lines.MODULE}{want['soabi']}").write_bytes(b"")
    (root / "manifest.json").write_text(json.dumps({**want, "client": "9.9.9"}))
    monkeypatch.setenv("SHARDFLOW_COMPILED_LINES_DIR", str(root))
    monkeypatch.delenv("SHARDFLOW_PURE_PYTHON", raising=False)
    ok, why = compiled_lines.status()
    assert not ok and "another client library" in why
    (root / "manifest.json").write_text(json.dumps(want))
    assert compiled_lines.status()[0]
    monkeypatch.setenv("SHARDFLOW_PURE_PYTHON", "1")
    assert compiled_lines.status() == (False, "SHARDFLOW_PURE_PYTHON=1")


def test_the_source_is_read_from_the_archive_executors_import(tmp_path):
    """Spark's executors import dm_core from packaging.project_archive: the build is checked
    against the .pyx inside it."""
    import subprocess
    import sys

    from dm_core.packaging import project_archive

    zip_path = project_archive(str(tmp_path))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from dm_core.full import compiled_lines as c; "
            "assert '.zip' in c.__file__, c.__file__; print(c.status()[0], c.module() is not None)")
    r = subprocess.run([sys.executable, "-c", code, zip_path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True"]
