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

If every transaction goes through alone, the failure came from how the batch was merged (two
rows of different keys that share a value of another unique key, on two workers: causality
orders rows by their key only), or safe mode resolved it (a duplicate key an INSERT met
becomes the upstream's row, as DM's safe mode does): the batch is then applied and the
window goes on.

What safe mode must not resolve: a REPLACE removes every row that shares any unique value
with it, so a row of another key that this batch never wrote -- a row only the downstream
has, or a unique index only the downstream has -- would vanish without a word. Before each
transaction is replayed, ``ForeignRows`` looks for such a row by every other unique key of
the target; one found makes the transaction the culprit ("Duplicate entry", as DM reports
it), and the source pauses there.

With `safe-mode-duration: 0s` the search does not run (safe_mode.may_replay): the source
pauses at the batch's start with the downstream's error.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections import Counter
from itertools import groupby

from dm_core.db import qi, qt
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.sync.dml import to_db_value

log = logging.getLogger("shardflow.sync")


def find_culprit(apply, jobs: list, spans: list[tuple], foreign=None) -> ShardflowError | None:
    """Apply ``jobs`` (RowJobs in binlog order) one transaction at a time with ``apply``;
    ``spans``: (start, end) of every transaction of the batch; ``foreign``: a ``ForeignRows``
    of the batch. Returns the error of the first transaction rejected for good, with
    ``position`` (its start) and ``statement`` set, or None when all went through."""
    starts = {end: start for start, end in spans}
    for end, group in groupby(jobs, key=lambda j: j.pos):
        txn = [dataclasses.replace(j, safe=True) for j in group]
        hit = foreign.find(txn) if foreign is not None else None
        if hit is not None:
            job, message = hit
            e = ErrorCode.DML_REJECTED.error(message)
            e.position, e.statement = starts.get(end, end), describe(job)
            return e
        try:
            apply(txn)
            if foreign is not None:
                foreign.done(txn)
        except ShardflowError as e:
            if e.code is not ErrorCode.DML_REJECTED:
                raise
            job = _rejected_row(apply, txn) or txn[0]
            e = _on_a_generated_column(e, job)
            e.position, e.statement = starts.get(end, end), describe(job)
            return e
    return None


# the downstream's "value does not fit" errors, whose message names the column: out of range,
# data truncated, incorrect value, data too long
_CLIPPED = frozenset({1264, 1265, 1366, 1406})
_COLUMN = re.compile(r"for column '((?:[^']|'')+)'")


def _on_a_generated_column(e: ShardflowError, job) -> ShardflowError:
    """``e``, saying why when the column it names is generated downstream. The downstream
    computes such a column itself, in strict mode; the upstream may hold a value the expression's
    result was clipped to (INSERT IGNORE, or a non-strict sql_mode), which the binlog carries and
    no statement can write. The row cannot land as the upstream has it: said, with the ways out.

    >>> from dm_core.target import TargetTable
    >>> from dm_core.sync.job import RowJob
    >>> t = TargetTable("db", "t", ("id", "c"), ("id",), True, generated=frozenset({"g"}))
    >>> err = ErrorCode.DML_REJECTED.error("downstream error 1264 (permanent): Out of range value for column 'g' at row 1")
    >>> err.errno = 1264
    >>> got = _on_a_generated_column(err, RowJob("insert", t, None, {"id": 1, "c": 2}, False))
    >>> "`g` is a generated column" in got.message and "ALTER TABLE `db`.`t` MODIFY `g`" in got.workaround
    True
    >>> got.errno
    1264
    """
    m = _COLUMN.search(e.message) if e.errno in _CLIPPED else None
    generated = {c.lower(): c for c in getattr(job.target, "generated", ())}
    col = generated.get(m.group(1).replace("''", "'").lower()) if m else None
    if col is None:
        return e
    t = qt(job.target.schema, job.target.table)
    out = ErrorCode.DML_REJECTED.error(
        f"{e.message} (`{col}` is a generated column downstream: the downstream computes it from the row's "
        f"other columns and the result does not fit its type; the upstream holds the value that result was "
        f"clipped to, which INSERT IGNORE or a non-strict sql_mode allows there and strict mode refuses here)",
        workaround=f"The row cannot land as the upstream holds it. To take it with `{col}` computed in full, widen "
                   f"the column downstream (ALTER TABLE {t} MODIFY {qi(col)} with a type that holds the expression's "
                   f"result: the downstream's value then differs from the upstream's clipped one), then `dmctl "
                   f"resume-task TASK -s SOURCE`; or `dmctl binlog skip TASK -s SOURCE` to leave the transaction "
                   f"out, or `dmctl binlog replace TASK -s SOURCE \"SQL\"` to run other SQL in its place.")
    out.errno = e.errno
    return out


class ForeignRows:
    """Rows downstream that a safe-mode REPLACE of a batch's row would remove besides its own
    and that the batch never wrote (the module says why they matter)."""

    def __init__(self, conn, jobs: list):
        self.conn = conn
        # keys the batch still writes, per target: a row of such a key may be downstream only
        # because a part of the batch after the transaction being replayed was committed
        # already (another worker's); a row of any other key is as the upstream left it
        self.ahead: dict[tuple, Counter] = {}
        for j in jobs:
            for k in _keys(j):
                self.ahead.setdefault(j.target.ident, Counter())[k] += 1

    def done(self, txn: list) -> None:
        """``txn`` was replayed: its keys are no longer ahead."""
        for j in txn:
            for k in _keys(j):
                c = self.ahead[j.target.ident]
                c[k] -= 1
                if c[k] <= 0:
                    del c[k]

    def find(self, txn: list):
        """(job, message) for the first row of ``txn`` whose REPLACE would remove a foreign row."""
        for job in txn:
            t = job.target
            if job.after is None or not t.key_is_unique or t.only_unique_key:
                continue
            for uk in t.unique_indexes:
                if tuple(uk) == tuple(t.key) or any(c in t.generated for c in uk):
                    continue
                vals = [to_db_value(job.after.get(c)) for c in uk]
                if any(v is None for v in vals):
                    continue   # NULLs never collide
                if self._held(t, uk, vals):
                    entry = "-".join("NULL" if v is None else str(v) for v in vals)
                    return job, (f"downstream error 1062 (as a plain INSERT gets it): Duplicate entry '{entry}' "
                                 f"for the unique key ({', '.join(uk)}) of `{t.schema}`.`{t.table}`, held by "
                                 f"another row, which the upstream does not have (or the key exists only "
                                 f"downstream): replaying the row with REPLACE would delete that row")
        return None

    def _held(self, t, uk, vals) -> bool:
        keys = sorted(self.ahead.get(t.ident, ()), key=repr)
        cols = lambda names: "(" + ", ".join(qi(c) for c in names) + ")"
        one = "(" + ", ".join(["%s"] * len(t.key)) + ")"
        sql = (f"SELECT 1 FROM {qt(t.schema, t.table)} WHERE {cols(uk)} = ({', '.join(['%s'] * len(uk))})"
               + (f" AND {cols(t.key)} NOT IN ({', '.join([one] * len(keys))})" if keys else "") + " LIMIT 1")
        with self.conn.cursor() as cur:
            cur.execute(sql, [*vals, *(v for k in keys for v in k)])
            return cur.fetchone() is not None


def _keys(job) -> set:
    return {k for k in (job.key_before(), job.key_after()) if k is not None}


def _rejected_row(apply, txn: list):
    """The job of ``txn`` the downstream rejects when applied alone, or None."""
    for job in txn:
        try:
            apply([job])
        except ShardflowError as e:
            if e.code is not ErrorCode.DML_REJECTED:
                raise
            return job
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
