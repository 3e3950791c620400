"""The keyless ledger's decisions (dm_core/sync/keyless_ledger.py): which replayed rows of a
table without a key are downstream already, and what a worker's transaction records."""

import pytest

from dm_core.sync.job import RowJob
from dm_core.sync.keyless_ledger import KeylessLedger, replay_plan
from dm_core.target import TargetTable

K = TargetTable("d", "k", ("a", "b"), ("a", "b"), False)
T = TargetTable("d", "t", ("id", "v"), ("id",), True)


def kj(seq, pos, table, n, safe=True, op="insert"):
    return RowJob(op, K, None, {"a": n, "b": "x"}, safe, origin=(seq, pos, table, n))


def shape(jobs):
    return [(j.origin[1:] if j.origin else j.target.table, j.safe) for j in jobs]


CASES = [
    # (what, jobs, horizon, applied, expected (origin[1:] or table, safe))
    ("no horizon: everything as it is", [kj(1, 10, "u.k", 0)], None, {},
     [((10, "u.k", 0), True)]),
    ("before the horizon: legacy safe mode", [kj(1, 10, "u.k", 0)], (1, 20), {(1, 10, "u.k"): 1},
     [((10, "u.k", 0), True)]),
    ("at the horizon, nothing applied: plain writes", [kj(1, 20, "u.k", 0), kj(1, 20, "u.k", 1)], (1, 20), {},
     [((20, "u.k", 0), False), ((20, "u.k", 1), False)]),
    ("a prefix applied: the rest plain", [kj(1, 20, "u.k", i) for i in range(3)], (1, 20), {(1, 20, "u.k"): 2},
     [((20, "u.k", 2), False)]),
    ("all applied: nothing", [kj(1, 20, "u.k", i) for i in range(2)], (1, 20), {(1, 20, "u.k"): 2}, []),
    ("per upstream table", [kj(1, 20, "u.k", 0), kj(1, 20, "u.k2", 0)], (1, 20), {(1, 20, "u.k"): 1},
     [((20, "u.k2", 0), False)]),
    ("per transaction", [kj(1, 20, "u.k", 0), kj(2, 4, "u.k", 0)], (1, 20), {(2, 4, "u.k"): 1},
     [((20, "u.k", 0), False)]),
    ("not in safe mode: never sent before", [kj(1, 20, "u.k", 0, safe=False)], (1, 20), {(1, 20, "u.k"): 1},
     [((20, "u.k", 0), False)]),
    ("keyed rows pass", [RowJob("insert", T, None, {"id": 1, "v": 2}, True)], (1, 20), {},
     [("t", True)]),
    ("a later file is past the horizon", [kj(2, 4, "u.k", 0)], (1, 900), {}, [((4, "u.k", 0), False)]),
]


@pytest.mark.parametrize("what,jobs,horizon,applied,want", CASES, ids=[c[0] for c in CASES])
def test_replay_plan(what, jobs, horizon, applied, want):
    assert shape(replay_plan(jobs, horizon, applied)) == want


def test_a_worker_records_the_highest_ordinal_per_transaction_and_table():
    ledger = KeylessLedger("task", "src", "dm_meta", connect=None)
    jobs = [kj(1, 20, "u.k", 0), kj(1, 20, "u.k", 1), RowJob("insert", T, None, {"id": 1, "v": 2}, False),
            kj(1, 20, "u.k2", 4), kj(3, 8, "u.k", 0)]
    marks = ledger.marks(jobs)
    assert sorted(m.params for m in marks) == [("task", "src", 1, 20, "u.k", 2), ("task", "src", 1, 20, "u.k2", 5),
                                               ("task", "src", 3, 8, "u.k", 1)]
    head, row, tail = marks[0].shape
    assert "`dm_meta`.`shardflow_sync_keyless`" in head and "GREATEST(applied" in tail
    assert ledger.marks([RowJob("insert", T, None, {"id": 1, "v": 2}, False)]) == []
