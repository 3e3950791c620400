"""A task's full-phase progress and last validation summarised in Postgres, for the Migrations
page: a task of 10,000 tables keeps 10,000 plans and a validation result listing every target
table, so the counts are made by the store and only the few tables a person must look at
(problems first) travel to the page. Each function is one read transaction on a ``StateStore``.
"""

from __future__ import annotations

from dm_core.state.schema import SCHEMA

# the order problem tables are listed in: the worst first
_VALIDATION_ORDER = ("error", "different", "pending", "equal")


def _exists(cur, table: str) -> bool:
    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.{table}",))
    return bool(cur.fetchone()[0])


def full_progress(store, task: str, shown: int = 10) -> dict:
    """``{"sources": {source: counts}, "loading": [tables]}``. Per source of the full phase: tables
    and chunks planned, tables whose every chunk is loaded, chunks and rows loaded. ``loading``:
    up to ``shown`` tables with some but not all chunks loaded (a load in progress, or stopped
    inside a table), by source and name.

    Two single-table reads matched here, not a join in Postgres: right after a full phase writes
    thousands of plans and chunks their statistics are stale, and the planner's nested loop over
    the join took 111 s for 10,000 tables (these reads take tens of ms)."""
    out: dict = {"sources": {}, "loading": []}
    with store.tx() as cur:
        cur.execute(f"SELECT source_id, schema_name, table_name, count(*), coalesce(sum(rows), 0) "
                    f"FROM {SCHEMA}.full_chunk WHERE task = %s GROUP BY 1, 2, 3", (task,))
        rows = cur.fetchall()
        loaded = {(sid, s, t): int(n) for sid, s, t, n, _ in rows}
        for sid, _, _, n, r in rows:
            got = out["sources"].setdefault(sid, {"tables_planned": None, "tables_loaded": None,
                                                  "chunks_planned": None, "chunks_loaded": 0, "rows": 0})
            got["chunks_loaded"] += int(n)
            got["rows"] += int(r)
        if not _exists(cur, "full_plan"):
            return out
        cur.execute(f"SELECT source_id, schema_name, table_name, chunks FROM {SCHEMA}.full_plan WHERE task = %s "
                    "ORDER BY 1, 2, 3", (task,))
        plans = cur.fetchall()
    for sid, s, t, k in plans:
        got = out["sources"].setdefault(sid, {"chunks_loaded": 0, "rows": 0})
        if got.get("tables_planned") is None:
            got.update(tables_planned=0, tables_loaded=0, chunks_planned=0)
        n = loaded.get((sid, s, t), 0)
        got["tables_planned"] += 1
        got["chunks_planned"] += k
        got["tables_loaded"] += n >= k
        if 0 < n < k and len(out["loading"]) < shown:
            out["loading"].append({"source": sid, "table": f"{s}.{t}", "chunks_loaded": n, "chunks_planned": k})
    return out


def last_validation(store, task: str, shown: int = 50) -> dict | None:
    """The newest finished validation run of ``task`` without its table list: its fields, the
    number of tables of each result (``counts``), and up to ``shown`` tables (``tables``, as
    stored), the worst first (error, different, pending, then equal), in the run's order within
    each; ``not_shown``: how many tables are left out. None when no run has finished. The tables
    are picked by JSON path in Postgres (a pass over a 10,000-table result takes a few tens of ms
    there, and far longer as rows in Python)."""
    with store.tx() as cur:
        cur.execute(f"SELECT run_id, status, result - 'tables' FROM {SCHEMA}.validation_run "
                    "WHERE task = %s AND finished_at IS NOT NULL ORDER BY started_at DESC LIMIT 1", (task,))
        row = cur.fetchone()
        if row is None:
            return None
        run_id, status, fields = row

        def tables(path: str, tail: str = "", args: tuple = ()) -> list:
            cur.execute(f"SELECT x FROM {SCHEMA}.validation_run v, jsonb_path_query(v.result, %s) "
                        f"WITH ORDINALITY AS p(x, i) WHERE v.task = %s AND v.run_id = %s {tail}",
                        (path, task, run_id, *args))
            return [r[0] for r in cur.fetchall()]

        cur.execute(f"SELECT x #>> '{{}}', count(*) FROM {SCHEMA}.validation_run v, "
                    "jsonb_path_query(v.result, '$.tables[*].status') AS x WHERE v.task = %s AND v.run_id = %s "
                    "GROUP BY 1", (task, run_id))
        counts = {s: int(n) for s, n in cur.fetchall()}
        rank = " ".join(f"WHEN %s THEN {k}" for k in range(len(_VALIDATION_ORDER)))
        listed = tables('$.tables[*] ? (@.status != "equal")', f"ORDER BY CASE x->>'status' {rank} ELSE 0 END, i "
                        "LIMIT %s", (*_VALIDATION_ORDER, shown))
        if len(listed) < shown:
            listed += tables('$.tables[*] ? (@.status == "equal")', "ORDER BY i LIMIT %s", (shown - len(listed),))
    return {**fields, "run_id": run_id, "status": status, "counts": counts, "tables": listed,
            "not_shown": sum(counts.values()) - len(listed)}


def running_validation(store, task: str) -> str | None:
    """The run id of the task's newest validation run if it has not finished, else None."""
    with store.tx() as cur:
        cur.execute(f"SELECT run_id, finished_at FROM {SCHEMA}.validation_run WHERE task = %s "
                    "ORDER BY started_at DESC LIMIT 1", (task,))
        row = cur.fetchone()
    return row[0] if row and row[1] is None else None
