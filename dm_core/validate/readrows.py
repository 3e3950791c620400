"""Reading every row: the comparison of a table whose row image cannot be hashed in SQL
(image.py raised Unexpressible: a spatial column, a column transform without an SQL form).

Pass 1 streams every shard and the downstream table through server-side cursors and keeps
only per-bucket tallies (diff.py), so memory does not grow with the table; only when some
bucket differs, pass 2 streams them again keeping the records of those buckets, and check.py
names, filters and re-checks the differing rows.
"""

from __future__ import annotations

import time
from typing import Iterator

import pymysql

from dm_core.db import qt
from dm_core.errors import Cancelled
from dm_core.validate.verdict import check_table
from dm_core.validate.diff import Tally
from dm_core.validate.rows import Record, select_list, types_of

FETCH = 5_000


def _stream(conn, schema: str, table: str, columns: list[str], maker, types: dict, stop) -> Iterator[Record]:
    """``stop()``: asked before each fetch; once true, the read raises errors.Cancelled (a
    cancelled job does not read a large table to its end)."""
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute(f"SELECT {select_list(columns, types)} FROM {qt(schema, table)}")
        while True:
            if stop is not None and stop():
                raise Cancelled(f"the validation was cancelled while it read {schema}.{table}: its task was stopped")
            chunk = cur.fetchmany(FETCH)
            if not chunk:
                break
            for raw in chunk:
                yield maker.record(raw)
    finally:
        cur.close()


def _sides(plan, up_conns, down, stop):
    """(upstream reads, downstream reads): callables yielding the records of each reader."""
    ups = [lambda s=s: _stream(up_conns[s.table.source_id], s.table.schema, s.table.table, s.table.columns, s.maker,
                               types_of(s.table), stop) for s in plan.shards]
    downs = [lambda: _stream(down, plan.schema, plan.table, plan.columns, plan.down_maker, types_of(plan.down), stop)] \
        if plan.down else []
    return ups, downs


def _tally(reads) -> Tally:
    t = Tally()
    for read in reads:
        for r in read():
            t.add(r)
    return t


def _keep(reads, buckets: set[int], limit: int) -> list[Record]:
    out: list[Record] = []
    for read in reads:
        for r in read():
            if r.bucket in buckets:
                out.append(r)
                if len(out) >= limit:
                    return out
    return out


def compare_rows(plan, ctx, settings):
    """The TableResult of ``plan`` from its rows (``ctx``: a check.RecheckContext whose
    connections are this thread's)."""
    t0 = time.monotonic()
    ups, downs = _sides(plan, ctx.up_conns, ctx.down_conn, ctx.waiter.stop)
    up, dn = _tally(ups), _tally(downs)
    return check_table(plan, up, dn, lambda b, limit: (_keep(ups, b, limit), _keep(downs, b, limit)), ctx, settings,
                       chunks=len(ups) + len(downs), started=t0)
