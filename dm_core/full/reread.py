"""Tables a rename moved rows between while the full load read them, read again at a snapshot.

Why: renames.py says which loaded tables a RENAME TABLE / ``ALTER TABLE ... RENAME`` /
EXCHANGE PARTITION harmed (a daily ``RENAME TABLE log TO log_1127, log_new TO log`` while
``log`` loads mixes two tables' rows under one name and loses the rest). DM's dump does not
meet this (one consistent snapshot for every table); the lock-free load does, and a user
cannot be asked to keep their rotation jobs still for a whole load.

Protocol, per source, in the full phase's ``finish`` (before the high watermark):

1. scan the binlog from the low watermark (renames.scan: RENAME TABLE, ALTER ... RENAME,
   EXCHANGE PARTITION, CONVERT PARTITION / TABLE; an online DDL tool's cut-over is left to
   the sync, which makes it the real table's ALTER) and find the harmed tables
   (renames.harmful); none: done.
2. the names to read again: every name tied to a harmed one by those statements
   (renames.component), in the block-allow list.
3. each name's target must be its own (a target other tables merge into cannot be emptied
   for one of them) and its engine must keep snapshots (InnoDB); else the source does not
   hand over (FULL_LOAD_RENAMED, the way out).
4. downstream, for each name: its markers are forgotten and its target dropped; a name that
   exists upstream now gets its target created again from the table's definition now (a
   swapped-in table may have other columns than the one the target was made from) at or
   after binlog position D; one that exists no more gets a marker "read again, empty" at the
   position taken before the upstream's tables were listed (``record_gone``).
5. each existing name is copied as one chunk in a consistent snapshot whose binlog position
   S its marker records, in the same transaction as its rows (small_tables.copy_specs, with
   ``snapshot``; snapshot_read.py). A statement naming one of the tables between D and the
   last S (renames.ddl_between) may have changed a definition the copy was read against: the
   round counts as not done and the names are read again in the next. Only then are the state
   store's chunk records of the tables replaced by one chunk each. A rerun of ``finish`` finds
   the same harm in those records (the load's, or the re-read's, made after the statement) and
   does it all again: a kill at any step converges.
6. scan again from where the last scan ended: a statement since then that harmed a table, or
   that names both tables read again after it and tables that were not (it would move a table
   standing at its position onto one the sync replays it over), repeats 2-5 (at most
   ``ROUNDS`` times, then FULL_LOAD_RENAMED).

The sync's catch-up then skips, for each such name, the row changes of transactions ending at
or before its S (a piece of a large transaction: a position inside it) and the table DDL
before S that changes only such tables (keyless_ledger.py ``reread_gate`` /
``reread_covers``): the table already stands as of S, definition included (5). Changes after
S replay in safe mode as usual. The positions are downstream markers, kept until a new full
phase, whatever clears the keyless handoff.

Tables that cannot be read at a position (a MySQL upstream, MyISAM / Aria, an XA transaction
prepared across the read, missing privileges: snapshot_read.py), not as text (the Spark JDBC
path's types: FLOAT/DOUBLE, spatial), or without LOAD DATA LOCAL downstream are refused the
same way. Limits: each table is one LOAD DATA in one downstream transaction (a very large
table on TiDB may exceed its transaction size limit: the rerun fails the same way, and the way
out is the new full phase); a target the user made is made again from the upstream's
definition.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter

from dm_core import faults
from dm_core.db import connect, master_position, qt
from dm_core.errors import ErrorCode
from dm_core.full import chunk_writer, renames, small_tables
from dm_core.full.extract import partition_id_columns
from dm_core.full.load_data import load_data_allowed
from dm_core.full.snapshot_read import transactional
from dm_core.full.discover import discover
from dm_core.full.loader import binlog_end
from dm_core.position import Position
from dm_core.sources import replica_server_id, source_endpoint, target_endpoint

log = logging.getLogger("shardflow.full")

ROUNDS = 3


def settle(task, store, source_id: str) -> str | None:
    """Steps 1-6 for one source: None when it may hand over to the sync, else why not."""
    st = store.source_state(task.name, source_id)
    if not st.get("low_file"):
        return None
    ep = source_endpoint(store, source_id)
    allowed = task.rules_for(source_id).block_allow.allow_table
    start = Position(st["low_file"], int(st["low_pos"]))
    # Only what this run read again counts as done: a run that died left a component half read
    # (its markers say nothing of the tables it had not reached), and its harmed tables keep
    # chunk records from the load until every table of it is read again.
    reread_at: dict = {}
    seen: list[renames.Moved] = []
    server_id = replica_server_id(task.name, source_id)
    ignore = None
    if task.online_ddl:   # a tool's cut-over swaps its copy in: the sync makes it the real table's ALTER
        from dm_core.sync.online_ddl import REAL, kinds_of

        kinds = kinds_of(task)
        ignore = lambda names: any(kinds.kind(t) != REAL for _, t in names)   # noqa: E731
    again: set = set()   # names whose definition changed while they were read again: once more
    said = ""
    for n in range(ROUNDS + 1):   # each reading again is checked by one more scan
        t0 = time.monotonic()
        moved, start = renames.scan(ep, start, server_id=server_id, selected=allowed, ignore=ignore)
        seen += moved
        hits = renames.harmful(moved, store.chunk_read_bys(task.name, source_id), reread_at) if moved else []
        log.info("source %s: %d statement(s) renaming selected tables since the last look, %d of them while the load "
                 "read a table they moved (binlog read in %.1fs)", source_id, len(moved), len(hits),
                 time.monotonic() - t0)
        if not hits and not again:
            return None
        said = renames.refusal(task.name, source_id, hits) if hits else said
        if n == ROUNDS:
            break
        names = {n for n in renames.component(seen, {t for _, ts in hits for t in ts} | again) if allowed(*n)}
        log.warning("%s\nreading again at a consistent snapshot: %s", said,
                    ", ".join(f"`{s}`.`{t}`" for s, t in sorted(names)))
        why, again = _read_again(task, store, source_id, ep, names, reread_at)
        if why:
            return f"{said}\n{why}"
    return (f"{said}\nthe tables were renamed or altered again while they were read again, {ROUNDS} times; start "
            "the full phase over once that has stopped")


def _targets_shared(task, store, sid, now: dict, routed_of: dict) -> list[str]:
    """The names whose target other upstream tables of the task (any source) also route to;
    ``now``: source ``sid``'s tables as just listed."""
    count: Counter = Counter()
    for inst in task.mysql_instances:
        if inst.source_id == sid:
            tables = now.values()
        else:
            conn = connect(source_endpoint(store, inst.source_id))
            try:
                tables = discover(conn, inst.source_id, task.rules_for(inst.source_id))
            finally:
                conn.close()
        for t in tables:
            count[t.target_schema.lower(), t.target_table.lower()] += 1
    for n, tgt in routed_of.items():
        if n not in now:   # a name gone upstream still has its target
            count[tgt] += 1
    return [f"`{s}`.`{t}`" for (s, t), tgt in sorted(routed_of.items()) if count[tgt] > 1]


def _read_again(task, store, sid, ep, names: set, reread_at: dict) -> tuple[str | None, set]:
    """Steps 3-5 for ``names`` of source ``sid``; records each name's position in ``reread_at``.
    Returns (why it cannot be done, or None; the names to read once more because a statement
    named one of them between its target's definition and its snapshot)."""
    from dm_core.full.target_schema import ensure_targets

    rules = task.rules_for(sid)
    up = connect(ep)
    try:
        # before the listing: a name created after it is not "gone" from this position on
        gone_at = master_position(up)
        now = {(t.schema, t.table): t for t in discover(up, sid, rules)}
    finally:
        up.close()
    present = [now[n] for n in sorted(names) if n in now]
    gone = sorted(n for n in names if n not in now)
    routed_of = {n: tuple(x.lower() for x in rules.router.route(*n)) for n in names}
    shared = _targets_shared(task, store, sid, now, routed_of)
    if shared:
        return (f"{', '.join(shared)} load into targets other tables are merged into, so they cannot be read again "
                "alone"), set()
    no_snapshot = [f"`{t.schema}`.`{t.table}` ({t.engine or 'engine unknown'})" for t in present
                   if not transactional(t.engine)]
    if no_snapshot:
        return f"no consistent snapshot can be read of {', '.join(no_snapshot)}", set()
    target_ep = target_endpoint(task, load=True)
    if not load_data_allowed(target_ep)[0]:
        return ("the downstream refuses LOAD DATA LOCAL INFILE (local_infile is OFF), which reading tables again "
                "needs: SET GLOBAL local_infile = ON downstream, then run the full DAG's finish again"), set()
    meta = task.meta_schema
    down = connect(target_ep, downstream=True)
    up = connect(ep)
    try:
        chunk_writer.ensure_meta(down, meta)
        chunk_writer.forget_tables(down, meta, task.name, sid, [f"{s}.{t}" for s, t in names])
        with down.cursor() as cur:   # a swapped-in table may differ from the one the target was made from
            for s, t in sorted(names):
                cur.execute(f"DROP TABLE IF EXISTS {qt(*rules.router.route(s, t))}")
        defined_at = Position(*master_position(up)[:2])   # the definitions read below are at least this new
        ensure_targets(down, [(up, st) for st in present], lambda st: partition_id_columns(task, st),
                       routes=lambda st: rules.router.route)
        faults.hit("full.reread.after_empty")
        if gone:
            f, p = gone_at[:2]
            for s, t in gone:
                chunk_writer.record_gone(down, meta, task.name, sid, f"{s}.{t}", f, p)
                reread_at[s, t] = Position(f, p)
                log.info("source %s: `%s`.`%s` was renamed away during the load: its target is dropped, its changes "
                         "before %s:%d are skipped", sid, s, t, f, p)
        if not present:
            return None, set()
        verb = chunk_writer.verb(task.instance(sid).loader.on_duplicate_logical)
        todo = [(st, ep, 0, chunk_writer.reread_plan_id(task.name, sid, f"{st.schema}.{st.table}")) for st in present]
        specs, rest = small_tables.specs(task, todo, target_ep, verb=verb, turn_of=lambda schema, table: None)
        if rest:
            return ("these tables cannot be read again as text (a FLOAT/DOUBLE or spatial column, or gone meanwhile): "
                    + ", ".join(f"`{t[0].schema}`.`{t[0].table}`" for t in rest)), set()
        t0 = time.monotonic()
        results = list(small_tables.copy_specs(target_ep)([dataclasses.replace(s, snapshot=True) for s in specs]))
        failed = [f"{r['name']}: {r['error']}" for r in results if r["error"]]
        if failed:
            raise ErrorCode.FULL_LOAD_FAILED.error(
                "reading tables again after renames failed:\n  " + "\n  ".join(failed),
                workaround="Run the full DAG's finish task again (clear it in the Airflow UI): it reads these tables "
                           "again from the start; everything else stays loaded.")
        at = chunk_writer.rereads_of(down, meta, task.name, sid)
        unplaced = [f"`{st.schema}`.`{st.table}`" for st in present if f"{st.schema}.{st.table}" not in at]
        if unplaced:
            return (f"no binlog position could be read with {', '.join(unplaced)} (a MySQL upstream, MyISAM / Aria, an "
                    "XA transaction prepared across the read, or no privilege for XA RECOVER / SHOW BINLOG EVENTS)"), set()
        last = max((Position(*at[f"{st.schema}.{st.table}"]) for st in present), key=Position.key)
        changed = renames.ddl_between(ep, defined_at, last, {(st.schema, st.table) for st in present},
                                      server_id=replica_server_id(task.name, sid))
        if changed:   # a target's definition may lack what its snapshot's rows have: not recorded as done
            log.warning("source %s: a statement named tables while they were read again (%s); once more",
                        sid, changed[0][:300])
            return None, {(st.schema, st.table) for st in present}
        by = binlog_end(task, ep)
        rows = {r["name"]: r["rows"] for r in results}
        for st in present:
            # every chunk of the load's plan stays done (a rerun of the load must not add its rows
            # again): chunk 0 holds the copy's rows
            ids = store.done_chunks(task.name, sid, st.schema, st.table) | {0}
            store.forget_chunks(task.name, sid, st.schema, st.table)
            for c in sorted(ids):
                store.mark_chunk_done(task.name, sid, st.schema, st.table, c, rows.get(st.name, 0) if c == 0 else 0,
                                      read_by=by)
            reread_at[st.schema, st.table] = Position(*at[f"{st.schema}.{st.table}"])
        log.info("source %s: %d table(s) read again in %.1fs (%d rows), each at its own binlog position", sid,
                 len(present), time.monotonic() - t0, sum(rows.values()))
        return None, set()
    finally:
        up.close()
        down.close()
