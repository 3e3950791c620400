"""What the syncer measures for the metrics (dm_core/metrics/observe.py) and how the collector
reads a source's row (dm_core/metrics/collector.py), without servers."""

import pytest

from dm_core.metrics import collector, observe
from dm_core.position import Position


class Job:
    def __init__(self, op):
        self.op = op


def test_observations_bucket_as_prometheus_le_and_start_over_after_take():
    o = observe.Observations()
    for v in (0.5, 0.6, 3000.0):           # on a bound: in it (le); above the last: the overflow slot
        o.observe("lag", v)
    o.committed([Job("insert"), Job("insert"), Job("delete")], None)
    o.ddl(0.25, 2)
    got = o.take()
    lag = got["lag_hist"]
    assert len(lag) == 1 + 12 + 1 and lag[0] == pytest.approx(3001.1)
    assert lag[1] == 1 and lag[2] == 1 and lag[-1] == 1 and sum(lag[1:]) == 3
    assert got["applied_inserts"] == 2 and got["applied_deletes"] == 1 and got["applied_ddls"] == 2
    assert got["ddl_hist"][0] == 0.25 and "applied_updates" not in got
    assert o.take() == {}


def test_histogram_column_reads_back_cumulative_with_dms_bounds():
    o = observe.Observations()
    o.observe("lag", 0.4)
    o.observe("lag", 5.0)
    buckets, total = collector.histogram("lag", o.take()["lag_hist"])
    assert total == pytest.approx(5.4)
    assert buckets[0] == ("0.5", 1) and dict(buckets)["8.0"] == 2 and buckets[-1] == ("+Inf", 2)
    assert collector.histogram("lag", None) is None and collector.histogram("lag", [1.0, 2.0]) is None


@pytest.mark.parametrize("start, end, until, sizes, want", [
    (("b.000001", 100), ("b.000001", 1100), ("b.000001", 1100), {}, 0.0),            # caught up
    (("b.000001", 100), ("b.000001", 1100), ("b.000001", 3100), {}, 20.0),           # 2000 bytes at 100 B/s
    (("b.000001", 100), ("b.000001", 1100), ("b.000003", 500), {"b.000001": 1600, "b.000002": 1000,
                                                                 "b.000003": 9}, 20.0),  # 500 + 1000 + 500
    (("b.999999", 0), ("b.999999", 1000), ("b.1000000", 1000), {"b.999999": 1000, "b.1000000": 5}, 10.0),
    (("b.000001", 100), ("b.000001", 1100), ("b.000003", 500), {"b.000003": 9}, None),  # a file it does not list
    (("", 4), ("", 4), ("b.000001", 9), {}, None),                                    # a GTID-only start
])
def test_remaining_seconds_is_binlog_left_over_the_windows_read_rate(start, end, until, sizes, want):
    got = observe.remaining_seconds(Position(*start), Position(*end), Position(*until), 10.0, lambda: sizes)
    assert got == (pytest.approx(want) if want is not None else None)


def test_file_index_as_dm_reads_it():
    assert observe.file_index("mysql-bin.000123") == 123 and observe.file_index("b.1000000") == 1000000
    assert observe.file_index("") is None and observe.file_index(None) is None and observe.file_index("mark") is None


@pytest.mark.parametrize("task_status, stage, requested, want", [
    ("running", "sync", "running", collector.RUNNING),
    ("running", "full", "running", collector.RUNNING),
    ("running", "new", "running", collector.NEW),
    ("running", "paused", "running", collector.PAUSED),       # paused on an error
    ("running", "sync", "paused", collector.PAUSED),          # pause-task -s
    ("paused", "sync", "paused", collector.PAUSED),
    ("stopped", "sync", "running", collector.STOPPED),
    ("running", "sync", "stopped", collector.STOPPED),        # stop-task -s
    ("running", "finished", "running", collector.FINISHED),   # task-mode full loaded it
    (None, "sync", "running", collector.INVALID),             # no task row
])
def test_task_state_uses_dms_numbers(task_status, stage, requested, want):
    assert collector.task_state(task_status, {"stage": stage, "requested": requested}) == want
