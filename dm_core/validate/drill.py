"""Down into the differing chunks: from their checksums to the few rows that make them differ.

1. **split** -- a chunk of up to ``leaf_rows`` rows (the larger side's count) is one leaf. A
   larger one is cut into about rows / ``leaf_rows`` leaves in one ``GROUP BY`` query per side,
   a k-way bisection in one pass over the chunk: a closed integer range by key arithmetic,
   ``(key - base) DIV width`` (each leaf is then a small key range of its own), any other chunk
   by key hash, ``CRC32(key image) % n`` (the key hashed as its image, image.py, so a row and
   its counterpart fall in the same leaf on every side). Leaves whose (count, sum) agree are done.
2. **re-check** (while sync runs) -- the differing leaves are asked again upstream (U1), then,
   once every source's checkpoint has passed the upstream's position after U1, downstream (D)
   and upstream (U2): a leaf whose D equals U1 or U2 held the same rows on both sides at one
   moment -- its difference was in flight -- and is done. A range leaf is a small range query;
   hash leaves of a chunk are asked together, one pass over the chunk.
3. **fetch** -- the rows of the leaves still differing, from every side, as records (rows.py)
   for the key-level diff (check.py), chunk by chunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from dm_core.db import qi, qt
from dm_core.full.chunking import between
from dm_core.validate.checksum import DOWN, ZERO, Sums, chunk_sums, rows_of

MAX_BUCKETS = 65536


@dataclass
class Leaf:
    """A piece of a differing chunk: its own predicates (range leaves and whole chunks), or
    the chunk's plus ``CRC32(key) % n = bucket`` (hash leaves, ``n`` > 0)."""

    chunk: int
    down: str
    ups: dict[str, str] = field(default_factory=dict)
    n: int = 0
    bucket: int = 0
    up: Sums = ZERO
    dn: Sums = ZERO

    @property
    def differs(self) -> bool:
        return self.up != self.dn


def pieces(rows: int, leaf_rows: int) -> int:
    """
    >>> pieces(100, 256), pieces(20_000, 256), pieces(10**9, 256)
    (0, 79, 65536)
    """
    if rows <= leaf_rows:
        return 0
    return min(MAX_BUCKETS, -(-rows // leaf_rows))


# ---- 1. split ------------------------------------------------------------------------------------
def _grouped(conn, image, expr: str, where: str) -> dict[int, Sums]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT {expr}, COUNT(*), SUM(CRC32({image.row})) FROM {qt(image.schema, image.table)} "
                    f"WHERE {where} GROUP BY 1")
        return {int(b): Sums(int(n), int(s or 0)) for b, n, s in cur.fetchall()}


def _range_exprs(ch, width: int) -> tuple[str, dict[str, str]]:
    """The leaf number of a row on each side: (downstream, origin → shard)."""
    down = f"({qi(ch.key)} - {int(ch.base)}) DIV {int(width)}"
    ups = {o: f"({qi(col)} - {int(ch.base) - int(off)}) DIV {int(width)}" for o, (col, off) in ch.offsets.items()}
    return down, ups


def _range_leaf(ch, j: int, width: int) -> Leaf:
    lo, hi = ch.base + j * width, ch.base + (j + 1) * width
    down = f"{ch.down} AND {between([ch.key], [str(lo)], [str(hi)])}"
    ups = {o: f"{ch.ups[o]} AND {between([col], [str(lo - off)], [str(hi - off)])}"
           for o, (col, off) in ch.offsets.items()}
    return Leaf(ch.index, down, ups)


def split(servers, job, indices: list[int], leaf_rows: int) -> list:
    """Submit the split of chunks ``indices`` of ``job`` (compare.TableJob); :func:`leaves`
    collects it."""
    out = []
    for i in indices:
        ch = job.chunks[i]
        n = pieces(max(job.up[i].rows, job.down[i].rows), leaf_rows)
        if not n:
            out.append((ch, 0, 0, None, None))
            continue
        if ch.base is not None and ch.width >= n:
            width = -(-ch.width // n)
            dexpr, uexprs = _range_exprs(ch, width)
        else:
            width = 0
            dexpr = f"CRC32({job.images.down.key}) % {n}"
            uexprs = {o: f"CRC32({job.images.shards[o].key}) % {n}" for o in ch.ups}
        ups = [servers.submit(job.server_of[o], _grouped, job.images.shards[o], uexprs[o], w) for o, w in ch.ups.items()]
        down = servers.submit(DOWN, _grouped, job.images.down, dexpr, ch.down)
        out.append((ch, n, width, ups, down))
    return out


def leaves(job, asked: list) -> list[Leaf]:
    """The differing leaves of the chunks :func:`split` cut."""
    out = []
    for ch, n, width, ups, down in asked:
        if ups is None:
            out.append(Leaf(ch.index, ch.down, dict(ch.ups), up=job.up[ch.index], dn=job.down[ch.index]))
            continue
        up: dict[int, Sums] = {}
        for f in ups:
            for b, s in f.result().items():
                up[b] = up.get(b, ZERO) + s
        dn = down.result()
        for b in sorted(set(up) | set(dn)):
            if up.get(b, ZERO) == dn.get(b, ZERO):
                continue
            leaf = _range_leaf(ch, b, width) if width else Leaf(ch.index, ch.down, dict(ch.ups), n, b)
            leaf.up, leaf.dn = up.get(b, ZERO), dn.get(b, ZERO)
            out.append(leaf)
    return out


# ---- 2. re-check ---------------------------------------------------------------------------------
def _hash_sums(conn, image, where: str, n: int, buckets: list[int]) -> dict[int, Sums]:
    cond = f"({where}) AND CRC32({image.key}) % {int(n)} IN ({', '.join(str(int(b)) for b in buckets)})"
    return _grouped(conn, image, f"CRC32({image.key}) % {int(n)}", cond)


def ask(servers, job, todo: list[Leaf], *, up: bool) -> list:
    """Submit the sums of leaves ``todo`` on one side; :func:`take` stores them."""
    out = []
    hashed: dict[int, list[Leaf]] = {}
    for leaf in todo:
        if leaf.n:
            hashed.setdefault(leaf.chunk, []).append(leaf)
        elif up:
            out.append(([leaf], [servers.submit(job.server_of[o], chunk_sums, job.images.shards[o], w)
                                 for o, w in leaf.ups.items()]))
        else:
            out.append(([leaf], [servers.submit(DOWN, chunk_sums, job.images.down, leaf.down)]))
    for group in hashed.values():
        first, buckets = group[0], [leaf.bucket for leaf in group]
        futs = ([servers.submit(job.server_of[o], _hash_sums, job.images.shards[o], w, first.n, buckets)
                 for o, w in first.ups.items()] if up
                else [servers.submit(DOWN, _hash_sums, job.images.down, first.down, first.n, buckets)])
        out.append((group, futs))
    return out


def take(asked: list, *, up: bool) -> dict[int, Sums]:
    """id(leaf) → its sums on the side :func:`ask` asked (also stored on the leaf)."""
    got = {}
    for group, futs in asked:
        if group[0].n:
            merged: dict[int, Sums] = {}
            for f in futs:
                for b, s in f.result().items():
                    merged[b] = merged.get(b, ZERO) + s
            sums = {id(leaf): merged.get(leaf.bucket, ZERO) for leaf in group}
        else:
            total = ZERO
            for f in futs:
                total = total + f.result()
            sums = {id(group[0]): total}
        for leaf in group:
            if up:
                leaf.up = sums[id(leaf)]
            else:
                leaf.dn = sums[id(leaf)]
        got.update(sums)
    return got


# ---- 3. fetch ------------------------------------------------------------------------------------
def fetch(servers, job, todo: list[Leaf], batch: int = 16) -> Iterator[tuple[int, list, list]]:
    """(chunk index, upstream records, downstream records) of the leaves ``todo``, chunk by chunk."""
    by_chunk: dict[int, list[Leaf]] = {}
    for leaf in todo:
        by_chunk.setdefault(leaf.chunk, []).append(leaf)
    order = sorted(by_chunk)
    for i in range(0, len(order), batch):
        asked = [(c, _fetch(servers, job, by_chunk[c])) for c in order[i:i + batch]]
        for c, (ups, downs) in asked:
            up_recs = [rec for o, f in ups for rec in map(job.plan.shard(o).maker.record, f.result())]
            down_recs = [job.plan.down_maker.record(r) for f in downs for r in f.result()]
            yield c, up_recs, down_recs


def _fetch(servers, job, group: list[Leaf]):
    if group[0].n:   # hash leaves of one chunk: one query per side
        first, wanted = group[0], {leaf.bucket for leaf in group}
        ups = [(o, servers.submit(job.server_of[o], rows_of, job.images.shards[o], w, first.n, wanted))
               for o, w in first.ups.items()]
        return ups, [servers.submit(DOWN, rows_of, job.images.down, first.down, first.n, wanted)]
    ups = [(o, servers.submit(job.server_of[o], rows_of, job.images.shards[o], w)) for leaf in group
           for o, w in leaf.ups.items()]
    return ups, [servers.submit(DOWN, rows_of, job.images.down, leaf.down) for leaf in group]
