"""The full load's fence (dm_core/full/fence.py) on the real state store: a second load of a
task waits for the first, saying so; a cancelled wait gives up; stop-task's wait lists a load
that has not ended. The Spark side (a killed spark-submit's driver ends, a rerun waits) is in
test_full_resume.py."""

import logging
import threading
import time

import pytest

from dm_core.cli.lifecycle import still_alive
from dm_core.full import fence
from dm_core.errors import Cancelled
from dm_core.state import StateStore

pytestmark = pytest.mark.integration

log = logging.getLogger("test.fence")


class _NoRuns:
    """Airflow with no active run: what is left is the fence alone."""

    def active_runs(self, dag):
        return []


def _wait(predicate, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_second_load_waits_for_the_first_and_stop_lists_it(stack, uniq, caplog):
    task, other = f"fence{uniq}", f"fence{uniq}b"
    store = StateStore()
    released, second_in = threading.Event(), threading.Event()
    waited: list[float] = []

    def second():
        with fence.held(store.dsn, task, log, poll_s=0.05) as w:
            waited.append(w)
            second_in.set()

    try:
        with caplog.at_level(logging.INFO, logger="test.fence"):
            with fence.held(store.dsn, task, log) as w:
                assert w == 0
                assert store.full_load_held(task) and not store.full_load_held(other)
                assert still_alive(_NoRuns(), store, task, [], whole=True) == [
                    "the full load's Spark job has not ended yet (it holds the task's load fence)"]
                assert still_alive(_NoRuns(), store, task, [], whole=False) == [], "a source stop waits for its pokes only"
                with fence.held(store.dsn, other, log) as w_other:   # another task is not held back
                    assert w_other == 0
                t = threading.Thread(target=second)
                t.start()
                _wait(lambda: "another full load of task" in caplog.text, "the second load did not say it waits")
                time.sleep(0.3)
                assert not second_in.is_set(), "the second load ran beside the first"
                released.set()
            t.join(30)
        assert second_in.is_set() and waited[0] > 0.3
        assert f"the other full load of task {task} ended after" in caplog.text
        _wait(lambda: not store.full_load_held(task), "the fence outlived its load")
        assert still_alive(_NoRuns(), store, task, [], whole=True) == []
    finally:
        store.close()


def test_a_cancelled_wait_gives_up_without_loading(stack, uniq):
    task = f"fence{uniq}"
    store = StateStore()
    cancel = threading.Event()
    try:
        with fence.held(store.dsn, task, log):
            threading.Timer(0.3, cancel.set).start()
            with pytest.raises(Cancelled, match=f"full load of task {task} was cancelled while it waited"):
                with fence.held(store.dsn, task, log, cancelled=cancel.is_set, poll_s=0.05):
                    pytest.fail("a cancelled load got the fence")
    finally:
        store.close()
