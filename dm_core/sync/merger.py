"""Merger (``syncers.multiple-rows``): one worker's ordered jobs → statements.

``multiple_rows=False``: each job becomes its own statement(s) via ``DMLBuilder`` (safe
mode INSERT → REPLACE, UPDATE → DELETE + REPLACE).

``multiple_rows=True``: a run of *adjacent* jobs on the same target table that share one
of these kinds becomes one statement (DM's rule for picking the kind):

    kind     jobs                                           statement
    insert   INSERT, not safe                               INSERT INTO t (..) VALUES (..),(..)
    replace  INSERT, safe                                   REPLACE INTO t (..) VALUES (..),(..)
    upsert   UPDATE, not safe, key unchanged                INSERT INTO t (..) VALUES (..),(..)
                                                            ON DUPLICATE KEY UPDATE c = VALUES(c), ..
    delete   DELETE                                         DELETE FROM t WHERE k IN (..)
                                                            / WHERE (k1, k2) IN ((..), (..))

Everything else goes row by row through ``DMLBuilder``: an UPDATE in safe mode (DELETE +
REPLACE per row: batching all DELETEs before all REPLACEs would be wrong for a chain
1→2, 2→3), an UPDATE that changes the key (DM batches these as one UPDATE … CASE WHEN,
which can trip over transient duplicate keys; we don't), and every job of a table without
a unique key (statements there carry ``<=>`` and LIMIT 1 and must stay one per row).

Why this preserves the result: rows of a multi-row INSERT/REPLACE/ON DUPLICATE KEY UPDATE
are processed in order, exactly like the single-row statements one after another, and a
DELETE by unique key does not depend on order. Only adjacent jobs merge, so no job moves
past another. ``upsert`` equals the UPDATE it replaces whenever the row exists downstream,
which holds in a consistent downstream outside safe mode (where DM uses it too); if the row
is missing it inserts it instead of doing nothing. (A second unique key downstream can make
it hit another row: see ``job.py``.) A run of one job is emitted exactly as ``DMLBuilder``
builds it (plain UPDATE for an upsert of one row).

Regrouping (``regroup``, before merging). Runs of adjacent jobs are short in a busy mixed
workload (INSERT, UPDATE, DELETE interleaved), so few rows merge. Jobs on rows that cannot
interact may be applied in any order: rows of tables whose only unique index is the key,
with distinct keys (compared folded, as the collation would). ``regroup`` cuts a worker's
queue into segments in which no key repeats and every job is such a row, and orders each
segment DELETEs → UPDATEs → INSERTs, per table, keeping binlog order inside each group;
any other job ends the segment and keeps its place. The result is the same rows, with
long runs for the merger.

Limits per statement: ``max_rows`` rows and at most 65,535 placeholders (the prepared
statement limit of MySQL and TiDB). Values are always parameters, identifiers always
quoted (and ``%`` doubled, since pymysql interpolates ``%s`` client-side).
"""

from __future__ import annotations

from functools import lru_cache
from itertools import chain
from operator import itemgetter

from dm_core.db import qi
from dm_core.sync.dml import DMLBuilder, Stmt
from dm_core.sync.job import RowJob
from dm_core.target import TargetTable

MAX_PLACEHOLDERS = 65_535
DEFAULT_MAX_ROWS = 1_000


def merge(jobs: list[RowJob], *, multiple_rows: bool, max_rows: int = DEFAULT_MAX_ROWS) -> list[Stmt]:
    """Statements applying ``jobs`` in order; see the module docstring for the merge rules."""
    out: list[Stmt] = []
    if not multiple_rows:
        for j in jobs:
            out.extend(_builder(j.target).build(j.op, j.before, j.after, j.safe))
        return out
    run: list[RowJob] = []
    run_kind = None
    for j in jobs:
        kind = _kind(j)
        if run and (kind is None or kind != run_kind or (j.target is not run[0].target and j.target != run[0].target)):
            out.extend(_flush(run_kind, run, max_rows))
            run = []
        if kind is None:
            out.extend(_builder(j.target).build(j.op, j.before, j.after, j.safe))
            continue
        run.append(j)
        run_kind = kind
    if run:
        out.extend(_flush(run_kind, run, max_rows))
    return out


_OP_ORDER = {"delete": 0, "update": 1, "insert": 2}


def regroup(jobs: list[RowJob]) -> list[RowJob]:
    """Reorder independent jobs so that the merger sees long runs (see the module docstring).

    >>> from dm_core.target import TargetTable
    >>> t = TargetTable("db", "t", ("id", "v"), ("id",), True, True)
    >>> ins = lambda i: RowJob("insert", t, None, {"id": i, "v": 1}, False)
    >>> dele = lambda i: RowJob("delete", t, {"id": i, "v": 1}, None, False)
    >>> [(j.op, j.key()) for j in regroup([ins(1), dele(2), ins(3), dele(1)])]
    [('delete', (2,)), ('insert', (1,)), ('insert', (3,)), ('delete', (1,))]
    """
    out: list[RowJob] = []
    seg: list[RowJob] = []
    seen: set = set()

    def close() -> None:
        if len(seg) > 1:
            seg.sort(key=lambda j: (_OP_ORDER[j.op], j.target.schema, j.target.table))
        out.extend(seg)
        seg.clear()
        seen.clear()

    for j in jobs:
        t = j.target
        if not t.rows_apart or j.op not in _OP_ORDER:
            close()
            out.append(j)
            continue
        ks = j.keys()
        if any(k in seen for k in ks):
            close()
        seen.update(ks)
        seg.append(j)
    close()
    return out


def _kind(j: RowJob) -> str | None:
    if not j.target.key_is_unique:
        return None
    if j.op == "insert":
        return "replace" if j.safe else "insert"
    if j.op == "delete":
        return "delete"
    if not j.safe and not j.key_changed():
        return "upsert"
    return None


def _flush(kind: str, run: list[RowJob], max_rows: int) -> list[Stmt]:
    t = run[0].target
    per_row = len(t.key) if kind == "delete" else len(t.columns)
    step = max(1, min(max_rows, MAX_PLACEHOLDERS // max(1, per_row)))
    out = []
    for i in range(0, len(run), step):
        chunk = run[i:i + step]
        if len(chunk) == 1:
            j = chunk[0]
            out.extend(_builder(t).build(j.op, j.before, j.after, j.safe))
        elif kind == "delete":
            out.append(_multi_delete(t, chunk))
        else:
            out.append(_multi_insert(t, kind, chunk))
    return out


def _multi_insert(t: TargetTable, kind: str, chunk: list[RowJob]) -> Stmt:
    cols = t.columns
    verb = "REPLACE" if kind == "replace" else "INSERT"
    row_ph = "(" + ", ".join(["%s"] * len(cols)) + ")"
    head = f"{verb} INTO {_qt(t)} ({', '.join(_qi(c) for c in cols)}) VALUES "
    tail = ""
    if kind == "upsert":
        tail = " ON DUPLICATE KEY UPDATE " + ", ".join(f"{_qi(c)} = VALUES({_qi(c)})" for c in cols)
    return Stmt(head + ", ".join([row_ph] * len(chunk)) + tail, _values(cols, [j.after for j in chunk]),
                (head, row_ph, tail))


def _multi_delete(t: TargetTable, chunk: list[RowJob]) -> Stmt:
    if len(t.key) == 1:
        head, row_ph = f"DELETE FROM {_qt(t)} WHERE {_qi(t.key[0])} IN (", "%s"
    else:
        row_ph = "(" + ", ".join(["%s"] * len(t.key)) + ")"
        head = f"DELETE FROM {_qt(t)} WHERE ({', '.join(_qi(k) for k in t.key)}) IN ("
    return Stmt(head + ", ".join([row_ph] * len(chunk)) + ")", tuple(v for j in chunk for v in j.key_before()),
                (head, row_ph, ")"))


def _values(cols: tuple[str, ...], rows: list[dict]) -> tuple:
    """Every row's values in ``cols`` order, flattened (a missing column is NULL). Values
    stay as decoded: the applier's ``literal.Renderer`` converts JSON and SET values."""
    get = itemgetter(*cols)
    try:
        return tuple(chain.from_iterable(map(get, rows))) if len(cols) > 1 else tuple(map(get, rows))
    except KeyError:  # a shard without some target column (optimistic shard DDL)
        return tuple(r.get(c) for r in rows for c in cols)


@lru_cache(maxsize=512)
def _builder(t: TargetTable) -> DMLBuilder:
    return DMLBuilder(t)


def _qi(name: str) -> str:
    return qi(name).replace("%", "%%")


def _qt(t: TargetTable) -> str:
    return f"{_qi(t.schema)}.{_qi(t.table)}"
