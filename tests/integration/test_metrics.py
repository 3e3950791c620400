"""/metrics on real servers: the plugin's FastAPI app (in process) answers with series computed
from the state store as the syncer, the full phase, the shard DDL locks, validation and re-sync
write it; promtool accepts the exposition."""

import shutil
import subprocess
from pathlib import Path

import pytest

from dm_core.db import qt
from dm_core.metrics import catalog
from dm_core.position import Position
from dm_core.state.schema import SCHEMA

from .helpers import run_sql as run, steps

pytestmark = pytest.mark.integration


def scrape(headers=None) -> tuple[dict, str]:
    """(name, {label: value} without instance) → value, and the body, from the plugin's app."""
    from fastapi.testclient import TestClient
    from prometheus_client.parser import text_string_to_metric_families

    from shardflow_airflow.ui.migrations_app import create_app

    r = TestClient(create_app()).get("/metrics", headers=headers or {})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    got = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            got[(s.name, frozenset(s.labels.items()))] = s.value
    return got, r.text


def value(got: dict, name: str, **labels):
    want = {k: str(v) for k, v in labels.items()}
    found = [v for (n, ls), v in got.items() if n == name and want.items() <= dict(ls).items()]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_a_syncing_source_then_paused_on_an_error(plain, stack):
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    t, me = qt(db, "t"), {"task": task.name, "source_id": sid}
    run(up, f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')", f"UPDATE {t} SET name = 'bb' WHERE id = 2",
        f"DELETE FROM {t} WHERE id = 3", f"ALTER TABLE {t} ADD COLUMN n int", f"INSERT INTO {t} VALUES (4, 'd', 4)")
    steps(sess, "caught_up")
    got, body = scrape()
    jobs = {k: value(got, "dm_syncer_finished_jobs_total", type=k, **me) for k in ("insert", "update", "delete", "ddl")}
    assert jobs == {"insert": 4, "update": 1, "delete": 1, "ddl": 1}, jobs
    assert value(got, "dm_syncer_finished_transaction_total", **me) == 5   # four DML transactions and the DDL
    assert value(got, "dm_worker_task_state", **me) == 2
    st = store.source_state(task.name, sid)
    for node in ("syncer", "master"):   # caught up: the checkpoint is where the upstream's binlog ended
        assert value(got, "dm_syncer_binlog_file", node=node, **me) == int(st["binlog_file"].rsplit(".", 1)[1])
        assert value(got, "dm_syncer_binlog_pos", node=node, **me) == st["binlog_pos"]
    assert value(got, "dm_syncer_remaining_time", **me) == 0 and value(got, "dm_syncer_replication_lag_gauge", **me) == 0
    assert value(got, "dm_syncer_replication_lag_count", **me) >= 2       # batches committed, windows ended
    assert value(got, "dm_syncer_txn_duration_time_count", **me) >= 1
    assert value(got, "dm_syncer_query_duration_time_count", **me) == 1
    assert value(got, "dm_syncer_query_duration_time_bucket", le="+Inf", **me) == 1
    assert value(got, "dm_syncer_exit_with_error_count", resumable_err="false", **me) == 0
    assert value(got, "dm_loader_progress", **me) == 1   # the full phase handed over
    assert value(got, "shardflow_task_status", task=task.name, status="running") == 1
    worker = dict(next(ls for (n, ls) in got if n == "dm_worker_task_state" and ("source_id", sid) in ls))
    assert worker["instance"] == sid and worker["worker"], worker
    if shutil.which("promtool"):   # Prometheus' own lint finds nothing but a name DM chose (kept as DM spells it)
        lint = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
        found = [line for line in (lint.stdout + lint.stderr).splitlines() if line.strip()]
        assert found in ([], ["dm_syncer_replication_lag_gauge metric name should not include type 'gauge'"]), found

    # a transient error the sensor retries (as session.py records it), then a permanent one that pauses
    store.update_source_state(task.name, sid, error="transient error (attempt 1 of 2; next try in 2s): lost")
    run(down, f"ALTER TABLE {qt(tdb, 't')} MODIFY name varchar(2)")
    run(up, f"INSERT INTO {t} VALUES (5, 'far too long', 5)")
    steps(sess, "paused")
    got, _ = scrape()
    assert value(got, "dm_syncer_exit_with_error_count", resumable_err="false", **me) == 1
    assert value(got, "dm_syncer_exit_with_error_count", resumable_err="true", **me) == 1
    assert value(got, "dm_worker_task_state", **me) == 3
    assert value(got, "shardflow_source_stage", stage="paused", **me) == 1


def test_full_phase_locks_validation_and_resync_as_their_writers_record_them(stack, uniq):
    from dm_core.full.plan_store import PlanStore
    from dm_core.reset import reset_task
    from dm_core.resync import hold
    from dm_core.shardddl.lock_ops import PESSIMISTIC
    from dm_core.shardddl.pessimism.info import Info
    from dm_core.state import StateStore

    name, s1, s2 = f"mt{uniq}", f"m1-{uniq}", f"m2-{uniq}"
    store = StateStore()
    try:
        store.start_task(name, "name: x\n")
        # full phase: s1 planned 2 tables of 3 and 1 chunk, 3 chunks loaded; s2 not planned yet
        store.update_source_state(name, s1, stage="full", low_file="mysql-bin.000001", low_pos=4)
        store.update_source_state(name, s2, stage="full", low_file="mysql-bin.000001", low_pos=4)
        PlanStore(store.dsn).close()   # its tables
        with store.tx() as cur:
            for table, n in (("a", 3), ("b", 1)):
                cur.execute(f"INSERT INTO {SCHEMA}.full_plan (task, source_id, schema_name, table_name, plan_id, epoch, "
                            "chunks) VALUES (%s, %s, 'db', %s, %s, 'e', %s)", (name, s1, table, f"{name}{table}", n))
        for table, chunk, rows in (("a", 0, 10), ("a", 1, 10), ("b", 0, 5)):
            store.mark_chunk_done(name, s1, "db", table, chunk, rows)
        # a pessimistic shard DDL lock: s1 reported, s2 not yet
        info = Info(name, s1, ("tdb", "t"), (("db", "t_1"),), ("ALTER TABLE `tdb`.`t` ADD COLUMN `c` INT",),
                    Position("mysql-bin.000001", 100))
        PESSIMISTIC.put_info(store, info, [s1, s2])
        store.put_validation(name, "r1", "different", {"tables": [
            {"target": "tdb.t", "differences": [{"kind": "missing", "key": {"id": "1"}}], "more_differences": 2,
             "pending": [{"kind": "changed", "key": {"id": "9"}}]}]}, finished=True)
        hold.request(store, name, "resync-1")

        got, _ = scrape()
        a = {"task": name, "source_id": s1}
        assert value(got, "dm_loader_progress", **a) == 0.75
        assert value(got, "lightning_chunks", state="finished", **a) == 3
        assert value(got, "lightning_chunks", state="estimated", **a) == 4
        assert value(got, "lightning_tables", state="completed", **a) == 1
        assert value(got, "shardflow_full_rows_loaded_total", **a) == 25
        assert value(got, "dm_loader_progress", task=name, source_id=s2) == 0
        assert value(got, "dm_master_ddl_state_number", task=name, type="Un-synced") == 1
        assert value(got, "dm_master_ddl_state_number", task=name, type="Synced") == 0
        assert value(got, "dm_syncer_shard_lock_resolving", **a) == 1
        assert value(got, "dm_syncer_shard_lock_resolving", task=name, source_id=s2) == 0
        assert value(got, "shardflow_shard_ddl_lock_waiting_seconds", task=name) >= 0
        assert value(got, "shardflow_validation_status", task=name, status="different") == 1
        assert value(got, "shardflow_validation_differing_rows", task=name) == 3
        assert value(got, "shardflow_validation_pending_rows", task=name) == 1
        assert value(got, "shardflow_resync_holding", task=name) == 1
        assert value(got, "dm_worker_task_state", **a) == 2
        served = {n for n, _ in got}
        assert all(any(n in served for n in catalog.BY_NAME[m].series_names()) for m in (
            "dm_loader_exit_with_error_count", "shardflow_full_chunks", "shardflow_full_tables")), served

        # the operator pauses the task: every source counts as paused
        store.request_sources(name, [s1, s2], "paused", all_sources=[s1, s2])
        got, _ = scrape()
        assert value(got, "dm_worker_task_state", **a) == 3
    finally:
        hold.release(store, name, "resync-1")
        reset_task(store, name)   # positions, chunks, locks
        with store.tx() as cur:
            for table, key in (("full_plan", "task"), ("validation_run", "task"), ("task", "name")):
                cur.execute(f"DELETE FROM {SCHEMA}.{table} WHERE {key} = %s", (name,))
        store.close()


def test_a_token_guards_metrics_when_set(monkeypatch):
    from fastapi.testclient import TestClient

    from shardflow_airflow.ui.migrations_app import create_app

    monkeypatch.setenv("SHARDFLOW_METRICS_TOKEN", "s3cret")
    client = TestClient(create_app())
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_loopback_prometheus_scrapes_it_as_docs_say(plain, stack, tmp_path):
    """Debian's Prometheus scrapes the plugin's app (served by uvicorn, as Airflow's API server
    does) with the scrape job docs/operations.md gives (job dm_master, honor_labels) and loads
    DM's rules: the source's series arrive under its own instance, DM's dashboard queries answer,
    and so does every query of docs/grafana/shardflow.json."""
    import json
    import threading
    import time
    import urllib.parse
    import urllib.request

    import uvicorn
    import yaml

    from shardflow_airflow.ui.migrations_app import create_app

    prometheus = shutil.which("prometheus")
    assert prometheus, "prometheus is missing: `make setup` installs Debian's prometheus package"
    task, store, sid, db, tdb, sess = plain
    run(stack["up1"], f"INSERT INTO {qt(db, 't')} VALUES (1, 'a'), (2, 'b')")
    steps(sess, "caught_up")
    app_port, prom_port = _free_port(), _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=app_port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(root / "config" / "prometheus" / "dm_worker.rules.yml")],
        "scrape_configs": [{"job_name": "dm_master", "honor_labels": True, "metrics_path": "/metrics",
                            "static_configs": [{"targets": [f"127.0.0.1:{app_port}"]}]}]}))
    proc = subprocess.Popen([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def query(q: str) -> list:
        url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.load(r)["data"]["result"]

    try:
        rate = f'sum by (task, source_id) (rate(dm_syncer_finished_transaction_total{{source_id="{sid}"}}[10s]))'
        deadline = time.monotonic() + 30
        while True:
            try:
                if query('up{job="dm_master"} == 1') and len(query(rate)) == 1:   # two scrapes at least
                    break
            except OSError:
                pass   # not listening yet
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
            time.sleep(0.3)
        state = query(f'dm_worker_task_state{{source_id="{sid}"}}')
        assert [(s["metric"]["instance"], s["metric"]["job"], s["value"][1]) for s in state] == [(sid, "dm_master", "2")]
        lag = query(f'histogram_quantile(0.90, sum(rate(dm_syncer_replication_lag_bucket{{source_id="{sid}"}}[10s])) '
                    'by (le, task, source_id))')
        assert len(lag) == 1, lag
        assert not query('ALERTS{alertname=~"DM_.*"}')   # nothing is wrong
        dash = json.loads((root / "docs" / "grafana" / "shardflow.json").read_text())
        for p in dash["panels"]:   # Prometheus takes every query of shardflow's dashboard (a 400 raises)
            for t in p.get("targets", []):
                query(t["expr"].replace("$task", ".*").replace("$source", ".*"))
        assert query(f'time() - shardflow_source_updated_timestamp_seconds{{source_id="{sid}"}} < 60')
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        server.should_exit = True
