"""One bounded sync window of one source: the DM syncer unit, run once per sensor poke.

Protocol of a window (every step survives the process dying right after it), one method each:
1. ``_open``: read the source's state. Stopped or paused task or source, or a run of an earlier
   start (dm_core/state/lifecycle.py: gate) → do nothing. A source paused on an error waits
   for `dmctl binlog skip|replace` or `dmctl resume-task`. Then [start, until): start = the
   checkpoint (checkpoint.py), until = the upstream's write position now.
2. ``_take``, per whole transaction read from the binlog (dm_core/binlog): rows go through the
   row path (row_path.py) into the pending batch, sent every `syncers.batch` x workers rows to
   the apply queue (apply_queue.py). Before the window's first batch goes downstream, the
   safe-mode exit point is raised to the window's end (one write per window). Batches commit
   downstream in order; the checkpoint follows them, every `checkpoint-flush-interval`
   seconds and always at a DDL and at the window's end. A crash anywhere leaves checkpoint <=
   applied <= exit point, so the next window replays in safe mode up to the exit point.
3. ``_take_ddl``: a DDL flushes everything before it, then runs alone, then the checkpoint
   moves past it. A DDL on a sharded target goes through shard DDL coordination
   (shard_sync.py): it may stop the window before the DDL (the lock waits for other shards)
   or move the checkpoint back (pessimistic mode replays the rows it held back).
4. ``_end``: the last batch and the checkpoint, the exit point back down; ``_report``: what
   the window did (rows, lag), for the session and the UI.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass

from dm_core import faults
from dm_core.classify import ddl_error
from dm_core.db import connect, connect_native, database_errors, master_position, qi, server_identity
from dm_core.errors import ErrorCode, ShardflowError, Terminal
from dm_core.metrics import observe
from dm_core.position import Position
from dm_core.secrets.redact import redact_sql
from dm_core.sources import foreign_key_checks, replica_server_id, source_endpoint, source_rules, target_endpoint
from dm_core.state import lifecycle
from dm_core.ddl.collation import (collation_name, database_defaults, names_charset, with_database_collation,
                                  with_table_defaults)
from dm_core.ddl.kind import foreign_key_clause
from dm_core.ddl.parsed import parse_ddl
from dm_core.ddl.text import default_reading, tokenize
from dm_core.shardddl.ddl_norm import combine, normalize
from dm_core.ddl import replay as ddl_replay
from dm_core.ddl.upstream_session import event_session, mode_names, upstream_time_zone, without_lexical
from dm_core.schema_tracker.tracker import SchemaTracker
from dm_core.sync import isolate, safe_mode, statements
from dm_core.sync.ddl import TABLE_DDL, route_ddl
from dm_core.sync.online_ddl import OnlineDDL
from dm_core.sync.apply_queue import ApplyQueue, Batch
from dm_core.sync import operator_step
from dm_core.sync.handle_error import PendingOps, parse_binlog_pos
from dm_core.sync.keyless_ledger import KeylessLedger, empties
from dm_core.sync.checkpoint import SourcePositions, lag_seconds
from dm_core.sync.row_path import RowPath
from dm_core.sync.schema_overlay import FilterEvents, SchemaOverlays
from dm_core.sync.gc_pause import rare_young_collections
from dm_core.sync.window_result import WindowResult
from dm_core.sync.logged_statements import LoggedStatements
from dm_core.sync.shard_sync import GO, REWIND, ShardStep, ShardSync
from dm_core.sync.workers import WorkerPool
from dm_core.binlog import BinlogWindow
from dm_core.binlog.txn import Txn
from dm_core.target import TargetCatalog

log = logging.getLogger("shardflow.sync")

# A window ends by time (``budget_seconds``: the sensor's 10 s) or at the upstream's position; the
# event count only bounds it where a caller asks (tests). Each end drains the apply queue and
# each open reconnects, which cost about 0.3 s of a catch-up's wall time per window
# (docs/benchmarks.md, "incremental").
WINDOW_EVENTS = 5_000_000
# How often a running window looks for a pause or stop (dmctl pause-task / stop-task), which
# would otherwise wait for the window's end.
LIFECYCLE_POLL_SECONDS = 2.0

@dataclass
class _Window:
    """What one window carries between its stages."""

    st: dict                       # the source's state row when the window began
    res: WindowResult
    until: Position
    binlog: BinlogWindow
    dconn: object
    applier: ApplyQueue
    closers: list
    ops: PendingOps | None = None  # `dmctl binlog skip|replace|inject` operations (handle_error.py)
    held: Position | None = None   # paused there on an error: go on only where an operation says what to do
    resumed_at: Position | None = None  # the event an operation let the source go on from (operator_step)
    pending: Batch | None = None
    start: Position | None = None       # where the window began reading
    checkpoint: Position | None = None  # the last position handed to the applier (durable after barrier())
    # keys the per-transaction checks compare with, dropped once passed (transactions come in order)
    safe_until: tuple | None = None     # the safe-mode exit point's key
    catch_up_until: tuple | None = None  # the full phase's high watermark's key (row_path: lenient rows)
    unrecorded: bool = False       # the first window records its start even if idle
    batch_rows: int = 1            # rows that make a batch: DM's `batch` is per worker, a batch feeds every worker
    poll_at: float = 0.0           # when to look for a pause or stop next (Syncer._told_to_stop)

    def flush(self, upto: Position, force: bool = False) -> None:
        """Hand the pending rows to the applier; ``force``: write the checkpoint too."""
        p = self.pending
        if p.jobs or p.txns or upto.key() > self.checkpoint.key() or self.unrecorded or force:
            self.unrecorded = False
            p.upto, p.force = upto, force
            self.applier.submit(p)
        self.checkpoint = upto
        self.pending = Batch(upto)

    def settle(self, upto: Position) -> None:
        """Everything up to ``upto`` durable downstream, checkpoint written."""
        self.flush(upto, force=True)
        self.applier.barrier()

    def close(self) -> None:
        try:
            self.applier.close()
        finally:
            for c in self.closers:
                c.close()


def _strict_needs(value, what: str):
    """``collation_compatible: strict`` writes out what the upstream had; without it, it cannot."""
    if value is None:
        raise ErrorCode.DDL_UNSUPPORTED.error(f"collation_compatible strict: the upstream has no {what} to write out")
    return value


class Syncer:
    def __init__(self, task, source_id: str, store, *, budget_events: int = WINDOW_EVENTS, budget_seconds: float = 30.0,
                 generation: int | None = None, clock=time.monotonic):
        self.task = task
        self.generation = generation  # the start (dm_core/state/lifecycle.py) the calling DAG run belongs to
        self.source_id = source_id
        self.store = store
        self.rules = source_rules(task, store, source_id)  # + the source file's `filters`
        self.syncer_cfg = task.instance(source_id).syncer
        self.budget_events = budget_events
        self.budget_seconds = budget_seconds
        self.positions = SourcePositions(task, source_id, store)
        self.rows = RowPath(self.rules, source_id)   # filter, route, map: RowChange -> RowJob
        self.ledger = KeylessLedger(task.name, source_id, task.meta_schema,  # exact replay of keyless tables
                                    lambda: connect_native(target_endpoint(task)))
        self._upstream_zone: str | None = None
        self._up = None                               # the upstream endpoint, from the window's start
        self._modes: dict[int, str] = {}              # sql_mode bitmap -> the upstream's names
        self.logged_statements = LoggedStatements(source_id, self.rules.block_allow, self._upstream)
        self._last_ts = None
        self.shard = ShardSync(task, source_id, store)
        self.online = OnlineDDL(task, source_id, store, self.rules) if task.online_ddl else None
        self._clock = clock
        self._started = False                         # safe_mode.start_phase ran for this start
        self._timed_safe_until: float | None = None   # safe-mode-duration's end, on ``clock``
        # the event type a DDL is filtered by, and DDLs the downstream did not get (schema_overlay.py)
        self.events = FilterEvents(SchemaOverlays(task.name, source_id, store), self.rules.router.route)
        # the upstream tables' columns by binlog position, for rows that do not name theirs (dm_core/schema_tracker)
        self.tracker = SchemaTracker(task.name, source_id, store)
        # the downstream session checks foreign keys: parents and children in order (workers.py, target.py)
        self._fk_checks = foreign_key_checks(task.target_database.session)
        self.observed = observe.Observations()   # for the metrics: added to the source's row by its next write

    # ---- entry points -----------------------------------------------------------------
    def run_until(self, deadline: float, *, max_windows: int | None = None, on_window=None,
                  clock=time.monotonic) -> WindowResult:
        """Windows back to back until the source caught up, paused, waits on a shard DDL lock
        or is no longer running, ``max_windows`` ran, or ``deadline`` (on ``clock``) passed;
        the last window's result. ``on_window(result)`` sees every window. The sensor's
        session, the tests and the bench all loop so."""
        n = 0
        while True:
            res = self.run_window()
            n += 1
            if on_window is not None:
                on_window(res)
            if (res.caught_up or res.paused or res.waiting or res.state != "sync" or clock() >= deadline
                    or (max_windows is not None and n >= max_windows)):
                return res

    def run_window(self) -> WindowResult:
        with rare_young_collections():
            return self._run_window()

    def _run_window(self) -> WindowResult:
        """The window's stages, in order (each a method below)."""
        t0 = time.monotonic()
        w = self._open()                       # gate, operator command, positions, connections
        if isinstance(w, WindowResult):
            return w
        try:
            for txn in w.binlog:               # whole transactions in [checkpoint, until)
                if not self._take(w, txn):     # DDL, operator step, or rows into the batch
                    break
                if not txn.more and self._told_to_stop(w):   # it ends as at its budget
                    break
            self._end(w)                       # the last batch, the checkpoint, the exit point
        except ShardflowError as e:
            if not isinstance(e, Terminal):
                raise                          # retried by the session from the checkpoint
            e = self.shard.lost_replay(e, w.checkpoint)
            w.applier.take_error()  # the pause position must be committed, not just submitted
            self._pause(None, e, w.res, at=e.position or w.checkpoint, exact=e.position is not None)
        finally:
            w.close()
        return self._report(w, t0)

    def _told_to_stop(self, w: _Window) -> bool:
        """A pause or stop asked for while the window runs: it ends after the transaction just
        taken, and its next open says why (``lifecycle.gate``). Looked at every
        LIFECYCLE_POLL_SECONDS; a store that does not answer leaves that to the next open."""
        now = time.monotonic()
        if now < w.poll_at:
            return False
        w.poll_at = now + LIFECYCLE_POLL_SECONDS
        try:
            st = self.store.source_state(self.task.name, self.source_id)
            info = self.store.task_info(self.task.name)
        except database_errors():
            return False
        return lifecycle.gate(info, st, self.generation).state != lifecycle.RUNNING

    # ---- stage 1: open ----------------------------------------------------------------
    def _open(self) -> "_Window | WindowResult":
        """Gate the window on the task's lifecycle and a paused source's operator command,
        then fix [start, until) and the safe-mode exit point and open the connections."""
        try:
            faults.hit("sync.load_checkpoint")
            st = self.store.source_state(self.task.name, self.source_id)
            info = self.store.task_info(self.task.name)
        except database_errors() as e:   # retried by the session, then the source pauses naming it
            raise ErrorCode.STATE_STORE_UNREACHABLE.error(
                f"source {self.source_id}: cannot read its checkpoint and stage from the state store: {e}") from e
        gate = lifecycle.gate(info, st, self.generation) if info is not None else lifecycle.Gate(lifecycle.RUNNING)
        if gate.state != lifecycle.RUNNING:  # a stop or a pause wins over a pause on an error
            self._started = False            # what runs next is a new start (safe_mode.py)
            return WindowResult(self.source_id, "-", "-", "-", state=gate.state)
        recorded = Position(st["binlog_file"], st["binlog_pos"]) if st["binlog_file"] else None
        ops = PendingOps.load(self.store, self.task.name, self.source_id, recorded)
        held = None
        if st["stage"] == "paused" and st["error"]:
            self._started = False
            held = parse_binlog_pos(st["error_pos"]) if st["error_pos"] else None
            if held is None or not any(op.pos.key() >= held.key() for op in ops.ops):
                return WindowResult(self.source_id, "-", "-", "-", paused=st["error"], state="paused")
            if st.get("error_code") == ErrorCode.HELD_ROWS_PURGED.number:
                given_up = self._give_up_replay(st, ops.at(held))
                if given_up is None:
                    return WindowResult(self.source_id, "-", "-", "-", paused=st["error"], state="paused")
                st, held = given_up, None
                recorded = Position(st["binlog_file"], st["binlog_pos"]) if st["binlog_file"] else None
                ops = PendingOps.load(self.store, self.task.name, self.source_id, recorded)

        up = self._up = self.rows.upstream = self.tracker.upstream = source_endpoint(self.store, self.source_id)
        uconn = connect(up)
        try:
            until = Position(*master_position(uconn))
            self._upstream_zone = upstream_time_zone(uconn)   # a DDL's clock when its event names no zone
            server = server_identity(uconn)
        finally:
            uconn.close()
        try:
            if st.get("start_time"):   # start-task --start-time: the checkpoint moves to that time first
                st = self.positions.start_at_time(st, up, server)
            start = self.positions.start(st, until, up, server)
            rewind = self.shard.load(st, start)   # refuses state the task file no longer fits (state_fit.py)
        except Terminal as e:   # no place to start from on this server (checkpoint.py says why)
            return self._refuse_start(e, WindowResult(self.source_id, "-", "-", str(until)))
        if rewind is not None:
            # tables this source held back are released (another source ran the change last):
            # read again from the first of them; the state saying so is durable first
            self.shard.persist()
            if rewind.key() < start.key():
                self.positions.rewind(rewind)
                faults.hit("shardddl.sync.after_rewind_checkpoint")
                start = rewind
        safe_exit = self.positions.load_exit_point(st)
        self.ledger.load(st, self.positions.server, self.store)
        faults.hit("sync.after_open")
        res = WindowResult(self.source_id, str(start), str(start), str(until))
        res.held = self.shard.held_notes()
        self.tracker.refresh()   # what `dmctl binlog-schema` wrote while the source was paused
        if not self._started:  # DM's safe-mode initialization phase, once per start
            try:
                seconds = safe_mode.start_phase(self.syncer_cfg, self.source_id, start, safe_exit)
            except Terminal as e:
                return self._refuse_start(e, res)
            self._timed_safe_until = self._clock() + seconds if seconds > 0 else None
            self._started = True
        dconn = connect(target_endpoint(self.task), autocommit=True, downstream=True)
        try:
            self.rows.use_catalog(TargetCatalog(dconn, foreign_keys=self._fk_checks))
            binlog = BinlogWindow(up, start, until, server_id=replica_server_id(self.task.name, self.source_id),
                                  budget_events=self.budget_events, budget_seconds=self.budget_seconds,
                                  wanted=self.rules.block_allow.allow_table, tracker=self.tracker)
            applier, closers = self._start_applier(st, res, until)
        except BaseException:
            dconn.close()   # the window never started: nothing else to undo
            raise
        high = Position(st["high_file"], int(st["high_pos"])) if st.get("high_file") else None
        return _Window(st, res, until, binlog, dconn, applier, [dconn, *closers],
                       ops=ops, held=held, pending=Batch(start), start=start, checkpoint=start,
                       unrecorded=not st["binlog_file"], safe_until=safe_exit.key() if safe_exit is not None else None,
                       catch_up_until=high.key() if high is not None else None,
                       poll_at=time.monotonic() + LIFECYCLE_POLL_SECONDS,
                       batch_rows=max(1, int(self.syncer_cfg.batch)) * max(1, int(self.syncer_cfg.worker_count)))

    def _give_up_replay(self, st: dict, op) -> dict | None:
        """`dmctl binlog skip` on HELD_ROWS_PURGED: the released tables' rows are gone from the
        upstream's binlog, so their replay is given up and the source goes on from where its
        first pass had read. One write clears the replay, moves the checkpoint and ends the
        pause, so a kill leaves either the pause or the source going on. None: not a skip."""
        if op is None or op.op != "skip":
            return None
        tables, horizon, groups = self.shard.give_up_replay(st)
        fields = dict(stage="sync", error=None, error_code=None, error_stmt=None, error_pos=None,
                      **({"shard_groups": groups} if groups is not None else {}))
        if horizon is not None:
            fields.update(binlog_file=horizon.file, binlog_pos=horizon.pos,
                          **({"binlog_gtid": horizon.gtid} if horizon.gtid else {}))
        self.store.update_source_state(self.task.name, self.source_id, **fields)
        log.warning("source %s: the operator's binlog skip gives up replaying %s (their binlog is gone upstream); "
                    "it goes on from %s. Their rows from the held DDL on are missing downstream until a re-sync "
                    "of their target tables", self.source_id,
                    ", ".join(f"`{t[0]}`.`{t[1]}`" for t in tables) or "nothing", horizon)
        return self.store.source_state(self.task.name, self.source_id)

    def _start_applier(self, st: dict, res: WindowResult, until: Position):
        """The background apply thread with its own downstream and state-store connections."""
        from dm_core.state.store import StateStore

        store = StateStore(self.store.dsn, migrate=False)   # self.store's connection migrated it
        cfg = self.syncer_cfg
        pool = WorkerPool(lambda: connect_native(target_endpoint(self.task), multi_statements=True),
                          cfg.worker_count, compact=cfg.compact, multiple_rows=cfg.multiple_rows,
                          foreign_key_checks=self._fk_checks, ledger=self.ledger)
        self._last_ts = None
        interval = float(cfg.checkpoint_flush_interval)
        unsaved = {"rows": 0, "txns": 0, "at": time.monotonic()}

        def before_apply(b: Batch) -> None:
            # Every batch of this window ends at or before `until`: one write covers them all.
            self.positions.raise_exit_point(until if until.key() >= b.upto.key() else b.upto, store)
            self.ledger.persist(store)

        def committed(b: Batch) -> None:
            if b.jobs:
                faults.hit("sync.after_batch_apply")
            self.observed.committed(b.jobs, b.last_ts)
            unsaved["rows"] += b.rows
            unsaved["txns"] += b.txns
            res.rows += b.rows
            res.txns += b.txns
            self._last_ts = b.last_ts or self._last_ts
            now = time.monotonic()
            if b.force or now - unsaved["at"] >= interval:
                self.positions.write(b.upto, unsaved["rows"], unsaved["txns"], self._last_ts, store,
                                     added=self.observed.take())
                unsaved.update(rows=0, txns=0, at=now)
            if b.force:  # the reader waits on it (settle): nothing past it was sent
                self.positions.settle_exit_point(st, b.upto, store)
                self.ledger.prune(b.upto)

        def apply(b: Batch) -> None:
            try:
                t = time.monotonic()
                pool.apply(b.jobs)
                self.observed.observe("txn", time.monotonic() - t)
            except ShardflowError as e:
                if e.code is not ErrorCode.DML_REJECTED:
                    raise
                if not safe_mode.may_replay(cfg):  # `safe-mode-duration: 0s`: no safe-mode retry (DM pauses)
                    e.position = b.spans[0][0] if b.spans else None
                    raise
                probe = connect(target_endpoint(self.task), autocommit=True, downstream=True)
                try:
                    culprit = isolate.find_culprit(pool.apply, b.jobs, b.spans, isolate.ForeignRows(probe, b.jobs))
                finally:
                    probe.close()
                if culprit is not None:
                    raise culprit from None
                log.warning("source %s: a batch the downstream rejected (%s) went through one transaction at a "
                            "time in safe mode", self.source_id, e.message)

        return ApplyQueue(before_apply=before_apply, apply=apply, committed=committed), [pool, store]

    # ---- stage 2: one transaction -----------------------------------------------------
    def _take(self, w: _Window, txn: Txn) -> bool:
        """One transaction of the window; False ends the window (a pause, a shard DDL wait or
        rewind). Rows go into the pending batch, which is sent every `batch` rows x workers."""
        end_key = txn.end.key() if w.safe_until is not None or w.catch_up_until is not None else None
        if w.safe_until is not None and end_key > w.safe_until:
            w.safe_until = None        # past the exit point: so is every later transaction
        safe = (self.syncer_cfg.safe_mode or w.safe_until is not None
                or (self._timed_safe_until is not None and self._clock() < self._timed_safe_until))
        w.res.safe_mode = w.res.safe_mode or safe
        if not safe and self.ledger.horizon is None:
            self.ledger.begin(txn.start or txn.end)
        if w.catch_up_until is not None and end_key > w.catch_up_until:
            w.catch_up_until = None
        # `dmctl binlog` (operator_step.py); nothing to look up while no operation waits and nothing holds
        op = operator_step.held(self, w, txn) if w.ops or w.held is not None else None
        if op is operator_step.HOLD:
            w.res.paused, w.res.stopped_early = w.st["error"], True
            return False               # still paused: no operation for the event it stopped at
        if txn.ddl is not None:
            return self._take_ddl(w, txn, safe, op)
        if op is not None and txn.piece and op.op == "inject":
            op = None   # a large transaction's later piece: the injected statements ran before the first
        if op is not None:
            w.settle(txn.start)
            # skip and replace act on the whole transaction: its later pieces are dropped with it
            err = operator_step.on_rows(self, w, txn, op) if not txn.piece else None
            if err is not None:
                self._pause(txn, err, w.res)
                return False
            if op.op != "inject":
                w.pending.txns, w.pending.last_ts = 0 if txn.more else 1, txn.timestamp
                w.settle(txn.end)
                return True
        if txn.undecodable is not None:   # the reader names the table and event; skip drops it whole
            w.settle(txn.start)
            self._pause(txn, txn.undecodable, w.res)
            return False
        partial = txn.partial_images and next(
            (what for s, t, what in txn.partial_images if self.rules.block_allow.allow_table(s, t)), None)
        if partial:  # binlog_row_image was not FULL: the rows are not whole (DM pauses too)
            w.settle(txn.start)
            self._pause(txn, ErrorCode.ROW_IMAGE_PARTIAL.error(
                f"upstream didn't log enough columns in binlog: {partial} (binlog_row_image is not FULL for "
                f"this change)"), w.res)
            return False
        if txn.statements:   # statements a STATEMENT/MIXED session logged among the rows
            stop = self.logged_statements.in_transaction(txn, self._ddl_mode, w.ops.at if w.ops else None,
                                                          lambda stmt, op: self._operator_at(w, txn, stmt, op))
            if stop is not None:
                stmt, err = stop
                w.settle(txn.start)
                self._pause(stmt, err, w.res, error_at=stmt.event_start)
                return False
        try:
            jobs = self.rows.jobs(txn, safe, self._row_gate(txn), lenient=w.catch_up_until is not None,
                                  replay=w.catch_up_until is not None or w.safe_until is not None)
        except Terminal as e:  # the rows before are durable; the pause names this transaction
            w.settle(txn.start)
            e.position = e.position or txn.start
            raise
        if txn.xid is not None:
            self.logged_statements.prepared(txn)
        p = w.pending
        p.spans.append((txn.start, txn.end))
        p.jobs.extend(jobs)
        p.rows += len(txn.rows)
        p.txns += 0 if txn.more else 1   # a large transaction's pieces count once, at the last
        p.last_ts = txn.timestamp or p.last_ts
        if p.rows >= w.batch_rows:
            w.flush(txn.end)
        return True

    def _take_ddl(self, w: _Window, txn: Txn, safe: bool, op=None) -> bool:
        """A DDL runs alone: everything before it durable first, the checkpoint past it after."""
        faults.hit("sync.ddl.before_settle")
        w.settle(txn.start or w.checkpoint)
        self.shard.committed(w.checkpoint)
        ran, t = len(w.res.ddls), time.monotonic()
        try:
            step = (self._handle_ddl(txn, w.dconn, w.res, replay=safe) if op is None
                    else operator_step.on_ddl(self, w, txn, op))
        except ShardflowError as e:
            if not isinstance(e, Terminal):
                raise
            step = e
        if len(w.res.ddls) > ran:   # ran downstream (DM's query_duration_time, finished ddl jobs)
            self.observed.ddl(time.monotonic() - t, len(w.res.ddls) - ran)
        if isinstance(step, ShardStep):
            if step.action == REWIND:
                # durable before the groups say the round is resolved (source_group)
                self.positions.rewind(step.rewind_to)
                faults.hit("shardddl.sync.after_rewind_checkpoint")
                w.checkpoint = step.rewind_to
                self.shard.committed(w.checkpoint)
                self.shard.persist()
                self.rows.use_catalog(TargetCatalog(w.dconn, foreign_keys=self._fk_checks))
            else:
                w.res.waiting = step.message
            w.res.stopped_early = True
            return False
        if step:
            self._pause(txn, step, w.res)
            return False
        w.pending.txns, w.pending.last_ts = 1, txn.timestamp
        w.settle(txn.end)
        return True

    # ---- stage 3: end -----------------------------------------------------------------
    def _end(self, w: _Window) -> None:
        """The last batch and the checkpoint at the window's end (or kept before the statement
        that paused or stopped it), then the exit point back down to the checkpoint."""
        if not w.res.paused and not w.res.stopped_early:
            pos = w.binlog.position
            w.flush(pos if pos.key() > w.checkpoint.key() else w.checkpoint, force=True)
        w.applier.barrier()
        self.shard.committed(w.checkpoint)
        self.shard.persist()
        if not w.res.stopped_early:  # after a shard DDL rewind, rows past the checkpoint were applied
            self.positions.settle_exit_point(w.st, w.checkpoint)

    def _report(self, w: _Window, t0: float) -> WindowResult:
        res = w.res
        res.end = str(w.checkpoint)
        res.seconds = time.monotonic() - t0
        res.lag_seconds = lag_seconds(w.checkpoint, w.until, self._last_ts)
        rate = res.rows / res.seconds if res.seconds > 0 else None
        self.observed.observe("lag", res.lag_seconds)
        self.store.update_source_state(self.task.name, self.source_id, lag_seconds=res.lag_seconds,
                                       rows_per_second=rate, added=self.observed.take(),
                                       **observe.window_end(w.start, w.checkpoint, w.until, res.seconds, self._upstream))
        if res.paused:
            res.state = "paused"
        return res

    def _row_gate(self, txn: Txn):
        """Rows of tables a shard DDL rewind already applied are skipped (shard_sync.py), and those
        of tables the full phase read again later (keyless_ledger.py ``reread_gate``)."""
        again = self.ledger.reread_gate(txn.inside or txn.end) if self.ledger.reread else None   # inside: a piece
        if not self.shard.row_gate(txn.start):
            return again
        return lambda table: self.shard.skip_row(table, txn.start) or (again is not None and again(table))

    def _operator_at(self, w: _Window, txn: Txn, stmt: Txn, op) -> ShardflowError | None:
        w.settle(txn.start)   # what the operator runs goes after the rows before this transaction
        return operator_step.on_statement(self, w, stmt, op)

    # ---- DDL --------------------------------------------------------------------------
    def _handle_ddl(self, txn: Txn, dconn, res: WindowResult, *,
                    replay: bool = False) -> ShardflowError | ShardStep | None:
        """``replay``: the DDL lies in the safe-mode range, where the downstream may already
        have it (dm_core/ddl/replay.py)."""
        sql = txn.ddl
        handled, err = self.logged_statements.on_ddl(txn, self._ddl_mode(txn))
        if handled:   # about the session's temporary tables: nothing downstream, or a pause
            return err
        if self.online is not None:
            step = self.online.handle(sql, txn.ddl_schema, txn.start)
            if step is not None:  # a gh-ost / pt-osc statement: what it means for the real tables
                for note in step.notes:
                    log.info("source %s: online DDL at %s: %s", self.source_id, txn.start, note)
                for stmt in step.sqls:
                    out = self._handle_statement(txn, stmt, dconn, res, replay=True)
                    if out is not None:
                        return out
                return None
        return self._handle_statement(txn, sql, dconn, res, replay=replay)

    def _handle_statement(self, txn: Txn, sql: str, dconn, res: WindowResult, *,
                          replay: bool) -> ShardflowError | ShardStep | None:
        mode = self._ddl_mode(txn)   # how the text reads (ANSI_QUOTES ...) and what it means
        said = statements.kind_of(sql, mode)
        if said is not None:
            return self.logged_statements.row_statement(txn, sql, said, mode)
        if parse_ddl(sql, txn.ddl_schema, mode).kind not in TABLE_DDL:
            # GRANT, CREATE USER, triggers, views, OPTIMIZE/ANALYZE/REPAIR…: not table data; DM skips them too
            log.info("source %s: skipping non-table statement at %s: %.200s", self.source_id, txn.start, redact_sql(sql))
            return None
        ba = self.rules.block_allow
        routed = route_ddl(sql, txn.ddl_schema, self.rules.router.route, allow=ba.allow_table, mode=mode)
        if routed.kind in ("create database", "drop database", "alter database"):
            return self._database_ddl(txn, sql, routed, mode, dconn, res)
        if self.ledger.reread_covers(routed.kind, routed.tables, txn.end, ba.allow_table):
            log.info("source %s: %s at %s: its tables were read again after it (full phase)", self.source_id,
                     routed.kind, txn.start)
            return None
        if routed.kind == "create table":   # its rows are all the sync's from here (keyless_ledger.py)
            self.ledger.created(txn.start or txn.end, [t for t in routed.tables[:1] if ba.allow_table(*t)])
        refused = self._refused_foreign_key(routed, sql, mode)
        if refused is not None:
            return refused
        sharded = self._sharded_table(routed.tables)
        if sharded is not None:  # coordinated, or refused with the shard DDL rules' message
            stop = self._filter_ddl(dconn, routed.kind, sql, mode, *sharded)
            if stop is not None:
                return stop or None
            return self._shard_ddl(txn, sql, dconn, res, replay)
        names = routed.tables or ([(txn.ddl_schema, "")] if txn.ddl_schema else [])
        if not any(ba.allow_table(s, t) if t else ba.allow_schema(s) for s, t in names):
            return None  # about tables this task does not replicate
        if routed.error:
            return ErrorCode.DDL_UNSUPPORTED.error(f"unsupported DDL ({routed.error}): {sql}")
        s0, t0 = next((s, t) for s, t in routed.tables if ba.allow_table(s, t))
        stop = self._filter_ddl(dconn, routed.kind, sql, mode, s0, t0)
        if stop is not None:
            return stop or None
        if routed.sql is None:
            log.info("source %s: nothing to run downstream for %s (%s)", self.source_id, sql, routed.note)
            return None
        if self.task.shard_mode and routed.kind in ("drop table", "truncate table"):
            # DM: in a sharding task every target has its sharding group, a one-table group too,
            # whose DROP TABLE and TRUNCATE TABLE are skipped (what shard_sync does for larger ones)
            log.info("source %s: %s skipped in shard mode, as DM does: %s", self.source_id, routed.kind, sql)
            res.ddls.append(f"skipped in shard mode: {sql}")
            return None
        if self.shard.skip_plain_ddl(txn.start):
            return None  # ran in the pass before a shard DDL rewind
        if empties(routed.kind, sql):
            self.ledger.emptied(txn.end, [t for t in routed.tables if ba.allow_table(*t)])   # keyless_ledger.py
        stmt = routed.sql
        if routed.kind == "create table" and self.task.collation_compatible == "strict" and not names_charset(sql, mode):
            with self._upstream() as conn:
                defaults = _strict_needs(database_defaults(conn, s0), f"database {s0}")
            stmt = with_table_defaults(stmt, *defaults, mode)   # ddl/collation.py
        # A DDL is not idempotent: the exit point covers it before it runs, so a restart after it ran
        # and before the checkpoint passed it replays it (ddl/replay.py), not run it twice
        self.positions.raise_exit_point(txn.end, self.store)
        try:
            faults.hit("sync.ddl.before_downstream")
            with event_session(dconn, txn.timestamp, txn.time_zone, self._upstream_zone, mode):
                done = ddl_replay.run(dconn, stmt, routed.kind, replay=replay)
        except Exception as e:
            err = ddl_error(e, f"`{stmt}`")
            if not isinstance(err, Terminal):
                raise err from None  # retried by the source (session.py)
            return err
        faults.hit("sync.ddl.after_downstream")
        self.events.executed(default_reading(sql, mode), s0, t0, routed.kind)
        for t in routed.targets:
            self.rows.forget(*t)
        res.ddls.extend(done)
        return None

    def _refused_foreign_key(self, routed, sql: str, mode: str | None):
        """DM refuses a DDL that creates a foreign key while the downstream session checks them
        (target-database.session foreign_key_checks: 1): its rows could then be refused or
        cascade in an order the binlog does not give. None when the DDL may run."""
        if not self._fk_checks or not any(t and self.rules.block_allow.allow_table(s, t) for s, t in routed.tables):
            return None
        what = foreign_key_clause(sql, routed.kind, mode)
        if what is None:
            return None
        return ErrorCode.DDL_UNSUPPORTED.error(
            f"`{what}` statement not supported in foreign_key_checks=1 mode: {redact_sql(sql)}",
            workaround="Create the foreign key downstream yourself and `dmctl binlog skip TASK -s SOURCE`, or set "
                       "foreign_key_checks to 0 in target-database.session and start the task again.")

    def _filter_ddl(self, dconn, kind: str, sql: str, mode: str | None, schema: str, table: str):
        """The binlog event filter on a DDL of ``schema.table``, by the event type DM's syncer gives
        it (an ALTER TABLE's incompatible change: schema_overlay.FilterEvents): None to go on, ""
        when ignored (recorded as a DDL the downstream does not get), else the error to pause with."""
        bf = self.rules.binlog_filter
        text = default_reading(sql, mode)
        event = self.events.event(dconn, kind, text, schema, table) if bf.applies(schema, table) else kind
        action = bf.action(schema, table, event, sql)
        if action == "do":
            return None
        if action == "ignore":
            self.events.skipped(dconn, kind, text, schema, table)
            log.info("source %s: binlog event filter ignores event %s on `%s`.`%s`: %s", self.source_id, event,
                     schema, table, redact_sql(sql))
            return ""
        return ErrorCode.FILTERED_AS_ERROR.error(
            f"event {event} on `{schema}`.`{table}`: the binlog event filter's action is Error for this statement: "
            f"{redact_sql(sql)}")

    def skipped_ddl(self, txn: Txn, dconn) -> None:
        """`dmctl binlog skip` passed DDL ``txn`` by: DM's tracker still reads it (schema_overlay.py)."""
        mode = self._ddl_mode(txn)
        d = parse_ddl(txn.ddl, txn.ddl_schema, mode)
        ba = self.rules.block_allow
        for s, t in d.tables:
            if t and ba.allow_table(s, t):
                self.events.skipped(dconn, d.kind, default_reading(txn.ddl, mode), s, t)
                return

    def _ddl_mode(self, txn: Txn) -> str | None:
        """The sql_mode names of the session a DDL ran in (ddl/upstream_session.py), or None when its
        event does not record one; each bitmap asked of the upstream once."""
        if txn.sql_mode is None:
            return None
        if txn.sql_mode not in self._modes:
            with self._upstream() as conn:
                self._modes[txn.sql_mode] = mode_names(conn, txn.sql_mode)
        return self._modes[txn.sql_mode]

    def _database_ddl(self, txn: Txn, sql: str, routed, mode: str | None, dconn, res: WindowResult):
        """CREATE / ALTER / DROP DATABASE on the routed target database, with the options (CHARACTER
        SET, COLLATE, COMMENT) as the upstream wrote them: a table created later without a charset
        inherits them. A DROP never runs: a merged target is not dropped because one shard was."""
        spans = parse_ddl(sql, txn.ddl_schema, mode).spans
        db = routed.tables[0][0] if routed.tables else txn.ddl_schema   # ALTER DATABASE without a name
        if not db or not self.rules.block_allow.allow_schema(db):
            return None
        action = self.rules.binlog_filter.action(db, "", routed.kind, sql)
        if action == "error":
            return ErrorCode.FILTERED_AS_ERROR.error(
                f"event {routed.kind} on `{db}`.``: the binlog event filter's action is Error for this statement: "
                f"{redact_sql(sql)}")
        if action != "do":
            return None
        tdb, _ = self.rules.router.route(db, "")
        if spans:
            options = sql[spans[0].end:]
        else:   # the options follow ALTER DATABASE|SCHEMA itself
            words = [t for t in tokenize(sql, mode) if t.kind == "word"][:2]
            options = sql[words[-1].end:] if len(words) == 2 else ""
        options = options.strip().rstrip(";").strip()
        stmt = {"create database": f"CREATE DATABASE IF NOT EXISTS {qi(tdb)} {options}".strip(),
                "alter database": f"ALTER DATABASE {qi(tdb)} {options}" if options else None}.get(routed.kind)
        if (routed.kind == "create database" and self.task.collation_compatible == "strict"
                and txn.collation_server and not names_charset(sql, mode)):
            with self._upstream() as conn:
                coll = _strict_needs(collation_name(conn, txn.collation_server), f"collation id {txn.collation_server}")
            stmt = with_database_collation(stmt, coll)
        if stmt:
            with event_session(dconn, txn.timestamp, txn.time_zone, self._upstream_zone, mode):
                with dconn.cursor() as cur:
                    cur.execute(stmt)
            res.ddls.append(stmt)
        return None

    @contextmanager
    def _upstream(self):
        """A short connection to the upstream (a DDL's sql_mode names, collations, database defaults)."""
        conn = connect(self._up)
        try:
            yield conn
        finally:
            conn.close()

    def _sharded_table(self, tables) -> tuple[str, str] | None:
        """The first replicated upstream table of a DDL whose target is a sharding group."""
        if not self.shard.enabled:
            return None
        for s, t in tables or ():
            if t and self.rules.block_allow.allow_table(s, t) and self.shard.is_sharded(self.rules.router.route(s, t)):
                return s, t
        return None

    def _shard_ddl(self, txn: Txn, sqls: str | list[str], dconn, res: WindowResult,
                   replay: bool = False) -> ShardStep | None:
        """One shard DDL: a statement, or an operator's statements taken together (one lock)."""
        # the normaliser reads and re-renders default-mode MySQL: the text rewritten to read so
        # (ddl/text.py), then run under the event's mode less what changes how text reads
        mode = self._ddl_mode(txn) if isinstance(sqls, str) else None
        ns = [normalize(default_reading(sql, mode), txn.ddl_schema, self.rules.router.route, mode=self.task.shard_mode)
              for sql in ([sqls] if isinstance(sqls, str) else sqls)]
        n = combine(ns)
        with event_session(dconn, txn.timestamp, txn.time_zone, self._upstream_zone, without_lexical(mode)):
            step = self.shard.handle(txn, n, dconn, replay=replay)
        res.shard.append(step.message)
        res.ddls.extend(step.executed)
        if step.lock:
            res.locks.append(step.lock)
        if step.executed or step.action == GO:
            # another member may have changed the target (optimistic: its exec, our skip): rows
            # after this DDL are planned against the downstream as it is now
            self.rows.forget(*n.target)
        return None if step.action == GO else step

    def _pause(self, txn: Txn | None, err: ShardflowError, res: WindowResult, at: Position | None = None,
               exact: bool = True, error_at: Position | None = None) -> None:
        """Pause at ``txn`` (or ``at``); ``exact``: the position is the failing event's start, which
        ``error_pos`` names (what `dmctl binlog` acts on). An error raised mid-window without one
        pauses at the checkpoint with no ``error_pos``: an operation there would hit another event.
        ``error_at``: the failing event lies inside the transaction (a statement among its rows):
        the checkpoint stays at the transaction's start, ``error_pos`` names the event."""
        pos = (txn.start if txn is not None else None) or at
        stmt = redact_sql(txn.ddl) if txn is not None and txn.ddl else err.statement
        self.store.update_source_state(
            self.task.name, self.source_id, stage="paused", error=str(err), error_code=err.code.number if err.code else None,
            error_stmt=stmt, error_pos=str(error_at or pos) if pos and exact else None,
            **({"binlog_file": pos.file, "binlog_pos": pos.pos} if pos else {}),
            **({"binlog_gtid": pos.gtid} if pos and pos.gtid else {}),
            **({"binlog_server": self.positions.server} if pos and self.positions.server else {}),
        )
        res.paused = f"{err} (at binlog position {error_at or pos}{'; statement: ' + stmt if stmt else ''})"
        log.error("source %s paused: %s", self.source_id, res.paused)

    def _refuse_start(self, err: ShardflowError, res: WindowResult) -> WindowResult:
        """Pause before reading anything (safe_mode.start_phase said no). No error position:
        `dmctl binlog skip` has no transaction to drop here; resume-task starts again."""
        self.store.update_source_state(self.task.name, self.source_id, stage="paused", error=str(err),
                                       error_code=err.code.number, error_stmt=None, error_pos=None)
        res.paused, res.state = str(err), "paused"
        log.error("source %s paused: %s", self.source_id, res.paused)
        return res
