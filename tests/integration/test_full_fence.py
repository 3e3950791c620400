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
            waited.append(w.waited)
            second_in.set()

    try:
        with caplog.at_level(logging.INFO, logger="test.fence"):
            with fence.held(store.dsn, task, log) as w:
                assert w.waited == 0
                assert store.full_load_held(task) and not store.full_load_held(other)
                assert still_alive(_NoRuns(), store, task, [], whole=True) == [
                    "the full load's Spark job has not ended yet (it holds the task's load fence)"]
                assert still_alive(_NoRuns(), store, task, [], whole=False) == [], "a source stop waits for its pokes only"
                with fence.held(store.dsn, other, log) as w_other:   # another task is not held back
                    assert w_other.waited == 0
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


def _terminate_holder(store: StateStore, task: str) -> None:
    """Break the connection holding the task's fence, as a Postgres restart does; returns once
    that backend has ended (pg_terminate_backend's wait), so the fence is free."""
    from dm_core.state.schema import FULL_FENCE_LOCK_CLASS
    from dm_core.state.store import _fence_key

    with store.tx() as cur:
        cur.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND classid::bigint = %s AND objid::bigint = %s", (FULL_FENCE_LOCK_CLASS, _fence_key(task, "")))
        assert cur.fetchall() == [(True,)]


def test_a_fence_whose_connection_broke_is_taken_again(stack, uniq, caplog):
    task = f"fence{uniq}"
    store = StateStore()
    lost = threading.Event()
    try:
        with caplog.at_level(logging.INFO, logger="test.fence"):
            with fence.held(store.dsn, task, log, on_lost=lost.set, check_s=0.1) as hold:
                _terminate_holder(store, task)
                _wait(lambda: "took its fence again" in caplog.text, "the watch did not take the fence again")
                assert "lost its state-store connection, and the fence with it" in caplog.text
                assert store.full_load_held(task) and not hold.lost.is_set() and not lost.is_set()
                assert hold.wait_held(0)
                other = StateStore(store.dsn, migrate=False)
                try:
                    assert not other.hold_full_load(task), "a second load got the fence the first took again"
                finally:
                    other.close()
        _wait(lambda: not store.full_load_held(task), "the fence outlived its load")
    finally:
        store.close()


def test_a_fence_taken_by_another_load_meanwhile_is_lost_and_said(stack, uniq, caplog):
    task = f"fence{uniq}"
    store = StateStore()
    on_lost = threading.Event()
    holder = StateStore(store.dsn, migrate=False)
    try:
        with caplog.at_level(logging.INFO, logger="test.fence"):
            with fence.held(store.dsn, task, log, on_lost=on_lost.set, check_s=1.0) as hold:
                _terminate_holder(holder, task)
                assert holder.hold_full_load(task), "the terminated backend kept the fence"
                _wait(hold.lost.is_set, "the load did not notice it lost its fence", timeout=10)
                assert on_lost.is_set() and not hold.wait_held(1)
                assert f"the full load of task {task} lost its fence" in caplog.text
                assert "another full load of the task holds it now: this one stops" in caplog.text
    finally:
        holder.close()
        store.close()


def test_the_operator_waits_for_a_held_fence_without_taking_it(stack, uniq, caplog):
    """What the Airflow operator does before it takes a job host's slot (fence.wait_free)."""
    task = f"fence{uniq}"
    store = StateStore()
    try:
        assert fence.wait_free(store.dsn, task, log) == 0.0
        with caplog.at_level(logging.INFO, logger="test.fence"):
            with fence.held(store.dsn, task, log):
                waited: list[float] = []
                t = threading.Thread(target=lambda: waited.append(fence.wait_free(store.dsn, task, log, poll_s=0.05)))
                t.start()
                _wait(lambda: "another full load of task" in caplog.text, "the operator did not say it waits")
                time.sleep(0.3)
                assert not waited, "the operator went on while the fence was held"
            t.join(30)
        assert waited and waited[0] > 0.3
        assert not store.full_load_held(task), "waiting took the fence"
        cancel = threading.Event()
        with fence.held(store.dsn, task, log):
            threading.Timer(0.3, cancel.set).start()
            with pytest.raises(Cancelled, match="cancelled while it waited"):
                fence.wait_free(store.dsn, task, log, cancelled=cancel.is_set, poll_s=0.05)
    finally:
        store.close()
