"""The Spark full load (local mode, as the full DAG runs it) followed by binlog sync, on tables with the
types and keys a real schema has: DECIMAL, DATETIME(6), DATE, TIME, JSON, BLOB, unicode TEXT,
NULLs, zero dates in NOT NULL columns, a composite key, a string key and no key at all.
Downstream must equal upstream."""

import textwrap
from pathlib import Path

import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, qi, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.syncer import Syncer
from dm_core.validate.compare import compare_task, render

from .helpers import drop_schemas
from .test_full_support import run_load

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

TABLES = {
    "typed": """(id bigint unsigned NOT NULL PRIMARY KEY, d decimal(20,6) NULL, dt datetime(6) NULL, da date NULL,
                 ti time NULL, j json NULL, b blob NULL, t text NULL, f double NULL, ti1 tinyint(1) NULL,
                 e enum('a','b','c') NULL, ts timestamp NULL)""",
    "composite": "(a int NOT NULL, b varchar(20) NOT NULL, v int NULL, PRIMARY KEY (a, b))",
    "strkey": "(code varchar(32) NOT NULL PRIMARY KEY, v varchar(100) NULL)",
    "nokey": "(a int NULL, b varchar(10) NULL)",
    # legacy MySQL schemas: zero dates in NOT NULL columns (DM's sharding case has them too)
    "zerodate": """(id int NOT NULL PRIMARY KEY, z datetime NOT NULL DEFAULT '0000-00-00 00:00:00',
                    zd date NOT NULL DEFAULT '0000-00-00', z6 datetime(6) NULL)""",
}


def _rows(i: int) -> dict:
    return {
        "typed": (i, f"{i}.123456" if i % 4 else None, f"2024-03-0{i % 9 + 1} 12:34:56.{i:06d}", "2023-12-31",
                  "23:59:59", '{"k": [1, "é"], "n": null}' if i % 3 else None, bytes([i % 256, 0, 255]),
                  "ünïcødé 笑 " * (i % 5), i / 3.0, i % 2, "abc"[i % 3], "2024-01-01 00:00:01"),
        "composite": (i, f"k{i % 7}", i),
        "strkey": (f"code-{i:05d}", "v" * (i % 50)),
        "nokey": (i % 10, None if i % 3 else "x"),
        "zerodate": (i, "0000-00-00 00:00:00" if i % 2 else "2024-05-06 07:08:09",
                     "0000-00-00" if i % 3 else "2024-05-06", "0000-00-00 00:00:01.5" if i % 5 == 0 else None),
    }


def _spark_load(task_name: str, env: dict | None = None) -> None:
    r = run_load(task_name, "--chunk-rows", "100", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]


def test_full_load_then_sync_keeps_every_type(stack, uniq):
    schema, tdb, name, sid = f"ty{uniq}", f"tyt{uniq}", f"types{uniq}", f"ty-{uniq}"
    up = stack["up1"]
    conn = connect(up)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {qi(schema)}")
        for t, ddl in TABLES.items():
            cur.execute(f"CREATE TABLE {qt(schema, t)} {ddl}")
            ph = ", ".join(["%s"] * len(_rows(0)[t]))
            cur.executemany(f"INSERT INTO {qt(schema, t)} VALUES ({ph})", [_rows(i)[t] for i in range(1, 400)])
    text = textwrap.dedent(f"""\
        name: {name}
        task-mode: all
        target-database: {{host: {stack['down'].host}, port: {stack['down'].port}, user: {stack['down'].user}, password: "{stack['down'].password}"}}
        mysql-instances:
          - source-id: {sid}
            block-allow-list: ba
            route-rules: [r]
        routes:
          r: {{schema-pattern: "{schema}", target-schema: "{tdb}"}}
        block-allow-list:
          ba: {{do-dbs: ["{schema}"]}}
        """)
    task = parse_task(text, "types.yaml")
    store = StateStore()
    try:
        store.put_source(sid, {"source-id": sid, "host": up.host, "port": up.port, "user": up.user}, up.password)
        reset_task(store, name)
        store.put_task(name, text, "running")
        prepare(task, store)
        with conn.cursor() as cur:  # lands between the low watermark and the dump: both paths see it
            cur.execute(f"UPDATE {qt(schema, 'typed')} SET t = 'during-dump' WHERE id < 20")
            cur.execute(f"DELETE FROM {qt(schema, 'nokey')} WHERE a = 3")
        _spark_load(name)
        finish(task, store)
        with conn.cursor() as cur:  # after the dump: only the binlog carries it
            ph = ", ".join(["%s"] * len(_rows(0)["typed"]))
            cur.executemany(f"INSERT INTO {qt(schema, 'typed')} VALUES ({ph})", [_rows(i)["typed"] for i in range(1000, 1050)])
            cur.execute(f"UPDATE {qt(schema, 'composite')} SET b = 'moved' WHERE a = 5")
            cur.execute(f"UPDATE {qt(schema, 'strkey')} SET v = NULL WHERE code < 'code-00100'")
            cur.execute(f"INSERT INTO {qt(schema, 'nokey')} VALUES (NULL, NULL), (1, 'dup'), (1, 'dup')")
            cur.execute(f"INSERT INTO {qt(schema, 'zerodate')} VALUES (5000, '0000-00-00 00:00:00', '0000-00-00', "
                        "'0000-00-00 00:00:00.25')")
            cur.execute(f"UPDATE {qt(schema, 'zerodate')} SET z = '0000-00-00 00:00:00' WHERE id = 2")
        r = Syncer(task, sid, store, budget_events=300).run_until(float("inf"), max_windows=100)
        assert not r.paused and r.caught_up, r.paused
        diffs = compare_task(task, store)
        assert len(diffs) == 5
        assert all(d.equal for d in diffs), render(diffs)
    finally:
        reset_task(store, name)
        store.close()
        conn.close()
        drop_schemas(up, [schema])
        drop_schemas(stack["down"], [tdb])
