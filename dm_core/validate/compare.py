"""The in-process engine of validation (``dmctl validate``): the same comparison as the
scheduled Spark job (spark_jobs/validate.py), on one core, streaming.

Per target table (plan.py): pass 1 streams every shard and the downstream table through
server-side cursors and keeps only the per-bucket tallies (diff.py), so memory does not grow
with the table; only when some bucket differs, pass 2 streams them again keeping the records
of those buckets, and check.py names, filters and re-checks the differing rows.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Iterator

import pymysql

from dm_core.db import connect, qi, qt
from dm_core.sources import source_endpoint, target_endpoint
from dm_core.validate.check import RecheckContext, check_table
from dm_core.validate.diff import Tally
from dm_core.validate.plan import plan_task
from dm_core.validate.recheck import SyncWaiter
from dm_core.validate.result import TableResult, ValidationResult
from dm_core.validate.result import render as _render
from dm_core.validate.rows import Record
from dm_core.validate.settings import settings_for

BUCKETS = 4096
FETCH = 5_000


def _stream(conn, schema: str, table: str, columns: list[str], maker) -> Iterator[Record]:
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute(f"SELECT {', '.join(qi(c) for c in columns)} FROM {qt(schema, table)}")
        while True:
            chunk = cur.fetchmany(FETCH)
            if not chunk:
                break
            for raw in chunk:
                yield maker.record(raw)
    finally:
        cur.close()


def _sides(plan, up_conns, down):
    """(upstream reads, downstream reads): callables yielding the records of each reader."""
    ups = [lambda s=s: _stream(up_conns[s.table.source_id], s.table.schema, s.table.table, s.table.columns, s.maker)
           for s in plan.shards]
    downs = [lambda: _stream(down, plan.schema, plan.table, plan.columns, plan.down_maker)] if plan.down else []
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


def checkpoints(store, task_name: str) -> dict:
    return {s["source_id"]: f"({s['binlog_file']}, {s['binlog_pos']})" for s in store.all_source_states(task_name)
            if s.get("binlog_file")}


def compare_task(task, store, *, wait: float = 60.0, **kw) -> list[TableResult]:
    """The per-table results of :func:`validate_task`, re-checking for at most ``wait`` seconds
    (what tests and scripts that just synced want)."""
    settings = kw.pop("settings", None) or settings_for(task)
    settings.recheck.row_error_delay = min(settings.recheck.row_error_delay, wait)
    return validate_task(task, store, settings=settings, **kw).tables


def render(result) -> str:
    """Text of a ValidationResult, or of a list of TableResult (compare_task's)."""
    if isinstance(result, ValidationResult):
        return _render(result)
    return _render(ValidationResult("", tables=list(result), finished_at="-"))


def validate_task(task, store, *, mode: str | None = None, settings=None, run_id: str = "",
                  buckets: int = BUCKETS) -> ValidationResult:
    """Validate ``task`` in this process. ``settings``: a ValidationSettings (default: the task
    file's validators); ``mode`` overrides its mode (full | fast)."""
    settings = settings or settings_for(task)
    mode = mode or settings.mode
    res = ValidationResult(task.name, run_id, mode, "in-process", dt.datetime.now(dt.timezone.utc).isoformat(),
                           checkpoints=checkpoints(store, task.name))
    up_conns: dict = {}
    down = None
    try:
        for inst in task.mysql_instances:
            up_conns[inst.source_id] = connect(source_endpoint(store, inst.source_id))
        down = connect(target_endpoint(task), downstream=True)
        ctx = RecheckContext(up_conns, down, SyncWaiter(task, store, up_conns))
        for plan in plan_task(task, up_conns, down, mode=mode, buckets=buckets):
            t0 = time.monotonic()
            ups, downs = _sides(plan, up_conns, down)
            up, dn = _tally(ups), _tally(downs)
            res.tables.append(check_table(
                plan, up, dn, lambda b, limit: (_keep(ups, b, limit), _keep(downs, b, limit)), ctx, settings,
                chunks=len(ups) + len(downs), started=t0))
    except Exception as e:
        res.error = str(e)
        raise
    finally:
        res.finished_at = dt.datetime.now(dt.timezone.utc).isoformat()
        for c in [*up_conns.values(), down]:
            if c is not None:
                c.close()
    return res
