"""Key chunks of one target table: ranges of the downstream key, each with the predicate that
selects its rows on the downstream table and on every upstream shard that can hold them.

A chunk is compared as one (count, checksum) per side (checksum.py), so both sides must
select exactly the rows whose *target* key falls in the range. Three shapes, tried in order:

1. **integer ranges** -- the downstream key is one integer column and every shard supplies it
   either as its own integer key column (``same``) or through a ``partition id`` mapping of its
   integer key (``pid``: target = source | or_value, with the source in [0, 2**id_bits), so a
   target range maps to the source range shifted by or_value). Bounds come from MIN/MAX of
   each shard's key (index ends, no scan) and its row estimate: shards with ``same`` keys share
   one key space, split into equal-width ranges; each ``pid`` shard owns the slice
   [or_value, or_value + 2**id_bits) of the target space, split the same way, and the gaps
   between slices are chunks of their own (downstream only: rows there are extra). A shard is
   only asked about chunks inside its slice; at its slice's two ends the range is left open,
   so a source value outside [0, 2**id_bits) still lands in one chunk (and differs).
2. **sampled ranges** -- any other key that every shard has as is (no mapping, no extract
   column, the same collation): bounds sampled by walking the downstream key every
   ``chunk_rows`` rows (as dm_core/full/chunking.py does), the same predicate on every side.
3. **one chunk** -- the rest (no key, a key written by ``add prefix`` or an extract column, a
   shard whose key is not the target key's index, types whose order and ``<`` disagree), and
   tables smaller than one chunk: the whole table; the drill-down still splits it by key hash.

Every row of every side lands in exactly one chunk: chunk i's lower bound is the complement of
chunk i-1's upper bound, the first chunk is open below and the last open above (the
argument of dm_core/full/chunking.py), and a shard skipped for a chunk cannot hold its keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.db import qi, qt
from dm_core.full.chunking import between
from dm_core.validate.image import INT_TYPES

_UNSAMPLEABLE = {"enum", "set", "bit", "time", "geometry", "json", "float", "double", "real"}
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "binary", "varbinary", "tinyblob", "blob",
         "mediumblob", "longblob"}


@dataclass
class Chunk:
    """One key range: ``down`` selects its downstream rows, ``ups`` origin → its shard rows
    (shards absent from ``ups`` cannot hold keys of the range).

    An integer range closed on both sides on every side also says how to cut it further
    (drill.py): target keys [``base``, ``base + width``) of the downstream column ``key``,
    each shard's key being its column plus an offset (``offsets``: origin → (column, offset))."""

    index: int
    down: str
    ups: dict[str, str] = field(default_factory=dict)
    label: str = ""             # the range, for messages
    key: str = ""
    base: int | None = None
    width: int = 0
    offsets: dict = field(default_factory=dict)


@dataclass(frozen=True)
class KeyMap:
    """How one shard supplies an integer target key: ``same`` column, or ``pid`` of ``column``."""

    kind: str
    column: str
    or_value: int = 0
    id_bits: int = 0


def key_map(plan, shard) -> KeyMap | None:
    """The shard's integer key map, or None when range arithmetic cannot reach its rows."""
    if len(plan.key) != 1:
        return None
    c = plan.key[0]
    st = shard.table
    mapping = shard.maker.shaper.mapping
    t = next((t for t in (mapping.transforms if mapping is not None else []) if t.column == c), None)
    src = c if t is None else getattr(t, "source_column", None)
    if src is None or c in st.extract or src not in st.columns or [k.lower() for k in st.key] != [src.lower()]:
        return None
    if st.column_types[st.columns.index(src)] not in INT_TYPES:
        return None
    if t is None:
        return KeyMap("same", src)
    if type(t).__name__ != "PartitionId":
        return None
    return KeyMap("pid", src, int(t.or_value), int(t.id_bits))


def _min_max(conn, schema: str, table: str, column: str) -> tuple[int, int] | None:
    with conn.cursor() as cur:
        cur.execute(f"SELECT MIN({qi(column)}), MAX({qi(column)}) FROM {qt(schema, table)}")
        lo, hi = cur.fetchone()
    return None if lo is None else (int(lo), int(hi))


def _cuts(lo: int, hi: int, rows: int, chunk_rows: int) -> list[int]:
    """Interior cut points splitting [lo, hi] into about rows / chunk_rows equal-width ranges.

    >>> _cuts(1, 100, 50, 10)
    [21, 41, 61, 81]
    >>> _cuts(1, 100, 5, 10)
    []
    """
    parts = max(1, -(-rows // max(1, chunk_rows)))
    step = max(1, -(-(hi - lo + 1) // parts))
    return [lo + step * i for i in range(1, parts) if lo + step * i <= hi]


def integer_chunks(plan, maps: dict[str, KeyMap], bounds: dict[str, tuple[int, int] | None],
                   chunk_rows: int) -> list[Chunk]:
    """Shape 1 (module docstring). ``bounds``: origin → (MIN, MAX) of the shard's key column
    (None: empty shard).

    >>> from types import SimpleNamespace as NS
    >>> plan = NS(key=["id"], shards=[NS(origin="a", table=NS(rows_estimate=20)), NS(origin="b", table=NS(rows_estimate=5))])
    >>> maps = {"a": KeyMap("pid", "id", 1000, 8), "b": KeyMap("pid", "id", 2000, 8)}
    >>> for c in integer_chunks(plan, maps, {"a": (1, 20), "b": (1, 5)}, 10):
    ...     print(c.down, c.ups)
    (`id` < 1000) {}
    (`id` >= 1000) AND (`id` < 1011) {'a': '(`id` < 11)'}
    (`id` >= 1011) AND (`id` < 1256) {'a': '(`id` >= 11)'}
    (`id` >= 1256) AND (`id` < 2000) {}
    (`id` >= 2000) AND (`id` < 2256) {'b': '1=1'}
    (`id` >= 2256) {}
    """
    cuts: set[int] = set()
    same = [o for o, m in maps.items() if m.kind == "same"]
    est = {s.origin: s.table.rows_estimate for s in plan.shards}
    have = [bounds[o] for o in same if bounds.get(o)]
    if have:
        cuts.update(_cuts(min(b[0] for b in have), max(b[1] for b in have), sum(est[o] for o in same), chunk_rows))
    for o, m in maps.items():
        if m.kind != "pid":
            continue
        cuts.update((m.or_value, m.or_value + (1 << m.id_bits)))
        if bounds.get(o):
            lo, hi = bounds[o]
            cuts.update(m.or_value + x for x in _cuts(lo, hi, est[o], chunk_rows) if 0 <= x < 1 << m.id_bits)
    edges: list[int | None] = [None, *sorted(cuts), None]
    k = qi(plan.key[0])
    out = []
    for lo, hi in zip(edges, edges[1:]):
        ups = {}
        for o, m in maps.items():
            where = _shard_range(m, lo, hi)
            if where is not None:
                ups[o] = where
        down = between([plan.key[0]], None if lo is None else [str(lo)], None if hi is None else [str(hi)])
        ch = Chunk(len(out), down, ups, f"{k} in [{'-inf' if lo is None else lo}, {'+inf' if hi is None else hi})")
        if lo is not None and hi is not None and all(_closed(maps[o], lo, hi) for o in ups):
            ch.key, ch.base, ch.width = plan.key[0], lo, hi - lo
            ch.offsets = {o: (maps[o].column, maps[o].or_value if maps[o].kind == "pid" else 0) for o in ups}
        out.append(ch)
    return out


def _closed(m: KeyMap, lo: int, hi: int) -> bool:
    """The shard's predicate of [lo, hi) bounds its column on both sides (a partition-id
    slice's first and last chunks are left open: see ``_shard_range``)."""
    return m.kind == "same" or (lo != m.or_value and hi != m.or_value + (1 << m.id_bits))


def _shard_range(m: KeyMap, lo: int | None, hi: int | None) -> str | None:
    """The shard's predicate for target range [lo, hi), or None when it holds no key there."""
    if m.kind == "same":
        return between([m.column], None if lo is None else [str(lo)], None if hi is None else [str(hi)])
    start, end = m.or_value, m.or_value + (1 << m.id_bits)
    if lo is None or hi is None or lo < start or hi > end:
        return None   # the cuts include the slice's ends: a chunk is inside a slice or outside all
    low = None if lo == start else [str(lo - start)]
    high = None if hi == end else [str(hi - start)]
    return between([m.column], low, high)


def sampleable(plan, down_infos: dict, shard_infos: dict[str, dict]) -> bool:
    """Shape 2 applies: every shard has the target key as its own key, same types' order."""
    if not plan.key or plan.down is None:
        return False
    for c in plan.key:
        d = down_infos.get(c)
        if d is None or d.data_type in _UNSAMPLEABLE or d.json:
            return False
        for s in plan.shards:
            st = s.table
            mapping = s.maker.shaper.mapping
            if c in st.extract or c not in st.columns or (mapping is not None and any(t.column == c for t in mapping.transforms)):
                return False
            u = shard_infos[s.origin].get(c)
            if u is None or u.data_type in _UNSAMPLEABLE or u.json:
                return False
            if (u.data_type in _TEXT or d.data_type in _TEXT) and (u.collation or "") != (d.collation or ""):
                return False
    return all([k.lower() for k in s.table.key] == [k.lower() for k in plan.key] for s in plan.shards)


def sampled_chunks(plan, down_conn, chunk_rows: int) -> list[Chunk]:
    """Shape 2: bounds every ``chunk_rows`` keys of the downstream table, one predicate text
    for every side (the shards name the key columns as the downstream does)."""
    from dm_core.full.chunking import ge

    cols = ", ".join(qi(c) for c in plan.key)
    bounds: list[list[str]] = []
    with down_conn.cursor() as cur:
        prev: list[str] | None = None
        while True:
            where = f" WHERE {ge(plan.key, prev)}" if prev else ""
            cur.execute(f"SELECT {cols} FROM {qt(plan.schema, plan.table)}{where} ORDER BY {cols} "
                        f"LIMIT 1 OFFSET {int(chunk_rows)}")
            row = cur.fetchone()
            if row is None:
                break
            lits = [literal(down_conn, v) for v in row]
            if lits == prev:
                break
            bounds.append(lits)
            prev = lits
    edges: list[list[str] | None] = [None, *bounds, None]
    out = []
    for lo, hi in zip(edges, edges[1:]):
        where = between(plan.key, lo, hi)
        out.append(Chunk(len(out), where, {s.origin: where for s in plan.shards}, where))
    return out


def literal(conn, v) -> str:
    """A sampled key value as SQL any side reads alike: integers bare, bytes as X'..', text as a
    utf8mb4 hex literal (no quoting rule of either server's sql_mode applies), the rest quoted."""
    from dm_core.validate.image import hex_literal

    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, (bytes, bytearray)):
        return "X'" + bytes(v).hex() + "'"
    if isinstance(v, str):
        return hex_literal(v)
    return conn.literal(v)


def whole(plan) -> list[Chunk]:
    return [Chunk(0, "1=1", {s.origin: "1=1" for s in plan.shards}, "the whole table")]


def plan_chunks(plan, up_conns: dict, down_conn, down_infos: dict, shard_infos: dict[str, dict],
                chunk_rows: int) -> tuple[str, list[Chunk]]:
    """(shape, chunks) of one table (module docstring); ``up_conns``: source_id → connection."""
    rows = sum(s.table.rows_estimate for s in plan.shards)
    if plan.down is None or rows <= chunk_rows:
        return "one chunk", whole(plan)
    maps = {s.origin: key_map(plan, s) for s in plan.shards}
    if plan.down.key_types and len(plan.key) == 1 and plan.down.key_types[0] in INT_TYPES \
            and all(m is not None for m in maps.values()):
        bounds = {s.origin: _min_max(up_conns[s.table.source_id], s.table.schema, s.table.table, maps[s.origin].column)
                  for s in plan.shards}
        return "integer ranges", integer_chunks(plan, maps, bounds, chunk_rows)
    if sampleable(plan, down_infos, shard_infos):
        return "sampled ranges", sampled_chunks(plan, down_conn, chunk_rows)
    return "one chunk", whole(plan)
