"""What a syncer measures for the metrics, kept until its next state-store write carries it.

The syncer runs wherever Airflow puts its sensor, so nothing it measures may stay in its own
process: ``/metrics`` (collector.py) reads every source's figures from the state store. A
syncer therefore adds up here what it measured since its last write and hands the amounts
(``take``) to the write it makes anyway -- the checkpoint (``SourcePositions.write``) or the
end of a window (``Syncer._report``) -- as counters and histogram columns that the same
UPDATE adds to (``StateStore.update_source_state(added=...)``). No extra round trip per
transaction or batch; what a process measured after its last write dies with it.

Histograms keep DM's buckets, so DM's dashboards' ``histogram_quantile`` reads them alike. A
histogram column is ``[sum, n_1, ..., n_k, n_over]``: the sum of the values, then how many
fell in each bucket (not cumulative), then how many above the last bound.
"""

from __future__ import annotations

import socket
import threading
import time
from bisect import bisect_left

from dm_core.position import Position


def exponential(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Prometheus' ExponentialBuckets: ``count`` upper bounds from ``start``, each ``factor`` times the last."""
    return tuple(start * factor ** i for i in range(count))


# name → (the source_state column, the bucket upper bounds: DM's for the same metric)
HISTOGRAMS = {
    "lag": ("lag_hist", exponential(0.5, 2, 12)),       # dm_syncer_replication_lag: 0.5 s .. 1024 s
    "txn": ("txn_hist", exponential(0.000005, 2, 25)),  # dm_syncer_txn_duration_time: 5 µs .. 84 s
    "ddl": ("ddl_hist", exponential(0.000005, 2, 25)),  # dm_syncer_query_duration_time
}
HOST = socket.gethostname()   # the `worker` label of the sources this process syncs
JOB_COUNTERS = {"insert": "applied_inserts", "update": "applied_updates", "delete": "applied_deletes",
                "ddl": "applied_ddls"}


class Observations:
    """Amounts measured since the last ``take``; the apply thread and the reader both add."""

    def __init__(self):
        self._lock = threading.Lock()
        self._hist: dict[str, list[float]] = {}
        self._jobs: dict[str, int] = {}

    def observe(self, name: str, value: float) -> None:
        """One value of histogram ``name`` (a key of ``HISTOGRAMS``)."""
        bounds = HISTOGRAMS[name][1]
        with self._lock:
            h = self._hist.get(name)
            if h is None:
                h = self._hist[name] = [0.0] * (len(bounds) + 2)
            h[0] += value
            h[1 + bisect_left(bounds, value)] += 1   # a value equal to a bound falls in it (le)

    def committed(self, jobs, last_ts) -> None:
        """A batch committed downstream: its row changes (``RowJob``s) counted by kind, and
        the lag as DM takes it once a job committed (now less its last event's time)."""
        counts: dict[str, int] = {}
        for j in jobs:
            counts[j.op] = counts.get(j.op, 0) + 1
        self._count(counts)
        if last_ts:
            self.observe("lag", max(0.0, time.time() - last_ts))

    def ddl(self, seconds: float, statements: int) -> None:
        """A DDL ran downstream as ``statements`` statements in ``seconds``."""
        self.observe("ddl", seconds)
        self._count({"ddl": statements})

    def _count(self, counts: dict[str, int]) -> None:
        with self._lock:
            for kind, n in counts.items():
                self._jobs[kind] = self._jobs.get(kind, 0) + n

    def take(self) -> dict:
        """What to add to the source's row (column → amount), and start over."""
        with self._lock:
            out: dict = {HISTOGRAMS[n][0]: h for n, h in self._hist.items()}
            out.update({JOB_COUNTERS[k]: n for k, n in self._jobs.items() if k in JOB_COUNTERS})
            self._hist, self._jobs = {}, {}
        return out


def file_index(name: str | None) -> int | None:
    """The number of a binlog file (``mysql-bin.000123`` → 123), DM's GetFilenameIndex; None
    when the name has none (a GTID-only position, a full-phase mark)."""
    if not name:
        return None
    _, dot, digits = name.rpartition(".")
    return int(digits) if dot and digits.isdigit() else None


def binlog_bytes(a: Position, b: Position, sizes) -> int | None:
    """Bytes of binlog from ``a`` to ``b`` (0 when ``b`` is not past ``a``); ``sizes()`` gives the
    upstream's file → size (SHOW BINARY LOGS), asked only when the two are in different files.
    None when unknown (a position without a file, a file the upstream no longer lists)."""
    if file_index(a.file) is None or file_index(b.file) is None:
        return None
    if a.key() >= b.key():
        return 0
    if a.file == b.file:
        return b.pos - a.pos
    known = sizes()
    lo, hi = file_index(a.file), file_index(b.file)
    files = sorted((f for f in known if file_index(f) is not None and lo <= file_index(f) <= hi), key=file_index)
    if not files or files[0] != a.file or files[-1] != b.file:
        return None
    return known[a.file] - a.pos + sum(known[f] for f in files[1:-1]) + b.pos


def remaining_seconds(start: Position, end: Position, until: Position, seconds: float, sizes) -> float | None:
    """DM's remaining_time: the binlog still to read up to ``until`` over the rate the window
    read [``start``, ``end``) at in ``seconds``; 0 once caught up, None when unknown."""
    left = binlog_bytes(end, until, sizes)
    if left == 0:
        return 0.0
    done = binlog_bytes(start, end, sizes)
    if left is None or not done or seconds <= 0:
        return None
    return left / (done / seconds)


def window_end(start: Position, end: Position, until: Position, seconds: float, upstream) -> dict:
    """What a window's last write records for the metrics: the upstream's binlog end it read
    towards (DM's binlog_file/pos of node "master"), the estimated time to reach it and this
    host. ``upstream()``: a short connection to the upstream (a context manager), used only
    for the binlog's file sizes when the positions span files."""
    from dm_core.db import as_str, database_errors

    sizes: dict = {}

    def binlog_sizes() -> dict:
        if not sizes:
            with upstream() as conn, conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                sizes.update({as_str(r[0]): int(r[1]) for r in cur.fetchall()})
        return sizes

    try:
        left = remaining_seconds(start, end, until, seconds, binlog_sizes) if start is not None else None
    except database_errors():   # only an estimate: the window's result stands without it
        left = None
    return dict(upstream_file=until.file, upstream_pos=until.pos, remaining_seconds=left, worker=HOST)
