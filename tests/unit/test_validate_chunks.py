"""The key-chunk algebra of validation without servers (dm_core/validate/chunks.py, drill.py):
every target key falls in exactly one chunk downstream, every shard row in exactly one chunk
of its shard -- the one whose downstream range holds its mapped key -- and a closed integer
chunk's leaves split it exactly. Predicates are evaluated with the expression filters' engine."""

import functools
import random
from types import SimpleNamespace as NS

import pytest

from dm_core.rules.sql_eval import compile_expr, parse_condition, truthy
from dm_core.validate.chunks import KeyMap, integer_chunks
from dm_core.validate.drill import _range_leaf

BITS = 44


@functools.lru_cache(maxsize=None)
def _compiled(pred: str):
    return compile_expr(parse_condition(pred), lambda c: c)


def holds(pred: str, **row) -> bool:
    return truthy(_compiled(pred)(row))


def plan_of(rows: dict):
    return NS(key=["id"], shards=[NS(origin=o, table=NS(rows_estimate=n)) for o, n in rows.items()])


LAYOUTS = [
    ("partition id slices", {"a": KeyMap("pid", "id", 1 << 59 | 1 << 52, BITS), "b": KeyMap("pid", "id", 1 << 59 | 2 << 52, BITS),
                             "c": KeyMap("pid", "sid", 2 << 59, BITS)},
     {"a": (1, 5000), "b": (10, 90), "c": None}),
    ("shared key space", {"a": KeyMap("same", "id"), "b": KeyMap("same", "id")}, {"a": (-50, 3000), "b": (1000, 9000)}),
    ("both", {"a": KeyMap("same", "id"), "p": KeyMap("pid", "id", 3 << 59, BITS)}, {"a": (1, 4000), "p": (1, 4000)}),
]


@pytest.mark.parametrize("name, maps, bounds", LAYOUTS, ids=[x[0] for x in LAYOUTS])
def test_every_key_lands_in_exactly_one_chunk_on_every_side(name, maps, bounds):
    rnd = random.Random(name)
    plan = plan_of({o: (b[1] - b[0] if b else 0) for o, b in bounds.items()})
    chunks = integer_chunks(plan, maps, bounds, 700)
    assert len(chunks) > 3
    edges = [b for m in maps.values() if m.kind == "pid" for b in (m.or_value, m.or_value + (1 << BITS))]
    keys = [rnd.randint(-10**4, 10**4) for _ in range(200)] + [e + d for e in edges for d in (-1, 0, 1)] + \
        [rnd.randint(0, 1 << 62) for _ in range(100)]
    for k in keys:
        assert sum(holds(c.down, id=k) for c in chunks) == 1, k
    for o, m in maps.items():
        srcs = [rnd.randint(-100, 10**4) for _ in range(200)] + ([-1, 0, (1 << BITS) - 1, 1 << BITS] if m.kind == "pid" else [])
        for src in srcs:
            inside = [c for c in chunks if o in c.ups and holds(c.ups[o], **{m.column: src})]
            assert len(inside) == 1, (o, src)
            target = src + m.or_value if m.kind == "pid" else src
            if m.kind == "same" or 0 <= src < 1 << BITS:
                assert holds(inside[0].down, id=target), (o, src)


def test_a_closed_integer_chunk_is_cut_into_leaves_that_cover_it_once():
    maps = {"a": KeyMap("pid", "id", 5 << 52, BITS), "b": KeyMap("same", "id")}
    chunks = integer_chunks(plan_of({"a": 5000, "b": 5000}), maps, {"a": (1, 5000), "b": (1, 5000)}, 1000)
    closed = [c for c in chunks if c.base is not None]
    assert closed and all(set(c.offsets) == set(c.ups) for c in closed)
    for c in closed:
        width = -(-c.width // 7)
        leaves = [_range_leaf(c, j, width) for j in range(7)]
        for k in range(c.base, c.base + c.width, max(1, c.width // 50)):
            assert sum(holds(x.down, id=k) for x in leaves) == 1, k
            for o, (col, off) in c.offsets.items():
                assert sum(holds(x.ups[o], **{col: k - off}) for x in leaves) == 1, (o, k)
