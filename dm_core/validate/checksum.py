"""Asking the servers: per key chunk one ``COUNT(*)`` and ``SUM(CRC32(image))`` from every side,
many chunks at once over a few connections per server.

Why SUM and not sync-diff-inspector's BIT_XOR: CRC32 is linear over XOR, so two rows changed
by the same bits at the same offset (the same column corrupted alike in two rows of equal
length) cancel in a BIT_XOR of CRCs; in an integer sum they do not, and two equal rows of a
keyless table count twice instead of cancelling. The sum is exact (a DECIMAL on the server).
The shards of one chunk add up: the upstream's (count, sum) of a chunk is the sum over the
shards that can hold its keys.

``Servers`` gives each server (every source and the target) its own small thread pool, each
thread with its own connection: the chunks of every table and every shard are in flight
together, and no server gets more than ``threads`` queries at a time.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, NamedTuple

from dm_core.db import connect, qt
from dm_core.errors import Cancelled

DOWN = ""   # the downstream's server name in ``Servers``


class Sums(NamedTuple):
    rows: int
    total: int

    def __add__(self, other: "Sums") -> "Sums":   # type: ignore[override]
        return Sums(self.rows + other.rows, self.total + other.total)


ZERO = Sums(0, 0)


class Servers:
    """Thread pools with one connection per thread, by server name (source id, DOWN).
    ``stop()``: checked before each query; once true, queries not yet sent raise Cancelled."""

    def __init__(self, endpoints: dict, threads: int, *, stop: Callable[[], bool] | None = None):
        self._eps, self.stop = endpoints, stop
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list = []
        self._pools = {name: ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix=f"checksum-{name or 'down'}")
                       for name in endpoints}

    def _conn(self, name: str):
        conns = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        if name not in conns:
            c = connect(self._eps[name], downstream=name == DOWN)
            with self._lock:
                self._conns.append(c)
            conns[name] = c
        return conns[name]

    def submit(self, name: str, fn: Callable, *args) -> Future:
        """``fn(conn, *args)`` on a thread of server ``name``'s pool."""
        def call():
            if self.stop is not None and self.stop():
                raise Cancelled("the validation was cancelled: its task was stopped")
            return fn(self._conn(name), *args)
        return self._pools[name].submit(call)

    def close(self) -> None:
        for p in self._pools.values():
            p.shutdown(wait=True, cancel_futures=True)
        for c in self._conns:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - closing what may already be gone
                pass

    def __enter__(self) -> "Servers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def chunk_sums(conn, image, where: str) -> Sums:
    with conn.cursor() as cur:
        cur.execute(image.sum_sql(where))
        n, s = cur.fetchone()
    return Sums(int(n), int(s or 0))


def bucket_sums(conn, image, where: str, buckets: int) -> dict[int, Sums]:
    """(count, sum) per key-hash bucket ``CRC32(key) % buckets`` of the rows of ``where``."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT CRC32({image.key}) % {int(buckets)}, COUNT(*), SUM(CRC32({image.row})) "
                    f"FROM {qt(image.schema, image.table)} WHERE {where} GROUP BY 1")
        return {int(b): Sums(int(n), int(s or 0)) for b, n, s in cur.fetchall()}


def rows_of(conn, image, where: str, buckets: int = 0, wanted=()) -> list[tuple]:
    """The rows (read as ``image.select``) of ``where``, only of key-hash buckets ``wanted``
    (of ``buckets``) when given."""
    cond = where
    if buckets and wanted:
        cond = f"({where}) AND CRC32({image.key}) % {int(buckets)} IN ({', '.join(str(int(b)) for b in sorted(wanted))})"
    with conn.cursor() as cur:
        cur.execute(f"SELECT {image.select} FROM {qt(image.schema, image.table)} WHERE {cond}")
        return [tuple(r) for r in cur.fetchall()]
