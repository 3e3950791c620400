"""Validation of one task, run by ``dmctl validate`` in process and by the scheduled job
(spark_jobs/validate.py, the same call): the servers checksum their own rows, Python only
compares sums and looks at the few rows where they differ. Stages, in order
(:func:`validate_task`):

==========  ==================================================================  ===========
stage       what                                                                module
==========  ==================================================================  ===========
plan        per target table its shards, route, mapping, filters, key           plan.py
image       per side the row as SQL bytes: the shard's transformation through   image.py
            the rule engines' ``mysql_sql``, every value rendered exactly
chunks      key ranges of the target, each with every side's predicate          chunks.py
first pass  COUNT + SUM(CRC32(image)) per chunk and side, every table's chunks  checksum.py
            in flight at once over a few connections per server
split       a differing chunk cut into leaves (key ranges or key hashes) by     drill.py
            one GROUP BY per side; leaves whose sums agree are done
re-check    while sync runs: differing leaves asked again upstream, downstream  drill.py
            once every checkpoint passed that point, and upstream again
fetch       the rows of the leaves still differing, from every side             drill.py
rows        key-level diff, filters, caps, row re-check, the result             check.py
==========  ==================================================================  ===========

A table whose row image cannot be SQL (image.Unexpressible) or whose checksum query fails
is compared by reading its rows (readrows.py); its result says so (``fallback``).

Only rows of differing chunks reach Python, so the cost is one server-side pass over each
side plus, per differing chunk, one more over that chunk: the speed of a table scan.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from dm_core.db import connect, is_mariadb
from dm_core.sources import source_endpoint, target_endpoint
from dm_core.validate.verdict import RecheckContext, conclude
from dm_core.errors import Cancelled
from dm_core.full.reconnect import away_for_good
from dm_core.validate.checksum import DOWN, ZERO, Servers, Sums, chunk_sums
from dm_core.validate.chunks import plan_chunks
from dm_core.validate import drill
from dm_core.validate.diff import key_diff, split_explained
from dm_core.validate.image import TableImages, Unexpressible, column_infos, images
from dm_core.validate.plan import TablePlan, plan_task
from dm_core.validate.readrows import compare_rows
from dm_core.validate.recheck import SyncWaiter
from dm_core.validate.result import TableResult, ValidationResult
from dm_core.validate.result import render as _render
from dm_core.validate.settings import settings_for

log = logging.getLogger("shardflow.validate")

BUCKETS = 4096          # key-hash buckets of the row-reading fallback
CHUNK_ROWS = 20_000     # rows per key chunk (SHARDFLOW_VALIDATE_CHUNK_ROWS)
LEAF_ROWS = 100         # a differing chunk is cut into leaves of about this many rows
POLL = 0.25             # seconds between looks at the checkpoints while waiting for sync to catch up
_MASK = (1 << 64) - 1


class UnknownTables(ValueError):
    """``tables`` named a table the task does not have."""


@dataclass
class TableJob:
    """One target table on its way through the stages."""

    plan: TablePlan
    started: float
    images: TableImages | None = None
    fallback: str | None = None         # why its rows are read instead (None: checksums)
    shape: str = ""                     # how it was chunked (chunks.py)
    chunks: list = field(default_factory=list)
    server_of: dict = field(default_factory=dict)   # origin → source id
    up: dict = field(default_factory=dict)          # chunk index → Sums
    down: dict = field(default_factory=dict)
    queries: int = 0
    differing: list = field(default_factory=list)   # chunk indices whose sums differ in the first pass
    leaves: list = field(default_factory=list)      # drill.Leaf: the pieces of them still differing
    first_seen: float = 0.0     # monotonic time its differences were first seen: row-error-delay counts from here

    def differs(self, i: int) -> bool:
        return self.up.get(i, ZERO) != self.down.get(i, ZERO)


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


@dataclass(frozen=True)
class Scope:
    """What one validation run covers, and the labels its result carries."""

    mode: str | None = None             # full | fast; None: the settings' mode
    tables: list[str] | None = None     # only these target tables (schema.table); None: all
    chunk_rows: int | None = None       # rows per key chunk; None: SHARDFLOW_VALIDATE_CHUNK_ROWS or CHUNK_ROWS
    buckets: int = BUCKETS              # key-hash buckets of the row-reading fallback
    run_id: str = ""
    engine: str = "in-process"


def validate_task(task, store, *, settings=None, result: ValidationResult | None = None, on_table=None,
                  stop=None, **scope) -> ValidationResult:
    """Validate ``task`` (module docstring). ``settings``: a ValidationSettings (default: the
    task file's validators); ``scope``: the fields of :class:`Scope` (``mode`` overrides the
    settings' mode, ``tables`` limits the run to those target tables); ``result``: fill this
    ValidationResult (the caller keeps it when this raises); ``on_table(result)``: called after
    each finished table; ``stop()``: once true, no further query is sent and it raises
    errors.Cancelled (the job host's cancel)."""
    settings = settings or settings_for(task)
    sc = Scope(**scope)
    mode = sc.mode or settings.mode
    chunk_rows = sc.chunk_rows or int(os.environ.get("SHARDFLOW_VALIDATE_CHUNK_ROWS", CHUNK_ROWS))
    res = result or ValidationResult(task.name, sc.run_id, mode, sc.engine,
                                     dt.datetime.now(dt.timezone.utc).isoformat(),
                                     checkpoints=checkpoints(store, task.name))
    eps = {i.source_id: source_endpoint(store, i.source_id) for i in task.mysql_instances}
    eps[DOWN] = target_endpoint(task)
    conns: dict = {}
    clock = _Stages()
    try:
        for name, ep in eps.items():   # one by one: those opened before a refusal are closed below
            conns[name] = connect(ep, downstream=name == DOWN)
        up_conns = {n: c for n, c in conns.items() if n != DOWN}
        jobs = _plan(task, up_conns, conns[DOWN], mode, sc.tables, chunk_rows, sc.buckets)
        shapes = Counter(j.shape or f"rows read ({j.fallback})" for j in jobs)
        clock.lap("plan", f"{len(jobs)} table(s), {sum(len(j.chunks) for j in jobs)} chunk(s): "
                          + ", ".join(f"{n} {shape}" for shape, n in shapes.items()))
        with Servers(eps, threads=max(2, settings.worker_count // 2), stop=stop) as servers:
            _first_pass(servers, jobs)
            clock.lap("first pass", f"{sum(j.queries for j in jobs)} queries")
            _split(servers, jobs)
            clock.lap("split", f"{sum(len(j.differing) for j in jobs)} chunk(s) differ, "
                               f"{sum(len(j.leaves) for j in jobs)} leaves")
            _recheck_leaves(servers, jobs, SyncWaiter(task, store, up_conns, poll=POLL, stop=stop), settings)
            clock.lap("re-check", f"{sum(len(j.leaves) for j in jobs)} leaves still differ")
            for t in _finish(servers, jobs, task, store, settings):
                res.tables.append(t)
                if on_table is not None:
                    on_table(res)
            clock.lap("rows")
        res.tables.sort(key=lambda t: t.target)
        log.info("validation of %s: %s", task.name, clock)
    except Exception as e:
        res.error, res.server_away = f"{type(e).__name__}: {e}", away_for_good(e)
        raise
    finally:
        res.finished_at = dt.datetime.now(dt.timezone.utc).isoformat()
        for c in conns.values():
            c.close()
    return res


class _Stages:
    """Seconds per stage, for the log."""

    def __init__(self):
        self._t, self._laps = time.monotonic(), []

    def lap(self, name: str, note: str = "") -> None:
        now = time.monotonic()
        self._laps.append(f"{name} {now - self._t:.2f}s" + (f" ({note})" if note else ""))
        self._t = now

    def __str__(self) -> str:
        return ", ".join(self._laps)


# ---- plan, image, chunks ---------------------------------------------------------------------
def _plan(task, up_conns: dict, down, mode: str, tables, chunk_rows: int, buckets: int) -> list[TableJob]:
    plans = plan_task(task, up_conns, down, mode=mode, buckets=buckets)
    if tables:
        unknown = sorted(set(tables) - {p.name for p in plans})
        if unknown:
            raise UnknownTables(f"{', '.join(unknown)} not a target table of task {task.name}")
        plans = [p for p in plans if p.name in tables]
    flavour = {name: is_mariadb(c) for name, c in up_conns.items()}
    flavour[DOWN] = is_mariadb(down)
    jobs = []
    for p in plans:
        job = TableJob(p, time.monotonic(), server_of={s.origin: s.table.source_id for s in p.shards})
        jobs.append(job)
        if p.down is None:
            continue   # readrows reports the missing table, with the upstream's rows counted
        try:
            down_infos = column_infos(down, p.schema, p.table)
            shard_infos = {s.origin: column_infos(up_conns[s.table.source_id], s.table.schema, s.table.table)
                           for s in p.shards}
            flavours = {"": flavour[DOWN], **{s.origin: flavour[s.table.source_id] for s in p.shards}}
            job.images = images(p, down_infos, shard_infos, flavours)
            job.shape, job.chunks = plan_chunks(p, up_conns, down, down_infos, shard_infos, chunk_rows)
        except Unexpressible as e:
            job.fallback = str(e)
    return jobs


# ---- first pass, split, re-check -------------------------------------------------------------------
def _ask(servers, job: TableJob, indices, *, up: bool = True, down: bool = True) -> list:
    """Submit the checksum queries of chunks ``indices``; collect them with :func:`_collect`."""
    out = []
    for i in indices:
        ch = job.chunks[i]
        ups = [servers.submit(job.server_of[o], chunk_sums, job.images.shards[o], w) for o, w in ch.ups.items()] \
            if up else None
        dn = servers.submit(DOWN, chunk_sums, job.images.down, ch.down) if down else None
        out.append((i, ups, dn))
    return out


def _collect(asked: list) -> tuple[dict, dict]:
    up, down = {}, {}
    for i, ups, dn in asked:
        if ups is not None:
            total = ZERO
            for f in ups:
                total = total + f.result()
            up[i] = total
        if dn is not None:
            down[i] = dn.result()
    return up, down


def _active(jobs):
    return [j for j in jobs if j.images is not None and j.fallback is None]


def _first_pass(servers, jobs: list[TableJob]) -> None:
    asked = {id(j): _ask(servers, j, range(len(j.chunks))) for j in _active(jobs)}
    for j in _active(jobs):
        a = asked[id(j)]
        j.queries = sum(len(ups) + 1 for _, ups, _ in a)
        try:
            j.up, j.down = _collect(a)
        except Cancelled:   # the job host's cancel: the whole validation ends
            raise
        except Exception as e:  # noqa: BLE001 - an SQL form this server refuses: read the rows instead
            log.warning("validate %s: a checksum query failed, reading its rows instead: %s", j.plan.name, e)
            j.fallback = f"the checksum query failed ({type(e).__name__}: {e})"


def _split(servers, jobs: list[TableJob]) -> None:
    """Each differing chunk cut into leaves in one GROUP BY per side; the differing leaves kept."""
    now = time.monotonic()
    for j in _active(jobs):
        j.differing = [i for i in range(len(j.chunks)) if j.differs(i)]
        j.first_seen = now
    asked = {id(j): drill.split(servers, j, j.differing, LEAF_ROWS) for j in _active(jobs) if j.differing}
    for j in _active(jobs):
        if id(j) in asked:
            try:
                j.leaves = drill.leaves(j, asked[id(j)])
            except Cancelled:   # the job host's cancel: the whole validation ends
                raise
            except Exception as e:  # noqa: BLE001 - an SQL form this server refuses: read the rows instead
                log.warning("validate %s: splitting a chunk failed, reading its rows instead: %s", j.plan.name, e)
                j.fallback = f"splitting a differing chunk failed ({type(e).__name__}: {e})"


def _recheck_leaves(servers, jobs: list[TableJob], waiter: SyncWaiter, settings) -> None:
    """While sync runs, a leaf may differ only because its rows are in flight: ask its
    upstream sums again (U1), wait until every source's checkpoint passed the upstream's
    position after U1, ask the downstream (D), then the upstream (U2). A leaf whose D equals
    U1 or U2 is settled (both sides held the same rows at one moment); the others -- rows
    damaged, or rows still changing -- are fetched, and their rows re-checked the same way,
    row by row (recheck.py), so a row in flight is never reported."""
    todo = [j for j in _active(jobs) if j.leaves]
    if not todo or waiter.replicating() is not None:
        return
    deadline = min(j.first_seen for j in todo) + settings.recheck.row_error_delay
    u1 = {id(j): drill.take(a, up=True) for j, a in [(j, drill.ask(servers, j, j.leaves, up=True)) for j in todo]}
    behind = waiter.catch_up(deadline)
    if behind is not None:
        log.info("validate: leaves not re-checked: %s", behind)
    asked = [(j, drill.ask(servers, j, j.leaves, up=False)) for j in todo]
    for j, a in asked:
        drill.take(a, up=False)
    asked = [(j, drill.ask(servers, j, j.leaves, up=True)) for j in todo]
    for j, a in asked:
        drill.take(a, up=True)
        j.leaves = [leaf for leaf in j.leaves if leaf.dn not in (u1[id(j)][id(leaf)], leaf.up)]


# ---- fetch and rows ------------------------------------------------------------------------------
def _finish(servers, jobs: list[TableJob], task, store, settings):
    """The TableResult of every job, as each is done; tables with nothing to look at first."""
    busy = [j for j in jobs if j.fallback is not None or j.images is None or j.leaves]
    for j in jobs:
        if j not in busy:
            yield _result(j)
    if not busy:
        return
    with ThreadPoolExecutor(max_workers=max(1, settings.worker_count), thread_name_prefix="validate-table") as ex:
        futs = {ex.submit(_look, servers, j, task, store.dsn, settings): j for j in busy}
        for f in as_completed(futs):
            j = futs[f]
            try:
                yield f.result()
            except Cancelled:   # the job host's cancel: the whole validation ends
                raise
            except Exception as e:  # noqa: BLE001 - one table's failure is its result; the others go on
                log.exception("validating %s failed", j.plan.name)
                yield TableResult(j.plan.name, [s.origin for s in j.plan.shards], error=f"{type(e).__name__}: {e}",
                                  server_away=away_for_good(e))


def _result(j: TableJob) -> TableResult:
    up = sum(j.up.values(), ZERO)
    down = sum(j.down.values(), ZERO)
    res = TableResult(j.plan.name, [s.origin for s in j.plan.shards], up.rows, down.rows, j.queries, len(j.chunks),
                      differing_buckets=len({leaf.chunk for leaf in j.leaves}), upstream_checksum=f"{up.total & _MASK:016x}",
                      downstream_checksum=f"{down.total & _MASK:016x}")
    if j.plan.missing_columns:
        res.error = (f"the downstream table lacks column(s) {', '.join(j.plan.missing_columns)} of the upstream "
                     "(the other columns were compared)")
    res.seconds = round(time.monotonic() - j.started, 3)
    return res


def _look(servers, j: TableJob, task, dsn: str, settings) -> TableResult:
    """Drill into one table's differing chunks (or read its rows) on this thread's connections."""
    from dm_core.state.outage import opening
    from dm_core.state.store import StateStore

    with opening(lambda: StateStore(dsn), what=f"the validation of {j.plan.name} opens the state store",
                 log=log.warning) as store:
        eps = {i.source_id: source_endpoint(store, i.source_id) for i in task.mysql_instances}
        ups = {sid: connect(ep) for sid, ep in eps.items()}
        down = connect(target_endpoint(task), downstream=True)
        try:
            ctx = RecheckContext(ups, down, SyncWaiter(task, store, ups, poll=POLL, stop=servers.stop))
            if j.fallback is not None or j.images is None:
                res = compare_rows(j.plan, ctx, settings)
                res.fallback = j.fallback
                return res
            res = _result(j)
            diffs, keep = [], max(1, settings.max_pending_row_count)
            for _, up_recs, down_recs in drill.fetch(servers, j, j.leaves):
                found, filtered = split_explained(key_diff(up_recs, down_recs))
                res.filtered += filtered
                room = max(0, keep - len(diffs))
                diffs += found[:room]
                res.more_differences += len(found) - len(found[:room])   # memory stays bounded
            conclude(j.plan, res, diffs, ctx, settings, j.first_seen)   # one row-error-delay for leaves and rows
            res.seconds = round(time.monotonic() - j.started, 3)
            return res
        finally:
            for c in [*ups.values(), down]:
                c.close()


__all__ = ["validate_task", "compare_task", "render", "checkpoints", "UnknownTables", "Sums"]
