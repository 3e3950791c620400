"""The pessimistic lock state machine: 2 and 3 sources, several tables per source,
several and interleaved DDLs, inconsistent sequences, replays, unlock.

Every scenario runs twice: on one Lock object, and with the lock written to rows and
read back after every call (what lock_ops.py does around each transaction)."""

import pytest

from dm_core.position import Position
from dm_core.shardddl.common import DONE, EXEC, EXECUTING, SKIP, WAIT
from dm_core.shardddl.errors import ShardDDLInconsistent, ShardDDLLockError
from dm_core.shardddl.keeper import Keeper
from dm_core.shardddl.pessimism import Info, Lock

TASK, TARGET = "task", ("db", "t")
A = "ALTER TABLE `db`.`t` ADD COLUMN `a` INT"
B = "ALTER TABLE `db`.`t` ADD COLUMN `b` INT"
C = "ALTER TABLE `db`.`t` DROP COLUMN `c`"


class Harness:
    """Drives one lock; optionally persists it (rows round-trip) after every transition."""

    def __init__(self, sources, persist):
        self.lock = Lock(f"{TASK}-`db`.`t`", TASK, TARGET, sources)
        self.persist = persist
        self.pos = {}

    def _rt(self):
        if self.persist:
            self.lock = Lock.from_rows(*self.lock.to_rows())

    def call(self, fn):
        try:
            return fn(self.lock)
        finally:
            self._rt()

    def report(self, source, *ddls, tables=None, pos=None):
        self.pos[source] = pos if pos is not None else self.pos.get(source, 0) + 100
        info = Info(TASK, source, TARGET, tuple(tables or [("s", "t_1")]), tuple(ddls),
                    Position("bin.000001", self.pos[source]))
        return self.call(lambda lk: lk.report(info))

    def op(self, source):
        return self.lock.operation_for(source)

    def ack(self, source, step=None):
        step = step if step is not None else self.op(source).step
        return self.call(lambda lk: lk.ack(source, step))

    def execute(self, source):
        """The owner's exec: mark each statement, then ack (as executor.run_operation)."""
        op = self.op(source)
        assert op.action == EXEC, op
        for i in range(op.exec_index, len(op.ddls)):
            self.call(lambda lk: lk.mark_executing(source, op.step, i))
            self.call(lambda lk: lk.mark_executed(source, op.step, i))
        return self.ack(source, op.step)


@pytest.fixture(params=[False, True], ids=["memory", "persisted"])
def persist(request):
    return request.param


def test_two_sources_one_ddl(persist):
    h = Harness(["s1", "s2"], persist)
    op = h.report("s1", A)
    assert (op.action, op.owner, op.step) == (WAIT, "s1", 1)
    assert "s2" in op.message
    assert h.lock.status == "waiting" and h.lock.unsynced() == ["s2"]
    op2 = h.report("s2", A)
    assert op2.action == WAIT and "owner s1" in op2.message     # skip is held until the owner is done
    assert h.op("s1").action == EXEC and h.op("s1").ddls == (A,)
    with pytest.raises(ShardDDLLockError, match="before the owner s1"):
        h.call(lambda lk: lk.ack("s2", 1))
    h.execute("s1")
    assert h.op("s1") is None
    assert h.op("s2").action == SKIP
    h.ack("s2")
    assert h.lock.status == "idle" and h.op("s2") is None and h.lock.step == 1


def test_three_sources_several_tables_each(persist):
    h = Harness(["s1", "s2", "s3"], persist)
    tables = {"s1": [("a", "t_1"), ("a", "t_2")], "s2": [("b", "t_1"), ("b", "t_2"), ("c", "t_1")],
              "s3": [("d", "t_9")]}
    h.report("s2", A, tables=tables["s2"])
    h.report("s3", A, tables=tables["s3"])
    assert h.lock.owner == "s2" and h.lock.status == "waiting" and h.lock.unsynced() == ["s1"]
    h.report("s1", A, tables=tables["s1"])
    d = h.lock.describe()
    assert d["members"] == {s: [list(t) for t in ts] for s, ts in tables.items()}
    assert d["status"] == "ready" and d["synced"] == ["s1", "s2", "s3"]
    assert [h.op(s).action for s in ("s1", "s2", "s3")] == [WAIT, EXEC, WAIT]
    h.execute("s2")
    assert [h.op(s).action for s in ("s1", "s3")] == [SKIP, SKIP]
    h.ack("s3")
    assert h.lock.status == "ready"   # s1 has not finished yet
    h.ack("s1")
    assert h.lock.status == "idle"


# Interleaved sequences: (source, ddl) reports in order; every source executes/acks as soon as it can.
SEQUENCES = [
    ("two sources, two DDLs, interleaved", ["s1", "s2"], [("s1", A), ("s2", A), ("s1", B), ("s2", B)]),
    ("two sources, s1 runs ahead", ["s1", "s2"], [("s1", A), ("s2", A), ("s1", B), ("s1", C), ("s2", B), ("s2", C)]),
    ("three sources, three DDLs", ["s1", "s2", "s3"],
     [("s3", A), ("s1", A), ("s2", A), ("s1", B), ("s3", B), ("s1", C), ("s2", B), ("s2", C), ("s3", C)]),
]


@pytest.mark.parametrize("name,sources,seq", SEQUENCES, ids=[s[0] for s in SEQUENCES])
def test_interleaved_sequences_do_not_deadlock(name, sources, seq, persist):
    """Upstream runs the DDLs in ``seq`` order; a source whose previous DDL is not finished
    is paused, so its next DDL waits in its binlog until it is. Every DDL is executed
    exactly once, in order, by one owner, and everything finishes."""
    h = Harness(sources, persist)
    backlog = {s: [] for s in sources}   # DDLs in the source's binlog not read yet
    busy = {s: False for s in sources}   # reported, not finished
    executed = []

    def progress():
        moved = True
        while moved:
            moved = False
            for s in sources:
                op = h.op(s)
                if op is not None and op.action != WAIT:
                    if op.action == EXEC:
                        executed.append(op.ddls)
                        h.execute(s)
                    else:
                        h.ack(s, op.step)
                    busy[s] = False
                    moved = True
                if not busy[s] and backlog[s]:
                    busy[s] = True
                    h.report(s, backlog[s].pop(0))
                    moved = True

    for s, ddl in seq:
        backlog[s].append(ddl)
        progress()
    assert not any(busy.values()) and not any(backlog.values()), "deadlock"
    expected = []
    for _, d in seq:
        if (d,) not in expected:
            expected.append((d,))
    assert executed == expected
    assert h.lock.status == "idle" and h.lock.step == len(expected)


def test_inconsistent_sequence_names_both_statements(persist):
    h = Harness(["s1", "s2"], persist)
    h.report("s1", A, tables=[("a", "t_1")])
    with pytest.raises(ShardDDLInconsistent) as ei:
        h.report("s2", B, tables=[("b", "t_7")])
    msg = str(ei.value)
    assert A in msg and B in msg and "s2" in msg and "`b`.`t_7`" in msg and "s1" in msg
    assert "inconsistent DDL sequence" in msg
    assert h.lock.status == "conflict" and h.lock.conflict == ei.value.message
    op = h.op("s2")
    assert op.action == WAIT and op.conflict and op.error() is not None
    # the operator replaced s2's statement (binlog replace): the right DDL is accepted
    h.report("s2", A, tables=[("b", "t_7")], pos=h.pos["s2"])
    assert h.lock.status == "ready" and h.lock.conflict == ""
    h.execute("s1")
    h.ack("s2")
    assert h.lock.status == "idle"


def test_inconsistent_queued_report_is_flagged_on_promotion(persist):
    h = Harness(["s1", "s2"], persist)
    h.report("s1", A)
    h.report("s2", A)
    h.execute("s1")
    h.report("s1", B)                 # queued behind step 1
    assert "queued" in h.op("s1").message
    h.ack("s2")                       # step 1 done: s1's B opens step 2
    with pytest.raises(ShardDDLInconsistent, match="DROP COLUMN"):
        h.report("s2", C)
    assert h.lock.owner == "s1" and h.lock.ddls == (B,)


def test_reports_are_idempotent_and_replays_are_recognised(persist):
    h = Harness(["s1", "s2"], persist)
    h.report("s1", A, pos=500)
    again = h.report("s1", A, pos=500)            # a sensor retried the same report
    assert again.action == WAIT and h.lock.seq == 1
    h.report("s2", A, pos=700)
    h.execute("s1")
    h.ack("s2")
    # s1 died after ack_done, before its checkpoint passed the DDL: it meets the DDL again
    op = h.report("s1", A, pos=500)
    assert (op.action, op.state, op.replayed) == (SKIP, DONE, True)
    assert h.lock.status == "idle" and h.lock.step == 1
    # acks are idempotent too
    assert h.call(lambda lk: lk.ack("s1", 1)).state == DONE


def test_a_second_ddl_while_one_is_pending_is_refused(persist):
    h = Harness(["s1", "s2"], persist)
    h.report("s1", A, pos=100)
    with pytest.raises(ShardDDLLockError, match="not finished"):
        h.report("s1", B, pos=200)


def test_late_reporter_outside_the_sources_gets_skip(persist):
    h = Harness(["s1"], persist)
    h.report("s1", A)
    assert h.op("s1").action == EXEC
    h.report("s9", A)                     # a source the coordinator did not list (yet)
    assert h.op("s9").action == WAIT
    h.execute("s1")
    assert h.op("s9").action == SKIP
    h.ack("s9")
    assert h.lock.status == "idle"


def test_no_sources_known_means_no_decision(persist):
    h = Harness([], persist)
    h.report("s1", A)
    assert h.op("s1").action == WAIT and h.lock.status == "waiting"
    h.call(lambda lk: (lk.set_sources(["s1"]), lk.settle()))   # the coordinator's resolve
    assert h.op("s1").action == EXEC


def test_executing_state_survives_and_statements_are_marked_in_order(persist):
    h = Harness(["s1"], persist)
    h.report("s1", A, B)
    op = h.op("s1")
    assert op.ddls == (A, B)
    with pytest.raises(ShardDDLLockError, match="not next"):
        h.call(lambda lk: lk.mark_executing("s1", 1, 1))
    h.call(lambda lk: lk.mark_executing("s1", 1, 0))
    assert h.op("s1").state == EXECUTING and h.op("s1").exec_index == 0
    h.call(lambda lk: lk.mark_executing("s1", 1, 0))          # a rerun marks again: fine
    h.call(lambda lk: lk.mark_executed("s1", 1, 0))
    h.call(lambda lk: lk.mark_executed("s1", 1, 0))           # idempotent
    assert (h.op("s1").state, h.op("s1").exec_index) == ("pending", 1)
    h.execute("s1")
    assert h.lock.status == "idle"


def test_unlock_releases_a_missing_source(persist):
    h = Harness(["s1", "s2", "s3"], persist)
    h.report("s1", A)
    h.report("s2", A)
    with pytest.raises(ShardDDLLockError, match="has not reached"):
        h.call(lambda lk: lk.unlock(owner="s3"))
    h.call(lambda lk: lk.unlock())                  # s3 is gone for now: run with s1, s2
    assert h.op("s1").action == EXEC and h.op("s3") is None
    h.execute("s1")
    h.ack("s2")
    assert h.lock.status == "idle"
    # s3 comes back and reaches the DDL: skip, nobody runs it again
    op = h.report("s3", A)
    assert op.action == SKIP and op.forced
    h.ack("s3", op.step)
    # and the next DDL involves s3 normally
    h.report("s1", B)
    h.report("s2", B)
    assert h.lock.status == "waiting" and h.lock.unsynced() == ["s3"]
    h.report("s3", B)
    assert h.lock.status == "ready"


def test_unlock_with_another_owner_and_skip(persist):
    h = Harness(["s1", "s2"], persist)
    h.report("s1", A)
    h.report("s2", A)
    h.call(lambda lk: lk.unlock(owner="s2"))         # s1 is stuck: let s2 execute
    assert h.op("s2").action == EXEC and h.op("s1").action == WAIT
    h.call(lambda lk: lk.mark_executing("s2", 1, 0))
    with pytest.raises(ShardDDLLockError, match="run it twice"):
        h.call(lambda lk: lk.unlock(owner="s1"))
    h.call(lambda lk: lk.unlock(owner="s2", action=SKIP))   # the operator ran it by hand
    assert h.op("s2").action == SKIP
    h.ack("s2")
    h.ack("s1")
    assert h.lock.status == "idle"


def test_unlock_force_remove_finishes_the_step(persist):
    h = Harness(["s1", "s2", "s3"], persist)
    h.report("s1", A)
    with pytest.raises(ShardDDLInconsistent):
        h.report("s2", B)
    h.call(lambda lk: lk.unlock(force_remove=True))
    assert h.lock.status == "idle" and h.op("s1") is None
    assert h.report("s1", A, pos=h.pos["s1"]).replayed
    # s2 and s3 were released: reaching A later they skip it
    assert h.report("s3", A).forced
    # s2's different DDL is skipped too (DM's unlock: the other sources skip theirs; DM's 102)
    op = h.report("s2", B, pos=h.pos["s2"])
    assert op.forced and op.action == SKIP and "differed from the unlocked" in op.message


def test_keeper_registry():
    k = Keeper(Lock)
    i1 = Info(TASK, "s1", ("db", "t1"), (("s", "a"),), (A,), Position("b.1", 1))
    i2 = Info(TASK, "s1", ("db", "t2"), (("s", "b"),), (B,), Position("b.1", 2))
    k.report(i1, ["s1"])
    k.report(i2, ["s1", "s2"])
    assert [lk.lock_id for lk in k.locks(TASK)] == ["task-`db`.`t1`", "task-`db`.`t2`"]
    assert k.operation(TASK, "s1").lock_id == "task-`db`.`t1`" and k.operation(TASK, "s1").action == EXEC
    assert k.get_by_target(TASK, ("db", "t2")).unsynced() == ["s2"]
    assert k.remove("task-`db`.`t1`") is not None and k.operation(TASK, "s1").action == WAIT
