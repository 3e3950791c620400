"""The optimised DML path on a real downstream: compacted, causality-split, multi-row
statements leave exactly the rows that raw per-row statements leave (and that the upstream
history produced), including a case-insensitive key, a composite key and a keyless table."""

from __future__ import annotations

import random

import pytest

from dm_core.db import connect_native, qi, qt
from dm_core.sync.applier import Applier
from dm_core.sync.job import RowJob
from dm_core.sync.merger import merge
from dm_core.target import TargetCatalog
from tests.unit.test_sync_merger import Spec, history, pipeline

pytestmark = pytest.mark.integration

TABLES = {
    "pk": "(id INT NOT NULL PRIMARY KEY, v VARCHAR(8) NULL)",
    "ck": "(a VARCHAR(4) COLLATE utf8mb4_bin NOT NULL, b INT NOT NULL, v VARCHAR(8) NULL, PRIMARY KEY (a, b))",
    # key = the NOT NULL unique key; general_ci: 'a' = 'A', 'é' = 'e', 'c ' = 'c'
    "ci": "(k VARCHAR(4) COLLATE utf8mb4_general_ci NOT NULL, v VARCHAR(8) NULL, n INT NULL, UNIQUE KEY uk (k))",
    "nk": "(a INT NULL, b VARCHAR(4) NULL)",
    # a second unique index: an UPDATE freeing u=2 and an INSERT taking it must stay in order
    "uk": "(id INT NOT NULL PRIMARY KEY, u INT NULL, v VARCHAR(8) NULL, UNIQUE KEY uu (u))",
}
SMALL = [None, "x", "y", "z"]
POOLS = {
    "pk": ({"id": [1, 2, 3, 4, 5], "v": SMALL}, False),
    "ck": ({"a": ["p", "q", "P"], "b": [1, 2], "v": SMALL}, False),
    "ci": ({"k": ["a", "A", "b", "B", "é", "e", "c ", "c"], "v": SMALL, "n": [None, 1, 2]}, True),
    "nk": ({"a": [1, 2, None], "b": ["x", None]}, False),
    "uk": ({"id": [1, 2, 3, 4, 5], "u": [None, 1, 2, 3], "v": SMALL}, False),
}


@pytest.fixture
def down(stack, uniq):
    schemas = [f"mg_{uniq}_r", f"mg_{uniq}_o"]
    conn = connect_native(stack["down"])  # the executors' driver (Applier renders with it)
    with conn.cursor() as cur:
        for s in schemas:
            cur.execute(f"DROP DATABASE IF EXISTS {qi(s)}")
            cur.execute(f"CREATE DATABASE {qi(s)} CHARACTER SET utf8mb4")
            for t, ddl in TABLES.items():
                cur.execute(f"CREATE TABLE {qt(s, t)} {ddl}")
    cat = TargetCatalog(conn)
    targets = {s: {t: cat.get(s, t) for t in TABLES} for s in schemas}
    try:
        yield conn, schemas, targets
    finally:
        with conn.cursor() as cur:
            for s in schemas:
                cur.execute(f"DROP DATABASE IF EXISTS {qi(s)}")
        conn.close()


def _specs(targets: dict, keyed_only=False) -> list[Spec]:
    return [Spec(targets[t], POOLS[t][0], ci=POOLS[t][1]) for t in TABLES
            if not keyed_only or targets[t].key_is_unique]


def _retarget(jobs: list[RowJob], targets: dict) -> list[RowJob]:
    return [RowJob(j.op, targets[j.target.table], j.before, j.after, j.safe, j.pos) for j in jobs]


def _reset(conn, schemas):
    with conn.cursor() as cur:
        for s in schemas:
            for t in TABLES:
                cur.execute(f"DELETE FROM {qt(s, t)}")


def _contents(conn, schema) -> dict:
    out = {}
    with conn.cursor() as cur:
        for t in TABLES:
            cur.execute(f"SELECT * FROM {qt(schema, t)}")
            out[t] = sorted(cur.fetchall(), key=repr)
    return out


def _want(snap: dict) -> dict:
    return {t: sorted(rows, key=repr) for (_, t), rows in snap.items()}


def _execute(conn):
    def run(stmt):
        with conn.cursor() as cur:
            cur.execute(stmt.sql, stmt.params)
    return run


def test_detected_keys(down):
    _, schemas, targets = down
    t = targets[schemas[0]]
    assert (t["pk"].key, t["ck"].key, t["ci"].key) == (("id",), ("a", "b"), ("k",))
    assert t["nk"].key == ("a", "b") and not t["nk"].key_is_unique
    assert t["uk"].key == ("id",) and t["pk"].only_unique_key and not t["uk"].only_unique_key


@pytest.mark.parametrize("seed", range(25))
def test_optimised_path_matches_row_by_row(down, seed):
    conn, (raw_s, opt_s), targets = down
    rng = random.Random(seed)
    jobs, snap = history(rng, _specs(targets[raw_s]), rng.randrange(10, 90))
    for j in jobs:
        j.safe = j.target.key_is_unique and rng.random() < 0.3
    want = _want(snap)
    cut = rng.randrange(len(jobs))
    applier = Applier(conn)
    for compact_on, multiple_rows in ((True, True), (False, True), (True, False)):
        _reset(conn, (raw_s, opt_s))
        applier.apply(merge(jobs, multiple_rows=False))
        assert _contents(conn, raw_s) == want
        opt = _retarget(jobs, targets[opt_s])
        applier.apply(merge(opt[:cut], multiple_rows=False))
        pipeline(opt[cut:], compact_on=compact_on, multiple_rows=multiple_rows, workers=3, rng=rng,
                 execute=_execute(conn))
        assert _contents(conn, opt_s) == want, (compact_on, multiple_rows)


@pytest.mark.parametrize("seed", range(15))
def test_safe_mode_replay_converges(down, seed):
    conn, (_, opt_s), targets = down
    rng = random.Random(500 + seed)
    jobs, snap = history(rng, _specs(targets[opt_s], keyed_only=True), rng.randrange(10, 90))
    want = {t: rows for t, rows in _want(snap).items()}
    checkpoint = rng.randrange(len(jobs))
    applied = rng.randrange(checkpoint, len(jobs) + 1)
    replay = [RowJob(j.op, j.target, j.before, j.after, True) for j in jobs[checkpoint:]]
    for compact_on in (True, False):
        _reset(conn, (opt_s,))
        Applier(conn).apply(merge(jobs[:applied], multiple_rows=False))
        pipeline(replay, compact_on=compact_on, multiple_rows=True, workers=3, rng=rng, execute=_execute(conn))
        got = _contents(conn, opt_s)
        assert {t: got[t] for t in want} == want, compact_on


def test_large_runs_split_into_capped_statements(down):
    conn, (raw_s, _), targets = down
    t = targets[raw_s]["pk"]
    n = 2500
    ins = [RowJob("insert", t, None, {"id": i, "v": "a"}, False) for i in range(n)]
    upd = [RowJob("update", t, {"id": i, "v": "a"}, {"id": i, "v": None if i % 2 else "b"}, False) for i in range(n)]
    dele = [RowJob("delete", t, {"id": i, "v": "b"}, None, False) for i in range(0, n, 2)]
    stmts = merge(ins + upd + dele, multiple_rows=True)
    assert len(stmts) == 3 + 3 + 2
    Applier(conn).apply(stmts)
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*), COUNT(v) FROM {qt(raw_s, 'pk')}")
        assert cur.fetchone() == (n // 2, 0)


@pytest.mark.parametrize("compact_on, multiple_rows", [(True, True), (True, False), (False, True)])
def test_a_value_of_a_second_unique_index_handed_between_rows_keeps_its_order(down, compact_on, multiple_rows):
    """Row 1 gives u=5 up, row 2 takes it, row 1 changes again, in one batch: compacting row 1's
    two updates into one placed after row 2's insert would put u=5 on two rows (1062)."""
    conn, (_, opt_s), targets = down
    t = targets[opt_s]["uk"]
    _reset(conn, (opt_s,))
    Applier(conn).apply(merge([RowJob("insert", t, None, {"id": 1, "u": 5, "v": "a"}, False)], multiple_rows=False))
    jobs = [RowJob("update", t, {"id": 1, "u": 5, "v": "a"}, {"id": 1, "u": 6, "v": "a"}, False),
            RowJob("insert", t, None, {"id": 2, "u": 5, "v": "b"}, False),
            RowJob("update", t, {"id": 1, "u": 6, "v": "a"}, {"id": 1, "u": 6, "v": "c"}, False)]
    pipeline(jobs, compact_on=compact_on, multiple_rows=multiple_rows, workers=3, rng=random.Random(0),
             execute=_execute(conn))
    assert _contents(conn, opt_s)["uk"] == [(1, 6, "c"), (2, 5, "b")]
