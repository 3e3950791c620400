"""One target table, from its candidate differences to its result.

The checksum engine (compare.py, drill.py) hands over the differing rows it drilled down to
(:func:`conclude`); the row-reading fallback (readrows.py) its bucket tallies and
``sample(buckets, limit)``, the records of the differing buckets (:func:`check_table`).
Everything after that is here: key-level diff, filters, the caps of DM's
``max-pending-row-count`` / ``max-pending-row-size``, the re-check (recheck.py) and the
TableResult.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from dm_core.validate.diff import Diff, Tally, differing_buckets, key_diff, split_explained
from dm_core.validate.recheck import SyncWaiter, recheck
from dm_core.validate.result import RowDiff, TableResult


@dataclass
class RecheckContext:
    up_conns: dict               # source_id → pymysql connection
    down_conn: object
    waiter: SyncWaiter


def check_table(plan, up: Tally, down: Tally, sample: Callable, ctx: RecheckContext, settings, *,
                chunks: int, started: float) -> TableResult:
    """``settings``: a ValidationSettings; ``started``: monotonic time the table's read began."""
    res = TableResult(plan.name, [s.origin for s in plan.shards], up.rows, down.rows, chunks, plan.buckets,
                      upstream_checksum=up.checksum, downstream_checksum=down.checksum)
    if plan.down is None:
        res.error = f"target table {plan.name} does not exist downstream"
        res.seconds = time.monotonic() - started
        return res
    if plan.missing_columns:
        res.error = (f"the downstream table lacks column(s) {', '.join(plan.missing_columns)} of the upstream "
                     "(the other columns were compared)")
    buckets = differing_buckets(up, down)
    res.differing_buckets = len(buckets)
    if buckets:
        limit = max(1000, 4 * settings.max_pending_row_count)
        up_recs, down_recs = sample(buckets, limit)
        first_seen = time.monotonic()
        diffs, res.filtered = split_explained(key_diff(up_recs, down_recs))
        conclude(plan, res, diffs, ctx, settings, first_seen)
    res.seconds = round(time.monotonic() - started, 3)
    return res


def conclude(plan, res: TableResult, diffs: list[Diff], ctx: RecheckContext, settings, first_seen: float) -> None:
    """The candidate differences of one table (filters already applied) → ``res``: capped by
    DM's max-pending-row-count / -size, re-checked against replication in flight (recheck.py)
    from ``first_seen`` (monotonic) on."""
    kept, more = _cap(diffs, settings.max_pending_row_count, settings.max_pending_row_size)
    res.more_differences += more
    if kept:
        out = recheck(plan, kept, ctx.up_conns, ctx.down_conn, ctx.waiter, settings.recheck, first_seen)
        res.resolved += out.resolved
        res.differences += [row_diff(plan, d) for d in out.confirmed]
        res.pending += [row_diff(plan, d, reason) for d, reason in out.pending]


def _cap(diffs: list[Diff], count: int, size: int) -> tuple[list[Diff], int]:
    kept, used = [], 0
    for d in diffs:
        used += sum(len(repr(r.row)) + len(repr(r.key)) for r in (d.up, d.down) if r is not None)
        if len(kept) >= count or used > size:
            break
        kept.append(d)
    return kept, len(diffs) - len(kept)


def row_diff(plan, d: Diff, reason: str = "") -> RowDiff:
    cols = plan.columns if plan.mode == "full" else plan.key
    return RowDiff(d.kind, dict(zip(plan.key, d.key)), dict(zip(cols, d.up.row)) if d.up else None,
                   dict(zip(cols, d.down.row)) if d.down else None, d.up.origin if d.up else "", reason)
