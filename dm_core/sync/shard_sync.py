"""The syncer's side of shard DDL coordination for one source (one sync window at a time).

The syncer asks this object three things:

* ``skip_row(table, pos)`` for every row event (pessimistic mode skips rows of shards that
  are past a DDL the downstream has not got yet, and rows already applied before a rewind);
* ``handle(txn, n, dconn)`` for a DDL on a sharded target, which answers with a
  ``ShardStep``: ``go`` (the event is dealt with: move past it), ``wait`` (stop the window
  *before* the DDL, the lock is not ready; the next poke reads it again) or ``rewind``
  (the DDL is resolved: move the checkpoint to ``rewind_to`` and end the window, the next
  one replays the skipped rows); errors (inconsistent DDLs, conflicts, unsupported
  statements) are raised and pause the source like any terminal error;
* ``committed(pos)`` whenever everything before ``pos`` is durable downstream, and
  ``persist()`` at the points ``source_group`` names.

Which targets are sharded, and which sources each lock waits for, comes from
``membership`` (the upstreams' tables, asked once per Syncer).

How the syncer calls shard DDL (per source, pessimistic; ``ops = lock_ops.PESSIMISTIC``)
-------------------------------------------------------------------------------------
Window start: ``groups = SourceShardGroups.from_json(saved)`` or, first time,
``SourceShardGroups.build({target: [this source's upstream tables routed there]})``.

For each transaction:

* row of table X: skip it if ``groups.should_skip_dml(X, txn.start)``;
* DDL on a table of no sharding group: as today, but skip it when
  ``groups.should_skip_ddl(txn.start)`` (already run in an earlier pass);
* DDL on a sharded table X: ``n = ddl_norm.normalize(sql, txn.ddl_schema, router.route)``
  (``ShardDDLUnsupported`` → pause as for any unsupported DDL);
  ``ignore`` → skip it (DROP TABLE: ``group.remove_member(X)``, and report if that
  completes a pending round); ``create`` → run ``n.sql`` downstream unless
  ``should_skip_ddl``, ``group.add_member(X)``; ``coordinate`` → flush and barrier, then
  ``out = groups.on_ddl(X, [n.sql], txn.end)`` and persist ``groups.to_json()`` at once:

  - ``recorded`` / ``done``: skip the event, go on;
  - ``report``: ``op = ops.put_info(store, Info(task, source, n.target,
    tuple(group.members), (n.sql,), txn.end), sources=[every source id of the task])``:
      · ``wait``: stop the window here (checkpoint stays at ``txn.start``); the next poke
        reads the DDL again, gets ``report`` again and calls ``put_info`` again
        (idempotent); ``op.conflict`` → pause the source with ``op.error()``;
      · ``exec``: ``executor.run_operation(store, downstream_conn, op, ops)``;
      · ``skip``: ``ops.ack_done(store, task, source, op.lock_id, op.step)`` unless
        ``op.done``;
    then ``replay = groups.on_resolved(n.target)``; move the checkpoint to
    ``replay.rewind_to`` (durable) *before* persisting ``groups.to_json()``; forget cached
    plans/catalog of the target; end the window (the next starts at the rewind point).

After each checkpoint commit: ``groups.committed(pos)`` (persist when not ``idle``).

Optimistic mode (``ops = lock_ops.OPTIMISTIC``): no groups; for a coordinated
DDL on table X: flush and barrier, ``op = ops.put_info(store, optimism.Info(task, source,
n.target, X, (n.sql,), txn.end, tables=<this source's tables of the target>,
schema_before=downstream.read_table_schema(downstream_conn, *n.target)), sources=...)``;
``exec`` → ``run_operation``; ``skip`` → ``ack_done``; ``wait`` → stop the window at the DDL
(``conflict`` → pause with ``op.error()``); when done the checkpoint moves past the DDL.
``hold`` (a rename or conversion the other shards have not run yet) → ``HeldTables.hold``, persist,
go on without the table (optimism/held.py); whenever the lock has released held tables (asked at
the window's start and after each reported DDL) → ``rewind`` to where the first of them was held.
A CREATE TABLE of a new shard is reported the same way (the lock learns its schema).

The coordinator task: ``coordinator.coordinate(task, store)`` each run (``ops.resolve`` with
the sources ``membership`` names per target); ``coordinator.list_locks`` for the UI summary.
dmctl: ``show-ddl-locks`` → ``coordinator.list_locks`` (both modes); ``shard-ddl-lock
unlock LOCK`` → ``coordinator.unlock(store, LOCK, owner=..., force_remove=..., action=...)``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from dm_core import faults
from dm_core.errors import ErrorCode
from dm_core.position import Position
from dm_core.shardddl import executor, state_fit
from dm_core.shardddl.common import EXEC, HOLD, SKIP, WAIT, fmt_tables, lock_id_of
from dm_core.shardddl.ddl_norm import CREATE, IGNORE, NormalizedDDL
from dm_core.shardddl.downstream import read_table_schema
from dm_core.shardddl.lock_ops import ops_for
from dm_core.shardddl.membership import Membership, task_membership
from dm_core.shardddl.optimism.held import HeldTables, Hold, held_line
from dm_core.shardddl.source_group import DONE, RECORDED, REPORT, SourceGroup, SourceShardGroups

log = logging.getLogger("shardflow.sync.shard")

GO, WAITING, REWIND = "go", "wait", "rewind"


@dataclass
class ShardStep:
    action: str                              # go | wait | rewind
    message: str = ""
    rewind_to: Position | None = None
    executed: list[str] = field(default_factory=list)   # statements this source ran downstream
    lock: dict | None = None                 # what was reported (for the sensor's XCom)


class ShardSync:
    def __init__(self, task, source_id: str, store):
        self.task = task
        self.source_id = source_id
        self.store = store
        self.mode = task.shard_mode
        self._membership: Membership | None = None
        self.groups: SourceShardGroups | HeldTables | None = None
        self._saved: str | None = None
        self._idle: bool | None = None  # groups.idle, cached: asked per transaction, changed only here
        self._replay = False  # the DDL being handled lies in the safe-mode range
        self._selected: tuple = (None, {})   # (rules, state_fit.prune's memo of their answers)

    # ---- set-up ---------------------------------------------------------------------------
    @property
    def membership(self) -> Membership:
        if self._membership is None:
            self._membership = task_membership(self.task, self.store)
        return self._membership

    @property
    def enabled(self) -> bool:
        return bool(self.mode)

    def load(self, state: dict, start: Position | None = None) -> Position | None:
        """Restore (or build) this source's first-level groups at the start of a window.
        Optimistic mode: the held tables; returns where to read from instead of ``start`` when
        the lock released some of them meanwhile (another source ran the change last).
        Raises SHARD_DDL_STATE_CHANGED when the saved state holds rows back under a mode or a
        membership the task file no longer has (state_fit.py)."""
        saved = state.get("shard_groups")
        # parsed once: for the checks, then (pessimistic mode, which only reads it there) as the groups
        kept = state_fit.parsed(saved)
        clash = state_fit.source_conflicts(self.task, self.source_id, saved, kept)
        if not clash and saved and state_fit.holds(saved, kept):   # a lock it waits on must be one the task can settle
            from dm_core.shardddl.coordinator import list_locks

            clash = state_fit.lock_conflicts(self.task, list_locks(self.store, self.task.name, active_only=True))
        if clash:
            raise ErrorCode.SHARD_DDL_STATE_CHANGED.error("; ".join(clash) + ". Nothing was skipped or applied.")
        if self.mode == "optimistic":
            self.groups = HeldTables.from_json(saved)
            self._saved = self.groups.to_json() if saved else None
            self._idle = None
            if start is None:
                return None
            released = self._released()
            if released:
                log.info("source %s: lock released %s; replaying them from %s", self.source_id,
                         fmt_tables(released), self.groups.release(released, start))
            # a replay whose rewind did not become durable (killed in between) starts again
            return self.groups.replay_start()
        if self.mode != "pessimistic":
            return None
        if saved:
            groups = kept if isinstance(kept, SourceShardGroups) else SourceShardGroups.from_json(saved)
            self._saved = groups.to_json()
        else:
            groups = SourceShardGroups()
            self._saved = None
        rules = self.task.rules_for(self.source_id)
        if self._selected[0] is not rules:
            self._selected = (rules, {})
        dropped = state_fit.prune(groups, rules, self._selected[1])
        if dropped:   # an idle group must not wait for them in its next round
            log.info("source %s: %s left the task's sharding groups (the task file no longer routes them there)",
                     self.source_id, fmt_tables(dropped))
        for target, tables in self.membership.tables_of(self.source_id).items():
            if not self.membership.sharded(target):
                continue
            if target not in groups.groups:
                groups.groups[target] = SourceGroup(target, tables)
            # A saved group lacks only tables created after it was saved: their CREATE TABLE
            # is still ahead in the binlog and adds them at the version of that moment
            # (added now, at the window's start, they would wait for DDLs they never run).
        self.groups = groups
        self._idle = None
        return None

    def _released(self) -> list[tuple[str, str]]:
        """Held tables the lock no longer holds (the last shard ran the change, or the operator
        unlocked them)."""
        if not isinstance(self.groups, HeldTables) or not self.groups.held:
            return []
        ops = ops_for("optimistic")
        out = []
        for table, h in sorted(self.groups.held.items()):
            op = ops.get_operation(self.store, self.task.name, self.source_id, h.lock_id, table=table)
            if op is None or op.action != HOLD:
                out.append(table)
        return out

    def is_sharded(self, target: tuple[str, str]) -> bool:
        return self.enabled and self.membership.sharded(target)

    def in_round(self, target: tuple[str, str]) -> bool:
        """Pessimistic mode: this source's first-level group of ``target`` has a DDL round open
        (a table of it reported a DDL): rows of its tables are held back until the round ends."""
        if not isinstance(self.groups, SourceShardGroups):
            return False
        g = self.groups.groups.get(tuple(target))
        return g is not None and not g.idle

    # ---- rows -----------------------------------------------------------------------------
    def row_gate(self, pos: Position) -> bool:
        """Whether rows of the transaction starting at ``pos`` need ``skip_row`` at all."""
        g = self.groups
        if g is None or (isinstance(g, SourceShardGroups) and not g.groups):
            return False
        if self._idle is None:
            self._idle = g.idle
        return not self._idle or g.in_replay(pos)

    def skip_row(self, table: tuple[str, str], pos: Position) -> bool:
        return self.groups.should_skip_dml(table, pos)

    def skip_plain_ddl(self, pos: Position) -> bool:
        """A DDL of an unsharded table met again while replaying ran in the first pass."""
        return self.groups is not None and self.groups.should_skip_ddl(pos)

    # ---- durability -------------------------------------------------------------------------
    def committed(self, pos: Position) -> None:
        self._idle = None
        if self.groups is not None:
            self.groups.committed(pos)

    def persist(self) -> None:
        if self.groups is None:
            return
        text = self.groups.to_json()
        if text != self._saved:
            self.store.update_source_state(self.task.name, self.source_id, shard_groups=text)
            self._saved = text

    def lost_replay(self, err, at: Position):
        """``err`` as the source should pause on it: a binlog position lost while replaying
        (the rows of released held tables, optimistic, or a group's skipped rows, pessimistic,
        purged upstream before the lock resolved) is HELD_ROWS_PURGED, naming the tables and
        positioned at ``at`` for `dmctl binlog skip`."""

        g = self.groups
        replaying = g.replaying if isinstance(g, (HeldTables, SourceShardGroups)) else {}
        if getattr(err, "code", None) is not ErrorCode.BINLOG_POSITION_LOST or not replaying or not g.in_replay(at):
            return err
        tables = ", ".join(f"`{t[0]}`.`{t[1]}` (from {p})" for t, p in sorted(replaying.items()))
        targets = sorted({".".join(self._target(t)) for t in replaying})
        new = ErrorCode.HELD_ROWS_PURGED.error(
            f"source {self.source_id} cannot replay the rows it held back of {tables} up to {g.horizon}: {err}",
            workaround=f"Those rows are not downstream. `dmctl binlog skip {self.task.name} -s {self.source_id}` gives "
                       f"the replay up (the source goes on from {g.horizon}); then re-sync {', '.join(targets)}: "
                       f"trigger dm_{self.task.name}_resync with what=tables and tables={targets}. Keep the "
                       "upstream's binlogs longer than a shard DDL lock takes to resolve.")
        new.position = at
        return new

    def _target(self, table) -> tuple[str, str]:
        """The routed (schema, table) of one of this source's upstream tables."""
        return tuple(self.task.rules_for(self.source_id).router.route(*table))

    def give_up_replay(self, state: dict) -> tuple[list, Position | None, str | None]:
        """The operator skipped a replay whose binlog is gone: (tables, where to go on from, the
        groups' state to write with the checkpoint in one write; None: no shard state)."""
        self.load(state)
        if not isinstance(self.groups, (HeldTables, SourceShardGroups)):
            return [], None, None
        tables, horizon = self.groups.give_up_replay()
        if isinstance(self.groups, HeldTables):
            # the lock waits for each table's skip ack, which the replay would have given at the
            # table's DDL: given here, before the state says the replay is over (a kill in between
            # leaves the pause, and the next skip acks again)
            ops = ops_for("optimistic")
            for t in tables:
                lock_id = lock_id_of(self.task.name, self._target(t))
                op = ops.get_operation(self.store, self.task.name, self.source_id, lock_id, table=t)
                if op is not None and op.action == SKIP and not op.done:
                    ops.ack_done(self.store, self.task.name, self.source_id, lock_id, op.step)
        self._saved = self.groups.to_json()
        return tables, horizon, self._saved

    def held_notes(self, now: float | None = None) -> list[str]:
        """Optimistic: the tables this source holds back, for every window's summary while it does."""
        return [held_line(t, h, now) for t, h in self.holds()] if isinstance(self.groups, HeldTables) else []

    def holds(self) -> list[tuple[tuple[str, str], Hold]]:
        """(table, Hold) of every table whose rows this source holds back, in name order:
        optimistic, the held tables; pessimistic, the members past a DDL their group's other
        members have not reached (their rows are skipped until the round resolves)."""
        if isinstance(self.groups, HeldTables):
            return sorted(self.groups.held.items())
        if not isinstance(self.groups, SourceShardGroups):
            return []
        return sorted((t, Hold(lock_id_of(self.task.name, g.target), d.end, d.ts))
                      for g in self.groups.groups.values() for t, d in g.skipping())

    def pending(self) -> list[dict]:
        """This source's pessimistic groups that wait for DDLs (optimistic: ``held_notes``)."""
        if not isinstance(self.groups, SourceShardGroups):
            return []
        out = []
        for g in self.groups.groups.values():
            if not g.idle:
                out.append({"target": list(g.target), "resolved": g.resolved,
                            "waiting_for_tables": [list(t) for t in g.waiting_for()]})
        return out

    # ---- DDL --------------------------------------------------------------------------------
    def handle(self, txn, n: NormalizedDDL, dconn, *, replay: bool = False) -> ShardStep:
        """``replay``: the DDL lies in the source's safe-mode range, where the downstream may
        already have it (executor.run_operation then runs only what is not in effect)."""
        self._idle = None
        self._replay = replay
        table = n.tables[0]
        if self.mode == "optimistic":
            return self._optimistic(txn, n, table, dconn)
        return self._pessimistic(txn, n, table, dconn)

    def _pessimistic(self, txn, n: NormalizedDDL, table, dconn) -> ShardStep:
        groups = self.groups
        g = groups.groups.get(tuple(n.target))
        if g is None:  # first table of this source routed to a target sharded across sources
            g = groups.groups[tuple(n.target)] = SourceGroup(n.target, [])
        if n.action == IGNORE:
            out = g.remove_member(table) if n.kind == "drop table" else None
            self.persist()
            if out is not None and out.action == REPORT:
                return self._report(g, out.ddls, out.position, dconn)
            return ShardStep(GO, f"ignored on a sharded table: {n.reason}")
        if n.action == CREATE:
            ran = []
            if not groups.should_skip_ddl(txn.start):
                with dconn.cursor() as cur:
                    cur.execute(n.sql)
                ran.append(n.sql)
            g.add_member(table)
            self.persist()
            return ShardStep(GO, f"`{table[0]}`.`{table[1]}` joins the sharding group of "
                                 f"`{n.target[0]}`.`{n.target[1]}`", executed=ran)
        if n.kind == "rename table":  # the shard keeps its place in the group under its new name
            g.rename_member(*n.tables)
            table = n.tables[1]
        if table not in g.members:
            g.add_member(table, version=g.resolved)
        ddls = tuple(x.sql for x in n.split())
        out = groups.on_ddl(table, ddls, txn.end, txn.timestamp or None)
        self.persist()  # before the checkpoint moves past the DDL
        faults.hit("shardddl.sync.after_record")
        if out.action == DONE:
            return ShardStep(GO, f"DDL already executed downstream (round {out.round})")
        if out.action == RECORDED:
            return ShardStep(GO, f"DDL of `{table[0]}`.`{table[1]}` recorded (round {out.round}); rows of that "
                                 f"table are held back until {fmt_tables(out.waiting_for)} reach it too")
        return self._report(g, out.ddls, out.position, dconn)

    def _report(self, g: SourceGroup, ddls, position: Position, dconn) -> ShardStep:
        from dm_core.shardddl.pessimism import Info

        ops = ops_for("pessimistic")
        info = Info(self.task.name, self.source_id, g.target, tuple(sorted(g.members)), tuple(ddls), position)
        op = ops.put_info(self.store, info, sources=self.membership.sources_by_target())
        faults.hit("shardddl.sync.after_put_info")
        step = self._finish(op, ops, dconn)
        if step is not None:
            return step
        replay = self.groups.on_resolved(g.target)
        faults.hit("shardddl.sync.after_resolved")
        msg = (f"DDL round {replay.round} of `{g.target[0]}`.`{g.target[1]}` done; replaying rows of "
               f"{fmt_tables(replay.tables)} from {replay.rewind_to}" if replay.tables else
               f"DDL round {replay.round} of `{g.target[0]}`.`{g.target[1]}` done")
        return ShardStep(REWIND, msg, rewind_to=replay.rewind_to,
                         executed=list(op.ddls) if op.action == EXEC and not op.replayed else [],
                         lock={"lock_id": op.lock_id, "ddls": list(ddls), "action": op.action})

    def _optimistic(self, txn, n: NormalizedDDL, table, dconn) -> ShardStep:
        from dm_core.shardddl.optimism import Info

        if n.action == IGNORE:
            if n.kind == "drop table":  # the dropped shards leave their locks (DM's TryRemoveTable)
                for t in n.tables:
                    ops_for("optimistic").remove_member(self.store, self.task.name, self._target(t),
                                                        (self.source_id, t[0], t[1]))
            return ShardStep(GO, f"ignored on a sharded table: {n.reason}")
        if self.groups is not None and self.groups.should_skip_dml(table, txn.start):
            return ShardStep(GO, f"DDL of `{table[0]}`.`{table[1]}` skipped: "
                                 + ("the table is held back" if tuple(table) in self.groups.held
                                    else "it ran before the replay's start"))
        ops = ops_for("optimistic")
        ddls = (n.sql,) if n.action == CREATE else tuple(x.sql for x in n.split())
        mine = tuple(sorted(set(self.membership.tables_of(self.source_id).get(tuple(n.target), [])) | {table}))
        info = Info(self.task.name, self.source_id, tuple(n.target), table, ddls, txn.end, tables=mine,
                    schema_before=read_table_schema(dconn, *n.target), replay=self._replay,
                    strict=bool(self.task.strict_optimistic_shard_mode))
        op = ops.put_info(self.store, info, sources=self.membership.sources_by_target())
        faults.hit("shardddl.sync.after_put_info")
        if op.action == WAIT and not op.conflict and self.groups.replaying:
            own = ops.get_operation(self.store, self.task.name, self.source_id, op.lock_id)
            if own is not None and own.action == EXEC and tuple(own.upstream) != tuple(table):
                # a released table's replay waits for the change this source itself ran last (killed
                # between the statement and its ack, the rewind came first): finish it now, or the
                # source would wait for itself; the later DDL event finds it done
                log.info("source %s: finishing its own op %s of lock %s before the replay goes on",
                         self.source_id, own.step, own.lock_id)
                executor.run_operation(self.store, dconn, own, ops, replay=True)
                op = ops.put_info(self.store, info, sources=self.membership.sources_by_target())
        if op.action == HOLD:
            self.groups.hold(table, op.lock_id, txn.start, since=txn.timestamp or None)
            self._idle = None
            self.persist()   # before the checkpoint moves past the DDL
            log.warning("source %s: `%s`.`%s` held back from %s on lock %s: %s", self.source_id, table[0], table[1],
                        txn.start, op.lock_id, op.message)
            return ShardStep(GO, f"hold on lock {op.lock_id}: `{table[0]}`.`{table[1]}` held back from {txn.start}: "
                                 f"{op.message}",
                             lock={"lock_id": op.lock_id, "ddls": list(ddls), "action": HOLD})
        step = self._finish(op, ops, dconn)
        if step is not None:
            return step
        released = self._released()
        if released:   # this DDL was the last one the held tables waited for
            rewind = self.groups.release(released, txn.end)
            self.persist()   # before the checkpoint moves back (optimism/held.py: restarts)
            return ShardStep(REWIND, f"{op.action} on lock {op.lock_id}; {fmt_tables(released)} released: "
                                     f"replaying from {rewind}", rewind_to=rewind,
                             executed=list(op.ddls) if op.action == EXEC and not op.replayed else [],
                             lock={"lock_id": op.lock_id, "ddls": list(ddls), "action": op.action})
        return ShardStep(GO, f"{op.action} on lock {op.lock_id}: {op.message}".rstrip(": "),
                         executed=list(op.ddls) if op.action == EXEC and not op.replayed else [],
                         lock={"lock_id": op.lock_id, "ddls": list(ddls), "action": op.action})

    def _finish(self, op, ops, dconn) -> ShardStep | None:
        """Carry out the lock's answer; a ShardStep when the window must stop, else None."""
        if op.action == WAIT:
            if op.conflict:
                raise op.error()
            return ShardStep(WAITING, f"lock {op.lock_id}: {op.message or 'waiting'}",
                             lock={"lock_id": op.lock_id, "ddls": list(op.ddls), "owner": op.owner})
        if op.done:
            return None
        if op.action == EXEC:
            log.info("source %s owns lock %s: executing %s", self.source_id, op.lock_id, "; ".join(op.ddls))
            executor.run_operation(self.store, dconn, op, ops, replay=self._replay)
        elif op.action == SKIP:
            ops.ack_done(self.store, self.task.name, self.source_id, op.lock_id, op.step)
            faults.hit("shardddl.sync.after_skip_ack")
        return None

