"""Ordered, pipelined batch apply: the reader decodes the next transactions while the
previous batch is written downstream.

Protocol for each batch, strictly in submission order, on one background thread:
1. make sure the safe-mode exit point is at or past the batch's end (durable in Postgres);
2. apply the batch downstream (its own transactions, possibly on several connections);
3. move the checkpoint to the batch's end (the callback decides when to write it).
So the checkpoint never passes data that is not durable, and after a crash anywhere the
replay up to the exit point runs in safe mode. ``barrier()`` waits until everything
submitted is committed (before a DDL, at the end of a window) and re-raises the first error.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from dm_core.position import Position


@dataclass
class Batch:
    upto: Position          # resume point after the last transaction of the batch
    jobs: list = field(default_factory=list)    # the batch's RowJobs, in binlog order
    rows: int = 0
    txns: int = 0
    last_ts: Any = None
    force: bool = False     # write the checkpoint at this batch (DDL, window end)
    spans: list = field(default_factory=list)   # (start, end) of each transaction (isolate.py)


class ApplyQueue:
    """Batches applied downstream in submission order on one background thread (above); in DM
    terms the apply, not the "flush", which there means writing the checkpoint."""

    _STOP = object()

    def __init__(self, *, before_apply: Callable[[Batch], None], apply: Callable[[Batch], None],
                 committed: Callable[[Batch], None], depth: int = 4):
        self._before, self._apply, self._committed = before_apply, apply, committed
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._idle = threading.Condition()
        self._inflight = 0
        self._thread = threading.Thread(target=self._run, name="shardflow-apply", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            b = self._q.get()
            if b is self._STOP:
                return
            try:
                if self._error is None:
                    if b.jobs:
                        self._before(b)
                        self._apply(b)
                    self._committed(b)
            except BaseException as e:  # surfaced to the reader thread by submit/barrier
                self._error = e
            finally:
                with self._idle:
                    self._inflight -= 1
                    self._idle.notify_all()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def submit(self, batch: Batch) -> None:
        self._raise()
        with self._idle:
            self._inflight += 1
        self._q.put(batch)

    def barrier(self) -> None:
        self.drain()
        self._raise()

    def drain(self) -> None:
        """Wait until nothing submitted is in flight, without raising its error."""
        with self._idle:
            while self._inflight:
                self._idle.wait()

    def take_error(self) -> BaseException | None:
        """Wait until nothing is in flight; return the error and forget it (the caller has
        handled it: a pause), so ``close`` does not raise it again."""
        self.drain()
        err, self._error = self._error, None
        return err

    def close(self) -> None:
        try:
            self.barrier()
        finally:
            self._q.put(self._STOP)
            self._thread.join(timeout=60)
