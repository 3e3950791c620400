"""Fixtures the integration modules share."""

import pytest

from dm_core.config.task import parse_task
from dm_core.db import qi, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.session import Clocks, Pacing, SyncSession

from .helpers import drop_schemas, one_source_task, register, target_database
from .helpers import run_sql as run


@pytest.fixture
def plain(stack, uniq):
    """One source, schema er<uniq> -> ter<uniq>, table t (id, name varchar(20)); synced."""
    up, down = stack["up1"], stack["down"]
    db, tdb, name, sid = f"er{uniq}", f"ter{uniq}", f"er{uniq}", f"er-{uniq}"
    run(up, f"CREATE DATABASE {qi(db)}", f"CREATE TABLE {qt(db, 't')} (id int PRIMARY KEY, name varchar(20))")
    target = {**target_database(down), "session": {"innodb_lock_wait_timeout": 1}}
    text = one_source_task(name, sid, db, tdb, down, target=target)
    task = parse_task(text, "errors.yaml")
    store = StateStore()
    register(store, {sid: up}, name, text)
    prepare(task, store)
    run(down, f"CREATE DATABASE IF NOT EXISTS {qi(tdb)}",
        f"CREATE TABLE IF NOT EXISTS {qt(tdb, 't')} (id int PRIMARY KEY, name varchar(20))")
    finish(task, store)
    sess = SyncSession(task, sid, store, pacing=Pacing(transient_retries=2), clocks=Clocks(sleep=lambda s: None))
    yield task, store, sid, db, tdb, sess
    reset_task(store, name)
    store.close()
    drop_schemas(up, [db])
    drop_schemas(down, [tdb])
