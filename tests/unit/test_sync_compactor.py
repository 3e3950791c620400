"""Compactor: DM's merge rules per key, key-changing updates split, order of survivors."""


import pytest

from dm_core.position import Position
from dm_core.sync.compactor import compact
from dm_core.sync.job import RowJob, fold
from dm_core.target import TargetTable

PK = TargetTable("db", "t", ("id", "v"), ("id",), True, only_unique_key=True)
PK2 = TargetTable("db", "t2", ("id", "v"), ("id",), True, only_unique_key=True)
CK = TargetTable("db", "c", ("a", "b", "v"), ("a", "b"), True, only_unique_key=True)
NK = TargetTable("db", "n", ("a", "b"), ("a", "b"), False)
SK = TargetTable("db", "s", ("k", "v"), ("k",), True, only_unique_key=True)  # string key: case folding matters
# a second unique index (u): rows of two keys interact through it
UK = TargetTable("db", "u", ("id", "u", "v"), ("id",), True, only_unique_key=False,
                 unique_keys=(("id",),), unique_indexes=(("id",), ("u",)))


def row(t, *vals):
    return dict(zip(t.columns, vals))


def I(t, *after, safe=False):
    return RowJob("insert", t, None, row(t, *after), safe)


def U(t, before, after, safe=False):
    return RowJob("update", t, row(t, *before), row(t, *after), safe)


def D(t, *before, safe=False):
    return RowJob("delete", t, row(t, *before), None, safe)


def shape(j):
    return (j.op, j.target.table, j.before and tuple(j.before.values()), j.after and tuple(j.after.values()), j.safe)


CASES = [
    # name, input jobs, expected output (same helpers)
    ("insert+update=insert", [I(PK, 1, "a"), U(PK, (1, "a"), (1, "b"))], [I(PK, 1, "b")]),
    ("insert+delete=delete", [I(PK, 1, "a"), D(PK, 1, "a")], [D(PK, 1, "a")]),
    ("update+update=update first before → last after",
     [U(PK, (1, "a"), (1, "b")), U(PK, (1, "b"), (1, "c"))], [U(PK, (1, "a"), (1, "c"))]),
    ("update+delete=delete of the original row", [U(PK, (1, "a"), (1, "b")), D(PK, 1, "b")], [D(PK, 1, "a")]),
    ("delete+insert=insert in safe mode (REPLACE)", [D(PK, 1, "a"), I(PK, 1, "b")], [I(PK, 1, "b", safe=True)]),
    ("delete+insert+update keeps safe mode", [D(PK, 1, "a"), I(PK, 1, "b"), U(PK, (1, "b"), (1, "c"))],
     [I(PK, 1, "c", safe=True)]),
    ("delete+insert+delete=delete", [D(PK, 1, "a"), I(PK, 1, "b"), D(PK, 1, "b")], [D(PK, 1, "b", safe=True)]),
    ("insert+insert (impossible): later wins", [I(PK, 1, "a"), I(PK, 1, "b")], [I(PK, 1, "b")]),
    ("delete+update (impossible): later wins", [D(PK, 1, "a"), U(PK, (1, "a"), (1, "b"))], [U(PK, (1, "a"), (1, "b"))]),
    ("update+insert (impossible): later wins", [U(PK, (1, "a"), (1, "b")), I(PK, 1, "c")], [I(PK, 1, "c")]),
    ("key-changing update splits into delete + insert", [U(PK, (1, "a"), (2, "a"))], [D(PK, 1, "a"), I(PK, 2, "a")]),
    ("key change then update of the new key", [U(PK, (1, "a"), (2, "a")), U(PK, (2, "a"), (2, "b"))],
     [D(PK, 1, "a"), I(PK, 2, "b")]),
    ("chain 1→2→3", [U(PK, (1, "a"), (2, "a")), U(PK, (2, "a"), (3, "a"))],
     [D(PK, 1, "a"), D(PK, 2, "a"), I(PK, 3, "a")]),
    ("swap back 1→2→1 ends as a REPLACE of 1", [U(PK, (1, "a"), (2, "b")), U(PK, (2, "b"), (1, "c"))],
     [D(PK, 2, "b"), I(PK, 1, "c", safe=True)]),
    ("delete and re-insert the same key via a key change", [D(PK, 2, "x"), U(PK, (1, "a"), (2, "a"))],
     [D(PK, 1, "a"), I(PK, 2, "a", safe=True)]),
    ("compacted job takes the place of the last job of its key",
     [I(PK, 1, "a"), I(PK, 2, "a"), U(PK, (1, "a"), (1, "b"))], [I(PK, 2, "a"), I(PK, 1, "b")]),
    ("hot key: many changes, one survivor, others untouched",
     [I(PK, 1, "v0")] + [j for i in range(1, 6) for j in (I(PK, 10 + i, "x"), U(PK, (1, f"v{i-1}"), (1, f"v{i}")))],
     [I(PK, 10 + i, "x") for i in range(1, 6)] + [I(PK, 1, "v5")]),
    ("same key value on two tables never merges", [I(PK, 1, "a"), I(PK2, 1, "a"), D(PK, 1, "a")],
     [I(PK2, 1, "a"), D(PK, 1, "a")]),
    ("NULLs outside the key are ordinary values", [I(PK, 1, None), U(PK, (1, None), (1, "x")), U(PK, (1, "x"), (1, None))],
     [I(PK, 1, None)]),
    ("composite key", [I(CK, "a", 1, 0), U(CK, ("a", 1, 0), ("a", 1, 5)), I(CK, "a", 2, 0), D(CK, "a", 2, 0)],
     [I(CK, "a", 1, 5), D(CK, "a", 2, 0)]),
    ("composite key change of one column splits", [U(CK, ("a", 1, 0), ("a", 2, 0))], [D(CK, "a", 1, 0), I(CK, "a", 2, 0)]),
    ("keyless tables are never compacted", [I(NK, 1, None), U(NK, (1, None), (1, 2)), D(NK, 1, 2), I(NK, 1, None)],
     [I(NK, 1, None), U(NK, (1, None), (1, 2)), D(NK, 1, 2), I(NK, 1, None)]),
    ("safe flags are OR-ed", [I(PK, 1, "a", safe=True), U(PK, (1, "a"), (1, "b"))], [I(PK, 1, "b", safe=True)]),
    ("safe flags are OR-ed (update+update)", [U(PK, (1, "a"), (1, "b")), U(PK, (1, "b"), (1, "c"), safe=True)],
     [U(PK, (1, "a"), (1, "c"), safe=True)]),
    ("exact keys: 'a' and 'b' are independent", [I(SK, "a", 1), I(SK, "b", 1), U(SK, ("a", 1), ("a", 2))],
     [I(SK, "b", 1), I(SK, "a", 2)]),
    # 'a' and 'A' may be one row (ci collation) or two (binary): exact keys, never merged.
    ("case-only key change splits", [I(SK, "a", 1), U(SK, ("a", 1), ("A", 1)), U(SK, ("A", 1), ("A", 2))],
     [D(SK, "a", 1), I(SK, "A", 2)]),
    ("fold-equal keys never merge (two rows under a binary collation)",
     [I(SK, "a", 1), U(SK, ("a", 1), ("A", 1)), I(SK, "a", 2)],
     [I(SK, "A", 1), I(SK, "a", 2, safe=True)]),
    # moving the merged update of row 1 after row 2's insert would put u=5 on two rows
    ("a table with a second unique index is never compacted",
     [U(UK, (1, 5, "a"), (1, 6, "a")), I(UK, 2, 5, "b"), U(UK, (1, 6, "a"), (1, 6, "c"))],
     [U(UK, (1, 5, "a"), (1, 6, "a")), I(UK, 2, 5, "b"), U(UK, (1, 6, "a"), (1, 6, "c"))]),
    ("accent and trailing-space variants are distinct exact keys", [I(SK, "é", 1), I(SK, "e ", 2), D(SK, "é", 1)],
     [I(SK, "e ", 2), D(SK, "é", 1)]),
]


@pytest.mark.parametrize("name,jobs,expected", CASES, ids=[c[0] for c in CASES])
def test_compact(name, jobs, expected):
    assert [shape(j) for j in compact(jobs)] == [shape(j) for j in expected]


def test_null_in_key_is_not_compacted():
    jobs = [I(PK, None, "a"), I(PK, None, "b")]
    assert [shape(j) for j in compact(jobs)] == [shape(j) for j in jobs]


def test_position_of_merged_job_is_its_last_part():
    a, b = Position("mysql-bin.000001", 100), Position("mysql-bin.000001", 200)
    j1, j2 = I(PK, 1, "a"), U(PK, (1, "a"), (1, "b"))
    j1.pos, j2.pos = a, b
    (out,) = compact([j1, j2])
    assert out.pos == b


def test_split_parts_keep_safe_and_pos():
    p = Position("mysql-bin.000002", 4)
    j = U(PK, (1, "a"), (2, "a"), safe=True)
    j.pos = p
    out = compact([j])
    assert [(o.op, o.safe, o.pos) for o in out] == [("delete", True, p), ("insert", True, p)]


def test_inputs_are_not_mutated():
    jobs = [I(PK, 1, "a"), U(PK, (1, "a"), (1, "b"))]
    before = [shape(j) for j in jobs]
    compact(jobs)
    assert [shape(j) for j in jobs] == before


def test_never_reorders_a_key():
    """Whatever survives for a key comes after every survivor it followed in the input."""
    import random

    rng = random.Random(7)
    for _ in range(200):
        jobs, live = [], {}
        for _ in range(30):
            k = rng.randrange(4)
            if k in live and rng.random() < 0.5:
                jobs.append(D(PK, k, live.pop(k)))
            elif k in live:
                v = rng.choice("xyz")
                jobs.append(U(PK, (k, live[k]), (k, v)))
                live[k] = v
            else:
                live[k] = rng.choice("xyz")
                jobs.append(I(PK, k, live[k]))
        out = compact(jobs)
        assert len({j.key() for j in out}) == len(out)  # one survivor per key
        # the survivor of each key sits where that key was last touched, relative to others
        last = {j.key(): i for i, j in enumerate(jobs)}
        assert [j.key() for j in out] == sorted(last, key=last.get)


def test_fold():
    assert fold("AbC  ") == "abc"
    assert fold("Éte") == fold("ete")
    assert fold(None) is None and fold(b"A ") == b"A "
