"""The tables one source holds back in optimistic mode (DM's conflict stage of its optimistic
sharding group keeper, ``osgk``), and the replay that brings them back.

Why it exists. A shard renames a column (or converts it to a type of another family) before the
others: its rows after the DDL name a column the merged table does not have, and running the
rename downstream now would break every other shard's rows. The lock answers ``hold``
(``Lock._hold_or_resolve``). All tables of a source come through one binlog stream, so the
source cannot stop at that DDL without stopping every other table with it; instead it goes on
and holds the table back:

1. the DDL at ``start`` is not run; ``hold(table, lock_id, start)``, persisted before the
   checkpoint moves past it;
2. rows and DDLs of the table at or after ``start`` are skipped (``should_skip_dml``); the
   other tables go on as usual, and the checkpoint moves on;
3. the last shard to run the change gets it executed downstream; the lock gives each held
   member a ``skip`` op, and no longer answers ``hold`` for it: it is *released*;
4. the source sees that (``ShardSync`` asks the lock at each window's start and after each DDL
   it reports), ``release`` returns where to read again (the earliest ``start`` of the released
   tables); the state is persisted, then the checkpoint moves back there;
5. the stream is read again from there: events of released tables at or after their ``start``
   go through (their DDL is met again: the lock answers ``skip``, done; their rows are applied
   now, against the renamed downstream), everything else below the ``horizon`` (the highest
   position ever committed) ran in the first pass and is skipped;
6. past the horizon the source replicates normally again.

Restarts. The state is written before the checkpoint moves back: a crash between the two
restarts past the replay's start, and the window's start reads from ``replay_start()``
again. Had the state not been written, the rows of other tables from the rewind position on
would be applied a second time, after the downstream changed under them (a renamed column:
"Unknown column"). A crash after the lock released the table and before the state said so
restarts with the table still held; the next window's start finds it released (its horizon
is that window's start). ``horizon`` is only kept while a replay runs; ``replaying`` moves up
with every commit, and is saved at the window's end, so a restart replays at most that
window's rows of the replayed tables again, below the source's safe-mode exit point.

    >>> from dm_core.position import Position as P
    >>> h = HeldTables()
    >>> h.hold(("s", "t_1"), "task-`db`.`t`", P("b.1", 100), since=1_700_000_000)
    >>> HeldTables.from_json(h.to_json()).held == h.held, h.held[("s", "t_1")].age(1_700_003_600)
    (True, 3600)
    >>> h.should_skip_dml(("s", "t_1"), P("b.1", 120)), h.should_skip_dml(("s", "t_2"), P("b.1", 120))
    (True, False)
    >>> h.release([("s", "t_1")], P("b.1", 300))
    Position(file='b.1', pos=100, gtid=None)
    >>> h.should_skip_dml(("s", "t_1"), P("b.1", 120)), h.should_skip_dml(("s", "t_2"), P("b.1", 120))
    (False, True)
    >>> h.should_skip_dml(("s", "t_1"), P("b.1", 90)), h.should_skip_ddl(P("b.1", 200))
    (True, True)
    >>> h.committed(P("b.1", 150)); h.should_skip_dml(("s", "t_1"), P("b.1", 120))
    True
    >>> h.committed(P("b.1", 310)); h.idle, h.horizon, h.should_skip_dml(("s", "t_2"), P("b.1", 320))
    (True, None, False)
"""

from __future__ import annotations

import datetime
import json
import time
from dataclasses import dataclass

from dm_core.position import Position
from dm_core.shardddl.common import pos_from_json, pos_to_json

Table = tuple[str, str]


@dataclass(frozen=True)
class Hold:
    lock_id: str             # the lock of the merged table
    start: Position          # the held DDL event's start: its rows from here on are held back
    since: float | None = None  # the upstream's time of that DDL (epoch seconds; None: saved by an older version)

    def age(self, now: float) -> float | None:
        """Seconds the table has been held back at ``now`` (upstream clock vs ours: a warning's
        precision, not a measurement's)."""
        return None if self.since is None else max(0.0, now - self.since)


def held_for(h: Hold, now: float | None = None) -> str:
    """`` since <UTC time> (for <age>)`` for a summary line; empty when the time is unknown.

    >>> held_for(Hold("l", Position("b.1", 4), 1_700_000_000), now=1_700_008_000)
    ' since 2023-11-14 22:13:20 UTC (for 2h13m)'
    """
    if h.since is None:
        return ""
    age = h.age(time.time() if now is None else now)
    stamp = datetime.datetime.fromtimestamp(h.since, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return f" since {stamp} UTC (for {span(age)})"


def held_line(table: Table, h: Hold, now: float | None = None) -> str:
    """One held table as window summaries and query-status say it."""
    return (f"`{table[0]}`.`{table[1]}` held back from {h.start}{held_for(h, now)} on lock {h.lock_id} until every "
            f"shard has run its DDL (or `dmctl shard-ddl-lock unlock {h.lock_id} --action skip`)")


def held_lines(saved, now: float | None = None) -> list[str]:
    """``held_line`` of every table a source's saved state (``source_state.shard_groups``) holds."""
    return [held_line(t, h, now) for t, h in sorted(HeldTables.from_json(saved).held.items())]


def span(seconds: float) -> str:
    """A short duration: 45s, 12m30s, 2h13m, 3d4h.

    >>> [span(s) for s in (45, 750, 8000, 273600)]
    ['45s', '12m30s', '2h13m', '3d4h']
    """
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


class HeldTables:
    """The held tables of one source and its replay; see the module docstring."""

    def __init__(self, held: dict[Table, Hold] | None = None, replaying: dict[Table, Position] | None = None,
                 horizon: Position | None = None):
        self.held: dict[Table, Hold] = dict(held or {})
        # released tables being replayed → from where their rows are not yet applied
        self.replaying: dict[Table, Position] = dict(replaying or {})
        self.horizon = horizon

    @property
    def idle(self) -> bool:
        return not self.held and not self.replaying

    def in_replay(self, pos: Position) -> bool:
        return self.horizon is not None and pos.key() < self.horizon.key()

    def hold(self, table: Table, lock_id: str, start: Position, since: float | None = None) -> None:
        table = tuple(table)
        if table not in self.held:
            self.held[table] = Hold(lock_id, start, since)

    def release(self, tables, at: Position) -> Position:
        """Release ``tables`` (the lock no longer holds them) while the first pass has reached
        ``at``; returns where to read again."""
        tables = [tuple(t) for t in tables]
        rewind = min((self.held[t].start for t in tables), key=Position.key)
        if self.horizon is None or at.key() > self.horizon.key():
            self.horizon = at
        for t in tables:
            self.replaying[t] = self.held.pop(t).start
        return rewind

    def replay_start(self) -> Position | None:
        """Where the replay's rows not yet applied begin (None: no replay): a window starting
        past it reads from here."""
        return min(self.replaying.values(), key=Position.key) if self.replaying else None

    def give_up_replay(self) -> tuple[list[Table], Position | None]:
        """Stop replaying (its binlog is gone: the operator accepted losing those rows); returns
        the tables that were being replayed and where the first pass had read (the horizon):
        the source goes on from there."""
        tables, horizon = sorted(self.replaying), self.horizon
        self.replaying.clear()
        self.horizon = None
        return tables, horizon

    def should_skip_dml(self, table: Table, pos: Position) -> bool:
        table = tuple(table)
        h = self.held.get(table)
        if h is not None and pos.key() >= h.start.key():
            return True
        if self.in_replay(pos):
            since = self.replaying.get(table)
            return since is None or pos.key() < since.key()
        return False

    def should_skip_ddl(self, pos: Position) -> bool:
        """A DDL of an unsharded table: skip it if it ran in the first pass."""
        return self.in_replay(pos)

    def committed(self, pos: Position) -> None:
        """Everything before ``pos`` is durable downstream. Only a replay needs to know: the
        state of a source holding nothing back stays as it is (nothing to write per window)."""
        if not self.replaying:
            return
        if self.horizon is None or pos.key() >= self.horizon.key():
            self.replaying.clear()     # the replay reached the first pass: normal from here on
            self.horizon = None
            return
        for t, since in self.replaying.items():
            if pos.key() > since.key():
                self.replaying[t] = pos

    def to_json(self) -> str:
        return json.dumps({"mode": "optimistic", "horizon": pos_to_json(self.horizon),
                           "held": [{"table": list(t), "lock_id": h.lock_id, "start": pos_to_json(h.start), "since": h.since}
                                    for t, h in sorted(self.held.items())],
                           "replaying": [{"table": list(t), "since": pos_to_json(p)}
                                         for t, p in sorted(self.replaying.items())]}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | dict | None) -> "HeldTables":
        d = (json.loads(text) if isinstance(text, str) else text) or {}
        if d.get("mode") != "optimistic":
            return cls()   # nothing saved, or a pessimistic group state of an earlier run of the task
        return cls({tuple(x["table"]): Hold(x["lock_id"], pos_from_json(x["start"]), x.get("since"))
                    for x in d.get("held", [])},
                   {tuple(x["table"]): pos_from_json(x["since"]) for x in d.get("replaying", [])},
                   pos_from_json(d.get("horizon")))
