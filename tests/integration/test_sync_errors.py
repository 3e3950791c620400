"""Downstream errors while syncing, on real servers: a permanent one pauses the source at the
exact transaction with its statement, position and the server's error, and `binlog skip`,
`binlog replace` and `resume-task` act on it; a transient one is retried with backoff and
converges, or pauses the source once the retries are spent. Nothing is retried in silence."""

import pytest

from dm_core.db import connect, qi, qt

from .helpers import run_sql as run, steps
from .test_full_support import execute

pytestmark = pytest.mark.integration


def rows(ep, schema, table, columns="id, name") -> list[tuple]:
    return execute(ep, f"SELECT {columns} FROM {qt(schema, table)} ORDER BY 1")


def dmctl_binlog(*args) -> int:
    from dm_core.cli.dmctl import main

    return main(["binlog", *args])


def test_a_permanent_error_pauses_at_the_transaction_and_skip_replace_resume_act_on_it(plain, stack):
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    t = qt(db, "t")
    run(down, f"ALTER TABLE {qt(tdb, 't')} MODIFY name varchar(5)")  # the downstream drifted: too narrow
    run(up, f"INSERT INTO {t} VALUES (1, 'ok')", f"INSERT INTO {t} VALUES (2, 'fine')",
        f"INSERT INTO {t} VALUES (3, 'far too long for it')",
        f"INSERT INTO {t} VALUES (4, 'after')")
    out = steps(sess, "paused")
    st = store.source_state(task.name, sid)
    assert "1406" in st["error"] and "Data too long" in st["error"] and "50011" in st["error"], st["error"]
    assert st["error_stmt"] == f"INSERT `{tdb}`.`t` WHERE (`id`) = (3)", st["error_stmt"]
    assert st["error_pos"] and st["error_pos"] in out.messages[0][1]
    got = rows(down, tdb, "t")
    # the transactions before it are applied; a later one may be too (another worker of the same
    # batch committed it), which the replay from the pause point in safe mode makes exact
    assert got[:2] == [(1, "ok"), (2, "fine")] and 3 not in [r[0] for r in got], got

    # resume without a fix: tried once more, paused again with the same report
    store.request_sources(task.name, [sid], "running", all_sources=[sid], clear_error=True)
    steps(sess, "paused")
    again = store.source_state(task.name, sid)
    assert (again["error_pos"], again["error_stmt"]) == (st["error_pos"], st["error_stmt"])

    # skip drops exactly that transaction
    assert dmctl_binlog("skip", task.name, "-s", sid) == 0
    steps(sess, "caught_up")
    assert rows(down, tdb, "t") == [(1, "ok"), (2, "fine"), (4, "after")]

    # replace runs the operator's SQL in its place
    run(up, f"INSERT INTO {t} VALUES (5, 'also much too long')", f"INSERT INTO {t} VALUES (6, 'last')")
    steps(sess, "paused")
    assert dmctl_binlog("replace", task.name, f"INSERT INTO {qt(tdb, 't')} VALUES (5, 'short')") == 0
    steps(sess, "caught_up")
    assert rows(down, tdb, "t") == [(1, "ok"), (2, "fine"), (4, "after"), (5, "short"), (6, "last")]
    assert store.source_state(task.name, sid)["error"] is None


def test_a_transient_error_is_retried_with_backoff_and_converges_or_pauses(plain, stack):
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    run(up, f"INSERT INTO {qt(db, 't')} VALUES (1, 'a')")
    steps(sess, "caught_up")
    locker = connect(down)  # holds the downstream row: every write to it waits 1 s and times out (1205)
    try:
        with locker.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"SELECT * FROM {qt(tdb, 't')} WHERE id = 1 FOR UPDATE")
        run(up, f"UPDATE {qt(db, 't')} SET name = 'b' WHERE id = 1")
        out = sess.step()
        assert out.state == "retrying" and "transient error (attempt 1 of 2)" in out.messages[0][1], out.messages
        assert "1205" in out.messages[0][1]
        st = store.source_state(task.name, sid)    # a retry is not a pause, but query-status shows it
        assert st["stage"] != "paused" and "attempt 1 of 2" in st["error"] and "1205" in st["error"], st
        locker.rollback()
        steps(sess, "caught_up")
        assert rows(down, tdb, "t") == [(1, "b")] and sess.failures == 0
        assert store.source_state(task.name, sid)["error"] is None, "the error went away"

        with locker.cursor() as cur:  # the lock never goes away: the retries are spent, then a pause
            cur.execute("BEGIN")
            cur.execute(f"SELECT * FROM {qt(tdb, 't')} WHERE id = 1 FOR UPDATE")
        run(up, f"UPDATE {qt(db, 't')} SET name = 'c' WHERE id = 1")
        assert [sess.step().state for _ in range(3)] == ["retrying", "retrying", "paused"]
        st = store.source_state(task.name, sid)
        assert "50012" in st["error"] and "1205" in st["error"] and "3 times in a row" in st["error"], st["error"]
        # the checkpoint is not the failing event: `binlog skip` there would drop another one
        assert st["error_pos"] is None
        assert dmctl_binlog("skip", task.name, "-s", sid) == 1
        assert not store.error_ops(task.name, sid)
    finally:
        locker.rollback()
        locker.close()
    store.request_sources(task.name, [sid], "running", all_sources=[sid], clear_error=True)
    steps(sess, "caught_up")
    assert rows(down, tdb, "t") == [(1, "c")]


def test_a_row_larger_than_the_downstream_packet_pauses_at_once_naming_the_fix(plain, stack):
    """A row whose statement is longer than the downstream's max_allowed_packet: the server would
    drop the connection ("gone away", transient: minutes of retries, then a pause naming the wrong
    cause). The source pauses at once at the transaction, saying to raise max_allowed_packet; raised,
    resume-task writes it."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    run(up, f"ALTER TABLE {qt(db, 't')} MODIFY name longtext")
    steps(sess, "caught_up")
    (was,) = _one(down, "SELECT @@GLOBAL.max_allowed_packet")
    run(down, "SET GLOBAL max_allowed_packet = 1048576")   # read by the connections opened from now on
    try:
        run(up, f"INSERT INTO {qt(db, 't')} VALUES (1, REPEAT('x', 2 * 1048576))")
        out = sess.step()
        assert out.state == "paused", out.messages
        st = store.source_state(task.name, sid)
        assert "50011" in st["error"] and "max_allowed_packet (1.0 MB)" in st["error"], st["error"]
        assert f"`{tdb}`.`t`" in st["error"] and "SET GLOBAL max_allowed_packet" in st["error"], st["error"]
        assert st["error_pos"], "paused at the transaction"
    finally:
        run(down, f"SET GLOBAL max_allowed_packet = {int(was)}")
    store.request_sources(task.name, [sid], "running", all_sources=[sid], clear_error=True)
    steps(sess, "caught_up")
    assert _one(down, f"SELECT LENGTH(name) FROM {qt(tdb, 't')} WHERE id = 1") == (2 * 1048576,)


def _one(ep, sql):
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return tuple(cur.fetchone())
    finally:
        conn.close()


def test_rows_whose_target_table_is_gone_pause_at_once_and_resume_once_it_is_back(plain, stack):
    """A target table dropped downstream (by hand, or a skipped CREATE): waiting creates nothing,
    so the source pauses at the transaction at once (it was retried as transient for minutes),
    naming the table; once it is back, resume-task applies the rows."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    run(up, f"INSERT INTO {qt(db, 't')} VALUES (1, 'a')")
    steps(sess, "caught_up")
    run(down, f"DROP TABLE {qt(tdb, 't')}")
    run(up, f"INSERT INTO {qt(db, 't')} VALUES (2, 'b')")
    out = sess.step()
    assert out.state == "paused", (out.state, out.messages)
    st = store.source_state(task.name, sid)
    assert "50011" in st["error"] and f"`{tdb}`.`t` does not exist" in st["error"] and st["error_pos"], st
    run(down, f"CREATE TABLE {qt(tdb, 't')} (id int PRIMARY KEY, name varchar(20))",
        f"INSERT INTO {qt(tdb, 't')} VALUES (1, 'a')")
    store.request_sources(task.name, [sid], "running", all_sources=[sid], clear_error=True)
    steps(sess, "caught_up")
    assert rows(down, tdb, "t") == [(1, "a"), (2, "b")]


def test_an_undecodable_row_pauses_before_its_transaction_and_skip_alone_drops_it(plain, stack, monkeypatch):
    """A row the reader cannot decode (fault point ``binlog.decode_row``, as a value in a charset
    Python reads differently): the source pauses before its transaction, naming table and
    event, with the position `dmctl binlog skip` needs (before: no position, and skip refused
    without -b). A table the task does not replicate is never decoded: its row, written
    first, is not the one that fails."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    other = f"{db}_other"
    run(up, f"CREATE DATABASE {qi(other)}", f"CREATE TABLE {qt(other, 't')} (id int PRIMARY KEY)")
    try:
        steps(sess, "caught_up")
        monkeypatch.setenv("SHARDFLOW_FAULTS", "binlog.decode_row=raise:1")
        run(up, f"INSERT INTO {qt(other, 't')} VALUES (1)", f"INSERT INTO {qt(db, 't')} VALUES (1, 'lost')",
            f"INSERT INTO {qt(db, 't')} VALUES (2, 'kept')")
        out = steps(sess, "paused")
        st = store.source_state(task.name, sid)
        assert "50014" in st["error"] and f"`{db}`.`t`" in st["error"], st["error"]
        assert st["error_pos"] and "binlog skip" in st["error"], st
        assert any(st["error_pos"] in text for _, text in out.messages), out.messages
        assert rows(down, tdb, "t") == []
        assert dmctl_binlog("skip", task.name, "-s", sid) == 0
        steps(sess, "caught_up")
        assert rows(down, tdb, "t") == [(2, "kept")]
    finally:
        run(up, f"DROP DATABASE IF EXISTS {qi(other)}")
