"""Driver-side bookkeeping of one table's full load: plan → skip → adopt → land → record.

How a chunk's rows reach the target comes in as ``land(plan_id, chunk) -> rows`` (land.Lander),
so this module stays free of Spark and its rules read in one place:

1. plan: the persisted chunk plan (plan_store.py), computed on the first run only;
2. skip: chunks recorded in the state store (``full_chunk``) are done;
3. adopt: chunks whose marker is committed downstream but not recorded (the job died in
   between) are recorded now, not loaded again (chunk_writer.py explains why that is exact);
4. land the rest, ``parallel`` at a time; after each commit record it in the state store
   (``full_chunk`` row = every row of the chunk is durable downstream), then pass the fault
   point ``full.after_chunk_write``.

A failing chunk stops the table's remaining chunks (already running ones finish and are
recorded) and the error names the table, the chunk and its predicate.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from dm_core import faults
from dm_core.db import connect, master_position
from dm_core.full import chunk_writer, reconnect
from dm_core.full.chunking import Chunk, plan_chunks
from dm_core.full.plan_store import PlanStore, epoch_of

log = logging.getLogger("shardflow.full")


@dataclass
class TableResult:
    """What one run did to one table (the job's --report lists these)."""

    name: str
    plan_id: str = ""
    chunks: int = 0
    skipped: list[int] = field(default_factory=list)   # recorded before this run
    adopted: list[int] = field(default_factory=list)   # committed by an earlier run, recorded now
    loaded: list[int] = field(default_factory=list)    # landed by this run
    rows: int = 0                                      # rows landed by this run
    error: str | None = None
    store_outage: bool = False                         # the error was the state store's absence
    server_away: bool = False                          # ... a server that stayed away (reconnect.away_for_good)


class ChunkFailed(Exception):
    """A chunk could not be landed; the message names table, chunk and predicate."""


def binlog_end(task, up_ep):
    """The upstream's binlog end now, recorded with a chunk once it is committed (its read
    ended before it: renames.py compares it with renames during the load); None in task-mode
    full (no binlog is read) or when the server cannot say."""
    if task.task_mode == "full":
        return None
    from dm_core.position import Position

    try:
        conn = connect(up_ep)
        try:
            f, p, _g = master_position(conn)
        finally:
            conn.close()
    except Exception as e:  # noqa: BLE001 - unknown counts as "after every rename": never unsafe
        log.warning("could not read the upstream's binlog position after a chunk (%s)", e)
        return None
    return Position(f, p) if f else None


def load_table(task, st, up_ep, target_ep, store, land, *, chunk_rows: int, parallel: int = 1) -> TableResult:
    """Load the chunks of ``st`` not yet done. ``store`` is a StateStore owned by the caller's
    thread; ``land(plan_id, chunk)`` puts one chunk into the target with its marker."""
    res = TableResult(st.name)
    epoch = epoch_of(store.source_state(task.name, st.source_id))
    done = store.done_chunks(task.name, st.source_id, st.schema, st.table)

    def compute() -> list[Chunk]:
        conn = connect(up_ep)
        try:
            return plan_chunks(conn, st, chunk_rows)
        finally:
            conn.close()

    with PlanStore(store.dsn) as plans:
        res.plan_id, chunks = plans.get_or_create(task.name, st, epoch, compute, lambda: bool(done))
    res.chunks = len(chunks)
    res.skipped = sorted(c.chunk_id for c in chunks if c.chunk_id in done)
    todo = [c for c in chunks if c.chunk_id not in done]
    if todo:
        todo = _adopt(task, st, up_ep, target_ep, store, res, todo)
    if not todo:
        log.info("%s: nothing to load (%d chunks recorded, %d adopted)", st.name, len(res.skipped), len(res.adopted))
        return res
    log.info("%s: loading %d of %d chunks (plan %s)", st.name, len(todo), len(chunks), res.plan_id)
    lock = threading.Lock()

    def one(c: Chunk) -> None:
        try:
            n = land(res.plan_id, c)
        except Exception as e:
            raise ChunkFailed(f"{st.name} chunk {c.chunk_id} of {len(chunks)} (WHERE {c.where}): {e}") from e
        faults.hit("full.after_chunk_merge")
        with type(store)(store.dsn) as own:  # the caller's connection belongs to its thread
            own.mark_chunk_done(task.name, st.source_id, st.schema, st.table, c.chunk_id, n,
                                read_by=binlog_end(task, up_ep))
        with lock:
            res.loaded.append(c.chunk_id)
            res.rows += n
        faults.hit("full.after_chunk_write")

    with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix=f"chunks-{st.table}") as ex:
        futs = [ex.submit(one, c) for c in todo]
        wait(futs, return_when=FIRST_EXCEPTION)
        for f in futs:  # after a failure, chunks not started yet are left for the rerun
            f.cancel()
    failed = [f.exception() for f in futs if not f.cancelled() and f.exception()]
    res.loaded.sort()
    if failed:
        from dm_core.state.outage import store_away

        res.error = "; ".join(str(e) for e in failed)
        res.store_outage = any(store_away(e) for e in failed)
        res.server_away = all(reconnect.away_for_good(e) for e in failed)
    return res


def _adopt(task, st, up_ep, target_ep, store, res: TableResult, todo: list[Chunk]) -> list[Chunk]:
    """Record chunks committed downstream by a run that died before recording them."""
    down = connect(target_ep, downstream=True)
    try:
        chunk_writer.ensure_meta(down, task.meta_schema)
        marked = chunk_writer.marked_chunks(down, task.meta_schema, res.plan_id)
        rest = []
        by = binlog_end(task, up_ep) if any(c.chunk_id in marked for c in todo) else None
        for c in todo:
            if c.chunk_id in marked:
                store.mark_chunk_done(task.name, st.source_id, st.schema, st.table, c.chunk_id, marked[c.chunk_id],
                                      read_by=by)
                chunk_writer.drop_staging(down, task.meta_schema, chunk_writer.staging_name(res.plan_id, c.chunk_id))
                res.adopted.append(c.chunk_id)
            else:
                rest.append(c)
    finally:
        down.close()
    return rest
