"""regroup: reordering a worker's jobs for longer merge runs never changes the result."""

import random

import pytest

from dm_core.sync.job import RowJob
from dm_core.sync.merger import regroup
from dm_core.target import TargetTable

T = TargetTable("db", "t", ("id", "v"), ("id",), True, True)
U = TargetTable("db", "u", ("id", "v"), ("id",), True, True)
TWO_UK = TargetTable("db", "w", ("id", "v"), ("id",), True, False)  # a second unique index on v


def apply(jobs):
    """The downstream tables after the jobs, as a row store keyed by (table, id)."""
    rows = {}
    for j in jobs:
        t = j.target.table
        if j.op in ("delete", "update"):
            rows.pop((t, j.before["id"]), None)
        if j.op in ("insert", "update"):
            rows[(t, j.after["id"])] = j.after["v"]
    return rows


def workload(seed, n=300, tables=(T, U)):
    rnd = random.Random(seed)
    live = {t.table: {} for t in tables}
    jobs = []
    by_name = {t.table: t for t in tables}
    for _ in range(n):
        t = by_name[rnd.choice(list(live))]
        rows = live[t.table]
        k = rnd.randrange(20)
        if k in rows and rnd.random() < 0.5:
            if rnd.random() < 0.5:
                jobs.append(RowJob("delete", t, {"id": k, "v": rows.pop(k)}, None, False))
            else:
                new = k if rnd.random() < 0.8 else rnd.randrange(20, 40)
                if new != k and new in rows:
                    continue
                v = rnd.randrange(1000)
                jobs.append(RowJob("update", t, {"id": k, "v": rows.pop(k)}, {"id": new, "v": v}, False))
                rows[new] = v
        elif k not in rows:
            rows[k] = rnd.randrange(1000)
            jobs.append(RowJob("insert", t, None, {"id": k, "v": rows[k]}, False))
    return jobs


@pytest.mark.parametrize("seed", range(40))
def test_regrouped_jobs_give_the_same_rows(seed):
    jobs = workload(seed)
    out = regroup(jobs)
    assert sorted(map(id, out)) == sorted(map(id, jobs)), "no job lost or duplicated"
    assert apply(out) == apply(jobs)


def test_runs_get_longer():
    jobs = [RowJob("insert", T, None, {"id": i, "v": 0}, False) if i % 2 else
            RowJob("delete", T, {"id": i, "v": 0}, None, False) for i in range(100)]
    out = regroup(jobs)
    changes = sum(1 for a, b in zip(out, out[1:]) if a.op != b.op)
    assert changes == 1


@pytest.mark.parametrize("jobs", [
    # a second unique key: delete v=1 then insert another id with v=1 must keep its order
    [RowJob("insert", TWO_UK, None, {"id": 2, "v": 1}, False), RowJob("delete", TWO_UK, {"id": 1, "v": 1}, None, False)],
    # the same key twice (delete then re-insert): order kept
    [RowJob("delete", T, {"id": 1, "v": 1}, None, False), RowJob("insert", T, None, {"id": 1, "v": 2}, False)][::-1],
])
def test_jobs_that_may_interact_keep_their_order(jobs):
    assert [(j.op, j.target.table) for j in regroup(jobs)] == [(j.op, j.target.table) for j in jobs]
