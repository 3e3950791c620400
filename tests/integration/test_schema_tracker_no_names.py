"""The schema tracker on an upstream that logs no column names: the stack's up2 runs
binlog_row_metadata=NO_LOG (MariaDB's default; MySQL 5.6/5.7 cannot log names at all). Rows are
decoded by position with the table as it stood at their binlog position: values exact across
DDL (a RENAME COLUMN keeps the TABLE_MAP's bytes, an ADD COLUMN FIRST moves every position),
after a restart, and in a safe-mode replay from before the DDLs. `dmctl binlog-schema` shows the
versions, and an operator's wrong version pauses the source naming both sides until
`binlog-schema update --from-source` sets it right."""

import contextlib
import io
import json

import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, qi, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.session import Clocks, Pacing, SyncSession
from dm_core.sync.syncer import Syncer

from .helpers import drop_schemas, one_source_task, register
from .helpers import run_sql as run
from .test_full_support import execute

pytestmark = pytest.mark.integration

AFTER_DDL = "id, HEX(title), e, s, big, HEX(b), HEX(note)"
BEFORE_DDL = "id, HEX(name), e, s, big, HEX(b)"


def exact(ep, schema, columns=AFTER_DDL) -> list[tuple]:
    return execute(ep, f"SELECT {columns} FROM {qt(schema, 't')} ORDER BY id")


def dmctl(*args) -> tuple[int, str]:
    from dm_core.cli.dmctl import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = main(list(args))
    return rc, out.getvalue()


def steps(sess, want, n=30):
    for _ in range(n):
        out = sess.step()
        if out.state == want:
            return out
    pytest.fail(f"never {want!r}: last {out.state!r} {out.messages}")


@pytest.fixture
def no_names(stack, uniq):
    up, down = stack["up2"], stack["down"]
    with connect(up).cursor() as cur:
        cur.execute("SELECT @@GLOBAL.binlog_row_metadata")
        assert cur.fetchone()[0] == "NO_LOG", "the stack's up2 must log no column names"
    db, tdb, name, sid = f"nn{uniq}", f"tnn{uniq}", f"nn{uniq}", f"nn-{uniq}"
    run(up, f"CREATE DATABASE {qi(db)}",
        f"CREATE TABLE {qt(db, 't')} (id int unsigned PRIMARY KEY, name varchar(20) CHARACTER SET latin1, "
        "e enum('x','y','z') NOT NULL, s set('a','b','c'), big bigint unsigned, b varbinary(4)) DEFAULT CHARSET=utf8mb4")
    text = one_source_task(name, sid, db, tdb, down)
    task = parse_task(text, "nn.yaml")
    store = StateStore()
    register(store, {sid: up}, name, text)
    prepare(task, store)     # the target, and the tracker's version at the low watermark
    finish(task, store)
    sess = SyncSession(task, sid, store, pacing=Pacing(transient_retries=2), clocks=Clocks(sleep=lambda s: None))
    yield task, store, sid, db, tdb, sess
    reset_task(store, name)
    store.close()
    drop_schemas(up, [db])
    drop_schemas(down, [tdb])


def test_no_names_upstream_rows_keep_every_value_across_ddl_a_restart_and_a_replay(no_names, stack):
    task, store, sid, db, tdb, sess = no_names
    up, down = stack["up2"], stack["down"]
    t = qt(db, "t")
    run(up, f"INSERT INTO {t} VALUES (4294967295, 'caf\u00e9 \u00c5', 'z', 'a,c', 18446744073709551615, x'00ff')",
        f"INSERT INTO {t} VALUES (1, NULL, 'x', '', 0, NULL)",
        f"ALTER TABLE {t} RENAME COLUMN name TO title",          # same TABLE_MAP bytes, another name
        f"INSERT INTO {t} VALUES (2, '\u00fcber', 'y', 'b', 9223372036854775808, x'01')",
        f"ALTER TABLE {t} ADD COLUMN note varchar(10) CHARACTER SET latin1 DEFAULT 'n\u00e9' FIRST",
        f"INSERT INTO {t} (note, id, title, e) VALUES ('\u00e0', 3, 'd\u00e9j\u00e0', 'x')",
        f"UPDATE {t} SET title = 'r\u00e9', s = 'a,b,c' WHERE id = 1",
        f"DELETE FROM {t} WHERE id = 2")
    # a first process reads part of it, a second (a restart: a new tracker, read from the store) the rest
    Syncer(task, sid, store, budget_events=4).run_window()
    steps(sess, "caught_up")
    want = exact(up, db)
    assert len(want) == 3 and exact(down, tdb) == want
    assert want[-1][0] == 4294967295 and want[-1][4] == 18446744073709551615 and want[-1][2:4] == ("z", "a,c")

    # read again from the low watermark into the target as it was then (a re-sync): with the
    # versions already stored, each row decodes with its own position's schema
    st = store.source_state(task.name, sid)
    store.update_source_state(task.name, sid, binlog_file=st["low_file"], binlog_pos=st["low_pos"])
    run(down, f"DROP TABLE {qt(tdb, 't')}",      # the target as the full phase made it: the DDLs run again
        f"CREATE TABLE {qt(tdb, 't')} (id int unsigned PRIMARY KEY, name varchar(20) CHARACTER SET latin1, "
        "e enum('x','y','z') NOT NULL, s set('a','b','c'), big bigint unsigned, b varbinary(4)) DEFAULT CHARSET=utf8mb4")
    replay = SyncSession(task, sid, store, pacing=Pacing(transient_retries=2), clocks=Clocks(sleep=lambda s: None))
    steps(replay, "caught_up")
    assert exact(down, tdb) == want

    rc, out = dmctl("binlog-schema", "list", task.name, db, "t", "-s", sid)
    versions = json.loads(out)["sources"][sid]["versions"]
    assert rc == 0 and [[c["name"] for c in v["table"]["columns"]] for v in versions] == [
        ["id", "name", "e", "s", "big", "b"], ["id", "title", "e", "s", "big", "b"],
        ["note", "id", "title", "e", "s", "big", "b"]]


def test_a_wrong_tracked_table_pauses_naming_both_sides_until_binlog_schema_update_sets_it(no_names, stack):
    task, store, sid, db, tdb, sess = no_names
    up, down = stack["up2"], stack["down"]
    t = qt(db, "t")
    run(up, f"INSERT INTO {t} VALUES (1, 'a', 'x', 'a', 1, x'01')")
    steps(sess, "caught_up")
    bad = f"/tmp/nn-{sid}.sql"
    with open(bad, "w") as f:
        f.write("CREATE TABLE t (id int unsigned, name varchar(20))")
    rc, out = dmctl("binlog-schema", "update", task.name, db, "t", bad, "-s", sid)
    assert rc == 2 and "pause first" in out, out          # a running syncer may be decoding with them
    store.request_sources(task.name, [sid], "paused", all_sources=[sid])
    steps(sess, "paused")
    rc, out = dmctl("binlog-schema", "update", task.name, db, "t", bad, "-s", sid)
    assert rc == 0, out
    run(up, f"INSERT INTO {t} VALUES (2, 'b', 'y', 'b', 2, x'02')")
    store.request_sources(task.name, [sid], "running", all_sources=[sid])
    steps(sess, "paused")
    err = store.source_state(task.name, sid)["error"]
    assert "50025" in err and f"`{db}`.`t`" in err and "has 6 columns, the tracked table 2 (id, name)" in err, err
    assert "binlog-schema update" in err
    assert exact(down, tdb, BEFORE_DDL) == exact(up, db, BEFORE_DDL)[:1]     # nothing of the row written with a wrong schema

    rc, out = dmctl("binlog-schema", "update", task.name, db, "t", "--from-source", "-s", sid)
    assert rc == 0, out
    store.request_sources(task.name, [sid], "running", all_sources=[sid], clear_error=True)
    steps(sess, "caught_up")
    assert exact(down, tdb, BEFORE_DDL) == exact(up, db, BEFORE_DDL)
    store.request_sources(task.name, [sid], "paused", all_sources=[sid])
    rc, out = dmctl("binlog-schema", "delete", task.name, db, "t", "-s", sid)
    assert rc == 0 and json.loads(out)["sources"][sid]["deleted_versions"] >= 1


def test_rows_after_the_seed_decode_when_the_table_also_changed_between_low_watermark_and_seed(stack, uniq):
    """Writes while the full phase prepares: the table's rows between the low watermark L and
    the tracker's seed S are passed over (the load's chunks, read after S, hold them), and the
    same table's rows after S, under the same TABLE_MAP, in the same window, decode and land.
    (The demo lost every later change of such a table until the window ended: the pass at L..S
    was remembered with the map.)"""
    from dm_core.db import master_position

    up, down = stack["up2"], stack["down"]
    db, tdb, name, sid = f"ns{uniq}", f"tns{uniq}", f"ns{uniq}", f"ns-{uniq}"
    t = qt(db, "t")
    run(up, f"CREATE DATABASE {qi(db)}", f"CREATE TABLE {t} (id int PRIMARY KEY, v varchar(10))")
    text = one_source_task(name, sid, db, tdb, down)
    task = parse_task(text, "ns.yaml")
    store = StateStore()
    try:
        register(store, {sid: up}, name, text)
        conn = connect(up)
        f, p, g = master_position(conn)   # L, before the writes the load will hold
        conn.close()
        run(up, f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')", f"UPDATE {t} SET v = 'a2' WHERE id = 1")
        store.update_source_state(name, sid, low_file=f, low_pos=p, low_gtid=g, stage="full")
        prepare(task, store)              # seeds the tracker at S, after those writes
        run(down, f"INSERT INTO {qt(tdb, 't')} VALUES (1, 'a2'), (2, 'b')")   # what the load's chunk holds
        finish(task, store)
        run(up, f"INSERT INTO {t} VALUES (3, 'c')", f"UPDATE {t} SET v = 'b2' WHERE id = 2",
            f"DELETE FROM {t} WHERE id = 1")
        sess = SyncSession(task, sid, store, pacing=Pacing(transient_retries=2), clocks=Clocks(sleep=lambda s: None))
        steps(sess, "caught_up")
        assert exact(down, tdb, "id, v") == exact(up, db, "id, v") == [(2, "b2"), (3, "c")]
    finally:
        reset_task(store, name)
        store.close()
        drop_schemas(up, [db])
        drop_schemas(down, [tdb])
