"""query-status names a source whose sensor cannot get a worker slot (dm_core/cli/status_view.py):
a sensor scheduled or queued in Airflow for longer than SLOT_WAIT_S while its task runs."""

from __future__ import annotations

import datetime

import pytest

from dm_core import slot_wait
from dm_core.cli.status_view import _slot_wait, describe

NOW = datetime.datetime(2024, 1, 1, 0, 10, tzinfo=datetime.timezone.utc)
RUN = {"dag_run_id": "r2", "state": "running", "start_date": "2024-01-01T00:00:00Z", "conf": {"generation": 3}}


@pytest.mark.parametrize("ti, state, words, absent", [
    ({"queued_when": "2024-01-01T00:09:50Z"}, "queued", ["queued in Airflow", "starts syncing"], ["worker slot"]),
    ({"queued_when": "2024-01-01T00:08:00Z", "queue": "default"}, "queued",
     ["waiting for a worker slot", "queued in Airflow for 120s", "queue default", "Sizing"], []),
    ({"scheduled_when": "2024-01-01T00:05:00+00:00", "pool": "default_pool"}, "scheduled",
     ["waiting for a worker slot", "scheduled in Airflow for 300s", "PARALLELISM", "default_pool"], []),
    ({"scheduled_when": "2024-01-01T00:05:00"}, "scheduled", ["300s"], []),   # no zone: UTC, as Airflow stores
    ({}, "queued", ["queued in Airflow"], ["worker slot"]),                      # no time: not yet long
    ({"queued_when": "not a time"}, "queued", ["queued in Airflow"], ["worker slot"]),
])
def test_slot_wait(ti, state, words, absent):
    got = _slot_wait(ti, state, now=NOW)
    for w in words:
        assert w in got, (w, got)
    for w in absent:
        assert w not in got, (w, got)


def test_query_status_says_waiting_for_a_worker_slot():
    long_ago = (datetime.datetime.now(datetime.timezone.utc)
                - datetime.timedelta(seconds=slot_wait.SLOT_WAIT_S + 60)).isoformat()
    view = {"phases": {}, "active": {"incremental": [RUN]}, "waiting": [], "sensor_run": "r2",
            "sensors": {"sync_s1": {"task_id": "sync_s1", "state": "queued", "queued_when": long_ago}}}
    info = {"status": "running", "generation": 3}
    source = {"source_id": "s1", "stage": "sync", "requested": "running", "binlog_file": None, "binlog_pos": None}
    status, message = describe("t", info, source, view)
    assert status == "waiting"
    assert "waiting for a worker slot" in message
