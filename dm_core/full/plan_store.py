"""The persisted chunk plan of each table: computed once, reused by every rerun.

Why persist: chunk ids are the keys of progress (``full_chunk`` rows in the state store and
markers downstream). Recomputing boundaries after a crash could shift them when rows moved
in between, so "chunk 3 is done" would no longer mean the same rows. The first run stores
the plan; reruns read it back.

A plan belongs to one snapshot epoch: the source's low watermark. A task reset forgets the
watermark, ``prepare`` records a new one and calls :func:`forget`, so the next load plans
afresh. A stored plan whose epoch differs from the current one is replaced only while the
table has no finished chunk; otherwise the load stops with an error naming the table.

Tables (schema ``SHARDFLOW_STATE_SCHEMA``, created idempotently):
``full_plan`` one row per (task, source, table): plan_id (random hex, also the key of the
downstream markers), epoch, chunk count; ``full_plan_chunk`` one row per chunk: its predicate.
Writing a plan is one transaction, so a plan is either complete or absent.
"""

from __future__ import annotations

import uuid

from dm_core.full.chunking import Chunk
from dm_core.state.schema import SCHEMA, apply_schema, transaction

_DDL = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.full_plan (
    task        text NOT NULL,
    source_id   text NOT NULL,
    schema_name text NOT NULL,
    table_name  text NOT NULL,
    plan_id     text NOT NULL UNIQUE,
    epoch       text NOT NULL,            -- the low watermark the plan was made for
    chunks      integer NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, source_id, schema_name, table_name)
);
CREATE TABLE IF NOT EXISTS {SCHEMA}.full_plan_chunk (
    plan_id     text NOT NULL REFERENCES {SCHEMA}.full_plan (plan_id) ON DELETE CASCADE,
    chunk_id    integer NOT NULL,
    predicate   text NOT NULL,            -- WHERE text on the upstream table
    PRIMARY KEY (plan_id, chunk_id)
);
"""


class PlanConflict(Exception):
    """Finished chunks exist for a plan of another epoch: their ids would mean other rows."""


class PlanStore:
    """Get-or-create of chunk plans; one short transaction per call, like StateStore."""

    def __init__(self, dsn: str):
        import psycopg2  # lazy, as in StateStore

        self._conn = psycopg2.connect(dsn, connect_timeout=10)
        with transaction(self._conn) as cur:
            apply_schema(cur, _DDL, "full_plan", newest=("full_plan_chunk", "predicate"))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "PlanStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def get_or_create(self, task: str, st, epoch: str, compute, has_progress) -> tuple[str, list[Chunk]]:
        """(plan_id, chunks) of table ``st``; ``compute()`` makes chunks when no plan fits,
        ``has_progress()`` says whether finished chunks exist (checked before replacing)."""
        key = (task, st.source_id, st.schema, st.table)
        got = self._read(key)
        if got and got[1] == epoch:
            return got[0], got[2]
        if got and has_progress():
            raise PlanConflict(
                f"{st.name}: finished chunks belong to the plan of snapshot {got[1]!r}, the task's low watermark "
                f"is now {epoch!r}; reset the task (dmctl start-task --remove-meta) to load it again")
        from psycopg2.extras import execute_values

        chunks = compute()
        plan_id = uuid.uuid4().hex
        with transaction(self._conn) as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("/".join(key),))
            cur.execute(f"SELECT epoch FROM {SCHEMA}.full_plan WHERE task = %s AND source_id = %s "
                        "AND schema_name = %s AND table_name = %s", key)
            row = cur.fetchone()
            if row and row[0] == epoch:  # another job planned it meanwhile: keep theirs
                plan_id = None
            else:
                cur.execute(f"DELETE FROM {SCHEMA}.full_plan WHERE task = %s AND source_id = %s "
                            "AND schema_name = %s AND table_name = %s", key)
                cur.execute(f"INSERT INTO {SCHEMA}.full_plan (task, source_id, schema_name, table_name, plan_id, epoch, chunks) "
                            "VALUES (%s, %s, %s, %s, %s, %s, %s)", (*key, plan_id, epoch, len(chunks)))
                execute_values(cur, f"INSERT INTO {SCHEMA}.full_plan_chunk (plan_id, chunk_id, predicate) VALUES %s",
                               [(plan_id, c.chunk_id, c.where) for c in chunks], page_size=1000)
        if plan_id is None:
            got = self._read(key)
            return got[0], got[2]
        return plan_id, chunks

    def get_or_create_many(self, task: str, source_id: str, tables, epoch: str, compute_many,
                           recorded) -> dict[tuple[str, str], tuple[str, list[Chunk]] | None]:
        """``get_or_create`` for many tables of one source in three round trips instead of two
        per table (the small tables' pass plans hundreds at once). ``tables``: their
        discover.SourceTable; ``compute_many(sts)`` makes the chunks of each (a list per table,
        in order); ``recorded(st)``: it has finished chunks. A table whose stored plan is of
        another epoch and that has finished chunks maps to None: the per-table path raises its
        PlanConflict."""
        from psycopg2.extras import execute_values

        names = [(st.schema, st.table) for st in tables]
        stored = self._read_source(task, source_id, names)
        out: dict = {}
        unplanned = []
        for st in tables:
            got = stored.get((st.schema, st.table))
            if got and got[1] == epoch:
                out[st.schema, st.table] = (got[0], got[2])
            elif got and recorded(st):
                out[st.schema, st.table] = None
            else:
                unplanned.append(st)
        if not unplanned:
            return out
        fresh = [(st, uuid.uuid4().hex, chunks) for st, chunks in zip(unplanned, compute_many(unplanned), strict=True)]
        keys = ["/".join((task, source_id, st.schema, st.table)) for st, _, _ in fresh]
        with transaction(self._conn) as cur:
            # the same per-table locks get_or_create takes, in one order: no deadlock between jobs
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(k)) FROM unnest(%s::text[]) AS k ORDER BY k",
                        (sorted(keys),))
            cur.execute(f"SELECT schema_name, table_name FROM {SCHEMA}.full_plan WHERE task = %s AND source_id = %s "
                        "AND epoch = %s", (task, source_id, epoch))
            theirs = {tuple(r) for r in cur.fetchall()}  # planned by another job meanwhile: keep those
            mine = [f for f in fresh if (f[0].schema, f[0].table) not in theirs]
            if mine:
                execute_values(cur, f"DELETE FROM {SCHEMA}.full_plan AS p USING (VALUES %s) AS d (task, src, s, t) "
                                    "WHERE p.task = d.task AND p.source_id = d.src AND p.schema_name = d.s "
                                    "AND p.table_name = d.t",
                               [(task, source_id, st.schema, st.table) for st, _, _ in mine], page_size=1000)
                execute_values(cur, f"INSERT INTO {SCHEMA}.full_plan (task, source_id, schema_name, table_name, plan_id, "
                                    "epoch, chunks) VALUES %s",
                               [(task, source_id, st.schema, st.table, pid, epoch, len(ch)) for st, pid, ch in mine],
                               page_size=1000)
                execute_values(cur, f"INSERT INTO {SCHEMA}.full_plan_chunk (plan_id, chunk_id, predicate) VALUES %s",
                               [(pid, c.chunk_id, c.where) for _, pid, ch in mine for c in ch], page_size=1000)
        for st, pid, ch in fresh:
            out[st.schema, st.table] = (pid, ch)
        if len(mine) != len(fresh):
            stored = self._read_source(task, source_id, names)
            for st, _, _ in fresh:
                if (st.schema, st.table) in theirs:
                    got = stored[st.schema, st.table]
                    out[st.schema, st.table] = (got[0], got[2])
        return out

    def _read_source(self, task: str, source_id: str,
                     names: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, str, list[Chunk]]]:
        """(schema, table) -> (plan_id, epoch, chunks) of the stored plans of ``names`` of one
        source (the small tables' pass asks per batch: reading the whole source each time grew
        with the square of its tables)."""
        out: dict = {}
        with transaction(self._conn) as cur:
            cur.execute(f"SELECT p.schema_name, p.table_name, p.plan_id, p.epoch, p.chunks, c.chunk_id, c.predicate "
                        f"FROM {SCHEMA}.full_plan p LEFT JOIN {SCHEMA}.full_plan_chunk c ON c.plan_id = p.plan_id "
                        "WHERE p.task = %s AND p.source_id = %s AND (p.schema_name, p.table_name) IN "
                        "(SELECT * FROM unnest(%s::text[], %s::text[])) ORDER BY p.schema_name, p.table_name, c.chunk_id",
                        (task, source_id, [s for s, _ in names], [t for _, t in names]))
            counts = {}
            for schema, table, plan_id, epoch, n, chunk_id, predicate in cur.fetchall():
                got = out.setdefault((schema, table), (plan_id, epoch, []))
                counts[schema, table] = n
                if chunk_id is not None:
                    got[2].append(Chunk(chunk_id, predicate))
        for k, (plan_id, _, chunks) in out.items():
            if len(chunks) != counts[k]:  # cannot happen (one transaction); refuse rather than guess
                raise RuntimeError(f"chunk plan {plan_id} of {source_id}:{k[0]}.{k[1]} is incomplete")
        return out

    def _read(self, key) -> tuple[str, str, list[Chunk]] | None:
        with transaction(self._conn) as cur:
            cur.execute(f"SELECT plan_id, epoch, chunks FROM {SCHEMA}.full_plan WHERE task = %s AND source_id = %s "
                        "AND schema_name = %s AND table_name = %s", key)
            row = cur.fetchone()
            if not row:
                return None
            cur.execute(f"SELECT chunk_id, predicate FROM {SCHEMA}.full_plan_chunk WHERE plan_id = %s ORDER BY chunk_id",
                        (row[0],))
            chunks = [Chunk(i, w) for i, w in cur.fetchall()]
        if len(chunks) != row[2]:  # cannot happen (one transaction); refuse rather than guess
            raise RuntimeError(f"chunk plan {row[0]} of {key[1]}:{key[2]}.{key[3]} is incomplete")
        return row[0], row[1], chunks

    def plan_ids(self, task: str, source_id: str | None = None) -> list[str]:
        with transaction(self._conn) as cur:
            cur.execute(f"SELECT plan_id FROM {SCHEMA}.full_plan WHERE task = %s AND (%s IS NULL OR source_id = %s)",
                        (task, source_id, source_id))
            return [r[0] for r in cur.fetchall()]

    def forget(self, task: str, source_id: str | None = None) -> list[str]:
        """Drop the plans of a task (one source, or all): the next load plans afresh.
        Returns the forgotten plan ids (their downstream markers can go too)."""
        with transaction(self._conn) as cur:
            cur.execute(f"DELETE FROM {SCHEMA}.full_plan WHERE task = %s AND (%s IS NULL OR source_id = %s) RETURNING plan_id",
                        (task, source_id, source_id))
            return [r[0] for r in cur.fetchall()]


def epoch_of(source_state: dict) -> str:
    """The snapshot a plan belongs to: the source's low watermark (empty before prepare)."""
    if not source_state.get("low_file"):
        return ""
    return f"{source_state['low_file']}:{source_state['low_pos']}"
