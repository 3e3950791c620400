"""Confirming differences while replication runs: no false difference from rows in flight.

A snapshot of the upstream union and one of the downstream are never taken at the same
instant, so while a task syncs a row written upstream between the two reads looks missing
or changed. Like DM's continuous validator, which re-checks a failed row until
``row-error-delay`` has passed, every difference the bucket pass found is a *candidate*,
re-checked by key until it is confirmed, resolved or out of time. One round:

1. read the candidates' rows upstream (U1), by key, from the shard that holds them (an extra
   downstream row's key is mapped back through the column mapping to every shard that could
   hold it);
2. note each source's binlog position now (after U1) and wait until every source's
   checkpoint has passed it -- everything U1 saw is then applied downstream;
3. read the candidates' rows downstream (D), then upstream again (U2).

A candidate whose U1 and D agree is *resolved* (it was in flight). One whose U1 equals U2
(the row did not change upstream around the downstream read) and still differs from D is
*confirmed*: the downstream shows state from after U1 and the upstream row stayed the same
all that time, so the downstream is wrong. Otherwise (the row changed again, or a source did
not catch up in time: paused, waiting on a shard DDL lock, lagging) it goes to the next round,
``check-interval`` later. Candidates still open when ``row-error-delay`` has passed since the
bucket pass are reported as *pending* with the reason, never as differences. (A row that
changes and changes back between U1 and U2 is the one case this cannot see.)

When nothing replicates (task-mode full, or the task is stopped) there is nothing in flight
and step 2 does not wait.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from dm_core.db import qi, qt
from dm_core.validate.diff import Diff, key_diff, split_explained
from dm_core.validate.rows import Record, norm, select_list, types_of

log = logging.getLogger("shardflow.validate")


@dataclass
class Settings:
    row_error_delay: float = 1800.0
    check_interval: float = 5.0
    batch_query_size: int = 100


@dataclass
class Outcome:
    confirmed: list[Diff]
    resolved: int
    pending: list[tuple[Diff, str]]


class SyncWaiter:
    """Step 2: wait until every source's checkpoint passes its upstream position now."""

    def __init__(self, task, store, up_conns: dict, *, poll: float = 1.0, stop=None):
        """``stop()``: checked at each poll; once true, the wait raises errors.Cancelled."""
        self.task, self.store, self.up_conns, self.poll, self.stop = task, store, up_conns, poll, stop

    def _ask(self, call):
        """A read of the state store, waiting out a Postgres restart (dm_core/state/outage.py)."""
        from dm_core.state.outage import riding_out

        return riding_out(self.store, call, what="the validation waits for replication", log=log.warning)

    def replicating(self) -> str | None:
        """None when rows may be in flight, else why nothing is (no wait needed)."""
        if self.task.task_mode not in ("all", "incremental"):
            return f"task-mode {self.task.task_mode} does not replicate"
        got = self._ask(lambda: self.store.get_task(self.task.name))
        if got is not None and got[1] == "stopped":
            return "the task is stopped"
        return None

    def catch_up(self, deadline: float) -> str | None:
        """None once every source caught up, else why not by ``deadline`` (monotonic)."""
        from dm_core.db import master_position
        from dm_core.position import Position

        if self.replicating() is not None:
            return None
        got = self._ask(lambda: self.store.get_task(self.task.name))
        if got is not None and got[1] == "paused":
            return "the task is paused: the downstream cannot catch up"
        targets = {}
        for sid, conn in self.up_conns.items():
            f, p, _ = master_position(conn)
            targets[sid] = Position(f, p)
        while True:
            states = {s["source_id"]: s for s in self._ask(lambda: self.store.all_source_states(self.task.name))}
            behind = []
            for sid, want in targets.items():
                s = states.get(sid) or {}
                if s.get("stage") == "paused" and s.get("error"):
                    return f"source {sid} is paused on an error: {s['error']}"
                at = Position(s["binlog_file"], s["binlog_pos"]) if s.get("binlog_file") else None
                if at is None or at.key() < want.key():
                    behind.append(f"source {sid} at {at or 'no checkpoint'}, needs {want}")
            if not behind:
                return None
            if time.monotonic() >= deadline:
                return "replication did not catch up in time: " + "; ".join(behind)
            if self.stop is not None and self.stop():
                from dm_core.errors import Cancelled

                raise Cancelled("the validation was cancelled while it waited for replication: its task was stopped")
            time.sleep(self.poll)


def recheck(plan, diffs: list[Diff], up_conns: dict, down_conn, waiter: SyncWaiter, settings: Settings,
            first_seen: float, *, sleep=time.sleep) -> Outcome:
    """Re-check candidate differences of one table (``plan``: a TablePlan) until each is
    confirmed, resolved or pending (module docstring)."""
    open_keys = {d.key: d for d in diffs}
    confirmed: list[Diff] = []
    resolved = 0
    pending: dict[tuple, tuple[Diff, str]] = {}
    deadline = first_seen + settings.row_error_delay
    while open_keys:
        keys = list(open_keys)
        u1 = read_upstream(plan, [open_keys[k] for k in keys], up_conns, settings.batch_query_size)
        behind = waiter.catch_up(deadline)
        dn = read_downstream(plan, [open_keys[k] for k in keys], down_conn, settings.batch_query_size)
        u2 = read_upstream(plan, [open_keys[k] for k in keys], up_conns, settings.batch_query_size)
        again: dict[tuple, Diff] = {}
        for k in keys:
            now, _ = split_explained(key_diff(u1.get(k, []), dn.get(k, [])))
            if not now:
                resolved += 1
                pending.pop(k, None)
                continue
            stable = sorted(r.digest for r in u1.get(k, [])) == sorted(r.digest for r in u2.get(k, []))
            if stable and behind is None:
                confirmed += now
                pending.pop(k, None)
            else:
                again[k] = now[0]
                pending[k] = (now[0], behind or "the row kept changing upstream while it was re-checked")
        if not again or time.monotonic() >= deadline:
            break
        sleep(min(settings.check_interval, max(0.0, deadline - time.monotonic())))
        open_keys = again
    return Outcome(confirmed, resolved, [pending[k] for k in pending])


def key_predicate(cols: list[str], values: list[tuple]) -> tuple[str, list]:
    """WHERE text + parameters selecting rows whose ``cols`` equal one of ``values``."""
    if len(cols) == 1 and all(v[0] is not None for v in values):
        return f"{qi(cols[0])} IN ({', '.join(['%s'] * len(values))})", [v[0] for v in values]
    one = "(" + " AND ".join(f"{qi(c)} <=> %s" for c in cols) + ")"
    return " OR ".join([one] * len(values)), [x for v in values for x in v]


def select_by_key(conn, schema: str, table: str, columns: list[str], cols: list[str], values: list[tuple],
                  batch: int, types: dict | None = None) -> list[tuple]:
    """Rows whose ``cols`` equal one of ``values``, ``columns`` read exactly (rows.select_list)."""
    out = []
    uniq = list(dict.fromkeys(values))
    for i in range(0, len(uniq), max(1, batch)):
        where, params = key_predicate(cols, uniq[i:i + batch])
        with conn.cursor() as cur:
            cur.execute(f"SELECT {select_list(columns, types)} FROM {qt(schema, table)} WHERE {where}", params)
            out += list(cur.fetchall())
    return out


def read_downstream(plan, diffs: list[Diff], conn, batch: int) -> dict[tuple, list[Record]]:
    if plan.down is None:
        return {}
    values = [(d.up or d.down).raw_key for d in diffs]
    out: dict[tuple, list[Record]] = {}
    for raw in select_by_key(conn, plan.schema, plan.table, plan.columns, plan.key, values, batch, types_of(plan.down)):
        r = plan.down_maker.record(raw)
        out.setdefault(r.key, []).append(r)
    return out


def read_upstream(plan, diffs: list[Diff], up_conns: dict, batch: int) -> dict[tuple, list[Record]]:
    """The candidates' rows in every shard that can hold them."""
    wanted: dict[str, tuple[list[str], list[tuple]]] = {}
    for d in diffs:
        for shard in plan.shards:
            if d.up is not None and d.up.origin != shard.origin:
                continue
            got = source_key(plan, shard, d) if d.up is None else _own_key(plan, shard, d.up)
            if got is None:
                continue
            cols, vals = got
            wanted.setdefault(shard.origin, (cols, []))[1].append(vals)
    out: dict[tuple, list[Record]] = {}
    for shard in plan.shards:
        if shard.origin not in wanted:
            continue
        cols, values = wanted[shard.origin]
        st = shard.table
        for raw in select_by_key(up_conns[st.source_id], st.schema, st.table, st.columns, cols, values, batch,
                                 types_of(st)):
            r = shard.maker.record(raw)
            out.setdefault(r.key, []).append(r)
    return out


def _own_key(plan, shard, rec: Record) -> tuple[list[str], tuple] | None:
    """The lookup of an upstream record's own row: its key columns before mapping."""
    pairs = [(c, v) for c, i, v in zip(plan.key, shard.maker.src_key_idx, rec.src_key) if i is not None]
    return ([c for c, _ in pairs], tuple(v for _, v in pairs)) if pairs else None


def source_key(plan, shard, d: Diff) -> tuple[list[str], tuple] | None:
    """Which row of ``shard`` would map to the downstream key of ``d`` (None: none can):
    the inverse of the shard's column mapping and extract columns on the key columns."""
    from dm_core.rules.column_mapping import AddPrefix, AddSuffix, PartitionId

    st = shard.table
    mapping = shard.maker.shaper.mapping
    writes = {t.column: t for t in (mapping.transforms if mapping is not None else [])}
    cols, vals = [], []
    for c, v in zip(plan.key, d.down.raw_key):
        if c in st.extract:
            if norm(v) != norm(st.extract[c]):
                return None
            continue
        if c not in st.columns:
            if v is not None and norm(v) != norm(shard.maker.shaper.defaults.get(c)):
                return None
            continue
        t = writes.get(c)
        if isinstance(t, PartitionId):
            try:
                n = int(v)
            except (TypeError, ValueError):
                return None
            low = n & ((1 << t.id_bits) - 1)
            if n != low | t.or_value:
                return None
            cols.append(t.source_column)
            vals.append(low)
        elif isinstance(t, AddPrefix):
            if not isinstance(v, str) or not v.startswith(t.prefix):
                return None
            cols.append(c)
            vals.append(v[len(t.prefix):])
        elif isinstance(t, AddSuffix):
            if not isinstance(v, str) or not v.endswith(t.suffix):
                return None
            cols.append(c)
            vals.append(v[:len(v) - len(t.suffix)] if t.suffix else v)
        else:
            cols.append(c)
            vals.append(v)
    return (cols, tuple(vals)) if cols else None
