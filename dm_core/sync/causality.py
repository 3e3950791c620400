"""Causality: spread row jobs over ``syncers.worker-count`` workers without reordering a row.

Guarantee: two jobs that share a conflict key (``RowJob.keys()``: table + key values before
or after the change, strings folded so that rows a case-insensitive collation might treat
as one also share a key) are sent to the same worker, in the order they were added. Each
worker applies its jobs in order, so every row sees its changes in binlog order; jobs that
share no key may run concurrently in any order.

How (DM's union-find, labelled by worker):
* Every known key belongs to exactly one worker. A key set is a group; a job links all its
  keys into one group, and a group never spans two workers.
* ``add(job)``: if none of its keys is known, the job starts a group on the worker chosen
  by a stable hash of its first key (so unrelated keys spread out, and a hot key simply
  keeps its worker). If its known keys all sit on one worker, the job and its new keys join
  that worker. If they sit on two or more workers, the job would have to wait for both:
  that is a conflict, ``add`` returns None and remembers nothing.
* On a conflict the caller flushes: it waits until every worker has applied everything
  handed to it, calls ``reset()``, and adds the job again (which then cannot conflict).
  DM does the same with its conflict job. DM also flushes when the two groups happen to
  hash to one queue; here they just merge, since one worker already orders them.
* ``reset()`` is also right after any full flush (end of batch, before a DDL): all earlier
  jobs are durable, so no later job needs to follow them. It keeps the key map small.

Typical wiring (one batch):

    for job in compact(jobs) if cfg.compact else jobs:
        w = causality.add(job)
        if w is None:
            flush(queues); causality.reset(); w = causality.add(job)
        queues[w].append(job)
"""

from __future__ import annotations

import zlib

from dm_core.sync.job import RowJob


class Causality:
    def __init__(self, worker_count: int):
        if worker_count < 1:
            raise ValueError("worker_count must be at least 1")
        self.worker_count = worker_count
        self._worker: dict[tuple, int] = {}  # conflict key → worker that owns its group

    def __len__(self) -> int:
        """Number of keys currently tracked."""
        return len(self._worker)

    def add(self, job: RowJob, also: tuple | None = None) -> int | None:
        """The worker ``job`` must go to, or None on a conflict (flush, ``reset()``, retry).
        ``also``: one more key the job holds, first (every keyless job: keyless_ledger.KEYLESS)."""
        keys = job.keys() if also is None else (also, *job.keys())
        owner = None
        for k in keys:
            w = self._worker.get(k)
            if w is not None and w != owner:
                if owner is not None:
                    return None
                owner = w
        if owner is None:
            owner = self.worker_for(keys[0]) if keys else 0
        for k in keys:
            self._worker[k] = owner
        return owner

    def reset(self) -> None:
        """Forget all groups; only after every worker has applied what it was given."""
        self._worker.clear()

    def worker_for(self, key: tuple) -> int:
        """Stable spread of a fresh key over the workers (same key, same worker, every run)."""
        if self.worker_count == 1:
            return 0
        vals = key[-1]
        if len(vals) == 1 and type(vals[0]) is int:  # the common case; ints hash alike in every run
            return hash(vals[0]) % self.worker_count
        return zlib.crc32(repr(key).encode("utf-8", "surrogatepass")) % self.worker_count
