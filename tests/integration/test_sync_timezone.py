"""TIMESTAMP values keep their instant when the downstream runs in another time zone: a private
downstream started with --default-time-zone='+08:00', rows through the sync path (and the
task's `timezone` key set, as DM users have it). DATETIME values, which have no zone, stay as
written."""

import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, qi, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.session import Clocks, SyncSession
from dm_core.validate.compare import compare_task, render

from .helpers import drop_schemas, register
from .mariadb_fixture import free_port, private_port, start_mariadb

pytestmark = pytest.mark.integration

SELECT = "SELECT id, UNIX_TIMESTAMP(ts), CAST(dt AS CHAR) FROM {} ORDER BY id"


def run(ep, *stmts):
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            for s in stmts:
                cur.execute(s)
            return list(cur.fetchall())
    finally:
        conn.close()


def test_timestamps_keep_their_instant_on_a_downstream_in_another_zone(stack, uniq, tmp_path):
    down = start_mariadb(tmp_path, free_port(private_port(i) for i in range(4, 8)), 72,
                         ("--default-time-zone=+08:00",), log_bin=False)
    up, db, name, sid = stack["up1"], f"tz{uniq}", f"tz{uniq}", f"tz-{uniq}"
    store = StateStore()
    try:
        assert down.sql("SELECT @@global.time_zone")[0][0] == "+08:00"
        run(up, f"CREATE DATABASE {qi(db)}",
            f"CREATE TABLE {qt(db, 't')} (id int PRIMARY KEY, ts timestamp(3) NULL, dt datetime NULL)",
            "SET time_zone = '+00:00'", f"INSERT INTO {qt(db, 't')} VALUES (1, '2024-01-01 00:00:00.123', "
            "'2024-01-01 00:00:00')")
        text = (f"name: {name}\ntask-mode: all\ntimezone: Asia/Shanghai\n"
                f"target-database: {{host: 127.0.0.1, port: {down.port}, user: root, password: ''}}\n"
                f"mysql-instances:\n  - source-id: {sid}\n    block-allow-list: ba\n"
                f"block-allow-list:\n  ba: {{do-dbs: [{db}]}}\n")
        task = parse_task(text, "tz.yaml")
        register(store, {sid: up}, name, text)
        prepare(task, store)
        down.sql(f"INSERT INTO {qt(db, 't')} SELECT 1, '2024-01-01 08:00:00.123', '2024-01-01 00:00:00'")  # the dump
        finish(task, store)
        run(up, "SET time_zone = '-05:00'",  # a writer in yet another zone: the instant is what counts
            f"INSERT INTO {qt(db, 't')} VALUES (2, '2024-06-30 23:59:59.5', '2024-06-30 23:59:59')",
            f"UPDATE {qt(db, 't')} SET ts = ts + INTERVAL 1 HOUR WHERE id = 1",
            f"INSERT INTO {qt(db, 't')} VALUES (3, NOW(3), NOW())")
        sess = SyncSession(task, sid, store, clocks=Clocks(sleep=lambda s: None))
        for _ in range(20):
            if sess.step().state == "caught_up":
                break
        want = run(up, SELECT.format(qt(db, "t")))
        assert len(want) == 3
        assert run(down.endpoint(), SELECT.format(qt(db, "t"))) == want
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
    finally:
        reset_task(store, name)
        store.close()
        down.stop()
        drop_schemas(up, [db])
