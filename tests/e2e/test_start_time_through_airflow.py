"""`dmctl start-task --start-time` through real Airflow: an incremental task started at a time
syncs what the upstream wrote from then on and nothing before it; stopped and started again
from the UI's form (shardflow_operate_task, Param start_time) at an earlier time, the rows
before the first time arrive too (the DM case with its edge cases is
tests/dm_cases/test_start_task.py::test_start_task_by_time)."""

from __future__ import annotations

import datetime
import json
import time
import uuid

import pytest
import yaml

from dm_core.db import connect, qi, qt

from ..integration.helpers import drop_schemas, run_sql, target_database
from .test_migration_through_airflow import ROOT, _api, _source_file, dmctl
from .test_migrations_page import _run_dag

pytestmark = pytest.mark.e2e

_DDL = "CREATE TABLE {t} (id int PRIMARY KEY, name varchar(32) NOT NULL)"


def _rows(ep, schema, table) -> list[tuple]:
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, name FROM {qt(schema, table)} ORDER BY id")
        rows = [tuple(r) for r in cur.fetchall()]
    conn.close()
    return rows


def test_an_incremental_task_started_at_a_time_syncs_from_then_on(stack, airflow, tmp_path):
    uniq = uuid.uuid4().hex[:8]
    schema, tdb, name, sid = f"st{uniq}", f"stt{uniq}", f"st{uniq}", f"st-{uniq}"
    up, down = stack["up1"], stack["down"]
    task = {"name": name, "task-mode": "incremental", "target-database": target_database(down),
            "mysql-instances": [{"source-id": sid, "block-allow-list": "ba", "route-rules": ["r"]}],
            "block-allow-list": {"ba": {"do-dbs": [schema]}},
            "routes": {"r": {"schema-pattern": schema, "target-schema": tdb}}}
    task_file = tmp_path / f"{name}.yaml"
    task_file.write_text(yaml.safe_dump(task, sort_keys=False))
    try:
        first = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        time.sleep(2)
        # before the time: a table (made downstream by hand, as for any incremental task) and rows
        run_sql(up, f"CREATE DATABASE {qi(schema)}", _DDL.format(t=qt(schema, "t_1")),
             f"INSERT INTO {qt(schema, 't_1')} VALUES (1, 'before'), (2, 'before')")
        run_sql(down, f"CREATE DATABASE {qi(tdb)}", _DDL.format(t=qt(tdb, "t_1")))
        time.sleep(2)   # binlog events are stamped in whole seconds
        at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        time.sleep(2)
        run_sql(up, f"INSERT INTO {qt(schema, 't_1')} VALUES (3, 'after')", _DDL.format(t=qt(schema, "t_2")),
             f"INSERT INTO {qt(schema, 't_2')} VALUES (1, 'after')",
             f"UPDATE {qt(schema, 't_1')} SET name = 'after' WHERE id = 1")

        dmctl(stack, "operate-source", "create", _source_file(tmp_path, sid, up))
        out = dmctl(stack, "start-task", str(task_file), "--remove-meta", "--start-time", at).stdout
        assert f"start at the binlog position of {at}" in out, out
        r = dmctl(stack, "query-status", name, "--wait-synced", "600", check=False, timeout=900)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr
        # the UPDATE of row 1 after the time arrives (in safe mode: a REPLACE, the row was never
        # downstream); row 2, written only before it, does not
        assert _rows(down, tdb, "t_1") == [(1, "after"), (3, "after")]
        assert _rows(down, tdb, "t_2") == [(1, "after")]
        shown = json.loads(dmctl(stack, "query-status", name).stdout)["tasks"][0]["sources"][0]
        assert shown["start_time"] is None and shown["error"] is None, shown

        # stopped, then started from the Airflow UI's form at a time before everything: the rows
        # written before the first time arrive too (a start from the checkpoints would not)
        dmctl(stack, "stop-task", name)
        state, log = _run_dag(_api(stack), "shardflow_operate_task",
                              {"task": name, "action": "start", "sources": [], "remove_meta": False,
                               "start_time": first})
        assert state == "success" and f"start at the binlog position of {first}" in log, log[-3000:]
        r = dmctl(stack, "query-status", name, "--wait-synced", "600", check=False, timeout=900)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr
        assert _rows(down, tdb, "t_1") == [(1, "after"), (2, "before"), (3, "after")]
        assert _rows(down, tdb, "t_2") == [(1, "after")]
    finally:
        dmctl(stack, "stop-task", name, check=False)
        (ROOT / "config" / "tasks" / f"{name}.yaml").unlink(missing_ok=True)
        drop_schemas(up, [schema])
        drop_schemas(down, [tdb])
