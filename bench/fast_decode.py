"""Micro-benchmark: decoding one binlog range with OracleBinlogWindow vs BinlogWindow.

Workload (upstream up1 of the local stack, schema ``fdbench_<pid>``, dropped afterwards),
written before anything is timed, as two binlog ranges:

- ``small``: N single-row autocommit transactions, 60% INSERT / 30% UPDATE / 10% DELETE;
- ``big``:   M transactions of K-row multi-row INSERTs, then M/2 K-row UPDATEs.

The table mixes the common column types (int, bigint unsigned, varchar, char, decimal,
datetime(6), timestamp, nullable text). Each reader reads each range whole (no budget),
nothing applied; rows/s divides the workload's rows by the wall time of the window,
connection included, and by this process's CPU time (steadier on a busy machine, and the
server's share of the work is the same for both readers). BinlogWindow's output
(Txns, position, events_read) is checked equal to OracleBinlogWindow's.

    .venv/bin/python -m bench.fast_decode [--small 50000] [--big 50] [--rows 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import stack_from_env  # noqa: E402
from dm_core.binlog import BinlogWindow  # noqa: E402
from dm_core.db import connect, master_position, qi  # noqa: E402
from dm_core.position import Position  # noqa: E402
from tests.oracle_binlog import OracleBinlogWindow  # noqa: E402

DDL = """CREATE TABLE {t} (
  id int NOT NULL,
  k bigint unsigned NOT NULL,
  c varchar(120) NOT NULL,
  pad char(60) NOT NULL,
  amount decimal(12,2) NOT NULL,
  updated_at datetime(6) NOT NULL,
  ts timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  note text NULL,
  PRIMARY KEY (id),
  KEY k_k (k)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""


def _row(rng: random.Random, i: int) -> tuple:
    return (i, rng.randrange(1 << 40), f"c-{rng.random():.12f}-ü", f"pad{i % 97}",
            f"{rng.randrange(-10**9, 10**9) / 100:.2f}",
            f"2024-0{1 + i % 9}-1{i % 10} 0{i % 10}:1{i % 10}:2{i % 10}.{i % 1000000:06d}",
            None if i % 3 else f"note {i}")


def write_small(conn, t: str, n: int, rng: random.Random) -> int:
    """``n`` single-row autocommit transactions; returns the rows changed."""
    live: list[int] = []
    next_id = 1_000_000
    ins = f"INSERT INTO {t} (id, k, c, pad, amount, updated_at, note) VALUES (%s, %s, %s, %s, %s, %s, %s)"
    with conn.cursor() as cur:
        for _ in range(n):
            r = rng.random()
            if r < 0.6 or len(live) < 10:
                cur.execute(ins, _row(rng, next_id))
                live.append(next_id)
                next_id += 1
            elif r < 0.9:
                cur.execute(f"UPDATE {t} SET c = %s, amount = amount + 1 WHERE id = %s",
                            (f"u-{rng.random():.8f}", rng.choice(live)))
            else:
                j = rng.randrange(len(live))
                live[j], live[-1] = live[-1], live[j]
                cur.execute(f"DELETE FROM {t} WHERE id = %s", (live.pop(),))
    return n


def write_big(conn, t: str, m: int, k: int, rng: random.Random) -> int:
    """``m`` K-row INSERT transactions then ``m // 2`` K-row UPDATE transactions."""
    ins = f"INSERT INTO {t} (id, k, c, pad, amount, updated_at, note) VALUES (%s, %s, %s, %s, %s, %s, %s)"
    rows = 0
    with conn.cursor() as cur:
        for b in range(m):
            conn.begin()
            cur.executemany(ins, [_row(rng, 10_000_000 + b * k + j) for j in range(k)])
            conn.commit()
            rows += k
        for b in range(m // 2):
            lo = 10_000_000 + b * k
            cur.execute(f"UPDATE {t} SET k = k + 1, c = CONCAT(c, 'x') WHERE id >= %s AND id < %s", (lo, lo + k))
            rows += cur.rowcount
    return rows


def read(cls, ep, start: Position, until: Position, server_id: int):
    """(wall seconds, this process's CPU seconds, txns, window) for one whole-range window."""
    t0, c0 = time.perf_counter(), time.process_time()
    w = cls(ep, start, until, server_id=server_id, budget_events=1 << 62, budget_seconds=1e9)
    txns = list(w)
    return time.perf_counter() - t0, time.process_time() - c0, txns, w


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=50_000, help="single-row transactions")
    ap.add_argument("--big", type=int, default=50, help="multi-row INSERT transactions")
    ap.add_argument("--rows", type=int, default=1000, help="rows per multi-row transaction")
    ap.add_argument("--repeat", type=int, default=3, help="BinlogWindow runs (best kept)")
    args = ap.parse_args(argv)

    ep = stack_from_env().up1
    schema = f"fdbench_{os.getpid()}"
    t = f"{qi(schema)}.`t`"
    conn = connect(ep)
    rng = random.Random(7)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {qi(schema)}")
            cur.execute(DDL.format(t=t))
        ranges = {}
        for name, write in (("small", lambda: write_small(conn, t, args.small, rng)),
                            ("big", lambda: write_big(conn, t, args.big, args.rows, rng))):
            start = Position(*master_position(conn)[:2])
            t0 = time.perf_counter()
            rows = write()
            until = Position(*master_position(conn)[:2])
            size = until.pos - start.pos if until.file == start.file else None
            ranges[name] = (start, until, rows, size)
            print(f"[{name}] wrote {rows} rows in {time.perf_counter() - t0:.1f}s, binlog "
                  f"{start}..{until} ({'%.1f MB' % (size / 1e6) if size else 'spans files'})", flush=True)

        for name, (start, until, rows, size) in ranges.items():
            slow_s, slow_cpu, slow, ws = read(OracleBinlogWindow, ep, start, until, 88001)
            best = best_cpu = float("inf")
            for _ in range(args.repeat):
                sec, cpu, fast, wf = read(BinlogWindow, ep, start, until, 88002)
                best, best_cpu = min(best, sec), min(best_cpu, cpu)
            mine = sum(1 for x in slow for r in x.rows if r.schema == schema)
            same = (fast == slow and wf.position == ws.position and wf.events_read == ws.events_read)
            print(f"[{name}] {mine} rows of ours, {sum(len(x.rows) for x in slow)} rows in range, "
                  f"{len(slow)} txns, {size / 1e6 if size else float('nan'):.1f} MB")
            print(f"[{name}]   OracleBinlogWindow (mysql-replication): {slow_s:7.2f}s wall {rows / slow_s:9.0f} rows/s"
                  f" | {slow_cpu:6.2f}s cpu {rows / slow_cpu:9.0f} rows/s")
            print(f"[{name}]   BinlogWindow (best of {args.repeat}):  {best:7.2f}s wall {rows / best:9.0f} rows/s"
                  f" | {best_cpu:6.2f}s cpu {rows / best_cpu:9.0f} rows/s")
            print(f"[{name}]   ratio fast/slow: {slow_s / best:.1f}x wall, {slow_cpu / best_cpu:.1f}x cpu;"
                  f" identical output: {same}", flush=True)
            if not same:
                return 1
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {qi(schema)}")
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
