"""Upstream writes the team's own workloads did not make, through the real syncer: XA
transactions (rows logged at PREPARE, COMMIT / ROLLBACK later as statements), savepoints
inside a transaction, row changes a session logged as statements (binlog_format STATEMENT),
and edge values of every column kind.
Each either lands exactly or pauses the source naming what happened; none is lost in silence
(before: XA rows, the rows of a transaction with a savepoint and statement-logged rows were
dropped, an empty SET became NULL)."""

import pytest

from dm_core.db import connect, qi, qt

from .helpers import drop_schemas
from .helpers import run_sql as run
from .test_sync_errors import dmctl_binlog, plain, rows, steps  # noqa: F401 (plain is a fixture)

pytestmark = pytest.mark.integration


def xa(ep, xid, statements, end):
    """One XA transaction on its own connection: START, ``statements``, END, PREPARE, ``end``."""
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute("XA START %s", (xid,))
            for sql in statements:
                cur.execute(sql)
            cur.execute("XA END %s", (xid,))
            cur.execute("XA PREPARE %s", (xid,))
            cur.execute(f"XA {end} %s", (xid,))
    finally:
        conn.close()


def test_xa_commit_lands_and_a_rollback_after_prepare_pauses_naming_it(plain, stack):
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    t = qt(db, "t")
    run(up, f"INSERT INTO {t} VALUES (1, 'a')")
    steps(sess, "caught_up")
    xa(up, "x1", [f"INSERT INTO {t} VALUES (2, 'xa')", f"UPDATE {t} SET name = 'xa-upd' WHERE id = 1"], "COMMIT")
    run(up, f"INSERT INTO {t} VALUES (3, 'between')")
    steps(sess, "caught_up")
    assert rows(down, tdb, "t") == rows(up, db, "t") == [(1, "xa-upd"), (2, "xa"), (3, "between")]

    xa(up, "x2", [f"INSERT INTO {t} VALUES (4, 'rolled back')"], "ROLLBACK")
    run(up, f"INSERT INTO {t} VALUES (5, 'after')")
    steps(sess, "paused")
    st = store.source_state(task.name, sid)
    assert "50022" in st["error"] and "XA ROLLBACK" in st["error"] and "XA PREPARE" in st["error"], st["error"]
    assert "dm_TASK_resync" in st["error"], "the workaround follows the message"
    # applied at PREPARE as DM does; the pause is what tells the operator
    assert (4, "rolled back") in rows(down, tdb, "t") and (5, "after") not in rows(down, tdb, "t")

    run(down, f"DELETE FROM {qt(tdb, 't')} WHERE id = 4")  # the operator mends it, then skips
    assert dmctl_binlog("skip", task.name, "-s", sid) == 0
    steps(sess, "caught_up")
    assert rows(down, tdb, "t") == rows(up, db, "t")


def test_savepoints_inside_a_transaction_keep_its_rows(plain, stack):
    """An ORM's nested transactions (Django's atomic blocks): SAVEPOINT, ROLLBACK TO SAVEPOINT and
    RELEASE inside one transaction. The binlog holds SAVEPOINT statements inside the group; the
    rows before them were dropped (the statement ended the group as if it were DDL)."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    t = qt(db, "t")
    conn = connect(up)
    try:
        with conn.cursor() as cur:
            for sql in ("BEGIN", f"INSERT INTO {t} VALUES (1, 'outer')", "SAVEPOINT s1",
                        f"INSERT INTO {t} VALUES (2, 'inner')", "SAVEPOINT s2",
                        f"INSERT INTO {t} VALUES (3, 'rolled back')", "ROLLBACK TO SAVEPOINT s2",
                        f"UPDATE {t} SET name = 'inner, kept' WHERE id = 2", "RELEASE SAVEPOINT s1",
                        f"INSERT INTO {t} VALUES (4, 'outer again')", "COMMIT"):
                cur.execute(sql)
    finally:
        conn.close()
    steps(sess, "caught_up")
    assert rows(down, tdb, "t") == rows(up, db, "t") == [(1, "outer"), (2, "inner, kept"), (4, "outer again")]


def test_a_row_change_logged_as_a_statement_pauses_when_it_may_touch_a_moved_table(plain, stack, uniq):
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    other = f"erx{uniq}"  # a database the task does not move
    run(up, f"CREATE DATABASE {qi(other)}", f"CREATE TABLE {qt(other, 'o')} (id int PRIMARY KEY)")
    try:
        run(up, f"INSERT INTO {qt(db, 't')} VALUES (1, 'a')")
        steps(sess, "caught_up")
        conn = connect(up)
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION binlog_format = 'STATEMENT'")
                cur.execute(f"USE {qi(other)}")
                cur.execute("INSERT INTO o VALUES (1)")        # not the task's: skipped, logged
                steps(sess, "caught_up")
                cur.execute(f"USE {qi(db)}")
                cur.execute("INSERT INTO t VALUES (2, 'statement')")  # the task's: its rows are not in the binlog
        finally:
            conn.close()
        run(up, f"INSERT INTO {qt(db, 't')} VALUES (3, 'row')")
        steps(sess, "paused")
        st = store.source_state(task.name, sid)
        assert "50021" in st["error"] and "INSERT INTO t VALUES (2, 'statement')" in st["error"], st["error"]
        assert "binlog_format" in st["error"] and st["error_pos"], st
        assert rows(down, tdb, "t") == [(1, "a")]

        run(down, f"INSERT INTO {qt(tdb, 't')} VALUES (2, 'statement')")  # the operator writes it, then skips
        assert dmctl_binlog("skip", task.name, "-s", sid) == 0
        steps(sess, "caught_up")
        assert rows(down, tdb, "t") == rows(up, db, "t") == [(1, "a"), (2, "statement"), (3, "row")]
    finally:
        drop_schemas(up, [other])


EDGE_TABLE = ("(id int PRIMARY KEY, b bit(10), s set('a','b','c'), e enum('x','y'), j json, y year, tm time(3), "
              "d date, dt datetime(6), f float, dbl double, bl blob, u bigint unsigned, dec1 decimal(30,10), "
              "vb varbinary(20), ch char(5) CHARACTER SET latin1, ut tinyint unsigned, i24 mediumint, txt longtext, "
              "g point)")


def test_edge_values_of_every_column_kind_land_exactly(plain, stack):
    """Empty SET (was NULL downstream), zero date, extreme TIME, unsigned maxima, a 70 kB text,
    spatial, JSON with non-ASCII, and a row of defaults: downstream equals upstream, value for value."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    ty = qt(db, "ty")
    run(up, f"CREATE TABLE {ty} {EDGE_TABLE}",
        f"INSERT INTO {ty} VALUES (1, b'1010101010', 'a,c', 'y', '{{\"k\": [1, 2.5, \"é\"]}}', 2155, "
        "'-838:59:59.999', '0000-00-00', '2024-02-29 23:59:59.999999', 1.5, -2.25e-300, x'00ff10', "
        "18446744073709551615, -12345678901234567890.0123456789, x'0001', 'éa', 255, -8388608, REPEAT('z', 70000), "
        "POINT(1, 2))",
        f"INSERT INTO {ty} (id) VALUES (2)",
        f"INSERT INTO {ty} VALUES (3, b'0', '', 'x', 'null', 1901, '00:00:00', '1000-01-01', '1000-01-01 00:00:00', "
        "-0.0, 0, '', 0, 0, '', '', 0, 0, '', POINT(0, 0))",
        f"UPDATE {ty} SET tm = '12:00:00.5', s = '' WHERE id = 1",
        f"UPDATE {ty} SET s = 'b' WHERE id = 3")
    steps(sess, "caught_up")
    got, want = rows(down, tdb, "ty", "*"), rows(up, db, "ty", "*")
    assert len(want) == 3
    for a, b in zip(want, got):
        assert a == b, [(i, x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y]
    assert got[0][2] == "" and got[2][2] == "b", "an empty SET is '', not NULL"
