"""Compare the downstream with the union of the upstream shards (after routing, column
mapping and extract columns): row counts and an order-independent checksum per target table.

It reads whole tables into memory: meant for demos, tests and small tables. The chunked,
bisecting validator for real sizes is the validation DAG's job.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
from collections import Counter
from dataclasses import dataclass

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


def _row_digest(row) -> int:
    return int.from_bytes(hashlib.sha256(repr(tuple(_norm(v) for v in row)).encode()).digest()[:8], "big")


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


def _checksum(rows: Counter) -> str:
    acc = 0
    for r, n in rows.items():
        acc = (acc + _row_digest(r) * n) % (1 << 64)
    return f"{acc:016x}"


def compare_task(task, store) -> list[TableDiff]:
    """Shards of one target may have different columns (optimistic shard DDL): rows compare
    over the union of their columns, a column a shard lacks counting as what the downstream
    gives such rows (its default, NULL when it has none)."""
    expected: dict[tuple[str, str], list[tuple[list[str], list[tuple]]]] = {}
    columns: dict[tuple[str, str], list[str]] = {}
    for inst in task.mysql_instances:
        rules = task.rules_for(inst.source_id)
        conn = connect(source_endpoint(store, inst.source_id))
        try:
            for st in discover(conn, inst.source_id, rules):
                tkey = (st.target_schema, st.target_table)
                cols = st.columns + list(st.extract)
                union = columns.setdefault(tkey, [])
                union += [c for c in cols if c not in union]
                plan = rules.column_mapper.plan(st.schema, st.table, st.columns)
                with conn.cursor() as cur:
                    cur.execute(f"SELECT {', '.join(qi(c) for c in st.columns)} FROM {qt(st.schema, st.table)}")
                    rows = [tuple(plan.map_row(list(r)) if plan else r) + tuple(st.extract.values())
                            for r in cur.fetchall()]
                expected.setdefault(tkey, []).append((cols, rows))
        finally:
            conn.close()
    out = []
    down = connect(target_endpoint(task), downstream=True)
    try:
        for (ts, tt), shards in sorted(expected.items()):
            cols = columns[(ts, tt)]
            defaults = _defaults(down, ts, tt)
            bag: Counter = Counter()
            for shard_cols, rows in shards:
                at = {c: i for i, c in enumerate(shard_cols)}
                for r in rows:
                    bag[tuple(r[at[c]] if c in at else defaults.get(c) for c in cols)] += 1
            lacking = [c for c in cols if c not in defaults]
            with down.cursor() as cur:
                cur.execute(f"SELECT {', '.join(qi(c) if c in defaults else 'NULL' for c in cols)} FROM {qt(ts, tt)}")
                got = Counter(tuple(r) for r in cur.fetchall())
            exp_n = Counter({tuple(_norm(v) for v in k): n for k, n in bag.items()})
            got_n = Counter({tuple(_norm(v) for v in k): n for k, n in got.items()})
            missing = [f"column `{c}` (the downstream table lacks it)" for c in lacking]
            missing += list((exp_n - got_n).elements())[:5]
            extra = list((got_n - exp_n).elements())[:5]
            out.append(TableDiff(f"{ts}.{tt}", sum(bag.values()), sum(got.values()),
                                 _checksum(exp_n), "missing columns" if lacking else _checksum(got_n), missing, extra))
    finally:
        down.close()
    return out


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
