"""The tracker's versions in the state store: table ``schema_tracker``, one row per (task,
source, upstream table, binlog position) with the table as it stood from there on (NULL: gone;
``{"stale": true}``: read it from the upstream when next needed)."""

from __future__ import annotations

import json

from dm_core.state import schema as _schema

_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.schema_tracker (
    task        text NOT NULL,
    source_id   text NOT NULL,
    schema_name text NOT NULL,           -- the upstream table
    table_name  text NOT NULL,
    file_no     integer NOT NULL,        -- from this binlog position on (Position.key())
    pos         bigint NOT NULL,
    binlog_file text NOT NULL DEFAULT '',
    structure   jsonb,                   -- TrackedTable.to_dict(); NULL: the table is gone
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, source_id, schema_name, table_name, file_no, pos)
);
"""

_TABLES = _schema.PartTables("schema_tracker", _DDL, newest=("schema_tracker", "structure"))
# create the table if missing (before ``delete_task`` in a wider transaction)
ensure = _TABLES.ensure


def delete_task(cur, task: str, source_id: str | None = None) -> None:
    """Forget a task's tracked tables (inside the caller's transaction; ``ensure`` first)."""
    if source_id is None:
        cur.execute(f"DELETE FROM {_schema.SCHEMA}.schema_tracker WHERE task = %s", (task,))
    else:
        cur.execute(f"DELETE FROM {_schema.SCHEMA}.schema_tracker WHERE task = %s AND source_id = %s",
                    (task, source_id))


def load(store, task: str, source_id: str) -> list[tuple]:
    """Every version: (schema, table, (file_no, pos), binlog_file, structure dict | None)."""
    ensure(store)
    with store.tx() as cur:
        cur.execute(f"SELECT schema_name, table_name, file_no, pos, binlog_file, structure "
                    f"FROM {_schema.SCHEMA}.schema_tracker WHERE task = %s AND source_id = %s "
                    "ORDER BY schema_name, table_name, file_no, pos", (task, source_id))
        rows = cur.fetchall()
    return [(s, t, (f, p), bf, d if d is None or isinstance(d, dict) else json.loads(d)) for s, t, f, p, bf, d in rows]


def put(store, task: str, source_id: str, versions: list[tuple]) -> None:
    """Write versions (schema, table, (file_no, pos), binlog_file, structure dict | None) in one
    transaction; a version met again (a re-read window) overwrites itself with the same value."""
    ensure(store)
    with store.tx() as cur:
        for s, t, (f, p), bf, d in versions:
            cur.execute(f"INSERT INTO {_schema.SCHEMA}.schema_tracker (task, source_id, schema_name, table_name, "
                        "file_no, pos, binlog_file, structure) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                        "ON CONFLICT (task, source_id, schema_name, table_name, file_no, pos) DO UPDATE SET "
                        "structure = EXCLUDED.structure, binlog_file = EXCLUDED.binlog_file, updated_at = now()",
                        (task, source_id, s, t, f, p, bf, None if d is None else json.dumps(d)))


def delete_table(store, task: str, source_id: str, schema: str, table: str, after: tuple | None = None) -> int:
    """Versions of one table: every one (``dmctl binlog-schema delete``: it is read again when
    needed), or those after the position ``after`` (``update``: followed again from there)."""
    ensure(store)
    later, args = ("", ()) if after is None else (" AND (file_no, pos) > (%s, %s)", tuple(after))
    with store.tx() as cur:
        cur.execute(f"DELETE FROM {_schema.SCHEMA}.schema_tracker WHERE task = %s AND source_id = %s "
                    "AND schema_name = %s AND table_name = %s" + later, (task, source_id, schema, table, *args))
        return cur.rowcount


def stamp(store, task: str, source_id: str) -> tuple:
    """What changes whenever a version of the source is written or deleted (a reader in memory
    compares it before each window: `dmctl binlog-schema` writes from another process)."""
    ensure(store)
    with store.tx() as cur:
        cur.execute(f"SELECT COUNT(*), MAX(updated_at) FROM {_schema.SCHEMA}.schema_tracker "
                    "WHERE task = %s AND source_id = %s", (task, source_id))
        return tuple(cur.fetchone())
