"""The Migrations page of a 16-source, 10,000-table task loaded once in headless Chromium from
`airflow standalone` (the plugin's real route, Airflow's own auth), and its data endpoint: the
state a real run leaves (bench/page_fleet.seed) and the task file in Airflow's tasks folder, no
upstream server. What a user sees is checked here (tests/integration/test_migrations_page_fleet
checks the rest without a browser); the load time is printed, and `make bench` (page part)
measures it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench import page_fleet
from dm_core.state import StateStore

from .test_migration_through_airflow import _api, _wait_for
from .test_migrations_page import CHROMIUM, FLAGS

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
NAME = "page_fleet_e2e"


def test_a_fleet_task_loads_in_the_browser_with_every_source_and_problems_first(stack, airflow):
    from playwright.sync_api import sync_playwright

    installed = ROOT / "config" / "tasks" / f"{NAME}.yaml"
    api = _api(stack)
    base = stack["env"]["SHARDFLOW_AIRFLOW_URL"]
    with StateStore(stack["state_dsn"]) as store:
        fleet = page_fleet.seed(store, NAME, sources=16, tables=625)
        text = store.get_task(NAME)[0]
    pw = sync_playwright().start()
    try:
        installed.write_text(text)
        _wait_for(lambda: f"dm_{NAME}_precheck" in api.dag_ids(f"dm_{NAME}"), 300, "Airflow to load the task's DAGs")
        token = api.token()
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS[1:])
        context = browser.new_context(viewport={"width": 1100, "height": 700})
        context.add_cookies([{"name": "_token", "value": token, "url": base}])
        tab = context.new_page()
        t0 = time.monotonic()
        tab.goto(f"{base}/shardflow/", wait_until="load", timeout=120_000)
        loaded = time.monotonic() - t0
        section = f"section[data-task='{NAME}']"
        rows = [r.get_attribute("data-source") for r in tab.query_selector_all(f"{section} tr.source")]
        assert rows[0] == fleet.paused and rows[-1] == fleet.loading and sorted(rows) == fleet.sources
        head = tab.inner_text(f"{section} .stages")
        assert "16 · 1 full · 1 paused · 14 sync" in head, head
        first = tab.inner_text(f"{section} tr.lock")
        assert fleet.lock_conflict in first and "conflict" in first
        assert "more active locks" in tab.inner_text(f"{section} .more-locks")
        listed = [r.inner_text() for r in tab.query_selector_all(f"{section} table.vtables tr td:nth-child(2)")]
        assert listed[:2] == ["error", "error"] and listed[-1] == "equal" and len(listed) == 50
        assert page_fleet.PASSWORD not in tab.content()
        t0 = time.monotonic()
        got = context.request.get(f"{base}/shardflow/api/tasks", headers={"Authorization": f"Bearer {token}"})
        answered = time.monotonic() - t0
        assert got.ok, got.text()
        task = next(t for t in got.json()["tasks"] if t["task"] == NAME)
        assert task["validation"]["counts"] == {k: len(v) for k, v in fleet.validation.items()}
        assert sum(f["tables_planned"] for f in task["full"]["sources"].values()) == 10_000
        print(f"\n16 sources x 625 tables: the page loaded in {loaded:.2f} s, /api/tasks answered in {answered:.2f} s "
              f"({len(got.body()):,} bytes)")
        browser.close()
    finally:
        pw.stop()
        installed.unlink(missing_ok=True)
        with StateStore(stack["state_dsn"]) as store:
            page_fleet.forget(store, fleet)
