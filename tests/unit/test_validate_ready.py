"""dm_core/validate/ready.py: a validation before the task's full phase has finished validates
nothing and names the sources still loading; task-mode incremental is always ready."""

from types import SimpleNamespace

import pytest

from dm_core.validate.ready import not_ready


def _task(mode, *sources):
    return SimpleNamespace(name="t", task_mode=mode, mysql_instances=[SimpleNamespace(source_id=s) for s in sources])


LOADED = {"high_file": "mysql-bin.000002"}

CASES = [
    # task mode, {source: state}, sources named as not ready (None: ready)
    ("all", {}, ["a", "b"]),
    ("all", {"a": LOADED}, ["b"]),
    ("all", {"a": LOADED, "b": {"binlog_file": "mysql-bin.000001", "stage": "full"}}, ["b"]),
    ("all", {"a": LOADED, "b": LOADED}, None),
    ("full", {"a": {}, "b": LOADED}, ["a"]),
    ("full", {"a": LOADED, "b": LOADED}, None),
    ("incremental", {}, None),
]


@pytest.mark.parametrize("mode, states, loading", CASES)
def test_a_validation_waits_for_the_full_phase(mode, states, loading):
    why = not_ready(_task(mode, "a", "b"), [{"source_id": s, **st} for s, st in states.items()])
    if loading is None:
        assert why is None
    else:
        assert why and f"source(s) {', '.join(loading)}):" in why and "dmctl validation start t" in why, why
