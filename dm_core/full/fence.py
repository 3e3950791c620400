"""The full load's fence: one full-load job of a task writes at a time.

Why: a stopped run's job can outlive its Airflow task by seconds (Airflow ends the task
process, which then kills spark-submit or closes its job-host connection; the job notices at its
next check), and a start, resume or cleared run begun meanwhile would load the same missing
chunks beside it; a ``start-task --remove-meta`` could have its fresh tables written into by the
old job. Chunk markers keep a replayed chunk from landing twice, not two jobs from writing at
once.

Protocol:

1. The job takes a session advisory lock per task in the state store
   (``StateStore.hold_full_load``) on a connection of its own before it writes anything, and
   holds it until it returns; a job that dies drops it with its connection. A job that finds it
   taken waits, saying so, and gives up when it is cancelled. The Airflow operator waits the
   same way before it takes a job host's slot or starts spark-submit (``wait_free``), so a
   waiting job holds no slot; the job's own wait covers the race between the two.
2. While the job runs, a watch thread checks the connection every ``CHECK_S``. A connection
   that broke (Postgres restarted, the backend was terminated) took the lock with it: the watch
   takes it again on a new connection. If another job took it meanwhile, the fence is lost:
   ``Hold.lost`` is set, ``on_lost`` is called (the job cancels its Spark jobs) and the job stops
   before its next chunk, saying why. While the state store stays out of reach the watch keeps
   trying (``Hold.held`` is clear meanwhile); the load waits for the store, then for the fence
   (``Hold.wait_held``), before it writes again (spark_jobs/full_load.py).
3. ``dmctl stop-task``, ``pause-task`` and ``start-task`` (before it resets anything) wait until no
   job holds it (dm_core/cli/lifecycle.py), so they return once the load has really stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

POLL_S = 1.0
SAY_EVERY_S = 60.0
CHECK_S = 5.0


def _waiting(log: logging.Logger, task: str, seconds: float) -> None:
    log.warning("another full load of task %s is still running (a stopped run's job that has not ended yet, or a "
                "second run), waited %.0fs so far: this one starts when it ends, so that the two never write at "
                "once", task, seconds)


def _wait(try_once: Callable[[], bool], task: str, log: logging.Logger, cancelled: Callable[[], bool],
          poll_s: float) -> float:
    """Poll ``try_once`` until it is true; the seconds waited (0.0 when it was true at once)."""
    from dm_core.errors import Cancelled

    t0 = said = time.monotonic()
    first = True
    while not try_once():
        now = time.monotonic()
        if first or now - said >= SAY_EVERY_S:
            _waiting(log, task, now - t0)
            first, said = False, now
        if cancelled():
            raise Cancelled(f"the full load of task {task} was cancelled while it waited for another one to end")
        time.sleep(poll_s)
    waited = 0.0 if first else time.monotonic() - t0
    if waited:
        log.info("the other full load of task %s ended after %.1fs: this one starts", task, waited)
    return waited


def wait_free(dsn: str, task: str, log: logging.Logger, *, cancelled: Callable[[], bool] = lambda: False,
              poll_s: float = POLL_S) -> float:
    """Wait until no job holds the task's fence (without taking it); the seconds waited."""
    from dm_core.state.store import StateStore

    store = StateStore(dsn, migrate=False)
    try:
        return _wait(lambda: not store.full_load_held(task), task, log, cancelled, poll_s)
    finally:
        store.close()


@dataclass
class Hold:
    """The fence as a job holds it: how long it waited, whether it holds it now (clear while
    its connection is broken) and whether it lost it to another load."""
    waited: float
    lost: threading.Event = field(default_factory=threading.Event)
    held: threading.Event = field(default_factory=threading.Event)

    def wait_held(self, timeout: float) -> bool:
        """Whether the fence is held (again) within ``timeout``; False at once when it is lost."""
        deadline = time.monotonic() + timeout
        while not self.held.wait(0.1):
            if self.lost.is_set() or time.monotonic() > deadline:
                return False
        return not self.lost.is_set()


class _Watch(threading.Thread):
    """Keeps the fence held across a broken state-store connection (protocol, step 2)."""

    def __init__(self, store, task: str, log: logging.Logger, hold: Hold, on_lost: Callable[[], None],
                 check_s: float):
        super().__init__(name=f"full-load-fence-{task}", daemon=True)
        self.store, self.task, self.log, self.hold, self.on_lost = store, task, log, hold, on_lost
        self.check_s = check_s
        self.done = threading.Event()

    def run(self) -> None:
        from dm_core.state.outage import one_line

        broken = False
        while not self.done.wait(self.check_s):
            if not broken:
                try:
                    self.store.ping()
                    continue
                except Exception as e:   # noqa: BLE001 - the connection broke: take the fence again at once
                    broken = True
                    self.hold.held.clear()
                    self.log.warning("the full load of task %s lost its state-store connection, and the fence with "
                                     "it (%s): taking it again", self.task, one_line(e))
            try:
                self.store.reconnect()
                got = self.store.hold_full_load(self.task)
            except Exception:   # noqa: BLE001 - the server is still away: the next round tries again
                continue
            if not got:
                self._lose()
                return
            broken = False
            self.hold.held.set()
            self.log.warning("the full load of task %s took its fence again after the state store's connection "
                             "broke: no other load holds it", self.task)

    def _lose(self) -> None:
        self.hold.lost.set()
        self.log.error("the full load of task %s lost its fence while the state store's connection was broken, and "
                       "another full load of the task holds it now: this one stops before its next chunk so that the "
                       "two never write at once; the other goes on from the chunks recorded", self.task)
        try:
            self.on_lost()
        except Exception:   # noqa: BLE001 - the job stops at its next check anyway
            self.log.exception("cancelling the lost load's Spark jobs failed")


@contextmanager
def held(dsn: str, task: str, log: logging.Logger, *, cancelled: Callable[[], bool] = lambda: False,
         on_lost: Callable[[], None] = lambda: None, poll_s: float = POLL_S,
         check_s: float = CHECK_S) -> Iterator[Hold]:
    """Hold the task's fence for the block (protocol, steps 1 and 2)."""
    from dm_core.state.store import StateStore

    store = StateStore(dsn, migrate=False)
    watch = None
    try:
        hold = Hold(_wait(lambda: store.hold_full_load(task), task, log, cancelled, poll_s))
        hold.held.set()
        watch = _Watch(store, task, log, hold, on_lost, check_s)
        watch.start()
        yield hold
    finally:
        if watch is not None:
            watch.done.set()
            watch.join(30)   # a reconnect in progress gives up after its connect timeout
        store.close()   # the lock goes with the connection
