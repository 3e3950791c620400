"""Where one source's sync stands: the checkpoint it resumes from and its safe-mode exit point.

Both live in the source's row of the state store (dm_core/state/schema.py, ``source_state``):

- the **checkpoint** (``binlog_file``/``binlog_pos``/``binlog_gtid``): every change before it is
  durable downstream. It is written only after the batches before it committed (the apply
  queue's ``committed`` callback), every ``checkpoint-flush-interval`` seconds and always at a
  DDL and at a window's end. DM calls writing it "flush".
- the **safe-mode exit point** (``safe_exit_file``/``safe_exit_pos``, and the full phase's high
  watermark): changes up to it may already be downstream, so they are replayed in safe mode
  (REPLACE, DELETE+REPLACE), which is idempotent. It is raised to the window's end *before* the
  window's first batch is sent, and brought back to the checkpoint whenever nothing past it is
  in flight: at a DDL and when the window ended cleanly.

So after a crash anywhere, checkpoint <= applied <= exit point, and the next window's replay
from the checkpoint is exact. Where a window starts when there is no checkpoint yet: the full
phase's low watermark, else the task's ``meta``, else the upstream's position now.
"""

from __future__ import annotations

import datetime
import logging
import time

from dm_core.errors import ErrorCode
from dm_core.position import Position
from dm_core.sources import replica_server_id
from dm_core.sync.keyless_ledger import CLEARED

log = logging.getLogger("shardflow.sync")


class SourcePositions:
    """The checkpoint and the safe-mode exit point of one (task, source)."""

    def __init__(self, task, source_id: str, store):
        self.task, self.source_id, self.store = task, source_id, store
        self.exit_point: Position | None = None   # as last written by this window
        self.server: str | None = None            # the upstream server this window reads (db.server_identity)
        self.switched_at: Position | None = None  # the new server's binlog end when this start found it switched

    # ---- where a window starts --------------------------------------------------------
    def start(self, st: dict, now: Position, up, server: str | None = None) -> Position:
        """The checkpoint, else the low watermark, else ``meta``, else ``now``; found by GTID
        when its binlog file is gone or the checkpoint was written on another server than
        ``server`` (``up``: the upstream endpoint).

        Why the server: a failover to a replica (or an address moved to another server) keeps
        the source's host but not its binlog. The new server has files of the same names
        (mysql-bin.000001 ...) holding other events at other offsets, so a checkpoint's file
        and position, read there, would start mid-event or at another transaction: rows lost
        or applied twice. Checkpoints record the server they belong to (``binlog_server``); on
        another server the start is found by the checkpoint's GTID state, as DM does whenever
        `enable-gtid` is on, and without GTIDs the source pauses (UPSTREAM_SWITCHED)."""
        self.server = None   # until the start is known to be on this server, checkpoints name none
        self.switched_at = None
        start = self._recorded_start(st, now)
        was = st.get("binlog_server")
        if server and was and was != server and st["binlog_file"]:
            start = self._switched(up, start, was, server)
            self.switched_at = now
        else:
            start = self._resolve_gtid(up, start)
        self.server = server
        return start

    def start_at_time(self, st: dict, up, server: str | None) -> dict:
        """`start-task --start-time`: move the checkpoint to where the upstream's binlog stood at
        that time (dm_core/binlog/by_time.py) and forget the time, in one state write; returns
        the source's state as it is now. What the source had applied before may lie past the
        new start: its old checkpoint (and exit point) becomes the safe-mode exit point, so that
        stretch replays in safe mode; a source that had none gets the start's time-based safe
        mode (safe_mode.start_phase), as any first start. A time past the upstream's newest
        event raises START_TIME_TOO_LATE and keeps the time: resume-task looks again."""
        from dm_core.binlog.by_time import instant, parse_start_time, position_at_time
        from dm_core.db import connect

        text = st["start_time"]
        conn = connect(up)
        try:
            when = instant(conn, parse_start_time(text))
        finally:
            conn.close()
        found = position_at_time(up, when, server_id=replica_server_id(self.task.name, self.source_id))
        utc = datetime.datetime.fromtimestamp(when, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        if found.position is None:
            raise ErrorCode.START_TIME_TOO_LATE.error(
                f"source {self.source_id}: start-time {text} ({utc}) is too late, no binlog location matches it: "
                f"nothing {up} has written up to {found.newest} is stamped at or after it")
        if found.kind == "before_first":
            log.warning("source %s: start-time %s (%s) is before the oldest binlog %s keeps (%s): starting from "
                        "its oldest transaction at %s; what the upstream wrote before it was purged and is not "
                        "replayed", self.source_id, text, utc, up, found.oldest, found.position)
        same_server = not st.get("binlog_server") or not server or st["binlog_server"] == server
        applied = [Position(st[f], int(st[p])) for f, p in (("binlog_file", "binlog_pos"),
                                                            ("safe_exit_file", "safe_exit_pos"),
                                                            ("high_file", "high_pos")) if st.get(f)] if same_server else []
        exit_point = max(applied, key=Position.key, default=None)
        # the keyless ledger's horizon goes: rows before the new start are pruned from it
        fields = dict(binlog_file=found.position.file, binlog_pos=found.position.pos, binlog_gtid=None,
                      binlog_server=server, start_time=None, **CLEARED,
                      safe_exit_file=exit_point.file if exit_point else None,
                      safe_exit_pos=exit_point.pos if exit_point else None)
        self.store.update_source_state(self.task.name, self.source_id, **fields)
        log.info("source %s: start-time %s (%s) is at %s on %s: the checkpoint moves there%s", self.source_id, text,
                 utc, found.position, up,
                 f"; safe mode up to {exit_point}, what the source had applied before" if exit_point else "")
        return {**st, **fields}

    def _switched(self, up, start: Position, was: str, now: str) -> Position:
        got = self.store.get_source(self.source_id)
        enabled = bool(got and got[0].get("enable-gtid"))
        if not (enabled and start.gtid):
            raise ErrorCode.UPSTREAM_SWITCHED.error(
                f"source {self.source_id}: {up} is another server ({now}) than the one its checkpoint "
                f"{start} was written on ({was}), and "
                + ("the source has enable-gtid off, so no GTID state finds the checkpoint's place there" if not enabled
                   else "the checkpoint has no GTID state to find its place there"))
        from dm_core.binlog.gtid import not_logged, position_of_gtid

        behind = not_logged(up, start.gtid)
        if behind is not None:
            raise ErrorCode.UPSTREAM_BEHIND.error(
                f"source {self.source_id}: {up} is another server ({now}) than the checkpoint's ({was}) and has not "
                f"logged all of the checkpoint's GTID state {start.gtid} yet: {behind}; the source starts after it "
                f"once the server has")
        found = position_of_gtid(up, start.gtid, server_id=replica_server_id(self.task.name, self.source_id))
        log.warning("source %s: %s is another server (%s) than the checkpoint's (%s); resuming after GTID %s at %s",
                    self.source_id, up, now, was, start.gtid, found)
        return found

    def _recorded_start(self, st: dict, now: Position) -> Position:
        if st["binlog_file"]:
            return Position(st["binlog_file"], int(st["binlog_pos"]), st["binlog_gtid"])
        meta = self.task.instance(self.source_id).meta
        given = meta is not None and (meta.binlog_name or meta.binlog_gtid)
        # task-mode incremental after an all-mode run stopped in its full phase: the user's meta
        # (where their own copy stands) wins over that run's low watermark, as in DM
        from dm_core.full.phase import is_binlog_watermark

        # (a task-mode full run's low watermark is a mark, not a binlog position: never a start)
        if st["low_file"] and is_binlog_watermark(st["low_file"]) \
                and not (self.task.task_mode == "incremental" and given and not st["high_file"]):
            return Position(st["low_file"], int(st["low_pos"]), st["low_gtid"])
        if meta is not None and meta.binlog_name:
            return Position(meta.binlog_name, int(meta.binlog_pos or 4), meta.binlog_gtid)
        if meta is not None and meta.binlog_gtid:
            return Position("", 4, meta.binlog_gtid)  # found by GTID (_resolve_gtid)
        return now

    def _resolve_gtid(self, up, start: Position) -> Position:
        """With `enable-gtid` on the source, a start whose binlog file this server does not
        have (purged, or the source failed over to another server) is found by its GTID state."""
        got = self.store.get_source(self.source_id)
        enabled = bool(got and got[0].get("enable-gtid"))
        if not start.file and not enabled:
            raise ErrorCode.CONFIG_INVALID.error(
                f"source {self.source_id}: the task's meta gives only binlog-gtid, but the source has "
                f"enable-gtid off", workaround="Set `enable-gtid: true` in the source file and run "
                "`dmctl operate-source create` again, or give meta binlog-name and binlog-pos.")
        if enabled and start.file and not start.gtid:
            start = self._adjust_gtid(up, start)
        if not start.gtid or not enabled:
            return start
        from dm_core.binlog.gtid import binlog_files, position_of_gtid

        if start.file and start.file in binlog_files(up):
            return start
        found = position_of_gtid(up, start.gtid, server_id=replica_server_id(self.task.name, self.source_id))
        log.warning("source %s: binlog file %r is not on %s; resuming after GTID %s at %s",
                    self.source_id, start.file, up, start.gtid, found)
        return found

    def _adjust_gtid(self, up, start: Position) -> Position:
        """A start by file and position without a GTID state (a meta without binlog-gtid, a
        checkpoint written before `enable-gtid` was turned on): the state the server gives for
        that position, as DM's adjustGlobalPointGTID, so the next checkpoint has it and a resume
        by GTID (the file purged, a failover) finds its place. MariaDB says it itself
        (BINLOG_GTID_POS); on MySQL it is the file's PREVIOUS_GTIDS plus the GTIDs before the
        position, read from the file (binlog/gtid.py). Left without one where the server cannot
        say (a purged file, a server without GTIDs)."""
        from dm_core.db import as_str, connect, is_mariadb

        conn = connect(up)
        try:
            if is_mariadb(conn):
                with conn.cursor() as cur:
                    cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (start.file, start.pos))
                    got = cur.fetchone()[0]
                if got is None:   # an event larger than this session's max_allowed_packet before it
                    from dm_core.binlog.gtid import mariadb_gtid_at

                    got = mariadb_gtid_at(up, start.file, start.pos,
                                          server_id=replica_server_id(self.task.name, self.source_id))
            else:
                from dm_core.binlog.gtid import mysql_gtid_at

                got = mysql_gtid_at(up, start.file, start.pos,
                                    server_id=replica_server_id(self.task.name, self.source_id))
        except Exception as e:  # noqa: BLE001 - a purged file, an old server: the state stays unknown
            log.info("source %s: no GTID state for %s from %s: %s", self.source_id, start, up, e)
            return start
        finally:
            conn.close()
        if got is None:
            return start
        log.info("source %s: %s has no GTID state; the server gives %r for it", self.source_id, start, as_str(got))
        return Position(start.file, start.pos, as_str(got))

    # ---- the safe-mode exit point -----------------------------------------------------
    def load_exit_point(self, st: dict) -> Position | None:
        """The higher of the recorded exit point and the full phase's high watermark; after a
        switch to another server, that server's binlog end at the switch (written here, and into
        ``st``, the window's view of the state).

        Why the switch moves it: the start found by GTID is the new server's first transaction
        not in the checkpoint's state, and the server may have logged transactions in that state
        after it (another GTID domain it ordered differently, its own writes between the
        master's). Those are replayed and must go in safe mode, yet the recorded exit point is a
        position on the old server, which orders nothing on this one."""
        if self.switched_at is not None:
            at = self.switched_at
            self.store.update_source_state(self.task.name, self.source_id, safe_exit_file=at.file, safe_exit_pos=at.pos)
            st.update(safe_exit_file=at.file, safe_exit_pos=at.pos)
            self.exit_point, self.switched_at = at, None
            log.info("source %s: safe mode on up to %s, this server's binlog end when the source switched to it: "
                     "what it logged before may already be downstream", self.source_id, at)
            return at
        cands = [Position(st[f], int(st[p])) for f, p in (("safe_exit_file", "safe_exit_pos"), ("high_file", "high_pos"))
                 if st[f]]
        self.exit_point = max(cands, key=Position.key) if cands else None
        return self.exit_point

    def raise_exit_point(self, top: Position, store) -> None:
        """Before a batch is sent: the exit point covers it (one write per window: ``top`` is
        the window's end). ``store``: the apply thread's own connection."""
        if self.exit_point is None or top.key() > self.exit_point.key():
            store.update_source_state(self.task.name, self.source_id, safe_exit_file=top.file, safe_exit_pos=top.pos)
            self.exit_point = top

    def settle_exit_point(self, st: dict, checkpoint: Position, store=None) -> None:
        """Nothing past ``checkpoint`` was sent downstream (a checkpoint written after every
        batch before it committed and before any later one was sent: at a DDL, at the window's
        end): bring the exit point raised to the window's `until` back down to it, but not below
        the exit point the window began with (``st``). Else a restart would replay in safe mode
        rows never applied, and with `safe-mode-duration: 0s` refuse to start (DM's exit point
        is only ever written when its syncer stops). A crash before this only costs safe mode.
        ``store``: the apply thread's connection when called from there."""
        floor = Position(st["safe_exit_file"], int(st["safe_exit_pos"])) if st["safe_exit_file"] else None
        settle = checkpoint if floor is None or checkpoint.key() > floor.key() else floor
        if self.exit_point is not None and self.exit_point.key() > settle.key():
            (store or self.store).update_source_state(self.task.name, self.source_id,
                                                      safe_exit_file=settle.file, safe_exit_pos=settle.pos)
            self.exit_point = settle

    # ---- the checkpoint ---------------------------------------------------------------
    def write(self, pos: Position, rows: int, txns: int, last_ts, store, added: dict | None = None) -> None:
        """After the batches up to ``pos`` committed: the checkpoint, with the rows and
        transactions applied since the last one (the UI's counters) and ``added``, what the
        syncer measured since (dm_core/metrics/observe.py), in the same write."""
        fields = dict(binlog_file=pos.file, binlog_pos=pos.pos, stage="sync")
        if pos.gtid:
            fields["binlog_gtid"] = pos.gtid
        if self.server:
            fields["binlog_server"] = self.server
        if last_ts:
            fields["last_event_ts"] = datetime.datetime.fromtimestamp(last_ts, datetime.timezone.utc)
        store.add_applied(self.task.name, self.source_id, rows, txns, added=added, **fields)

    def rewind(self, pos: Position) -> None:
        """Move the checkpoint back (a pessimistic shard DDL lock replays the rows it held)."""
        fields = dict(binlog_file=pos.file, binlog_pos=pos.pos)
        if pos.gtid:
            fields["binlog_gtid"] = pos.gtid
        if self.server:
            fields["binlog_server"] = self.server
        self.store.update_source_state(self.task.name, self.source_id, **fields)


def lag_seconds(checkpoint: Position, until: Position, last_ts) -> float:
    """How far behind the source is: 0 when caught up, else the age of the last applied event."""
    if checkpoint.key() >= until.key() or not last_ts:
        return 0.0
    return max(0.0, time.time() - last_ts)
