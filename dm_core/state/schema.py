"""The state store's Postgres schema: its name, the registry of its tables (``PARTS``: which
module owns which tables, and the advisory lock key their creation serialises on), and the
one way every part of dm_core creates or migrates tables in it (``apply_schema``).

A leaf module (it imports nothing of dm_core) so that the parts that keep tables in this
schema (``state.store``, ``shardddl.pg``, ``full.plan_store``, ``sync.online_ddl``,
``sync.schema_overlay``, ``schema_tracker.store``, ``resync.hold``) can share it without
importing the store, and the store never has to import them.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

SCHEMA = os.environ.get("SHARDFLOW_STATE_SCHEMA", "shardflow")


@dataclass(frozen=True)
class Part:
    """Tables of the state store that one module creates, migrates and reads."""

    owner: str                  # the module whose script creates them
    tables: tuple[str, ...]
    lock_key: int               # pg_advisory_xact_lock(bigint) key its apply_schema serialises on


# Every table of the state store, by the part that owns it. A new part takes the next free key:
# two scripts under one key would only wait for each other, but a key per part keeps a stuck
# migration easy to find in pg_locks.
PARTS: dict[str, Part] = {
    "state": Part("dm_core.state.schema", ("source", "task", "source_state", "full_chunk", "operator_command",
                                           "validation_run", "sync_window"), 724011),
    "shardddl": Part("dm_core.shardddl.pg", ("shardddl_lock", "shardddl_member", "shardddl_operation"), 724012),
    "online_ddl": Part("dm_core.sync.online_ddl", ("online_ddl",), 724013),
    "resync_hold": Part("dm_core.resync.hold", ("resync_hold",), 724014),
    "full_plan": Part("dm_core.full.plan_store", ("full_plan", "full_plan_chunk"), 724015),
    "schema_overlay": Part("dm_core.sync.schema_overlay", ("schema_overlay",), 724016),
    "schema_tracker": Part("dm_core.schema_tracker.store", ("schema_tracker",), 724017),
}

# The first key of the syncers' fences, pg_try_advisory_lock(int4, int4) (StateStore.hold_source).
# Two-key advisory locks are a lock space apart from the one-key locks of PARTS, so sharing the
# number 724012 with the shard DDL tables' key is harmless.
FENCE_LOCK_CLASS = 724012
# The first key of the full load's fence (StateStore.hold_full_load, dm_core/full/fence.py), a
# class of its own so that no source id can name it.
FULL_FENCE_LOCK_CLASS = 724090


def lock_key(part: str) -> int:
    """The advisory lock key of a part of ``PARTS``, by its name."""
    if part not in PARTS:
        raise ValueError(f"{part!r} is not one of the state store's parts (PARTS: {', '.join(PARTS)})")
    return PARTS[part].lock_key


class PartTables:
    """One part's tables, created once per (store, schema) in this process and forgotten per task."""

    def __init__(self, part: str, ddl: str, *, newest: tuple[str, str]):
        self.part, self.ddl, self.newest = PARTS[part], ddl, newest
        self._name = part
        self._ensured: set[tuple[str, str]] = set()

    def ensure(self, store) -> None:
        """Create or migrate the part's tables if this process has not yet for ``store``."""
        key = (str(getattr(store, "dsn", id(store))), SCHEMA)
        if key in self._ensured:
            return
        with store.tx() as cur:
            apply_schema(cur, self.ddl.format(s=SCHEMA), self._name, newest=self.newest)
        self._ensured.add(key)

    def delete_task(self, cur, task: str) -> None:
        """Forget a task's rows in every table of the part (inside the caller's transaction;
        ``ensure`` first)."""
        for table in self.part.tables:
            cur.execute(f"DELETE FROM {SCHEMA}.{table} WHERE task = %s", (task,))

_STATE_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.source (
    source_id   text PRIMARY KEY,
    config      jsonb NOT NULL,          -- everything but the password (a TLS key: sealed)
    password    text NOT NULL DEFAULT '', -- sealed: fernet:<token> (plain in rows of older versions)
    enabled     boolean NOT NULL DEFAULT true,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {s}.task (
    name        text PRIMARY KEY,
    config_text text NOT NULL,           -- the task file as the user wrote it, sealed
    status      text NOT NULL DEFAULT 'running',   -- running | paused | stopped
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {s}.source_state (
    task        text NOT NULL,
    source_id   text NOT NULL,
    stage       text NOT NULL DEFAULT 'new',  -- new | precheck | full | sync | paused | error | stopped
    -- checkpoint: every effect before this position is durable downstream
    binlog_file text, binlog_pos bigint, binlog_gtid text,
    -- safe mode stays on until the stream passes this position
    safe_exit_file text, safe_exit_pos bigint,
    -- full phase watermarks
    low_file text, low_pos bigint, low_gtid text,
    high_file text, high_pos bigint, high_gtid text,
    -- progress and health
    applied_rows bigint NOT NULL DEFAULT 0,
    applied_events bigint NOT NULL DEFAULT 0,
    last_event_ts timestamptz,
    lag_seconds double precision,
    rows_per_second double precision,
    error       text,
    error_code  integer,
    error_stmt  text,
    error_pos   text,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, source_id)
);
CREATE TABLE IF NOT EXISTS {s}.full_chunk (
    task        text NOT NULL,
    source_id   text NOT NULL,
    schema_name text NOT NULL,
    table_name  text NOT NULL,
    chunk_id    integer NOT NULL,
    rows        bigint NOT NULL,
    done_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, source_id, schema_name, table_name, chunk_id)
);
CREATE TABLE IF NOT EXISTS {s}.operator_command (
    id          bigserial PRIMARY KEY,
    task        text NOT NULL,
    source_id   text,
    command     text NOT NULL,          -- skip | replace | inject
    args        jsonb NOT NULL DEFAULT '{{}}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    consumed_at timestamptz
);
-- the source's first-level sharding groups (dm_core.shardddl.source_group), pessimistic mode
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS shard_groups jsonb;
-- validation runs (dm_core/validate): one row per run, the result as JSON (result.py)
CREATE TABLE IF NOT EXISTS {s}.validation_run (
    task        text NOT NULL,
    run_id      text NOT NULL,
    status      text NOT NULL,           -- running | equal | different | pending | error
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    result      jsonb NOT NULL,
    PRIMARY KEY (task, run_id)
);
-- recent sync windows per source (the Migrations page's chart); pruned to the newest few
CREATE TABLE IF NOT EXISTS {s}.sync_window (
    id          bigserial PRIMARY KEY,
    task        text NOT NULL,
    source_id   text NOT NULL,
    ended_at    timestamptz NOT NULL DEFAULT now(),
    rows        bigint NOT NULL,
    seconds     double precision NOT NULL,
    lag_seconds double precision
);
CREATE INDEX IF NOT EXISTS sync_window_task_source ON {s}.sync_window (task, source_id, id);
-- lifecycle (dm_core.state.lifecycle): which start-task a DAG run belongs to, and what the
-- operator asked of each source (pause-task / stop-task -s)
ALTER TABLE {s}.task ADD COLUMN IF NOT EXISTS generation bigint NOT NULL DEFAULT 0;
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS requested text NOT NULL DEFAULT 'running';
-- `dmctl binlog ... -b FILE:POS` (dm_core/sync/handle_error.py): the event an operation is for
ALTER TABLE {s}.operator_command ADD COLUMN IF NOT EXISTS binlog_pos text;
-- which upstream server the checkpoint's file and position belong to (dm_core/sync/checkpoint.py)
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS binlog_server text;
-- `dmctl start-task --start-time`: the time the source's next window starts at, until it has
-- moved its checkpoint there (dm_core/binlog/by_time.py, SourcePositions.start_at_time)
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS start_time text;
-- the keyless tables' ledger horizon (dm_core/sync/keyless_ledger.py): replays from here on are exact
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS keyless_exact_file text;
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS keyless_exact_pos bigint;
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS keyless_exact_server text;
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS keyless_handoff boolean;
-- the upstream's binlog end once a chunk was committed: its read ended before it (dm_core/full/renames.py)
ALTER TABLE {s}.full_chunk ADD COLUMN IF NOT EXISTS read_by_file text;
ALTER TABLE {s}.full_chunk ADD COLUMN IF NOT EXISTS read_by_pos bigint;
-- the file of the last start-task, sealed: what a restart's file is compared with (config_text
-- follows the file Airflow reads; dm_core/state/progress_fit.py)
ALTER TABLE {s}.task ADD COLUMN IF NOT EXISTS started_text text;
UPDATE {s}.task SET started_text = config_text WHERE started_text IS NULL;
-- Prometheus metrics (dm_core/metrics): aggregates the syncer adds with the writes it makes anyway
-- (the checkpoint, the end of a window), so /metrics reads every source's from here, whichever
-- worker runs it. Counters of applied jobs by kind (DM's finished_jobs_total):
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS applied_inserts bigint NOT NULL DEFAULT 0;
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS applied_updates bigint NOT NULL DEFAULT 0;
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS applied_deletes bigint NOT NULL DEFAULT 0;
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS applied_ddls bigint NOT NULL DEFAULT 0;
-- histograms: {{sum, count of bucket 1, ..., count of bucket n, count above the last}} (not
-- cumulative; the buckets are dm_core/metrics/observe.py's), added up by hist_add below
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS lag_hist double precision[];
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS txn_hist double precision[];
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS ddl_hist double precision[];
-- times a source stopped on an error: paused (not resumable), retried (transient), a full-phase error
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS exits_paused bigint NOT NULL DEFAULT 0;
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS exits_retried bigint NOT NULL DEFAULT 0;
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS exits_load bigint NOT NULL DEFAULT 0;
-- at the end of each window: the upstream's binlog end it read towards, the estimated time to
-- reach it, the host the syncer ran on
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS upstream_file text;
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS upstream_pos bigint;
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS remaining_seconds double precision;
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS worker text;
-- a source paused on an error its checker resumes by itself (dm_core/sync/auto_resume.py): when
ALTER TABLE {s}.source_state ADD COLUMN IF NOT EXISTS auto_resume_at timestamptz;
CREATE OR REPLACE FUNCTION {s}.hist_add(a double precision[], b double precision[]) RETURNS double precision[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN a IS NULL OR cardinality(a) <> cardinality(b) THEN b
                ELSE ARRAY(SELECT x + y FROM unnest(a, b) WITH ORDINALITY AS t(x, y, i) ORDER BY i) END
$$;
"""


def apply_schema(cur, ddl: str, part: str, *, newest: tuple[str, str]) -> None:
    """Create or migrate tables of the state store's schema, once.

    ``newest`` (table, column) is the last thing ``ddl`` adds: when it exists, the whole
    script has run (it runs in one transaction) and nothing is executed, because even
    ``CREATE INDEX IF NOT EXISTS`` and ``ALTER TABLE ... ADD COLUMN IF NOT EXISTS`` take
    table locks that deadlock with sensors updating those tables. Concurrent first starts
    serialise on the advisory lock of ``part`` (a name of ``PARTS``).
    Whoever adds to a script moves ``newest``.
    """
    probe = ("SELECT 1 FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
             "AND column_name = %s")
    cur.execute(probe, (SCHEMA, *newest))
    if cur.fetchone():
        return
    cur.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(part),))
    cur.execute(probe, (SCHEMA, *newest))
    if not cur.fetchone():
        cur.execute(ddl)


def migrate_state(cur) -> None:
    """The state store's own tables (``StateStore.migrate``); the other parts of ``PARTS``
    add theirs through ``apply_schema`` under their own lock keys."""
    apply_schema(cur, _STATE_DDL.format(s=SCHEMA), "state", newest=("source_state", "auto_resume_at"))


@contextmanager
def transaction(conn) -> Iterator[Any]:
    """A cursor whose work commits when the block ends and rolls back if it raises: every
    state-store reader and writer (StateStore, the full phase's PlanStore) runs one per call."""
    cur = conn.cursor()
    try:
        yield cur
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    finally:
        cur.close()
