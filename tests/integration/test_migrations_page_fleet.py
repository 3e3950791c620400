"""The Migrations page of a task of 16 sources and 10,000 tables (625 a source), from the state
a real run leaves in the store (bench/page_fleet.seed: the product's own store calls), through
the plugin's own data function and template: every source is listed, paused first and then by
lag; each source's full phase is counted right; the locks and the validation tables a person
must look at come first and the rest is counted, not listed; no password shows. The page's
time at this size is a figure of `make bench` (its page part), not asserted here."""

from __future__ import annotations

import json
import re

import pytest

from bench import page_fleet
from dm_core.state import StateStore

NAME = "page_fleet"     # a fixed name: a rerun replaces the state it left


@pytest.fixture(scope="module")
def fleet(stack):
    with StateStore(stack["state_dsn"]) as store:
        got = page_fleet.seed(store, NAME, sources=16, tables=625)
        yield got
        page_fleet.forget(store, got)


@pytest.fixture(scope="module")
def page(stack, fleet):
    with StateStore(stack["state_dsn"]) as store:
        return page_fleet.page(store, NAME)


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_every_source_is_listed_paused_first_then_by_lag(fleet, page):
    ov, html = page
    assert len(fleet.tables) * len(fleet.sources) == 10_000
    listed = [s["source"] for s in ov["sources"]]
    assert sorted(listed) == fleet.sources
    by_lag = sorted(fleet.lag, key=lambda s: (-fleet.lag[s], s))
    assert listed == [fleet.paused, *by_lag, fleet.loading]     # the loading source has no lag yet
    rows = re.findall(r'<tr class="source" data-source="([^"]+)"', html)
    assert rows == listed
    assert ov["stages"] == {"paused": 1, "full": 1, "sync": 14}
    assert "16 · 1 full · 1 paused · 14 sync" in _text(html)
    assert "Duplicate entry &#39;7&#39; for key &#39;PRIMARY&#39;" in html
    assert page_fleet.PASSWORD not in html and page_fleet.PASSWORD not in json.dumps(ov, default=str)


def test_full_phase_is_counted_per_source(fleet, page):
    ov, html = page
    full = ov["full"]["sources"]
    for sid in fleet.sources:
        f = full[sid]
        assert (f["tables_planned"], f["tables_loaded"], f["chunks_planned"]) == \
            (625, fleet.loaded_tables[sid], fleet.chunks[sid]), sid
    assert fleet.loaded_tables[fleet.loading] < 625 and fleet.loaded_tables[fleet.paused] == 625
    row = html.split(f'data-source="{fleet.loading}"', 1)[1].split("</tr>", 1)[0]
    assert f"{fleet.loaded_tables[fleet.loading]:,} / 625 tables" in _text(row)
    assert [x["source"] for x in ov["full"]["loading"]] == [fleet.loading]
    assert "tables part-loaded:" in _text(html)


def test_locks_conflict_first_then_waiting_the_rest_counted(fleet, page):
    ov, html = page
    assert ov["lock_counts"] == {"conflict": 1, "waiting": len(fleet.locks_waiting)}
    shown = [lk["lock_id"] for lk in ov["locks"]]
    assert shown[0] == fleet.lock_conflict and len(shown) == 20
    assert set(shown[1:]) <= set(fleet.locks_waiting)
    assert ov["locks_not_shown"] == 1 + len(fleet.locks_waiting) - 20
    assert all(lk["waiting_for"] == fleet.late for lk in ov["locks"][1:])
    assert html.count('<tr class="lock">') == 20
    assert f"… and {ov['locks_not_shown']} more active locks" in _text(html)
    unlocks = [a for a in ov["actions"] if a["dag_id"].endswith("_shard_ddl_unlock")]
    assert [a["conf"]["lock_id"] for a in unlocks] == shown       # a button for each lock listed


def test_validation_lists_problem_tables_first_and_counts_the_rest(fleet, page):
    ov, html = page
    v = ov["validation"]
    assert v["counts"] == {k: len(t) for k, t in fleet.validation.items()}
    assert sum(v["counts"].values()) == len(fleet.tables) == 625
    order = [t["status"] for t in v["tables"]]
    problems = sum(len(t) for k, t in fleet.validation.items() if k != "equal")
    assert order[:problems] == sorted(order[:problems], key=["error", "different", "pending"].index)
    assert set(order[problems:]) == {"equal"} and len(order) == 50
    assert [t["target"] for t in v["tables"] if t["status"] == "different"] == fleet.validation["different"]
    assert v["not_shown"] == 625 - 50
    assert html.count("<tr><td>shop_") == 50
    assert f"… and {625 - 50} more tables not listed" in _text(html)
    assert "ERROR" in html      # the run has a failed table: its worst result


def test_a_small_task_still_lists_everything(stack):
    with StateStore(stack["state_dsn"]) as store:
        small = page_fleet.seed(store, "page_fleet_small", sources=2, tables=1)
        try:
            ov, html = page_fleet.page(store, small.task)
        finally:
            page_fleet.forget(store, small)
    assert [s["source"] for s in ov["sources"]] == sorted(small.sources, key=lambda s: -small.lag[s])
    assert ov["validation"]["not_shown"] == 0 and len(ov["validation"]["tables"]) == 1
    assert "more tables not listed" not in html and "more active locks" not in html


def test_a_source_whose_sensor_gets_no_worker_slot_says_so(stack, fleet):
    """A sensor queued (or scheduled) in Airflow past SHARDFLOW_SLOT_WAIT_S is shown "waiting
    for a worker slot", with the message query-status gives, right after the paused source; one
    queued a moment ago is only starting and is not named."""
    import datetime

    from dm_core.cli.status_view import _slot_wait
    from dm_core.overview import task_overview
    from dm_core.slot_wait import SLOT_WAIT_S
    from dm_core.state.lifecycle import sensor_task_id
    from shardflow_airflow.ui.migrations_app import render_page

    now = datetime.datetime.now(datetime.timezone.utc)
    ago = (now - datetime.timedelta(seconds=SLOT_WAIT_S + 90)).isoformat()
    least, second = sorted(fleet.lag, key=lambda s: fleet.lag[s])[:2]     # the two least behind
    starting = sorted(fleet.lag, key=lambda s: fleet.lag[s])[2]
    sensors = {sensor_task_id(least): {"task_id": sensor_task_id(least), "state": "queued", "queued_when": ago,
                                       "queue": "default"},
               sensor_task_id(second): {"task_id": sensor_task_id(second), "state": "scheduled", "scheduled_when": ago,
                                      "pool": "default_pool"},
               sensor_task_id(starting): {"task_id": sensor_task_id(starting), "state": "queued",
                                          "queued_when": now.isoformat()}}
    with StateStore(stack["state_dsn"]) as store:
        ov = task_overview(store, NAME, {"precheck": "success", "full": "success", "incremental": "running"},
                           sensors, now=now)
    html = render_page([ov], "admin")
    listed = [s["source"] for s in ov["sources"]]
    assert listed[:3] == [fleet.paused, second, least]          # waiting for a slot: right after the paused one
    by = {s["source"]: s for s in ov["sources"]}
    assert by[least]["slot_wait"] == _slot_wait(sensors[sensor_task_id(least)], "queued", now=now)
    assert "waiting for a worker slot" in by[least]["slot_wait"] and "queue default" in by[least]["slot_wait"]
    assert "default_pool" in by[second]["slot_wait"]
    assert by[starting]["slot_wait"] is None and ov["slot_waits"] == 2 and not ov["synced"]
    assert re.findall(r'<tr class="source" data-source="([^"]+)"', html)[:3] == listed[:3]
    row = html.split(f'data-source="{least}"', 1)[1].split('<tr class="source"', 1)[0]
    assert "waiting for a worker slot" in row and "queued in Airflow for" in _text(row)
    assert "2 waiting for a worker slot" in _text(html)
