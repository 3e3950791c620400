"""Upstream writes the team's own workloads did not make, through the real syncer: XA
transactions (rows logged at PREPARE, COMMIT / ROLLBACK later as statements), savepoints
inside a transaction, row changes a session logged as statements (binlog_format STATEMENT),
edge values of every column kind, odd names, MariaDB-only DDL forms and sequences.
Each either lands exactly or pauses the source naming what happened; none is lost in silence
(before: XA rows, the rows of a transaction with a savepoint and statement-logged rows were
dropped, an empty SET became NULL)."""

import pymysql
import pytest

from dm_core.db import connect, qi, qt

from .helpers import drop_schemas
from .helpers import run_sql as run
from .test_sync_errors import dmctl_binlog, rows, steps

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


def test_an_xa_rollback_of_a_transaction_on_other_tables_is_no_pause(plain, stack, uniq):
    """A coordinator that gives up on a prepared branch of tables the task does not move: the
    XA ROLLBACK paused the source all the same (it was judged without its transaction)."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    other = f"erx{uniq}"
    run(up, f"CREATE DATABASE {qi(other)}", f"CREATE TABLE {qt(other, 'o')} (id int PRIMARY KEY)")
    try:
        xa(up, "Other-1", [f"INSERT INTO {qt(other, 'o')} VALUES (1)"], "ROLLBACK")
        run(up, f"INSERT INTO {qt(db, 't')} VALUES (1, 'after')")
        steps(sess, "caught_up")
        assert rows(down, tdb, "t") == [(1, "after")]
        xa(up, "mine-2", [f"INSERT INTO {qt(db, 't')} VALUES (2, 'rolled back')"], "ROLLBACK")
        steps(sess, "paused")
        assert "50022" in store.source_state(task.name, sid)["error"]
    finally:
        drop_schemas(up, [other])


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


def test_a_row_change_logged_as_a_statement_pauses_when_it_may_touch_a_moved_table(plain, stack, uniq, tmp_path):
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

        # LOAD DATA logged as a statement: an event type of its own, with its rows in a file
        # the binlog carries separately; the same pause, and the same skip
        rows_file = tmp_path / "rows.tsv"
        rows_file.write_text("7\tloaded\n8\tloaded\n")
        conn = pymysql.connect(host=up.host, port=up.port, user=up.user, password=up.password,
                               local_infile=True, autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION binlog_format = 'STATEMENT'")
                cur.execute(f"LOAD DATA LOCAL INFILE %s INTO TABLE {qt(db, 't')}", (str(rows_file),))
        finally:
            conn.close()
        run(up, f"INSERT INTO {qt(db, 't')} VALUES (9, 'row')")
        steps(sess, "paused")
        st = store.source_state(task.name, sid)
        assert "50021" in st["error"] and "LOAD DATA" in st["error"] and st["error_pos"], st["error"]
        run(down, f"INSERT INTO {qt(tdb, 't')} VALUES (7, 'loaded'), (8, 'loaded')")
        assert dmctl_binlog("skip", task.name, "-s", sid) == 0
        steps(sess, "caught_up")
        assert rows(down, tdb, "t") == rows(up, db, "t")
    finally:
        drop_schemas(up, [other])


def _session(ep, fmt, db, *statements):
    """``statements`` on one connection with binlog_format ``fmt``, closed after (a session
    with temporary tables logs their DROP when it ends)."""
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_format = '{fmt}'")
            cur.execute(f"USE {qi(db)}")
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()


def test_a_transaction_mixing_row_events_and_statements_keeps_its_rows(plain, stack, uniq):
    """A MIXED session logs an unsafe statement (UUID()) as rows and a safe one as a statement,
    in one transaction. The statement ended the group as if it were DDL and the rows before it
    were dropped in silence. Now the statement rides on the transaction: one that writes no
    table the task moves is skipped and every row lands; one that may pauses before the
    transaction, naming the statement at its own position, and `binlog skip` passes that
    statement by, the transaction's rows still landing."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    other = f"erm{uniq}"   # a database the task does not move
    run(up, f"CREATE DATABASE {qi(other)}", f"CREATE TABLE {qt(other, 'o')} (id int PRIMARY KEY)")
    try:
        steps(sess, "caught_up")
        _session(up, "MIXED", db, "BEGIN", "INSERT INTO t VALUES (1, LEFT(UUID(), 8))",
                 f"INSERT INTO {qt(other, 'o')} VALUES (1)", "INSERT INTO t VALUES (2, LEFT(UUID(), 8))", "COMMIT")
        steps(sess, "caught_up")
        assert rows(down, tdb, "t") == rows(up, db, "t") and [r[0] for r in rows(down, tdb, "t")] == [1, 2]

        _session(up, "MIXED", db, "BEGIN", "INSERT INTO t VALUES (3, LEFT(UUID(), 8))",
                 "INSERT INTO t VALUES (4, 'statement')", "UPDATE t SET name = LEFT(UUID(), 8) WHERE id = 1", "COMMIT")
        run(up, f"INSERT INTO {qt(db, 't')} VALUES (5, 'after')")
        steps(sess, "paused")
        st = store.source_state(task.name, sid)
        assert "50021" in st["error"] and "INSERT INTO t VALUES (4, 'statement')" in st["error"], st["error"]
        assert st["error_pos"] != f"({st['binlog_file']}, {st['binlog_pos']})", "the statement's own position"
        assert [r[0] for r in rows(down, tdb, "t")] == [1, 2], "nothing of the transaction before the operator acts"

        run(down, f"INSERT INTO {qt(tdb, 't')} VALUES (4, 'statement')")   # the operator writes it, then skips
        assert dmctl_binlog("skip", task.name, "-s", sid) == 0
        steps(sess, "caught_up")
        assert rows(down, tdb, "t") == rows(up, db, "t") and [r[0] for r in rows(down, tdb, "t")] == [1, 2, 3, 4, 5]
        assert store.source_state(task.name, sid)["stage"] != "paused"
    finally:
        drop_schemas(up, [other])


def test_temporary_tables_of_a_statement_session_never_reach_the_downstream(plain, stack):
    """A MIXED session logs its temporary tables' statements, and the server logs their DROP
    when the session ends. A temporary table named as the task's table `t`: its CREATE ran
    downstream as a temporary table, and its ALTER, TRUNCATE and DROP reached the real target
    (the DROP dropped it, every row lost; a RENAME renamed it). Now they are skipped (the event's
    thread-specific flag tells an ALTER of the temporary table from one of the real; the
    session's temporary tables are tracked by connection id), and so are the session's row
    changes of them. A CREATE TABLE ... SELECT built from a temporary table pauses: its rows are
    not in the binlog."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    run(up, f"INSERT INTO {qt(db, 't')} VALUES (1, 'a'), (2, 'b')")
    steps(sess, "caught_up")
    _session(up, "MIXED", db, "CREATE TEMPORARY TABLE t (id int, note text)", "ALTER TABLE t ADD extra int",
             "TRUNCATE t", "INSERT INTO t (id) VALUES (8)", "RENAME TABLE t TO t_renamed",
             "UPDATE t_renamed SET id = 9", "BEGIN", "CREATE TEMPORARY TABLE tmp2 (id int)", "INSERT INTO tmp2 VALUES (1)",
             f"INSERT INTO {qt(db, 't')} VALUES (3, LEFT(UUID(), 1))", "COMMIT", "CREATE INDEX k ON tmp2 (id)")
    steps(sess, "caught_up")
    assert rows(down, tdb, "t") == rows(up, db, "t") and [r[0] for r in rows(down, tdb, "t")] == [1, 2, 3]
    with connect(down) as conn, conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                    "ORDER BY ORDINAL_POSITION", (tdb, "t"))
        assert [r[0] for r in cur.fetchall()] == ["id", "name"], "the temporary table's ALTER is not the target's"
        cur.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (tdb,))
        assert cur.fetchone()[0] == 1, "no temporary table's name became a table"

    _session(up, "MIXED", db, "CREATE TEMPORARY TABLE tmp (id int, name varchar(20))",
             "INSERT INTO tmp VALUES (7, 'from tmp')", "CREATE TABLE r AS SELECT * FROM tmp")
    steps(sess, "paused")
    st = store.source_state(task.name, sid)
    assert "50021" in st["error"] and "CREATE TABLE r AS SELECT * FROM tmp" in st["error"], st["error"]
    assert "temporary" in st["error"], st["error"]
    run(down, f"CREATE TABLE {qt(tdb, 'r')} (id int, name varchar(20))", f"INSERT INTO {qt(tdb, 'r')} VALUES (7, 'from tmp')")
    assert dmctl_binlog("skip", task.name, "-s", sid) == 0
    run(up, f"INSERT INTO {qt(db, 't')} VALUES (4, 'd')")
    steps(sess, "caught_up")
    assert rows(down, tdb, "t") == rows(up, db, "t") and rows(down, tdb, "r") == rows(up, db, "r")


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


def _same_tables(up, db, down, tdb, *tables):
    for name in tables:
        want, got = rows(up, db, name, "*"), rows(down, tdb, name, "*")
        assert want and got == want, (name, want, got)


def test_ctas_like_and_mariadb_only_ddl_forms_land(plain, stack):
    """CREATE TABLE ... SELECT (a DDL and rows in one group), CREATE TABLE ... LIKE, CREATE OR
    REPLACE, IF [NOT] EXISTS clauses, ALGORITHM/LOCK options, RENAME COLUMN, partitions."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    t, d, p = qt(db, "t"), qt(db, "d"), qt(db, "p")
    run(up, f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')",
        f"CREATE TABLE {qt(db, 'c')} AS SELECT id, name FROM {t}",
        f"INSERT INTO {qt(db, 'c')} VALUES (3, 'c')",
        f"CREATE TABLE {qt(db, 'l')} LIKE {t}",
        f"INSERT INTO {qt(db, 'l')} SELECT * FROM {t}",
        f"CREATE TABLE {d} (id int PRIMARY KEY, a int)",
        f"INSERT INTO {d} VALUES (1, 1)",
        f"CREATE OR REPLACE TABLE {d} (id int PRIMARY KEY, a int, b int)",
        f"INSERT INTO {d} VALUES (2, 2, 2)",
        f"ALTER TABLE {d} ADD COLUMN IF NOT EXISTS c int DEFAULT 3, ALGORITHM=INPLACE, LOCK=NONE",
        f"ALTER TABLE {d} ADD COLUMN IF NOT EXISTS c int",
        f"CREATE INDEX IF NOT EXISTS ia ON {d} (a)",
        f"ALTER TABLE {d} DROP COLUMN IF EXISTS zz",
        f"ALTER TABLE {d} RENAME COLUMN b TO b2",
        f"ALTER TABLE {d} MODIFY COLUMN a bigint",
        f"INSERT INTO {d} VALUES (3, 3, 3, 3)",
        f"CREATE TABLE {p} (id int PRIMARY KEY) PARTITION BY HASH(id) PARTITIONS 3",
        f"INSERT INTO {p} VALUES (1), (2), (3)",
        f"ALTER TABLE {p} ADD PARTITION PARTITIONS 1",
        f"INSERT INTO {p} VALUES (4)")
    steps(sess, "caught_up")
    _same_tables(up, db, down, tdb, "c", "l", "d", "p")


def test_odd_names_another_gtid_domain_and_invisible_columns_land(plain, stack):
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    names = ("we`ird.t", "sp ace", "ünï-cödé", "%_pct", "select")
    for name in names:
        t = qt(db, name)
        run(up, f"CREATE TABLE {t} (`id col` int PRIMARY KEY, `va``l` varchar(10), `%s` int)",
            f"INSERT INTO {t} VALUES (1, 'a', 1), (2, 'b', 2)",
            f"UPDATE {t} SET `va``l` = 'z' WHERE `id col` = 1",
            f"ALTER TABLE {t} ADD COLUMN `new ``col` int DEFAULT 7",
            f"DELETE FROM {t} WHERE `id col` = 2",
            f"INSERT INTO {t} VALUES (3, 'c', 3, 8)")
    i = qt(db, "i")
    run(up, f"CREATE TABLE {i} (id int PRIMARY KEY, h int INVISIBLE DEFAULT 5, y int)",
        f"INSERT INTO {i} (id, h, y) VALUES (1, 9, 1)", f"INSERT INTO {i} VALUES (2, 2)")
    conn = connect(up)
    try:
        with conn.cursor() as cur:  # a session writing in its own GTID domain
            cur.execute("SET SESSION gtid_domain_id = 7")
            cur.execute(f"INSERT INTO {qt(db, 't')} VALUES (10, 'domain 7')")
    finally:
        conn.close()
    run(up, f"INSERT INTO {qt(db, 't')} VALUES (11, 'domain 0')")
    steps(sess, "caught_up")
    _same_tables(up, db, down, tdb, "t", *names)
    assert rows(down, tdb, "i", "id, h, y") == rows(up, db, "i", "id, h, y") == [(1, 9, 1), (2, 5, 2)]


def test_a_mariadb_sequence_does_not_stop_the_rows_that_use_it(plain, stack):
    """NEXTVAL logs the sequence's new state as a row of the sequence; that row has no table
    downstream (the source paused, after minutes of retries, on "table does not exist"). Its
    rows are skipped; the values it handed out land with the rows that use them."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    sq, t = qt(db, "s"), qt(db, "t")
    run(up, f"CREATE SEQUENCE {sq} START WITH 100 INCREMENT BY 5",
        f"INSERT INTO {t} VALUES (NEXTVAL({sq}), 'first'), (NEXTVAL({sq}), 'second')",
        f"SELECT SETVAL({sq}, 500)",
        f"ALTER SEQUENCE {sq} INCREMENT BY 1",
        f"INSERT INTO {t} VALUES (NEXTVAL({sq}), 'after setval')",
        f"DROP SEQUENCE {sq}",
        f"INSERT INTO {t} VALUES (1, 'plain')")
    steps(sess, "caught_up")
    got = rows(down, tdb, "t")
    assert got == rows(up, db, "t") and got[:3] == [(1, "plain"), (100, "first"), (105, "second")], got
    assert len(got) == 4


@pytest.mark.xfail(strict=True, reason="a checkpoint moved back by hand past what the keyless ledger keeps: "
                                       "identical rows of a keyless table cannot be told apart by safe mode "
                                       "(docs/architecture.md, tables without a key; DM documents the same limit). "
                                       "Replays after a failure are exact: test_sync_keyless_replay.py")
def test_a_replay_over_identical_rows_of_a_keyless_table(plain, stack):
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    k = qt(db, "k")
    run(up, f"CREATE TABLE {k} (a int, b varchar(10))",
        f"INSERT INTO {k} VALUES (1, 'x'), (1, 'x'), (2, 'y')", f"INSERT INTO {k} VALUES (1, 'x')",
        f"UPDATE {k} SET b = 'z' WHERE a = 2", f"DELETE FROM {k} WHERE a = 1 LIMIT 1")
    steps(sess, "caught_up")
    assert sorted(rows(down, tdb, "k", "*")) == sorted(rows(up, db, "k", "*"))
    st = store.source_state(task.name, sid)  # every checkpoint lost: replay from the start
    store.update_source_state(task.name, sid, binlog_file=st["low_file"], binlog_pos=st["low_pos"])
    steps(sess, "caught_up")
    assert sorted(rows(down, tdb, "k", "*")) == sorted(rows(up, db, "k", "*"))


def test_a_system_versioned_table_migrates_its_current_rows(plain, stack):
    """MariaDB's WITH SYSTEM VERSIONING: every row image carries the period (the invisible
    row_start / row_end, or the table's own ROW START / ROW END columns), an UPDATE also logs
    the history row, a DELETE is an update into history. The source paused on every row
    ("carry column(s) `row_start`, `row_end`"); now the current rows land and history does not."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    tables = {
        "v": "(id int PRIMARY KEY, x int) WITH SYSTEM VERSIONING",
        "w": "(id int PRIMARY KEY, x int, s timestamp(6) GENERATED ALWAYS AS ROW START, "
             "e timestamp(6) GENERATED ALWAYS AS ROW END, PERIOD FOR SYSTEM_TIME(s, e)) WITH SYSTEM VERSIONING",
    }   # (a transaction-precise period: the test below)
    for name, body in tables.items():
        t = qt(db, name)
        run(up, f"CREATE TABLE {t} {body}", f"INSERT INTO {t} (id, x) VALUES (1, 1), (2, 2), (3, 3)",
            f"UPDATE {t} SET x = 10 WHERE id = 1", f"DELETE FROM {t} WHERE id = 2", f"UPDATE {t} SET x = x + 1",
            f"INSERT INTO {t} (id, x) VALUES (2, 20)", f"DELETE HISTORY FROM {t}")
    out = sess.step()
    assert out.state == "caught_up", store.source_state(task.name, sid)["error"]
    for name in tables:
        assert rows(down, tdb, name, "id, x") == rows(up, db, name, "id, x") == [(1, 11), (2, 20), (3, 4)], name
    run(up, f"ALTER TABLE {qt(db, 'v')} DROP SYSTEM VERSIONING", f"UPDATE {qt(db, 'v')} SET x = 0 WHERE id = 3")
    steps(sess, "caught_up")
    assert rows(down, tdb, "v", "id, x") == rows(up, db, "v", "id, x") == [(1, 11), (2, 20), (3, 0)]


def test_a_transaction_precise_versioned_table_pauses_naming_its_period(plain, stack):
    """A period of transaction ids (BIGINT UNSIGNED ... AS ROW START) makes MariaDB log the
    table's changes as statements even in ROW format. The pause said the session ran with
    STATEMENT or MIXED, which sent the user to look for a setting nobody had changed."""
    task, store, sid, db, tdb, sess = plain
    up = stack["up1"]
    t = qt(db, "p")
    run(up, f"CREATE TABLE {t} (id int PRIMARY KEY, x int, s bigint unsigned GENERATED ALWAYS AS ROW START, "
            f"e bigint unsigned GENERATED ALWAYS AS ROW END, PERIOD FOR SYSTEM_TIME(s, e)) WITH SYSTEM VERSIONING",
        f"INSERT INTO {t} (id, x) VALUES (1, 1)")
    steps(sess, "paused")
    st = store.source_state(task.name, sid)
    assert st["error_code"] == 50021
    assert f"`{db}`.`p`" in st["error"] and "transaction-precise" in st["error"], st["error"]
    assert "TIMESTAMP" in st["error"], st["error"]   # what to do about it
