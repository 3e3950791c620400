"""The full load's fence: one full-load job of a task writes at a time.

Why: a stopped run's job can outlive its Airflow task by seconds (Airflow ends the task
process, which then kills spark-submit or closes its job-host connection; the job notices at its
next check), and a start, resume or cleared run begun meanwhile would load the same missing
chunks beside it; a ``start-task --remove-meta`` could have its fresh tables written into by the
old job. Chunk markers keep a replayed chunk from landing twice, not two jobs from writing at
once.

Protocol: the job takes a session advisory lock per task in the state store
(``StateStore.hold_full_load``) on a connection of its own before it writes anything, and holds
it until it returns; a job that dies drops it with its connection. A job that finds it taken
waits, saying so, and gives up when it is cancelled. ``dmctl stop-task`` (and ``start-task``,
before it resets anything) waits until no job holds it (dm_core/cli/lifecycle.py
``still_alive``), so it returns once the load has really stopped; ``pause-task`` does not wait,
and the resumed job waits for the fence instead.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import Callable, Iterator

POLL_S = 1.0
SAY_EVERY_S = 60.0


@contextmanager
def held(dsn: str, task: str, log: logging.Logger, *, cancelled: Callable[[], bool] = lambda: False,
         poll_s: float = POLL_S) -> Iterator[float]:
    """Hold the task's fence for the block; yields the seconds it waited for it (0.0: it was free)."""
    from dm_core.errors import Cancelled
    from dm_core.state.store import StateStore

    store = StateStore(dsn, migrate=False)
    try:
        t0 = said = time.monotonic()
        first = True
        while not store.hold_full_load(task):
            now = time.monotonic()
            if first or now - said >= SAY_EVERY_S:
                log.warning("another full load of task %s is still running (a stopped run's job that has not ended "
                            "yet, or a second run), waited %.0fs so far: this one starts when it ends, so that the "
                            "two never write at once", task, now - t0)
                first, said = False, now
            if cancelled():
                raise Cancelled(f"the full load of task {task} was cancelled while it waited for another one to end")
            time.sleep(poll_s)
        waited = 0.0 if first else time.monotonic() - t0
        if waited:
            log.info("the other full load of task %s ended after %.1fs: this one starts", task, waited)
        yield waited
    finally:
        store.close()   # the lock goes with the connection
