"""Causality: jobs sharing a conflict key go to one worker; joining two workers is a conflict."""

import pytest

from dm_core.sync.causality import Causality
from dm_core.sync.job import RowJob
from dm_core.target import TargetTable

PK = TargetTable("db", "t", ("id", "v"), ("id",), True)
PK2 = TargetTable("db", "t2", ("id", "v"), ("id",), True)
NK = TargetTable("db", "n", ("a", "b"), ("a", "b"), False)
SK = TargetTable("db", "s", ("k", "v"), ("k",), True)


def I(t, *after):
    return RowJob("insert", t, None, dict(zip(t.columns, after)), False)


def U(t, before, after):
    return RowJob("update", t, dict(zip(t.columns, before)), dict(zip(t.columns, after)), False)


def D(t, *before):
    return RowJob("delete", t, dict(zip(t.columns, before)), None, False)


def _apart(c: Causality, t=PK) -> tuple[int, int]:
    """Two ids whose fresh keys land on different workers."""
    w0 = c.worker_for(I(t, 0, None).keys()[0])
    for i in range(1, 100):
        if c.worker_for(I(t, i, None).keys()[0]) != w0:
            return 0, i
    raise AssertionError("hash does not spread")


def test_keys():
    assert I(PK, 1, "x").keys() == (("db", "t", (1,)),)
    assert U(PK, (1, "x"), (1, "y")).keys() == (("db", "t", (1,)),)
    assert U(PK, (1, "x"), (2, "x")).keys() == (("db", "t", (1,)), ("db", "t", (2,)))
    assert D(NK, 1, None).keys() == (("db", "n", (1, None)),)  # keyless: every column
    assert I(SK, "Ab ", 1).keys() == I(SK, "ab", 2).keys()       # folded for ci collations


# Each case: (worker_count, jobs, expected labels). Equal labels ⇔ same worker; None = conflict;
# "*" = any worker.
# ``a``/``b`` are ids known to hash to different workers (see _apart).
def _cases(a, b):
    return [
        ("same key, same worker", 4, [I(PK, a, "x"), U(PK, (a, "x"), (a, "y")), D(PK, a, "y")], ["A", "A", "A"]),
        ("a key change links both keys", 2, [I(PK, a, "x"), U(PK, (a, "x"), (b, "x")), I(PK, b + 100, "z"), I(PK, b, "w")],
         ["A", "A", "*", "A"]),
        ("joining keys of two workers is a conflict", 2, [I(PK, a, "x"), I(PK, b, "x"), U(PK, (a, "x"), (b, "x"))],
         ["A", "B", None]),
        ("a conflicting job is not remembered", 2, [I(PK, a, "x"), I(PK, b, "x"), U(PK, (a, "x"), (b, "x")), I(PK, a, "q")],
         ["A", "B", None, "A"]),
        ("same id on another table is another key", 2, [I(PK, a, "x"), I(PK2, a, "x"), D(PK, a, "x")], ["A", "A2", "A"]),
        ("keyless rows conflict on all values", 2, [I(NK, 1, 2), I(NK, 1, 2), U(NK, (1, 2), (1, 3)), D(NK, 1, 3)],
         ["N", "N", "N", "N"]),
        ("case/accent/trailing-space variants share a worker", 3, [I(SK, "a", 1), U(SK, ("a", 1), ("A ", 1)), I(SK, "á", 2)],
         ["S", "S", "S"]),
        ("one worker never conflicts", 1, [I(PK, a, "x"), I(PK, b, "x"), U(PK, (a, "x"), (b, "x"))], ["A", "A", "A"]),
    ]


CASES = _cases(*_apart(Causality(2)))


@pytest.mark.parametrize("name,n,jobs,labels", CASES, ids=[c[0] for c in CASES])
def test_table(name, n, jobs, labels):
    c = Causality(n)
    got = [c.add(j) for j in jobs]
    seen: dict[str, int] = {}
    for g, want in zip(got, labels):
        if want is None:
            assert g is None
            continue
        assert g is not None and 0 <= g < n
        if want == "*":
            continue
        if want in seen:
            assert seen[want] == g
        seen[want] = g
    if "A" in seen and "B" in seen:
        assert seen["A"] != seen["B"]


def test_conflict_then_reset_then_add():
    c = Causality(2)
    a, b = _apart(c)
    assert c.add(I(PK, a, "x")) != c.add(I(PK, b, "x"))
    j = U(PK, (a, "x"), (b, "x"))
    assert c.add(j) is None
    assert len(c) == 2
    c.reset()
    assert len(c) == 0
    assert c.add(j) in (0, 1)
    assert len(c) == 2


def test_spreads_unrelated_keys_and_is_stable():
    c = Causality(4)
    workers = [c.add(I(PK, i, "x")) for i in range(400)]
    counts = [workers.count(w) for w in range(4)]
    assert min(counts) > 50, counts
    c2 = Causality(4)
    assert [c2.add(I(PK, i, "y")) for i in range(400)] == workers


def test_hot_key_stays_on_its_worker():
    c = Causality(8)
    w = c.add(I(PK, 7, "v"))
    for i in range(1000):
        assert c.add(U(PK, (7, str(i)), (7, str(i + 1)))) == w


def test_worker_count_must_be_positive():
    with pytest.raises(ValueError):
        Causality(0)


def test_other_unique_indexes_are_conflict_keys_as_in_dm():
    """DM's CAUSALITY_USE_DOWNSTREAM_SCHEMA: the downstream (a, b UNIQUE NULL, c AUTO_INCREMENT
    PRIMARY KEY) is written by every column (its key is not carried, b may be NULL); an UPDATE
    moving b=3 away and a later INSERT of b=3 share b's key, so they stay on one worker in order
    (on two workers the INSERT could run first: duplicate entry '3' for key 'b')."""
    down = TargetTable("db", "u", ("a", "b", "c"), ("c",), True, unique_keys=(("c",),), unique_indexes=(("c",), ("b",)))
    t = down.for_columns({"a", "b"})
    assert (t.key, t.key_is_unique, t.unique_indexes) == (("a", "b"), False, (("b",),))
    move = U(t, (2, 3), (3, 4))
    again = I(t, 1, 3)
    assert ("db", "u", ("b",), (3,)) in move.keys() and ("db", "u", ("b",), (3,)) in again.keys()
    assert I(t, 5, None).keys() == (("db", "u", (5, None)),)  # NULL conflicts with nothing
    for n in range(2, 6):
        c = Causality(n)
        assert c.add(move) == c.add(again)
