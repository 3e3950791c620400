"""Find the transaction, and the row, that the downstream rejected for good.

A batch holds many upstream transactions, merged into multi-row statements and spread over
several workers. When the downstream rejects it permanently (``DML_REJECTED``), the batch
is applied again one transaction at a time, in binlog order, in safe mode (REPLACE /
DELETE + REPLACE: some workers may have committed their part already). The first
transaction that fails again is the culprit and everything before it is now durable, so
the source can pause exactly at the culprit's start: `dmctl binlog skip` then drops just
that transaction, `dmctl binlog replace` runs other SQL in its place. Inside the culprit,
rows are tried one by one to name the rejected row in the report (safe mode again: the
whole transaction is replayed on resume).

If every transaction goes through alone, the failure came from how the batch was merged, or
safe mode resolved it (a duplicate key an INSERT met becomes the upstream's row, as DM's
safe mode does): the batch is then applied and the window goes on.
"""

from __future__ import annotations

import dataclasses
import logging
from itertools import groupby

from dm_core.errors import ErrorCode, ShardflowError

log = logging.getLogger("shardflow.sync")


def find_culprit(apply, jobs: list, spans: list[tuple]) -> ShardflowError | None:
    """Apply ``jobs`` (RowJobs in binlog order) one transaction at a time with ``apply``;
    ``spans``: (start, end) of every transaction of the batch. Returns the error of the first
    transaction rejected for good, with ``position`` (its start) and ``statement`` set, or
    None when all went through."""
    starts = {end: start for start, end in spans}
    for end, group in groupby(jobs, key=lambda j: j.pos):
        txn = [dataclasses.replace(j, safe=True) for j in group]
        try:
            apply(txn)
        except ShardflowError as e:
            if e.code is not ErrorCode.DML_REJECTED:
                raise
            e.position = starts.get(end, end)
            e.statement = _rejected_row(apply, txn) or describe(txn[0])
            return e
    return None


def _rejected_row(apply, txn: list) -> str | None:
    for job in txn:
        try:
            apply([job])
        except ShardflowError as e:
            if e.code is not ErrorCode.DML_REJECTED:
                raise
            return describe(job)
    return None


def describe(job) -> str:
    """What the job does, by key (values of the key only: rows may hold personal data).

    >>> from dm_core.target import TargetTable
    >>> t = TargetTable("db", "t", ("id", "v"), ("id",), True)
    >>> from dm_core.sync.job import RowJob
    >>> describe(RowJob("update", t, {"id": 1, "v": 2}, {"id": 1, "v": 3}, True))
    'UPDATE `db`.`t` WHERE (`id`) = (1)'
    """
    row = job.before if job.before is not None else job.after
    cols = job.target.key
    vals = ", ".join(repr(row.get(c)) for c in cols)
    return (f"{job.op.upper()} `{job.target.schema}`.`{job.target.table}` WHERE "
            f"({', '.join(f'`{c}`' for c in cols)}) = ({vals})")
