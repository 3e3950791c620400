"""The first-level sharding group (DM's in-worker flow): skip-and-rewind, several DDLs in a
row, several groups and plain tables in one stream, JSON persistence and restarts.

A small binlog simulator reads a list of events the way the syncer does and checks the
two properties that matter, computed from the event list alone (not from the tracker):

* every row event reaches the downstream exactly once (or at least once when the
  tracker is saved lazily, duplicates then lying below the safe-mode horizon);
* when a row of table X reaches it, the downstream has run exactly as many DDLs of X's
  group as X had run before that row (the row's schema is the downstream's schema).
"""

import json
import random

import pytest

from dm_core.position import Position
from dm_core.shardddl.errors import ShardDDLInconsistent, ShardDDLLockError
from dm_core.shardddl.source_group import DONE, RECORDED, REPORT, SourceGroup, SourceShardGroups

T1, T2, T3 = ("s", "t_1"), ("s", "t_2"), ("s", "t_3")
U1, U2 = ("u", "x_1"), ("u", "x_2")        # a second group
PLAIN = ("p", "plain")                     # a table in no group
G1, G2 = ("db", "t"), ("db", "x")
DDL = {k: (f"ALTER TABLE `db`.`t` ADD COLUMN `c{k}` INT",) for k in range(1, 6)}
XDDL = {k: (f"ALTER TABLE `db`.`x` ADD COLUMN `d{k}` INT",) for k in range(1, 6)}


def P(n):
    return Position("bin.000001", n)


def build(events):
    """events: ("dml", table) | ("ddl", table, k) | ("ddlx", table, k) in binlog order; positions 10, 20, ..."""
    out = []
    for i, e in enumerate(events):
        start, end = P(10 * (i + 1)), P(10 * (i + 1) + 10)
        out.append((e, start, end))
    return out


class Sim:
    """Reads the stream like the syncer; one source; the lock answers at once (single source)."""

    def __init__(self, events, groups, *, save="eager", crash_at=(), roundtrip=False, crash_mid_resolve=0):
        self.events = build(events)
        self.groups = groups
        self.save = save
        self.crash_at = set(crash_at)
        self.roundtrip = roundtrip
        self.applied = []                       # (index of event, downstream versions when applied)
        self.down = {G1: 0, G2: 0}              # DDL rounds run downstream per group
        self.checkpoint = self.events[0][1]
        self.saved = groups.to_json()
        self.safe_exit = None                   # highest position ever sent downstream
        self.reads = 0
        self.crash_mid_resolve = crash_mid_resolve   # crash between the checkpoint rewind and saving the tracker
        self.lock_done = {}                     # the lock: last finished report position per group

    def persist(self):
        self.saved = self.groups.to_json()

    def restart(self):
        self.groups = SourceShardGroups.from_json(self.saved)

    def run(self):
        i = 0
        while i < len(self.events):
            self.reads += 1
            assert self.reads < 10_000, "the stream never ends"
            if self.reads in self.crash_at:
                self.restart()
                i = next(j for j, e in enumerate(self.events) if e[1] == self.checkpoint)
                continue
            if self.roundtrip:
                self.groups = SourceShardGroups.from_json(json.loads(json.dumps(json.loads(self.groups.to_json()))))
            (kind, table, *rest), start, end = self.events[i]
            if kind == "dml":
                if not self.groups.should_skip_dml(table, start):
                    self.applied.append((i, dict(self.down)))
                    self.safe_exit = end if self.safe_exit is None or end.key() > self.safe_exit.key() else self.safe_exit
                self.commit(end)
                i += 1
                continue
            # a DDL of a group member
            ddls = DDL[rest[0]] if kind == "ddl" else XDDL[rest[0]]
            out = self.groups.on_ddl(table, ddls, end)
            if self.save == "eager" or out.action != DONE:
                self.persist()
            if out.action in (RECORDED, DONE):
                self.commit(end)
                i += 1
                continue
            assert out.action == REPORT
            target = self.groups.group_of(table).target
            done = self.lock_done.get(target)
            if done is None or out.position.key() > done.key():
                self.down[target] += 1          # the lock's owner runs the DDL downstream
                self.lock_done[target] = out.position
            # else: the lock answers "already done" (a report met again after a restart)
            replay = self.groups.on_resolved(target)
            self.checkpoint = replay.rewind_to  # durable first ...
            if self.crash_mid_resolve:
                self.crash_mid_resolve -= 1
                if self.crash_mid_resolve == 0:
                    self.restart()
                    i = next(j for j, e in enumerate(self.events) if e[1] == self.checkpoint)
                    continue
            self.persist()                      # ... then the tracker
            i = next(j for j, e in enumerate(self.events) if e[1] == replay.rewind_to)
        return self

    def commit(self, pos):
        self.checkpoint = pos
        self.groups.committed(pos)
        if self.save == "eager":
            self.persist()

    # ---- the properties, from the event list alone ------------------------------------------
    def expected_versions(self, i):
        (kind, table, *_), _, _ = self.events[i]
        g = G1 if table in (T1, T2, T3) else G2 if table in (U1, U2) else None
        if g is None:
            return None, None
        n = sum(1 for (k, t, *_), _, _ in self.events[:i] if k in ("ddl", "ddlx") and t == table)
        return g, n

    def check(self, exact=True):
        dml = [i for i, ((k, *_), _, _) in enumerate(self.events) if k == "dml"]
        got = [i for i, _ in self.applied]
        if exact:
            assert sorted(got) == dml, "every row exactly once"
        else:
            assert set(got) == set(dml), "every row at least once"
        for i, down in self.applied:
            g, n = self.expected_versions(i)
            if g is not None:
                assert down[g] == n, f"row {self.events[i][0]} applied with the downstream at DDL {down[g]}, needs {n}"
        return self


def groups1(*members):
    return SourceShardGroups.build({G1: members})


SCENARIOS = {
    "the 10 steps (seed 004)": [("dml", T1), ("dml", T2), ("ddl", T1, 1), ("dml", T1), ("dml", T2), ("dml", T1),
                                ("ddl", T2, 1), ("dml", T1), ("dml", T2)],
    "three tables": [("ddl", T3, 1), ("dml", T1), ("dml", T3), ("ddl", T1, 1), ("dml", T2), ("dml", T1), ("dml", T3),
                     ("ddl", T2, 1), ("dml", T2), ("dml", T3)],
    "several DDLs in a row on one table": [
        ("ddl", T1, 1), ("dml", T1), ("ddl", T1, 2), ("dml", T1), ("dml", T2), ("ddl", T2, 1), ("dml", T2),
        ("dml", T1), ("ddl", T2, 2), ("dml", T2), ("dml", T1)],
    "interleaved DDLs": [
        ("ddl", T1, 1), ("dml", T2), ("ddl", T2, 1), ("dml", T1), ("ddl", T2, 2), ("dml", T2), ("dml", T1),
        ("ddl", T1, 2), ("dml", T1), ("dml", T2)],
    "three rounds overlapping": [
        ("ddl", T1, 1), ("dml", T1), ("ddl", T1, 2), ("dml", T1), ("ddl", T1, 3), ("dml", T1), ("dml", T2),
        ("ddl", T2, 1), ("dml", T2), ("ddl", T2, 2), ("dml", T2), ("dml", T1), ("ddl", T2, 3), ("dml", T2), ("dml", T1)],
}


@pytest.mark.parametrize("name", list(SCENARIOS))
@pytest.mark.parametrize("roundtrip", [False, True], ids=["memory", "json"])
def test_single_group(name, roundtrip):
    events = SCENARIOS[name]
    members = sorted({e[1] for e in events})
    sim = Sim(events, groups1(*members), roundtrip=roundtrip).run().check()
    assert sim.down[G1] == max(e[2] for e in events if e[0] == "ddl")
    assert sim.groups.idle


def test_two_groups_and_a_plain_table_in_one_stream():
    events = [("dml", PLAIN), ("ddl", T1, 1), ("dml", U1), ("ddlx", U1, 1), ("dml", T1), ("dml", PLAIN),
              ("dml", U2), ("dml", T2), ("ddlx", U2, 1), ("dml", U1), ("dml", PLAIN), ("dml", T2), ("ddl", T2, 1),
              ("dml", T1), ("dml", T2), ("dml", PLAIN), ("dml", U2)]
    groups = SourceShardGroups.build({G1: [T1, T2], G2: [U1, U2]})
    sim = Sim(events, groups).run().check()
    assert sim.down == {G1: 1, G2: 1}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_crash_anywhere_with_eager_saves_is_exactly_once(name):
    events = SCENARIOS[name]
    members = sorted({e[1] for e in events})
    clean = Sim(events, groups1(*members)).run()
    for crash in range(1, clean.reads + 1):
        Sim(events, groups1(*members), crash_at=[crash]).run().check(exact=True)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_crash_between_rewind_and_saving_the_tracker(name):
    events = SCENARIOS[name]
    members = sorted({e[1] for e in events})
    rounds = max(e[2] for e in events if e[0] == "ddl")
    for n in range(1, rounds + 1):
        sim = Sim(events, groups1(*members), crash_mid_resolve=n).run().check(exact=True)
        assert sim.down[G1] == rounds


@pytest.mark.parametrize("seed", range(25))
def test_crash_with_lazy_saves_is_at_least_once_below_the_safe_mode_horizon(seed):
    rnd = random.Random(seed)
    events = SCENARIOS[rnd.choice(list(SCENARIOS))]
    members = sorted({e[1] for e in events})
    sim = Sim(events, groups1(*members), save="lazy", crash_at=sorted(rnd.sample(range(1, 40), 3))).run()
    sim.check(exact=False)
    # a row applied twice was first applied below the highest position ever sent downstream
    seen = set()
    for i, _ in sim.applied:
        if i in seen:
            assert sim.events[i][2].key() <= sim.safe_exit.key()
        seen.add(i)


def test_outcomes_and_queries_step_by_step():
    g = SourceGroup(G1, [T1, T2, T3])
    out = g.on_ddl(T1, DDL[1], P(100))
    assert (out.action, out.round, out.waiting_for) == (RECORDED, 1, (T2, T3))
    assert not g.idle
    assert g.on_ddl(T1, DDL[1], P(100)).action == RECORDED          # met again: same answer
    g.on_ddl(T3, DDL[1], P(150))
    out = g.on_ddl(T2, DDL[1], P(300))
    assert out.action == REPORT and out.rewind_to == P(100)
    assert g.on_ddl(T2, DDL[1], P(300)).action == REPORT            # a restart before the lock answered
    r = g.on_resolved()
    assert (r.rewind_to, r.until, r.tables, r.round) == (P(100), P(300), (T1, T3), 1)
    assert not g.should_skip_dml(T1, P(120)) and g.should_skip_dml(T2, P(120))
    assert g.should_skip_dml(T3, P(120)) and not g.should_skip_dml(T3, P(160))
    assert g.on_ddl(T3, DDL[1], P(150)).action == DONE
    g.committed(P(400))
    assert g.idle and g.replay is None
    assert g.should_skip_dml(T1, P(200))                            # before the commit horizon: already applied
    assert not g.should_skip_dml(T1, P(400))


def test_inconsistent_ddls_inside_a_source_name_both_statements():
    g = SourceGroup(G1, [T1, T2])
    g.on_ddl(T1, DDL[1], P(100))
    with pytest.raises(ShardDDLInconsistent) as ei:
        g.on_ddl(T2, DDL[2], P(200))
    msg = str(ei.value)
    assert DDL[1][0] in msg and DDL[2][0] in msg and "`s`.`t_1`" in msg and "`s`.`t_2`" in msg


def test_errors_for_strangers_and_out_of_order():
    g = SourceGroup(G1, [T1, T2])
    with pytest.raises(ShardDDLLockError, match="not a member"):
        g.on_ddl(U1, DDL[1], P(100))
    g.on_ddl(T1, DDL[1], P(200))
    with pytest.raises(ShardDDLLockError, match="older than"):
        g.on_ddl(T1, DDL[2], P(150))
    with pytest.raises(ShardDDLLockError, match="still waiting"):
        g.on_resolved()


def test_members_join_and_leave():
    g = SourceGroup(G1, [T1, T2])
    g.on_ddl(T1, DDL[1], P(100))
    g.add_member(T3)                    # created with the new schema (DM's rule)
    assert g.waiting_for() == (T2,)
    assert g.should_skip_dml(T3, P(120))  # its rows have the new schema: held like T1's
    out = g.remove_member(T2)           # the last one missing is dropped: the round is complete
    assert out.action == REPORT and out.position == P(100)
    r = g.on_resolved()
    assert r.rewind_to == r.until == P(100) and g.replay is None


def test_a_renamed_member_keeps_its_place_under_the_new_name():
    """RENAME TABLE t_1 TO t_3 (pessimistic mode, the same target): the rename is t_1's DDL,
    recorded under t_3; t_3's rows wait like any shard's past a DDL; met again in the replay
    the rename is done, and rows of the old name there were applied in the first pass."""
    groups = SourceShardGroups.build({G1: [T1, T2]})
    g = groups.groups[G1]
    ren = ("RENAME TABLE `db`.`t` TO `db`.`t`",)
    g.rename_member(T1, T3)
    assert set(g.members) == {T2, T3}
    assert g.on_ddl(T3, ren, P(100)).action == RECORDED
    assert groups.should_skip_dml(T3, P(120)) and not groups.should_skip_dml(T2, P(130))
    groups.committed(P(190))                                 # the first pass, up to T2's rename
    assert g.on_ddl(T2, ren, P(200)).action == REPORT
    r = groups.on_resolved(G1)                               # the checkpoint rewinds to 100
    assert (r.rewind_to, r.tables) == (P(100), (T3,))
    g.rename_member(T1, T3)                                  # met again while replaying
    assert set(g.members) == {T2, T3} and g.on_ddl(T3, ren, P(100)).action == DONE
    assert not groups.should_skip_dml(T3, P(120))            # replayed now
    assert groups.should_skip_dml(T2, P(130))                # applied in the first pass
    assert groups.should_skip_dml(T1, P(90))                 # the old name: applied in the first pass


def test_json_roundtrip_is_lossless():
    g = SourceShardGroups.build({G1: [T1, T2], G2: [U1]})
    g.on_ddl(T1, DDL[1], P(100))
    g.on_ddl(T1, DDL[2], P(110))
    g.on_ddl(T2, DDL[1], P(200))
    g.on_resolved(G1)
    g.committed(P(150))
    back = SourceShardGroups.from_json(g.to_json())
    assert back.to_json() == g.to_json()
    for pos in range(90, 260, 10):
        for t in (T1, T2, U1, PLAIN):
            assert back.should_skip_dml(t, P(pos)) == g.should_skip_dml(t, P(pos))
