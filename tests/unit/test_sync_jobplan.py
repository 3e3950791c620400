"""The appliers' job stages in C (dm_core/sync/jobplan.pyx) give what their Python twins give:
``compact``, the causality loop, ``regroup`` and ``merge``, job for job, worker for worker and
statement for statement, over random valid histories of the common case (one int key, rows
apart); outside that case each C stage answers None and the pool runs the Python one.

`make setup` builds it with the binlog reader; these tests fail, not skip, where it did not build
(unless SHARDFLOW_PURE_PYTHON asks for pure Python).
"""

import dataclasses
import random

import pytest

from dm_core import compiled_build
from dm_core.binlog import compiled
from dm_core.sync import workers
from dm_core.sync.causality import Causality
from dm_core.sync.compactor import compact
from dm_core.sync.job import RowJob
from dm_core.sync.merger import merge, regroup
from dm_core.target import TargetTable
from tests.unit.test_sync_merger import Spec, history

if compiled_build.forced_pure():
    pytest.skip("SHARDFLOW_PURE_PYTHON: the pure-Python path only", allow_module_level=True)

jobplan = workers.jobplan


def test_built():
    assert jobplan is not None, f"make setup did not build it: {compiled.reason}"


def _t(schema, table, cols=("id", "v", "w"), key=("id",)):
    return TargetTable(schema, table, cols, key, True, only_unique_key=True)


SIMPLE = [_t("db", "a"), _t("db", "b"), _t("Db", "A"), _t("db", "a")]   # an equal twin of the first, another object
KEYS = [-(2 ** 63), -7, -1, -2, 0, 1, 2, 3, 5, 8, 13, 2 ** 61 - 1, 2 ** 64 + 3]


def _specs(keys=KEYS):
    vals = [None, 0, "x", b"\x00y", 2.5]
    return [Spec(t, {"id": keys, "v": vals, "w": vals}) for t in SIMPLE]


def _jobs(rng, n):
    jobs, _ = history(rng, _specs(), n)
    for i, j in enumerate(jobs):
        j.safe = rng.random() < 0.25
        j.pos = i
    return jobs


def _python_rounds(jobs, n):
    c = Causality(n)
    rounds, queues = [], [[] for _ in range(n)]
    for j in jobs:
        w = c.add(j)
        if w is None:
            rounds.append(queues)
            queues = [[] for _ in range(n)]
            c.reset()
            w = c.add(j)
        queues[w].append(j)
    rounds.append(queues)
    return rounds


def _same(a, b):
    """Jobs equal field by field, and the same table object where Python kept one."""
    assert a == b
    assert [x.target for x in a] == [x.target for x in b]
    assert all(x.target is y.target for x, y in zip(a, b))


@pytest.mark.parametrize("seed", range(60))
def test_stages_equal_python(seed):
    rng = random.Random(seed)
    jobs = _jobs(rng, rng.randrange(1, 300))
    got = jobplan.compact(jobs)
    _same(got, compact(jobs))
    for n in (2, 3, 8):
        want = _python_rounds(got, n)
        have = jobplan.spread(got, n)
        assert len(have) == len(want)
        for h, w in zip(have, want):
            for hq, wq in zip(h, w):
                _same(hq, wq)
                _same(jobplan.regroup(hq), regroup(hq))
                assert jobplan.merge(regroup(hq)) == merge(regroup(hq), multiple_rows=True)
    _same(jobplan.regroup(jobs), regroup(jobs))
    assert jobplan.merge(jobs) == merge(jobs, multiple_rows=True)


def test_conflicts_cut_rounds():
    # a key-changing update whose two keys sit on two workers: the Python loop flushes there too
    t = SIMPLE[0]
    ins = [RowJob("insert", t, None, {"id": k, "v": 0, "w": 0}, False) for k in range(40)]
    moves = [RowJob("update", t, {"id": k, "v": 0, "w": 0}, {"id": k + 1, "v": 0, "w": 0}, False)
             for k in range(0, 40, 2)]
    rounds = jobplan.spread(ins + moves, 4)
    assert len(rounds) > 1
    want = _python_rounds(ins + moves, 4)
    assert [[list(q) for q in r] for r in rounds] == [[list(q) for q in r] for r in want]


OUTSIDE = [
    ("a string key", _t("db", "s"), {"id": "k", "v": 1, "w": 1}),
    ("a bool key", _t("db", "s"), {"id": True, "v": 1, "w": 1}),
    ("a NULL key", _t("db", "s"), {"id": None, "v": 1, "w": 1}),
    ("a missing key column", _t("db", "s"), {"v": 1, "w": 1}),
    ("a two-column key", _t("db", "s", key=("id", "v")), {"id": 1, "v": 1, "w": 1}),
    ("a second unique index", dataclasses.replace(_t("db", "s"), only_unique_key=False, unique_indexes=(("id",), ("v",))),
     {"id": 1, "v": 1, "w": 1}),
    ("no unique key", TargetTable("db", "s", ("id", "v", "w"), ("id", "v", "w"), False), {"id": 1, "v": 1, "w": 1}),
    ("a foreign-key parent", dataclasses.replace(_t("db", "s"), parents=((("v",), ("db", "p")),)), {"id": 1, "v": 1, "w": 1}),
]


@pytest.mark.parametrize("what,t,row", OUTSIDE, ids=[o[0] for o in OUTSIDE])
def test_outside_the_case_is_python(what, t, row):
    simple = [RowJob("insert", SIMPLE[0], None, {"id": k, "v": 0, "w": 0}, False) for k in range(5)]
    odd = RowJob("insert", t, None, row, False)
    for jobs in ([odd], simple + [odd], [odd] + simple):
        assert jobplan.compact(jobs) is None
        assert jobplan.spread(jobs, 4) is None
        assert jobplan.regroup(jobs) is None
        assert jobplan.merge(jobs) is None
    keyless = RowJob("insert", SIMPLE[0], None, {"id": 9, "v": 0, "w": 0}, False, origin=(1, 4, "db.a", 0))
    assert jobplan.spread(simple + [keyless], 4) is None
