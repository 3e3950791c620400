"""The first-level sharding group: the sharded tables of ONE source merged into one target
(DM's in-worker sharding group, pessimistic mode).

Why it exists. All shards of a source come through one binlog stream, so the source
cannot pause one table and go on with another: when ``t_1`` has run a DDL and ``t_2`` has
not, the stream must keep going to reach ``t_2``'s DDL, while ``t_1``'s later rows (new
schema) must not reach the downstream (old schema) yet. DM's answer, the 10 steps of
its in-worker flow, is skip-and-rewind:

 1. ``t_1``'s DDL arrives: record it and its binlog position (``on_ddl`` → ``RECORDED``);
 2.–3. keep reading; rows of ``t_1`` (past its DDL) are skipped, rows of ``t_2`` (before its
    DDL) are applied (``should_skip_dml``);
 4. ``t_2``'s DDL arrives: record it; now every member has the DDL (``on_ddl`` → ``REPORT``);
 5. the source reports to the shard DDL lock and waits; the lock's owner runs the DDL;
 6. ``on_resolved()`` gives the rewind position (the end of the first DDL of the round);
 7.–8. the stream is read again from there: rows of ``t_1`` skipped in step 3 are applied
    now, rows of ``t_2`` (applied in step 3) are skipped; the DDL events met again are
    skipped (``on_ddl`` → ``DONE``);
 9. at the position where the group became complete every skipped row has been replayed;
10. from there on the source replicates normally.

The rule behind steps 3 and 8 (and several DDLs in a row, which DM's restriction "the
same DDLs in the same order on every shard" makes well defined): a table's *version* at a
position is the number of its DDLs at or before it; the downstream is at version ``R``
(rounds resolved). A row of table ``X`` at position ``p`` is applied exactly when
``version(X, p) == R`` and ``p >= reached`` (``reached`` = how far rows of version ``R``
have already been applied: the rewind position right after a resolution, then every
committed checkpoint). Each row is so applied in exactly one pass: the first pass after
the round that brings the downstream to its version, never in a pass before (version >
R) or after (version < R, or ``p < reached``).

``SourceShardGroups`` holds every group of a source plus the source's ``horizon`` (the
highest committed position ever): rows and DDLs of tables outside the groups met again
during a replay (``p < horizon``) were applied in the first pass and are skipped.

Restarts. The state is pure and JSON-serialisable (``to_json``/``from_json``); the syncer
persists it in the state store between pokes, and must do so:

* right after ``on_ddl`` returned ``RECORDED`` or ``REPORT`` and before the checkpoint
  moves past that DDL (a record lost would make a round never complete);
* after ``on_resolved()``, *after* having moved the checkpoint back to the rewind
  position. A crash between the two restarts at the rewind position with the round not
  yet resolved here: the rows read are skipped (version > R), the completing DDL is met
  again → ``REPORT`` → the lock answers "already done" → ``on_resolved()`` again. A crash
  after both replays from the checkpoint with the new state.

Saving it more often is never needed; saving it late only means more rows re-applied,
and every re-applied row lies below the source's safe-mode exit point (the syncer raises
it before sending anything downstream), so replay is idempotent: at least once, made
exact by safe mode, as everywhere else.

    >>> from dm_core.position import Position as P
    >>> g = SourceGroup(("db", "t"), [("s", "t_1"), ("s", "t_2")])
    >>> ddl = ("ALTER TABLE `db`.`t` ADD COLUMN `c` INT",)
    >>> g.on_ddl(("s", "t_1"), ddl, P("b.1", 100)).action
    'recorded'
    >>> g.should_skip_dml(("s", "t_1"), P("b.1", 120)), g.should_skip_dml(("s", "t_2"), P("b.1", 120))
    (True, False)
    >>> g.on_ddl(("s", "t_2"), ddl, P("b.1", 200)).action
    'report'
    >>> r = g.on_resolved(); (r.rewind_to, r.until, r.tables)
    (Position(file='b.1', pos=100, gtid=None), Position(file='b.1', pos=200, gtid=None), (('s', 't_1'),))
    >>> g.should_skip_dml(("s", "t_1"), P("b.1", 120)), g.should_skip_dml(("s", "t_2"), P("b.1", 120))
    (False, True)
    >>> g.on_ddl(("s", "t_2"), ddl, P("b.1", 200)).action
    'done'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable

from dm_core.position import Position
from dm_core.shardddl.common import fmt_tables, pos_from_json, pos_to_json
from dm_core.shardddl.ddl_norm import comparison_key
from dm_core.shardddl.errors import ShardDDLInconsistent, ShardDDLLockError

Table = tuple[str, str]

RECORDED, REPORT, DONE = "recorded", "report", "done"


@dataclass(frozen=True)
class DDLOutcome:
    """What the syncer does with a DDL event of a member table.

    * ``recorded`` — other members have not reached this DDL: skip the event (do not run it)
      and keep reading; this table's rows are skipped from now on;
    * ``report`` — every member has it now: report ``ddls`` (with ``position``) to the
      shard DDL lock and stop reading here until the lock resolves;
    * ``done`` — this DDL was already run downstream (met again while replaying): skip it.
    """

    action: str
    round: int                          # which DDL of the table this is (1 = its first after the start)
    ddls: tuple[str, ...]
    position: Position                  # the DDL event's end position
    rewind_to: Position | None = None   # report: where the replay will start
    waiting_for: tuple[Table, ...] = () # recorded: members that have not reached the DDL


@dataclass(frozen=True)
class Replay:
    """Where to rewind after a resolution and what the replay brings back."""

    rewind_to: Position                 # restart reading here (end of the round's first DDL)
    until: Position                     # the group became complete here; after it, normal again
    tables: tuple[Table, ...]           # members whose rows were skipped between the two
    round: int


@dataclass
class _DDL:
    ddls: tuple[str, ...]
    end: Position
    ts: float | None = None   # the upstream's time of the DDL (None: recorded by an older version)

    def to_json(self) -> dict:
        return {"ddls": list(self.ddls), "end": pos_to_json(self.end), "ts": self.ts}

    @classmethod
    def from_json(cls, d: dict) -> "_DDL":
        return cls(tuple(d["ddls"]), pos_from_json(d["end"]), d.get("ts"))


@dataclass
class _Member:
    base: int = 0                        # DDLs folded away (count as passed at every position)
    folded_until: Position | None = None # the last folded DDL's end
    ddls: list[_DDL] = field(default_factory=list)

    def version(self, pos: Position) -> int:
        return self.base + sum(1 for d in self.ddls if d.end.key() <= pos.key())

    def total(self) -> int:
        return self.base + len(self.ddls)

    def nth(self, k: int) -> _DDL | None:
        i = k - self.base - 1
        return self.ddls[i] if 0 <= i < len(self.ddls) else None


class SourceGroup:
    """The sharded tables of one source routed to one target. See the module docstring."""

    def __init__(self, target: Table, members: Iterable[Table], *, resolved: int = 0):
        self.target = tuple(target)
        self.resolved = resolved                 # R: DDL rounds executed downstream
        self.reached: Position | None = None     # rows of version R before this are applied
        self.members: dict[Table, _Member] = {tuple(t): _Member(base=resolved) for t in members}
        self.round_ddls: dict[int, tuple[Table, tuple[str, ...]]] = {}  # round → (first table, its ddls)
        self.replay: Replay | None = None

    # ---- queries ----------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        """No DDL recorded beyond the downstream's version and no replay under way."""
        return self.replay is None and all(m.total() == self.resolved for m in self.members.values())

    def waiting_for(self, k: int | None = None) -> tuple[Table, ...]:
        k = self.resolved + 1 if k is None else k
        return tuple(t for t, m in self.members.items() if m.total() < k)

    def unresolved(self) -> dict | None:
        """The round this group waits on, as query-status shows it (DM's ``unresolvedGroups``):
        its DDLs, the member tables that have reached them and those still to; None when idle."""
        if self.idle:
            return None
        k = self.resolved + 1
        first = self.round_ddls.get(k)
        return {"target": list(self.target), "ddls": list(first[1]) if first else [],
                "synced": sorted(list(t) for t, m in self.members.items() if m.total() >= k),
                "unsynced": [list(t) for t in sorted(self.waiting_for(k))]}

    def skipping(self) -> list[tuple[Table, "_DDL"]]:
        """Members past the next round's DDL while others are not: their rows from that DDL on
        are skipped until the round resolves (step 3), (table, its DDL of the round)."""
        k = self.resolved + 1
        if self.complete(k):
            return []
        # sorted after the filter: asked at every step, and most of thousands of members are not past it
        return sorted(((t, m.nth(k)) for t, m in self.members.items() if m.nth(k) is not None), key=lambda x: x[0])

    def complete(self, k: int) -> bool:
        return bool(self.members) and all(m.total() >= k for m in self.members.values())

    def rewind_position(self, k: int | None = None) -> Position:
        """The end of the earliest DDL of round ``k`` (default: the next one to resolve)."""
        k = self.resolved + 1 if k is None else k
        ends = [m.nth(k).end for m in self.members.values() if m.nth(k) is not None]
        return min(ends, key=Position.key)

    def should_skip_dml(self, table: Table, pos: Position) -> bool:
        """Whether a row event of member ``table`` at ``pos`` (its transaction's start) is skipped."""
        m = self._member(table)
        if m.version(pos) != self.resolved:
            return True
        return self.reached is not None and pos.key() < self.reached.key()

    # ---- transitions --------------------------------------------------------------------------
    def on_ddl(self, table: Table, ddls: Iterable[str], pos: Position, ts: float | None = None) -> DDLOutcome:
        """A DDL event of member ``table`` ending at ``pos`` (normalised, routed ``ddls``), run
        upstream at ``ts``."""
        table, ddls = tuple(table), tuple(ddls)
        m = self._member(table)
        if m.folded_until is not None and pos.key() <= m.folded_until.key():
            return DDLOutcome(DONE, m.base, ddls, pos)
        for i, d in enumerate(m.ddls):
            if d.end == pos:                      # met again: replay or restart
                k = m.base + i + 1
                return self._outcome(k, d.ddls, pos)
        if m.ddls and pos.key() < m.ddls[-1].end.key():
            raise ShardDDLLockError(
                f"DDL of `{table[0]}`.`{table[1]}` at {pos} is older than its last recorded DDL at "
                f"{m.ddls[-1].end}: the sharding group state does not match the binlog being read")
        k = m.total() + 1
        first = self.round_ddls.get(k)
        if first is not None and [comparison_key(s) for s in first[1]] != [comparison_key(s) for s in ddls]:
            raise ShardDDLInconsistent(_inconsistent(self.target, k, first[0], first[1], table, ddls))
        if first is None:
            self.round_ddls[k] = (table, ddls)
        m.ddls.append(_DDL(ddls, pos, ts))
        return self._outcome(k, ddls, pos)

    def _outcome(self, k: int, ddls: tuple[str, ...], pos: Position) -> DDLOutcome:
        if k <= self.resolved:
            return DDLOutcome(DONE, k, ddls, pos)
        if k == self.resolved + 1 and self.complete(k):
            return DDLOutcome(REPORT, k, ddls, pos, rewind_to=self.rewind_position(k))
        return DDLOutcome(RECORDED, k, ddls, pos, waiting_for=self.waiting_for(k))

    def on_resolved(self) -> Replay:
        """The lock finished the round (the DDL is downstream): advance and say where to rewind."""
        k = self.resolved + 1
        if not self.complete(k):
            raise ShardDDLLockError(f"sharding group of `{self.target[0]}`.`{self.target[1]}` cannot resolve DDL "
                                    f"round {k}: still waiting for {fmt_tables(self.waiting_for(k))}")
        ends = {t: m.nth(k).end for t, m in self.members.items() if m.nth(k) is not None}
        rewind = min(ends.values(), key=Position.key)
        until = max(ends.values(), key=Position.key)
        skipped = tuple(sorted(t for t, e in ends.items() if e.key() < until.key()))
        self.resolved = k
        self.reached = rewind
        self.replay = Replay(rewind, until, skipped, k) if rewind.key() < until.key() else None
        self._fold()
        return Replay(rewind, until, skipped, k)

    def committed(self, pos: Position) -> None:
        """Every event before ``pos`` is durably handled in the current pass."""
        if self.reached is None or pos.key() > self.reached.key():
            self.reached = pos
        if self.replay is not None and pos.key() >= self.replay.until.key():
            self.replay = None

    def add_member(self, table: Table, *, version: int | None = None) -> None:
        """A new shard (CREATE TABLE). DM's rule: it is created with the newest schema, so it
        counts as past every DDL recorded so far (``version`` overrides)."""
        table = tuple(table)
        if table in self.members:
            return
        v = max((m.total() for m in self.members.values()), default=self.resolved) if version is None else version
        self.members[table] = _Member(base=v)

    def rename_member(self, old: Table, new: Table) -> None:
        """A shard renamed (RENAME TABLE old TO new, pessimistic mode): it keeps its place,
        DDLs and version under the new name, so the rename itself is its next DDL (recorded
        by ``on_ddl(new, ...)``) and the rows it writes under the new name count from there.
        Met again (a replay, a restart), ``new`` is the member already: nothing changes. Rows
        of ``old`` met again in a replay belong to no member: applied in the first pass."""
        old, new = tuple(old), tuple(new)
        if new in self.members or old not in self.members:
            return
        self.members[new] = self.members.pop(old)

    def remove_member(self, table: Table) -> DDLOutcome | None:
        """A shard left (DROP TABLE, ignored downstream). If that completes the pending round,
        the outcome says to report it, as its last DDL would have."""
        table = tuple(table)
        if self.members.pop(table, None) is None:
            return None
        k = self.resolved + 1
        if self.complete(k) and any(m.nth(k) is not None for m in self.members.values()):
            last = max((m.nth(k) for m in self.members.values() if m.nth(k) is not None), key=lambda d: d.end.key())
            return DDLOutcome(REPORT, k, last.ddls, last.end, rewind_to=self.rewind_position(k))
        return None

    def _member(self, table: Table) -> _Member:
        m = self.members.get(tuple(table))
        if m is None:
            raise ShardDDLLockError(f"`{table[0]}`.`{table[1]}` is not a member of the sharding group of "
                                    f"`{self.target[0]}`.`{self.target[1]}` on this source")
        return m

    def _fold(self) -> None:
        """Forget DDL records of rounds older than the last resolved one (they decide nothing any more)."""
        keep = self.resolved - 1
        for m in self.members.values():
            while m.ddls and m.base < keep:
                d = m.ddls.pop(0)
                m.base += 1
                m.folded_until = d.end
        for k in [k for k in self.round_ddls if k < keep + 1]:
            del self.round_ddls[k]

    # ---- persistence --------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "target": list(self.target), "resolved": self.resolved, "reached": pos_to_json(self.reached),
            "members": [{"table": list(t), "base": m.base, "folded_until": pos_to_json(m.folded_until),
                         "ddls": [d.to_json() for d in m.ddls]} for t, m in sorted(self.members.items())],
            "rounds": {str(k): {"table": list(v[0]), "ddls": list(v[1])} for k, v in self.round_ddls.items()},
            "replay": None if self.replay is None else {
                "rewind_to": pos_to_json(self.replay.rewind_to), "until": pos_to_json(self.replay.until),
                "tables": [list(t) for t in self.replay.tables], "round": self.replay.round},
        }

    @classmethod
    def from_json(cls, d: dict) -> "SourceGroup":
        g = cls(tuple(d["target"]), [], resolved=d["resolved"])
        g.reached = pos_from_json(d.get("reached"))
        for m in d["members"]:
            g.members[tuple(m["table"])] = _Member(m["base"], pos_from_json(m.get("folded_until")),
                                                   [_DDL.from_json(x) for x in m["ddls"]])
        g.round_ddls = {int(k): (tuple(v["table"]), tuple(v["ddls"])) for k, v in d.get("rounds", {}).items()}
        r = d.get("replay")
        if r:
            g.replay = Replay(pos_from_json(r["rewind_to"]), pos_from_json(r["until"]),
                              tuple(tuple(t) for t in r["tables"]), r["round"])
        return g


def _inconsistent(target, k, t1, d1, t2, d2) -> str:
    pair = next(((a, b) for a, b in zip(d1, d2) if comparison_key(a) != comparison_key(b)), None)
    if pair is None:
        pair = ("; ".join(d1), "; ".join(d2))
    return (f"inconsistent DDL sequence in the sharding group of `{target[0]}`.`{target[1]}`: DDL #{k} of "
            f"`{t1[0]}`.`{t1[1]}` is `{pair[0]}` but DDL #{k} of `{t2[0]}`.`{t2[1]}` is `{pair[1]}`")


class SourceShardGroups:
    """Every first-level group of one source, and the source's replay horizon.

    The syncer keeps one of these per source (persisted as JSON, see the module docstring)
    and asks it about every event:

    * a row event of ``table`` at ``pos`` → ``should_skip_dml(table, pos)``;
    * a DDL of a member table → ``on_ddl``; of any other table → ``should_skip_ddl(pos)``
      (true while replaying: it ran in the first pass);
    * after each checkpoint commit → ``committed(pos)``.
    """

    def __init__(self, groups: Iterable[SourceGroup] = (), horizon: Position | None = None):
        self.groups: dict[Table, SourceGroup] = {g.target: g for g in groups}
        self.horizon = horizon

    @classmethod
    def build(cls, tables_by_target: dict[Table, Iterable[Table]]) -> "SourceShardGroups":
        """Fresh groups from ``{target: [upstream tables of this source]}``."""
        return cls([SourceGroup(t, m) for t, m in tables_by_target.items()])

    def group_of(self, table: Table) -> SourceGroup | None:
        table = tuple(table)
        return next((g for g in self.groups.values() if table in g.members), None)

    @property
    def idle(self) -> bool:
        return all(g.idle for g in self.groups.values())

    def in_replay(self, pos: Position) -> bool:
        return self.horizon is not None and pos.key() < self.horizon.key()

    def should_skip_dml(self, table: Table, pos: Position) -> bool:
        g = self.group_of(table)
        if g is not None:
            return g.should_skip_dml(table, pos)
        return self.in_replay(pos)

    def should_skip_ddl(self, pos: Position) -> bool:
        """A DDL of a table outside every group: skip it if it was executed in an earlier pass."""
        return self.in_replay(pos)

    def on_ddl(self, table: Table, ddls: Iterable[str], pos: Position, ts: float | None = None) -> DDLOutcome:
        g = self.group_of(table)
        if g is None:
            raise ShardDDLLockError(f"`{table[0]}`.`{table[1]}` is in no sharding group of this source")
        return g.on_ddl(table, ddls, pos, ts)

    def on_resolved(self, target: Table) -> Replay:
        return self.groups[tuple(target)].on_resolved()

    def committed(self, pos: Position) -> None:
        if self.horizon is None or pos.key() > self.horizon.key():
            self.horizon = pos
        for g in self.groups.values():
            g.committed(pos)

    @property
    def replaying(self) -> dict[Table, Position]:
        """Member tables whose skipped rows a replay under way brings back → from where (as
        ``HeldTables.replaying``)."""
        return {t: g.replay.rewind_to for g in self.groups.values() if g.replay is not None for t in g.replay.tables}

    def give_up_replay(self) -> tuple[list[Table], Position | None]:
        """Stop every replay (its binlog is gone: the operator accepted losing those rows); returns
        the tables they were bringing back and where the first pass had read (the horizon): the
        source goes on from there, every row before it counting as handled."""
        tables = sorted(self.replaying)
        for g in self.groups.values():
            if g.replay is not None:
                g.replay = None
                if self.horizon is not None and (g.reached is None or g.reached.key() < self.horizon.key()):
                    g.reached = self.horizon
        return tables, self.horizon

    def to_json(self) -> str:
        return json.dumps({"horizon": pos_to_json(self.horizon),
                           "groups": [g.to_json() for g in self.groups.values()]}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | dict) -> "SourceShardGroups":
        d = json.loads(text) if isinstance(text, str) else text
        return cls([SourceGroup.from_json(g) for g in d.get("groups", [])], pos_from_json(d.get("horizon")))
