"""The full phase around the Spark job: watermarks before and after, target tables, plan.

Lock-free snapshot handoff: the low watermark is each source's binlog position taken
*before* any table is read; the high watermark is taken *after* every chunk is loaded.
Replaying the binlog from low in safe mode until past high converges every row the dump
saw at any instant in between to the upstream's state, without a global read lock.
A rerun keeps the first low watermark (chunks already loaded were read after it).
Recording a new low watermark starts a new snapshot: the source's chunk plans (plan_store.py)
and downstream chunk markers (chunk_writer.py) of an earlier snapshot are forgotten then.

DDL during the full phase
-------------------------
DM's dump is consistent with the position it resumes from; ours is not, and DDL is not
transactional, so no snapshot gives the schema at the low watermark L. Instead, every
step tolerates a schema that is ahead of or behind the binlog position it stands for:

1. targets are created (target_schema.py) from the upstream definitions as they are at
   prepare time -- after L, so possibly with some DDL D (L < D) already in them;
2. each chunk reads, just before it is read, the columns the upstream table and the target
   both have (extract.chunk_shape); a table changed upstream since the target was created
   ("drifted") lands leniently: a value the target's older definition cannot hold (a
   widened VARCHAR, a column the target lacks NOT NULL) is truncated / defaulted, not an
   error; a chunk whose table changed while it was read is read again;
3. sync replays from L in safe mode (full-row REPLACE, DELETE+REPLACE) up to past the high
   watermark. Each row is written with the columns its binlog image has that the target
   has (row_path.written_columns), so a target column the image lacks gets its default,
   as the upstream's ADD COLUMN gave it;
4. a DDL met in that replay runs only its changes the target lacks (ddl/replay.py;
   the shard DDL owner does the same in executor.run_operation): D is skipped if the
   target was created after it and runs if it was created before.

Why this converges. Schema: the target starts at the upstream's schema at some point
T >= L; replaying the DDLs of [L, T) changes nothing (each is found in effect), and those
after T run exactly once, in order, so the target ends at the upstream's schema. Data: a
row's final upstream value is either its value as of T's schema with nothing written
since (then a chunk read it -- after T, so with the column set the target has -- or a
replayed DDL gave it the same default the upstream's DDL gave it), or the value of its last
binlog event in [L, end), which the replay writes as a full row after every DDL before it
has run downstream. A value truncated or defaulted by a lenient chunk (2) exists only
because a DDL after the target's creation allowed it upstream, so the write that produced
it came after that DDL, after L, and is replayed: the lenient value is always overwritten.
Limits, as in DM: a DDL that rewrites values itself (MODIFY to a narrower or other type)
converges only where the downstream converts values as the upstream did; a column added
with a non-constant default (CURRENT_TIMESTAMP, UUID()) gets the downstream's value.

Renames during the load
-----------------------
The argument above needs each name to carry the same table (rows) from L until its last
chunk is read. A RENAME / ``ALTER TABLE ... RENAME`` / EXCHANGE PARTITION that moves a table's
rows away while the load still reads it breaks that (renames.py): ``finish`` finds those
statements in the binlog and reads the tables they tie together again at snapshot positions
the catch-up starts them from (reread.py), or, where it cannot, stops with FULL_LOAD_RENAMED.

Tables without a unique key
---------------------------
Safe mode's replay is idempotent by the row's key; a keyless table has none, and identical
rows cannot be told apart. Such a table is one chunk, read in a consistent snapshot whose
binlog position its marker records (snapshot_read.py); the sync skips its changes before that
position and writes the rest exactly (dm_core/sync/keyless_ledger.py, "handoff"). ``finish``
turns that on for the source (``keyless_handoff``); a new low watermark turns it off.

Task-mode full
--------------
Nothing replicates after the load, so no binlog position is read (DM's full mode needs no
REPLICATION CLIENT either): the low watermark is a snapshot mark, ``(SNAPSHOT, unix time)``,
which names the snapshot for chunk plans and markers and tells a restart to load only the
missing chunks, as a binlog position does; ``finish`` records no high watermark and leaves
every source at stage ``finished`` (query-status: finished).
"""

from __future__ import annotations

import logging

import time
from concurrent.futures import ThreadPoolExecutor

from dm_core import faults
from dm_core.db import connect, master_position
from dm_core.full import chunk_writer, extract, reconnect, xa_wait
from dm_core.full.discover import SourceTable, allowed_databases, discover
from dm_core.full.extract import partition_id_columns
from dm_core.full.plan_store import PlanStore
from dm_core.full import user_targets
from dm_core.full.target_schema import ensure_databases, ensure_targets
from dm_core.schema_tracker import tracker as schema_tracker
from dm_core.state import outage
from dm_core.sources import source_endpoint, target_endpoint
from dm_core.sync import keyless_ledger

log = logging.getLogger("shardflow.full")

# The low watermark's file of a task-mode full snapshot: no binlog position (see above).
SNAPSHOT = "snapshot"
FINISHED = "finished"   # a source's stage once task-mode full loaded it


def is_binlog_watermark(file: str | None) -> bool:
    """Whether a recorded watermark is a binlog position (not task-mode full's snapshot mark)."""
    return bool(file) and file != SNAPSHOT


def _low_watermark(task, conn) -> tuple[str, int, str | None]:
    if task.task_mode == "full":
        return SNAPSHOT, int(time.time()), None
    return master_position(conn)


def chunk_shape(task, st: SourceTable, up_ep, target_ep) -> extract.ChunkShape:
    """What a chunk of ``st`` reads now (extract.ChunkShape), on fresh connections."""
    up = connect(up_ep)
    try:
        down = connect(target_ep, downstream=True)
        try:
            user_made = (st.target_schema.lower(), st.target_table.lower()) in user_targets.of_task(
                down, task.meta_schema, task.name)
            return extract.chunk_shape(up, down, st, partition_id_columns(task, st), user_made=user_made)
        finally:
            down.close()
    finally:
        up.close()


def prepare(task, store) -> dict:
    """Record low watermarks and create target tables. Returns a summary for XCom.

    A server that goes away part-way (Postgres, an upstream, the downstream) is waited out and
    prepare runs again from the top: it is a rerun like any other (it keeps each recorded low
    watermark)."""
    return _rerun_while_away(store, lambda: _prepare(task, store), f"the full phase of {task.name} prepares")


def _rerun_while_away(store, step, what: str):
    """``step()``, run again while a server it needs is away: the state store (outage.py, up to
    SHARDFLOW_STORE_OUTAGE_S) or an upstream or the downstream (reconnect.server_away, up to
    SHARDFLOW_FULL_RECONNECT_S, as a chunk of the load waits)."""
    patience = reconnect.Patience()
    while True:
        try:
            return outage.riding_out(store, step, what=what, log=log.warning)
        except Exception as e:  # noqa: BLE001 - a server away is waited out, anything else raised
            if not reconnect.server_away(e) or not patience.wait(what, e, "running it again"):
                raise


def _prepare(task, store) -> dict:
    summary = {"sources": {}, "created": []}
    members = []
    databases = []
    conns = []
    fresh = []
    states, listed = {}, {}
    # each source's tables are listed in a thread of their own once its low watermark is recorded:
    # listing is the upstream's work (it opens every table), and the sources are different servers
    lister = ThreadPoolExecutor(max_workers=len(task.mysql_instances) or 1, thread_name_prefix="discover")
    try:
        for inst in task.mysql_instances:
            sid = inst.source_id
            conn = connect(source_endpoint(store, sid))
            conns.append(conn)
            st = store.source_state(task.name, sid)
            if not st["low_file"]:
                f, p, g = _low_watermark(task, conn)
                if task.task_mode != "full":   # a transaction prepared before it must end first (xa_wait.py)
                    xa_wait.wait_prepared_xa(conn, sid)
                store.update_source_state(task.name, sid, low_file=f, low_pos=p, low_gtid=g, stage="full",
                                          **keyless_ledger.CLEARED)
                st = store.source_state(task.name, sid)
                fresh.append(sid)
            states[sid] = st
            listed[sid] = lister.submit(discover, conn, sid, task.rules_for(sid))
        for inst, conn in zip(task.mysql_instances, conns):
            sid, st = inst.source_id, states[inst.source_id]
            tables = listed[sid].result()
            if is_binlog_watermark(st["low_file"]):   # what the sync decodes rows without names with
                schema_tracker.seed_full_phase(store, task.name, sid, conn, [(t.schema, t.table) for t in tables],
                                               fresh=sid in fresh)
            members += [(conn, t) for t in tables]
            databases += [(conn, s, target) for s, target in allowed_databases(conn, task.rules_for(sid))]
            summary["sources"][sid] = {"low_watermark": f"({st['low_file']}, {st['low_pos']})",
                                       "tables": [f"{t.schema}.{t.table} -> {t.target_schema}.{t.target_table}" for t in tables]}
        target = target_endpoint(task, load=True)
        down = connect(target, downstream=True)
        try:
            chunk_writer.ensure_meta(down, task.meta_schema)
            if fresh:
                with PlanStore(store.dsn) as plans:
                    for sid in fresh:
                        old_plans = plans.forget(task.name, sid)
                        chunk_writer.forget_markers(down, task.meta_schema, task.name, sid)
                        keyless_ledger.forget(down, task.meta_schema, task.name, sid)
                        chunk_writer.drop_plan_staging(down, task.meta_schema, old_plans)
            # every source fresh (a first start, or one after a reset), or a first prepare that
            # failed after some watermarks and before this record (user_targets.py)
            if (fresh and len(fresh) == len(task.mysql_instances)) or not user_targets.recorded(
                    down, task.meta_schema, task.name):
                summary["user_made"] = [f"{s}.{t}" for s, t in user_targets.record(
                    down, task.meta_schema, task.name, [(st.target_schema, st.target_table) for _, st in members])]
            summary["created"] = _create_targets(task, target, down, members)
            summary["databases"] = ensure_databases(down, databases)
            if task.shard_mode == "optimistic":
                seed_optimistic_locks(task, store, down, members)
        finally:
            down.close()
    finally:
        lister.shutdown(wait=True)   # a failed source's listing ends before its connection closes
        for c in conns:
            c.close()
    return summary


def _create_targets(task, target, down, members) -> list[str]:
    """``ensure_targets`` of ``members`` under the task's rules: its partition-id columns, its
    routes (foreign keys' parents), exact members in pessimistic shard mode, 4 connections."""
    return ensure_targets(down, members, lambda st: partition_id_columns(task, st),
                          routes=lambda st: task.rules_for(st.source_id).router.route,
                          exact=task.shard_mode == "pessimistic", connect_down=lambda: connect(target, downstream=True))


def ensure_added_targets(task, store, added: list) -> list[str]:
    """The targets of tables a changed task file lets in after the full phase (``left_out.Added``),
    created as ``prepare`` creates every other: from the upstream's
    definition now, routed, with the partition-id columns; one that exists (a merged target) is
    kept. The sync meets their rows with a target to write them to instead of pausing on a
    missing one. Returns the targets created or found."""
    wanted: dict[str, set] = {}
    for a in added:
        wanted.setdefault(a.source_id, set()).add((a.schema, a.table))
    if not wanted:
        return []
    target = target_endpoint(task, load=True)
    conns, members = [], []
    try:
        for sid, names in wanted.items():
            conn = connect(source_endpoint(store, sid))
            conns.append(conn)
            members += [(conn, t) for t in discover(conn, sid, task.rules_for(sid)) if (t.schema, t.table) in names]
        down = connect(target, downstream=True)
        try:
            return _create_targets(task, target, down, members)
        finally:
            down.close()
    finally:
        for c in conns:
            c.close()


def seed_optimistic_locks(task, store, down, members) -> None:
    """Optimistic mode: each sharded target's lock learns every member table's schema as the
    snapshot has it, so shards that start with different shapes (columns only some have) are
    tracked as they are, not as the merged table (DM initialises its schema tracker from the
    dump the same way). ``members``: (upstream connection, SourceTable) pairs."""
    from dm_core.shardddl.downstream import read_table_schema
    from dm_core.shardddl.lock_ops import OPTIMISTIC

    by_target: dict[tuple[str, str], list] = {}
    for conn, t in members:
        by_target.setdefault((t.target_schema, t.target_table), []).append((conn, t))
    for target, group in by_target.items():
        initial = read_table_schema(down, *target)
        if len(group) < 2 or initial is None:
            continue  # not sharded, or no target to track
        schemas = {(t.source_id, t.schema, t.table): read_table_schema(conn, t.schema, t.table) for conn, t in group}
        schemas = {k: v for k, v in schemas.items() if v is not None}
        if any(all(m.column(c.name) is None for m in schemas.values()) for c in initial.columns):
            continue  # the target has columns of its own (extend columns, the user's): members stay as it
        OPTIMISTIC.seed(store, task.name, target, initial, schemas)


def finish(task, store) -> dict:
    """Record high watermarks; the incremental phase starts at low in safe mode. Task-mode
    full: every source finished, no binlog read.

    A server that goes away part-way is waited out and finish runs again, as prepare does: a
    later high watermark only keeps safe mode on longer, and the re-read of renamed tables is a
    rerun (reread.py)."""
    return _rerun_while_away(store, lambda: _finish(task, store), f"the full phase of {task.name} finishes")


def _finish(task, store) -> dict:
    out = {}
    totals = store.chunk_totals(task.name)
    if task.task_mode != "full":
        _refuse_renamed(task, store)
    for inst in task.mysql_instances:
        sid = inst.source_id
        if task.task_mode == "full":
            store.update_source_state(task.name, sid, stage=FINISHED)
            out[sid] = {"rows_loaded": totals.get(sid, 0)}
            continue
        faults.hit("full.before_high_watermark")
        conn = connect(source_endpoint(store, sid))
        try:
            f, p, g = master_position(conn)
        finally:
            conn.close()
        # keyless tables read at a recorded position catch up exactly from there (keyless_ledger.py)
        store.update_source_state(task.name, sid, high_file=f, high_pos=p, high_gtid=g, stage="sync",
                                  keyless_handoff=True, error=None, error_code=None)
        out[sid] = {"high_watermark": f"({f}, {p})", "rows_loaded": totals.get(sid, 0)}
    return out


def _refuse_renamed(task, store) -> None:
    """Tables a RENAME moved rows between while the load read them are read again at a
    snapshot (reread.py); where that cannot be done, no source hands over to the sync: each
    such source says why in query-status, and FULL_LOAD_RENAMED is raised."""
    from dm_core.errors import ErrorCode
    from dm_core.full import reread

    found = {}
    for inst in task.mysql_instances:
        why = reread.settle(task, store, inst.source_id)
        if why:
            found[inst.source_id] = why
    if not found:
        return
    for sid, why in found.items():
        store.update_source_state(task.name, sid, error=why, error_code=ErrorCode.FULL_LOAD_RENAMED.number,
                                  error_stmt=None, error_pos=None)
    raise ErrorCode.FULL_LOAD_RENAMED.error("\n".join(found.values()))


def forget(task, store) -> None:
    """Drop everything the full phase keeps for ``task`` besides ``full_chunk`` (which
    StateStore.forget_task clears): chunk plans, downstream markers and staging leftovers.
    For task removal / ``start-task --remove-meta``; prepare() does it per source by itself
    whenever it records a new low watermark."""
    with PlanStore(store.dsn) as plans:
        old_plans = plans.forget(task.name)
    down = connect(target_endpoint(task, load=True), downstream=True)
    try:
        chunk_writer.forget_markers(down, task.meta_schema, task.name)
        chunk_writer.drop_plan_staging(down, task.meta_schema, old_plans)
        keyless_ledger.forget(down, task.meta_schema, task.name)
        user_targets.forget(down, task.meta_schema, task.name)
    finally:
        down.close()
