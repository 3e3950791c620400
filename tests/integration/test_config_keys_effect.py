"""Keys that used to be parsed and ignored, now acting on real servers: `mydumpers.where` in the
Spark full load, and a source file's `filters` in binlog sync."""

import os

import pytest
import yaml

from dm_core.config.source import parse_source
from dm_core.config.task import parse_task
from dm_core.db import connect, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.state.schema import SCHEMA
from dm_core.sync.syncer import Syncer

from .helpers import drop_schemas, make_shards, target_database
from .test_full_load_types import _spark_load

pytestmark = pytest.mark.integration


def _task(name, stack, sid, schema, tdb, **extra) -> str:
    inst = {"source-id": sid, "block-allow-list": "ba", "route-rules": ["r"], **extra.pop("instance", {})}
    return yaml.safe_dump({"name": name, "task-mode": "all", "target-database": target_database(stack["down"]),
                           "mysql-instances": [inst],
                           "routes": {"r": {"schema-pattern": schema, "target-schema": tdb}},
                           "block-allow-list": {"ba": {"do-dbs": [schema]}}, **extra}, sort_keys=False)


def _rows(ep, sql) -> list:
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute(sql)
        out = sorted(cur.fetchall())
    conn.close()
    return out


def _register_source(store, stack, sid, extra_yaml: str = ""):
    ep = stack["up1"]
    src = parse_source(f"source-id: {sid}\nfrom: {{host: {ep.host}, port: {ep.port}, user: {ep.user}, "
                       f"password: '{ep.password}'}}\n{extra_yaml}", "source.yaml")
    store.put_source(sid, src.to_dict(), src.password)


def _cleanup(store, name, sid):
    reset_task(store, name)
    with store.tx() as cur:
        cur.execute(f"DELETE FROM {SCHEMA}.source WHERE source_id = %s", (sid,))
    store.close()


def test_mydumpers_where_selects_the_rows_of_every_table_the_full_load_copies(stack, uniq):
    schema, tdb, name, sid = f"wh{uniq}", f"wht{uniq}", f"where{uniq}", f"wh-{uniq}"
    make_shards(stack["up1"], [schema], ["t_1", "t_2"], rows=400)
    text = _task(name, stack, sid, schema, tdb, instance={"mydumper-config-name": "d"},
                 mydumpers={"d": {"where": "amount < 150 AND name IS NOT NULL"}})
    task = parse_task(text, "where.yaml")
    assert task.warnings == []
    store = StateStore()
    try:
        _register_source(store, stack, sid)
        reset_task(store, name)
        store.put_task(name, text, "running")
        prepare(task, store)
        _spark_load(name, dict(os.environ))
        finish(task, store)
        for t in ("t_1", "t_2"):
            want = _rows(stack["up1"], f"SELECT id, name, amount FROM {qt(schema, t)} WHERE amount < 150 AND name IS NOT NULL")
            got = _rows(stack["down"], f"SELECT id, name, amount FROM {qt(tdb, t)}")
            assert len(want) == 120 and got == want, f"{t}: {len(got)} rows downstream, {len(want)} match the where"
    finally:
        _cleanup(store, name, sid)
        drop_schemas(stack["up1"], [schema])
        drop_schemas(stack["down"], [tdb])


def test_source_file_filters_apply_to_binlog_sync_and_the_task_rule_for_the_same_tables_wins(stack, uniq):
    """The source ignores deletes on every table of the schema and updates on t_2; the task's own
    rule for t_2 (same patterns) replaces the source's: updates of t_2 replicate (DM's precedence)."""
    schema, tdb, name, sid = f"sf{uniq}", f"sft{uniq}", f"srcf{uniq}", f"sf-{uniq}"
    make_shards(stack["up1"], [schema], ["t_1", "t_2"])
    text = _task(name, stack, sid, schema, tdb, instance={"filter-rules": ["keep-t2"]},
                 filters={"keep-t2": {"schema-pattern": schema, "table-pattern": "t_2", "events": ["truncate table"],
                                      "action": "Ignore"}})
    task = parse_task(text, "filters.yaml")
    store = StateStore()
    try:
        _register_source(store, stack, sid, yaml.safe_dump({"filters": [
            {"schema-pattern": schema, "events": ["delete"], "action": "Ignore"},
            {"schema-pattern": schema, "table-pattern": "t_2", "events": ["update"], "action": "Ignore"}]}))
        reset_task(store, name)
        store.put_task(name, text, "running")
        prepare(task, store)        # low watermark + target tables (the rows come with the binlog below)
        conn = connect(stack["up1"])
        with conn.cursor() as cur:
            for t in ("t_1", "t_2"):
                cur.executemany(f"INSERT INTO {qt(schema, t)} (name, amount) VALUES ('new', %s)", [(i,) for i in range(10)])
                cur.execute(f"UPDATE {qt(schema, t)} SET name = 'updated' WHERE id <= 3")
                cur.execute(f"DELETE FROM {qt(schema, t)} WHERE id > 8")
        conn.close()
        finish(task, store)
        r = Syncer(task, sid, store, budget_events=500).run_until(float("inf"), max_windows=50)
        assert not r.paused and r.caught_up, r.paused
        for t in ("t_1", "t_2"):
            ids = [r[0] for r in _rows(stack["down"], f"SELECT id FROM {qt(tdb, t)}")]
            assert ids == list(range(1, 11)), f"{t}: inserts replicate, the source's rule ignores deletes"
            assert _rows(stack["up1"], f"SELECT COUNT(*) FROM {qt(schema, t)}") == [(8,)]
            updated = _rows(stack["down"], f"SELECT id FROM {qt(tdb, t)} WHERE name = 'updated'")
            assert len(updated) == 3, f"{t}: updates replicate (t_2: the task's rule replaced the source's)"
    finally:
        _cleanup(store, name, sid)
        drop_schemas(stack["up1"], [schema])
        drop_schemas(stack["down"], [tdb])
