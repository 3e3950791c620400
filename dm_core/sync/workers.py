"""The DML worker pool: compactor → causality → merger → `worker-count` parallel executors.

One batch at a time (the apply queue (apply_queue.py) calls ``apply`` in order):
1. ``compact`` merges changes of the same key inside the batch (``syncers.compact``);
2. ``Causality`` sends every job to a worker so that jobs sharing a key stay on one worker
   in binlog order; a job whose keys already sit on two workers is a conflict: the queued
   work is executed first (a flush), then the job is placed afresh;
3. each worker ``regroup``s and ``merge``s its queue into statements (``syncers.multiple-rows``)
   and runs them in one transaction on its own connection, in parallel with the others.
Steps 1-3 run in C (jobplan.pyx) for batches of tables keyed by one int column whose rows stand
apart, with the same result; any other batch takes the Python stages.
Rows of tables without a unique key go through the keyless ledger (keyless_ledger.py): a
replay drops what it says is downstream already, and all of a batch's such rows share one
worker, whose transaction also records them in the ledger.
``apply`` returns only when every worker committed, so the checkpoint that follows covers
only durable changes. A failed worker fails the batch; the others may have committed,
which safe-mode replay up to the exit point makes harmless.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from itertools import groupby

from dm_core.binlog import compiled
from dm_core.errors import ErrorCode
from dm_core.sync.applier import Applier
from dm_core.sync.causality import Causality
from dm_core.sync.compactor import compact
from dm_core.sync.dml import Stmt
from dm_core.sync.job import RowJob
from dm_core.sync.keyless_ledger import KEYLESS
from dm_core.sync.merger import merge, regroup

MAX_WORKERS = 32

# compaction, causality, regrouping and merging in C for the common case (dm_core/sync/jobplan.pyx)
# while the compiled build is active; each stage falls back to its Python twin for other batches
jobplan = compiled.load("jobplan")


_CHECKS_OFF = Stmt("SET SESSION foreign_key_checks = 0", ())
_CHECKS_ON = Stmt("SET SESSION foreign_key_checks = 1", ())


def _checks_off(job: RowJob) -> bool:
    """DM's shouldDisableForeignKeyChecksForJob: a safe-mode INSERT or UPDATE (a REPLACE, or a
    DELETE + REPLACE) runs with foreign key checks off, else the REPLACE of a parent row would
    delete (cascade) or refuse its children downstream."""
    return job.safe and job.op in ("insert", "update")


def refuse_key_updates(jobs: list[RowJob]) -> None:
    """DM's validateSafeModeForeignKeyUpdate: a safe-mode UPDATE that changes the row's key or a
    unique key runs as DELETE + REPLACE with the checks off, which would leave the children of the
    old key behind (the upstream's ON UPDATE CASCADE is not in the binlog) or, with a REPLACE
    meeting another row by the unique key, delete a parent under its children: refused."""
    for j in jobs:
        if j.safe and j.unique_key_changed():
            raise ErrorCode.DML_REJECTED.error(
                f"safe-mode update with foreign_key_checks=1 and PK/UK changes is not supported "
                f"(`{j.target.schema}`.`{j.target.table}` row with key {j.key_before()}): "
                f"delete+replace may break foreign key constraints and cascade operations")


def _twin(stage: str, jobs: list[RowJob], *args):
    """The compiled stage's result, or None (no build, or a job outside its common case)."""
    return getattr(jobplan, stage)(jobs, *args) if jobplan is not None else None


class WorkerPool:
    def __init__(self, connect, worker_count: int, *, compact: bool = False, multiple_rows: bool = False,
                 foreign_key_checks: bool = False, ledger=None):
        self.n = max(1, min(int(worker_count), MAX_WORKERS))
        self._connect = connect
        self._appliers: list[Applier | None] = [None] * self.n
        self._compact = compact
        self._multiple_rows = multiple_rows
        # the downstream session checks foreign keys (target-database.session): each run of jobs
        # says whether checks are on for it (safe-mode INSERT / UPDATE off, as DM)
        self._fk = foreign_key_checks
        self._ledger = ledger   # keyless_ledger.KeylessLedger, or None (tests, the bench's own pools)
        self._pool = ThreadPoolExecutor(max_workers=self.n, thread_name_prefix="shardflow-dml") if self.n > 1 else None

    def _applier(self, i: int) -> Applier:
        if self._appliers[i] is None:  # connections open lazily: small batches use few workers
            conn = self._connect()
            try:  # fewer gap locks between workers (keys never overlap: causality); TiDB accepts it too
                with conn.cursor() as cur:
                    cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            except Exception:
                pass
            self._appliers[i] = Applier(conn)
        return self._appliers[i]

    def apply(self, jobs: list[RowJob]) -> None:
        if self._ledger is not None:
            jobs = self._ledger.decide(jobs)
        if not jobs:
            return
        if self._compact:
            jobs = _twin("compact", jobs) or compact(jobs)
        if self.n == 1:
            self._applier(0).apply(self._merge(jobs))
            return
        rounds = _twin("spread", jobs, self.n)
        if rounds is not None:
            for queues in rounds:
                self._run(queues)
            return
        causality = Causality(self.n)
        queues: list[list[RowJob]] = [[] for _ in range(self.n)]
        for job in jobs:
            also = None if job.origin is None else KEYLESS
            w = causality.add(job, also)
            if w is None:
                self._run(queues)
                queues = [[] for _ in range(self.n)]
                causality.reset()
                w = causality.add(job, also)
            queues[w].append(job)
        self._run(queues)

    def _run(self, queues: list[list[RowJob]]) -> None:
        busy = [i for i, q in enumerate(queues) if q]
        if len(busy) == 1:
            i = busy[0]
            self._applier(i).apply(self._merge(queues[i]))
            return
        futs = [self._pool.submit(lambda i=i: self._applier(i).apply(self._merge(queues[i]))) for i in busy]
        errors = [f.exception() for f in futs]
        for e in errors:
            if e is not None:
                raise e

    def _merge(self, jobs: list[RowJob]):
        marks = self._ledger.marks(jobs) if self._ledger is not None else []
        if self._fk:
            refuse_key_updates(jobs)
            out = []
            for off, run in groupby(jobs, key=_checks_off):
                out.append(_CHECKS_OFF if off else _CHECKS_ON)
                out.extend(merge(list(run), multiple_rows=False))
            return out + marks
        if self._multiple_rows:
            jobs = _twin("regroup", jobs) or regroup(jobs)
            return (_twin("merge", jobs) or merge(jobs, multiple_rows=True)) + marks
        return merge(jobs, multiple_rows=False) + marks

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        for a in self._appliers:
            if a is not None:
                try:
                    a.conn.close()
                except Exception:
                    pass
