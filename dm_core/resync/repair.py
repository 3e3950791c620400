"""The re-sync's write: the downstream rows of chosen keys, made again from the upstream union.

For a batch of downstream keys of one target table:

1. every shard row that maps to one of the keys is read upstream: the inverse of the route's
   extract columns and the column mapping picks the shard's own key values
   (``validate.recheck.source_key``, as the validation's re-check reads rows), and each row
   read is shaped into the target's columns (``validate.rows.Shaper``, as the validation
   compares them) and kept only if its target key is one asked for;
2. ``before_write`` runs (the hold's lease and safe-mode exit point: hold.py);
3. one downstream transaction deletes every row with those keys and writes the shaped rows
   (REPLACE: a row holding one of their other unique values is stale as well). A key no
   shard holds any more is only deleted.

Keys arrive as the validation names them: ``{column: value as text}`` (rows.norm), which
the server compares with the column's type; binary columns' hex text is turned back into
bytes. Columns a shard lacks take the downstream default, and generated columns are left to
the downstream to compute.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace

from dm_core.db import qi, qt
from dm_core.errors import ErrorCode
from dm_core.validate.recheck import key_predicate, select_by_key, source_key
from dm_core.validate.rows import norm, types_of

_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "bit"}


@dataclass
class TableRepair:
    target: str
    keys: int = 0            # downstream keys rewritten
    deleted: int = 0         # downstream rows deleted (stale, extra, or about to be written again)
    written: int = 0         # rows written from upstream
    seconds: float = 0.0
    error: str | None = None
    server_away: bool = False   # the error only says a server stayed away: a later run can do it

    def line(self) -> str:
        head = f"{self.target}: {self.keys} key(s): {self.deleted} row(s) deleted, {self.written} written " \
               f"from upstream, {self.seconds:.1f}s"
        return f"{head}; error: {self.error}" if self.error else head


def key_tuples(plan, keys: list[dict]) -> list[tuple]:
    """Validation keys (``{column: text}``) → values in the plan's key order, typed for SQL."""
    types = dict(zip(plan.down.columns, plan.down.column_types)) if plan.down else {}
    out = []
    for k in keys:
        if set(k) != set(plan.key):
            raise ErrorCode.RESYNC_INVALID.error(
                f"{plan.name}: the key {sorted(k)} no longer matches the table's key {plan.key} (DDL since the "
                "validation?)", workaround="re-sync the table by name (what=tables) so it is compared again")
        out.append(tuple(bytes.fromhex(k[c]) if k[c] is not None and types.get(c, "").lower() in _BINARY
                         else k[c] for c in plan.key))
    return out


def expected_rows(plan, keys: list[tuple], up_conns: dict, batch: int = 100) -> list[tuple[tuple, tuple]]:
    """(columns, values) of every shard row whose target key is one of ``keys``."""
    wanted = {tuple(norm(v) for v in k) for k in keys}
    asks: dict[tuple[str, tuple], list[tuple]] = {}
    for k in keys:
        probe = SimpleNamespace(down=SimpleNamespace(raw_key=k))
        for shard in plan.shards:
            got = source_key(plan, shard, probe)
            if got is not None:
                asks.setdefault((shard.origin, tuple(got[0])), []).append(got[1])
    out = []
    for (origin, cols), values in asks.items():
        shard = plan.shard(origin)
        st, shaper = shard.table, shard.maker.shaper
        keep = shaper.supplied()
        names = tuple(plan.columns[i] for i in keep)
        for raw in select_by_key(up_conns[st.source_id], st.schema, st.table, st.columns, list(cols), values, batch,
                                 types_of(st)):
            if shard.maker.record(raw).key not in wanted:
                continue
            shaped = shaper.shape(raw)
            out.append((names, tuple(shaped[i] for i in keep)))
    return out


def repair_keys(plan, keys: list[dict], up_conns: dict, down_conn, *, batch: int = 200,
                before_write=lambda: None) -> TableRepair:
    """Rewrite the downstream rows of ``keys`` of one target table (module docstring)."""
    from dm_core.target import TargetCatalog

    t0 = time.monotonic()
    res = TableRepair(plan.name)
    if plan.down is None:
        res.error = f"the downstream table {plan.name} does not exist: run the full phase (it creates target tables)"
        return res
    generated = TargetCatalog(down_conn).get(plan.schema, plan.table).generated
    typed = list(dict.fromkeys(key_tuples(plan, keys)))
    for i in range(0, len(typed), batch):
        part = typed[i:i + batch]
        rows = expected_rows(plan, part, up_conns, batch)
        before_write()
        deleted, written = _write(down_conn, plan, part, rows, generated)
        res.keys += len(part)
        res.deleted += deleted
        res.written += written
    res.seconds = time.monotonic() - t0
    return res


def _write(conn, plan, keys: list[tuple], rows: list[tuple[tuple, tuple]], generated) -> tuple[int, int]:
    where, params = key_predicate(plan.key, keys)
    by_cols: dict[tuple, list[tuple]] = {}
    for cols, vals in rows:
        pick = [i for i, c in enumerate(cols) if c not in generated]
        by_cols.setdefault(tuple(cols[i] for i in pick), []).append(tuple(vals[i] for i in pick))
    conn.begin()
    try:
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM {qt(plan.schema, plan.table)} WHERE {where}", params)
            deleted = cur.rowcount
            for cols, vals in by_cols.items():
                cur.executemany(f"REPLACE INTO {qt(plan.schema, plan.table)} ({', '.join(qi(c) for c in cols)}) "
                                f"VALUES ({', '.join(['%s'] * len(cols))})", vals)
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return deleted, sum(len(v) for v in by_cols.values())
