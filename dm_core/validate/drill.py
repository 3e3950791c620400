"""Down into a differing chunk: from its checksums to the few rows that make it differ.

A chunk of up to ``leaf_rows`` rows (the larger side's count) is fetched whole from every
side. A larger one is split first, in one query per side: ``GROUP BY CRC32(key) % n`` with
``n`` about rows / ``leaf_rows`` gives each key-hash bucket's (count, sum) -- a k-way
bisection in one pass over the chunk, the same on every side because the key is hashed as its
image (image.py), so a row and its counterpart fall in the same bucket. Only the buckets whose
sums differ are fetched (``... AND CRC32(key) % n IN (...)``). The records (rows.py) of one
chunk then go to the key-level diff; chunks are drilled in batches, in parallel over the
servers' pools, and handed over one at a time, so memory holds a batch, not a table.
"""

from __future__ import annotations

from typing import Iterator

from dm_core.validate.checksum import DOWN, ZERO, bucket_sums, rows_of

MAX_BUCKETS = 65536
BATCH = 16


def _buckets(rows: int, leaf_rows: int) -> int:
    """
    >>> _buckets(100, 256), _buckets(20_000, 256), _buckets(10**9, 256)
    (0, 79, 65536)
    """
    if rows <= leaf_rows:
        return 0
    return min(MAX_BUCKETS, -(-rows // leaf_rows))


def drill(servers, job, indices: list[int], leaf_rows: int) -> Iterator[tuple[object, list, list]]:
    """(chunk, upstream records, downstream records) of each differing chunk of ``job``
    (compare.TableJob), restricted to its differing key-hash buckets."""
    for i in range(0, len(indices), BATCH):
        batch = [job.chunks[x] for x in indices[i:i + BATCH]]
        split = {c.index: _buckets(max(job.up[c.index].rows, job.down[c.index].rows), leaf_rows) for c in batch}
        sums = {c.index: _ask_buckets(servers, job, c, split[c.index]) for c in batch if split[c.index]}
        wanted = {}
        for c in batch:
            n = split[c.index]
            if not n:
                wanted[c.index] = ()
                continue
            up, down = _merge(sums[c.index][0]), sums[c.index][1].result()
            wanted[c.index] = {b for b in set(up) | set(down) if up.get(b, ZERO) != down.get(b, ZERO)}
        fetched = {c.index: _fetch(servers, job, c, split[c.index], wanted[c.index]) for c in batch
                   if not split[c.index] or wanted[c.index]}
        for c in batch:
            if c.index not in fetched:
                yield c, [], []      # every bucket agreed this time (the rows moved in between)
                continue
            ups, down = fetched[c.index]
            up_recs = [rec for o, f in ups for rec in map(job.plan.shard(o).maker.record, f.result())]
            down_recs = [job.plan.down_maker.record(r) for r in down.result()]
            yield c, up_recs, down_recs


def _ask_buckets(servers, job, chunk, n: int):
    ups = [servers.submit(job.server_of[o], bucket_sums, job.images.shards[o], where, n) for o, where in chunk.ups.items()]
    down = servers.submit(DOWN, bucket_sums, job.images.down, chunk.down, n)
    return ups, down


def _merge(futures) -> dict:
    out: dict = {}
    for f in futures:
        for b, s in f.result().items():
            out[b] = out.get(b, ZERO) + s
    return out


def _fetch(servers, job, chunk, n: int, wanted):
    ups = [(o, servers.submit(job.server_of[o], rows_of, job.images.shards[o], where, n, wanted))
           for o, where in chunk.ups.items()]
    down = servers.submit(DOWN, rows_of, job.images.down, chunk.down, n, wanted)
    return ups, down
