"""Compare the downstream with the union of the upstream shards (after routing, column
mapping and extract columns): row counts and an order-independent checksum per target table.

Tables are streamed (server-side cursors), never held in memory, so a table of any size
can be validated with a few MB. How:

1. Pass 1 digests every row (SHA-256 of its normalized values, 64 bits) on both sides and
   keeps, per target table, the row count, the sum of digests (the checksum) and the same
   two figures in each of ``BUCKETS`` buckets chosen by the digest. Equal counts and sums
   mean equal tables (a multiset of rows has one sum; a collision needs 2^-64 luck).
2. Only when they differ, pass 2 reads both sides again and keeps just the rows whose
   bucket differs (at most ``SAMPLE_ROWS`` a side): the rows missing downstream and the
   extra ones are named from those. A difference of one row costs a bucket's rows, about
   1/BUCKETS of the table.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator

import pymysql

from dm_core.db import as_str, connect, qi, qt
from dm_core.full.discover import discover
from dm_core.sources import source_endpoint, target_endpoint


def _norm(v):
    if isinstance(v, decimal.Decimal):
        return format(v.normalize(), "f") if v == v.to_integral() else str(v.normalize())
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ")
    if v is None:
        return None
    return str(v)


@dataclass
class TableDiff:
    target: str
    upstream_rows: int
    downstream_rows: int
    upstream_checksum: str
    downstream_checksum: str
    missing: list      # a few rows upstream has and downstream lacks
    extra: list        # a few rows downstream has and upstream lacks

    @property
    def equal(self) -> bool:
        return self.upstream_rows == self.downstream_rows and self.upstream_checksum == self.downstream_checksum


BUCKETS = 4096
SAMPLE_ROWS = 100_000   # rows of differing buckets kept per side in pass 2
FETCH = 5_000
_MASK = (1 << 64) - 1


class _Tally:
    """Count and digest sum of a multiset of rows, overall and per bucket."""

    __slots__ = ("rows", "sum", "b_rows", "b_sum")

    def __init__(self):
        self.rows, self.sum = 0, 0
        self.b_rows, self.b_sum = [0] * BUCKETS, [0] * BUCKETS

    def add(self, digest: int) -> None:
        b = digest % BUCKETS
        self.rows += 1
        self.sum = (self.sum + digest) & _MASK
        self.b_rows[b] += 1
        self.b_sum[b] = (self.b_sum[b] + digest) & _MASK

    @property
    def checksum(self) -> str:
        return f"{self.sum:016x}"

    def differing(self, other: "_Tally") -> set[int]:
        return {b for b in range(BUCKETS)
                if self.b_rows[b] != other.b_rows[b] or self.b_sum[b] != other.b_sum[b]}


@dataclass
class _Side:
    """How to read one side of a target table: queries, each with a row transform."""

    reads: list[tuple[object, str, Callable[[tuple], tuple]]]  # (connection, sql, to union row)

    def rows(self) -> Iterator[tuple]:
        """Normalized union rows, streamed."""
        for conn, sql, shape in self.reads:
            cur = conn.cursor(pymysql.cursors.SSCursor)
            try:
                cur.execute(sql)
                while True:
                    chunk = cur.fetchmany(FETCH)
                    if not chunk:
                        break
                    for r in chunk:
                        yield tuple(_norm(v) for v in shape(r))
            finally:
                cur.close()


def _tally(side: _Side) -> _Tally:
    t = _Tally()
    for r in side.rows():
        t.add(_digest(r))
    return t


def _sample(side: _Side, buckets: set[int]) -> Counter:
    out: Counter = Counter()
    kept = 0
    for r in side.rows():
        if _digest(r) % BUCKETS in buckets:
            out[r] += 1
            kept += 1
            if kept >= SAMPLE_ROWS:
                break
    return out


def _digest(normalized: tuple) -> int:
    return int.from_bytes(hashlib.sha256(repr(normalized).encode()).digest()[:8], "big")


def compare_task(task, store) -> list[TableDiff]:
    """Shards of one target may have different columns (optimistic shard DDL): rows compare
    over the union of their columns, a column a shard lacks counting as what the downstream
    gives such rows (its default, NULL when it has none)."""
    conns: dict[str, object] = {}
    try:
        shards: dict[tuple[str, str], list] = {}
        columns: dict[tuple[str, str], list[str]] = {}
        for inst in task.mysql_instances:
            rules = task.rules_for(inst.source_id)
            conn = conns[inst.source_id] = connect(source_endpoint(store, inst.source_id))
            for st in discover(conn, inst.source_id, rules):
                tkey = (st.target_schema, st.target_table)
                cols = st.columns + list(st.extract)
                union = columns.setdefault(tkey, [])
                union += [c for c in cols if c not in union]
                shards.setdefault(tkey, []).append((inst.source_id, st, cols,
                                                    rules.column_mapper.plan(st.schema, st.table, st.columns)))
        down = conns[""] = connect(target_endpoint(task), downstream=True)
        out = []
        for (ts, tt), parts in sorted(shards.items()):
            cols = columns[(ts, tt)]
            defaults = _defaults(down, ts, tt)
            up = _Side([(conns[sid],
                         f"SELECT {', '.join(qi(c) for c in st.columns)} FROM {qt(st.schema, st.table)}",
                         _shaper(st, shard_cols, plan, cols, defaults))
                        for sid, st, shard_cols, plan in parts])
            lacking = [c for c in cols if c not in defaults]
            dn = _Side([(down,
                         f"SELECT {', '.join(qi(c) if c in defaults else 'NULL' for c in cols)} FROM {qt(ts, tt)}",
                         lambda r: r)])
            exp, got = _tally(up), _tally(dn)
            missing = [f"column `{c}` (the downstream table lacks it)" for c in lacking]
            extra = []
            if (exp.rows, exp.sum) != (got.rows, got.sum):
                buckets = exp.differing(got)
                want, have = _sample(up, buckets), _sample(dn, buckets)
                missing += list((want - have).elements())[:5]
                extra = list((have - want).elements())[:5]
            out.append(TableDiff(f"{ts}.{tt}", exp.rows, got.rows, exp.checksum,
                                 "missing columns" if lacking else got.checksum, missing, extra))
        return out
    finally:
        for c in conns.values():
            c.close()


def _shaper(st, shard_cols: list[str], plan, cols: list[str], defaults: dict) -> Callable[[tuple], tuple]:
    """An upstream row of shard ``st`` → its row over the target's union columns."""
    extract = tuple(st.extract.values())
    at = {c: i for i, c in enumerate(shard_cols)}
    pick = [(True, at[c]) if c in at else (False, defaults.get(c)) for c in cols]

    def shape(r: tuple) -> tuple:
        full = (tuple(plan.map_row(list(r))) if plan else tuple(r)) + extract
        return tuple(full[x] if has else x for has, x in pick)
    return shape


def _defaults(conn, schema: str, table: str) -> dict:
    """``{column: default value}`` of the downstream table (None: no default or NULL)."""
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, COLUMN_DEFAULT FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (schema, table))
        out = {}
        for name, default in cur.fetchall():
            d = None if default is None else as_str(default)
            if d is not None and d.upper() == "NULL":
                d = None
            elif d is not None and len(d) >= 2 and d[0] == d[-1] == "'":
                d = d[1:-1].replace("''", "'")
            out[as_str(name)] = d
    return out


def render(diffs: list[TableDiff]) -> str:
    lines = [f"{'target table':<30} {'upstream rows':>14} {'downstream rows':>16} {'upstream checksum':>18} {'downstream checksum':>20}  result"]
    for d in diffs:
        lines.append(f"{d.target:<30} {d.upstream_rows:>14} {d.downstream_rows:>16} {d.upstream_checksum:>18} "
                     f"{d.downstream_checksum:>20}  {'EQUAL' if d.equal else 'DIFFERENT'}")
        for r in d.missing:
            lines.append(f"    missing downstream: {r}")
        for r in d.extra:
            lines.append(f"    extra downstream:   {r}")
    return "\n".join(lines)
