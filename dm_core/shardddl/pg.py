"""The shard DDL tables in the state store's schema, and the one transaction shape every
transition of both modes' ``ops`` uses. Nothing else in ``dm_core.shardddl`` speaks SQL
to Postgres.

Tables (created idempotently with ``CREATE TABLE IF NOT EXISTS`` under an advisory lock,
so sensors starting together do not race):

* ``shardddl_lock`` — one row per (task, target table): mode, step, owner, the current
  DDLs, status and conflict (for display), and the rest of the pure lock's state as jsonb;
* ``shardddl_member`` — one row per (lock, source, upstream table): the member's pending
  report and what it finished (pessimistic), its tracked schema (optimistic);
* ``shardddl_operation`` — one row per operation: action, DDLs, state, statements done.

A transition (``transition()``): ``SELECT ... FOR UPDATE`` the lock row (inserting it
first when the caller may create it), load the lock, run the pure transition, write the
lock back, commit. Concurrent sensors and the coordinator serialise on the lock row; a
process killed inside the transaction leaves nothing (Postgres rolls it back), so the
rerun starts from the last committed state.

Fault points (``dm_core.faults``): ``shardddl.ops.before_commit`` (a transition is
written, not committed), ``shardddl.exec.before_downstream`` / ``shardddl.exec.after_downstream``
(``executor``: a statement is marked executing / has run downstream, not marked executed).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from dm_core import faults
from dm_core.errors import ShardflowError
from dm_core.shardddl.errors import ShardDDLInconsistent, ShardDDLLockError
from dm_core.state import schema as _schema

_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.shardddl_lock (
    lock_id       text PRIMARY KEY,          -- task-`schema`.`table`
    task          text NOT NULL,
    mode          text NOT NULL,             -- pessimistic | optimistic
    target_schema text NOT NULL,
    target_table  text NOT NULL,
    status        text NOT NULL DEFAULT 'idle',   -- idle | waiting | ready | conflict
    step          integer NOT NULL DEFAULT 0,
    owner         text,
    ddls          jsonb,
    conflict      text,
    state         jsonb NOT NULL DEFAULT '{{}}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS shardddl_lock_task ON {s}.shardddl_lock (task);
CREATE TABLE IF NOT EXISTS {s}.shardddl_member (
    lock_id         text NOT NULL REFERENCES {s}.shardddl_lock (lock_id) ON DELETE CASCADE,
    source_id       text NOT NULL,
    upstream_schema text NOT NULL,
    upstream_table  text NOT NULL,
    ddls            jsonb,                   -- the pending report's statements
    position        text,                    -- and its binlog position
    state           jsonb NOT NULL DEFAULT '{{}}',
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (lock_id, source_id, upstream_schema, upstream_table)
);
CREATE TABLE IF NOT EXISTS {s}.shardddl_operation (
    lock_id         text NOT NULL REFERENCES {s}.shardddl_lock (lock_id) ON DELETE CASCADE,
    source_id       text NOT NULL,
    upstream_schema text NOT NULL DEFAULT '',
    upstream_table  text NOT NULL DEFAULT '',
    step            integer NOT NULL,
    action          text NOT NULL,           -- exec | skip
    ddls            jsonb NOT NULL,
    state           text NOT NULL,           -- pending | executing | done
    exec_index      integer NOT NULL DEFAULT 0,
    detail          jsonb NOT NULL DEFAULT '{{}}',
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (lock_id, source_id, upstream_schema, upstream_table, step)
);
-- when the lock last left idle: what `dmctl shard-ddl-lock` shows as "waiting since"
ALTER TABLE {s}.shardddl_lock ADD COLUMN IF NOT EXISTS waiting_since timestamptz;
"""

_ensured: set[tuple[str, str]] = set()


def schema() -> str:
    return _schema.SCHEMA


def ensure_tables(store) -> None:
    key = (str(getattr(store, "dsn", id(store))), schema())
    if key in _ensured:
        return
    with store.tx() as cur:
        _schema.apply_schema(cur, _DDL.format(s=schema()), "shardddl", newest=("shardddl_lock", "waiting_since"))
    _ensured.add(key)


def _rows(cur) -> list[dict]:
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def load(cur, lock_id: str, *, lock_clause: str = "FOR UPDATE") -> tuple[dict, list[dict], list[dict]] | None:
    s = schema()
    cur.execute(f"SELECT * FROM {s}.shardddl_lock WHERE lock_id = %s {lock_clause}", (lock_id,))
    rows = _rows(cur)
    if not rows:
        return None
    cur.execute(f"SELECT * FROM {s}.shardddl_member WHERE lock_id = %s "
                "ORDER BY source_id, upstream_schema, upstream_table", (lock_id,))
    members = _rows(cur)
    cur.execute(f"SELECT * FROM {s}.shardddl_operation WHERE lock_id = %s "
                "ORDER BY source_id, upstream_schema, upstream_table, step", (lock_id,))
    return rows[0], members, _rows(cur)


def save(cur, lock: dict, members: list[dict], ops: list[dict]) -> None:
    s = schema()
    cur.execute(
        f"UPDATE {s}.shardddl_lock SET status = %s, step = %s, owner = %s, ddls = %s, conflict = %s, state = %s, "
        "updated_at = now(), waiting_since = CASE WHEN %s = 'idle' THEN NULL ELSE COALESCE(waiting_since, now()) END "
        "WHERE lock_id = %s",
        (lock["status"], lock["step"], lock.get("owner"), _j(lock.get("ddls")), lock.get("conflict"),
         _j(lock.get("state") or {}), lock["status"], lock["lock_id"]))
    # rows go in one statement per table (execute_values): a lock of a table sharded over
    # thousands of upstream tables is rewritten at every transition and coordinator round
    from psycopg2.extras import execute_values

    cur.execute(f"DELETE FROM {s}.shardddl_member WHERE lock_id = %s", (lock["lock_id"],))
    if members:
        execute_values(
            cur, f"INSERT INTO {s}.shardddl_member (lock_id, source_id, upstream_schema, upstream_table, ddls, "
                 "position, state) VALUES %s",
            [(lock["lock_id"], m["source_id"], m["upstream_schema"], m["upstream_table"], _j(m.get("ddls")),
              m.get("position"), _j(m.get("state") or {})) for m in members], page_size=1000)
    cur.execute(f"DELETE FROM {s}.shardddl_operation WHERE lock_id = %s", (lock["lock_id"],))
    if ops:
        execute_values(
            cur, f"INSERT INTO {s}.shardddl_operation (lock_id, source_id, upstream_schema, upstream_table, step, "
                 "action, ddls, state, exec_index, detail) VALUES %s",
            [(lock["lock_id"], o["source_id"], o["upstream_schema"], o["upstream_table"], o["step"], o["action"],
              _j(o["ddls"]), o["state"], o["exec_index"], _j(o.get("detail") or {})) for o in ops], page_size=1000)


def _j(v: Any) -> str | None:
    return None if v is None else json.dumps(v, sort_keys=True)


def transition(store, lock_id: str, mode: str, fn: Callable, from_rows: Callable, *, create: dict | None = None):
    """Run ``fn(lock)`` on the stored lock in one transaction and write the lock back.

    ``create`` (task, target_schema, target_table) inserts the lock row when absent.
    A ``ShardDDLInconsistent`` raised by ``fn`` is a recorded outcome (the conflicting
    report stays on the lock for `show-ddl-locks`): the state is committed, then the error
    is raised. Any other error rolls the transaction back.
    """
    ensure_tables(store)
    deferred: ShardflowError | None = None
    with store.tx() as cur:
        if create is not None:
            cur.execute(f"INSERT INTO {schema()}.shardddl_lock (lock_id, task, mode, target_schema, target_table) "
                        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (lock_id) DO NOTHING",
                        (lock_id, create["task"], mode, create["target_schema"], create["target_table"]))
        got = load(cur, lock_id)
        if got is None:
            raise ShardDDLLockError(f"no shard DDL lock {lock_id}")
        if got[0]["mode"] != mode:
            raise ShardDDLLockError(f"lock {lock_id} is a {got[0]['mode']} lock, not {mode}: the task's shard-mode "
                                    f"changed while DDLs were pending; unlock it with --force-remove first")
        lock = from_rows(*got)
        try:
            result = fn(lock)
        except ShardDDLInconsistent as e:
            deferred, result = e, None
        save(cur, *lock.to_rows())
        faults.hit("shardddl.ops.before_commit")
    if deferred is not None:
        raise deferred
    return result


def remove_lock(store, lock_id: str, mode: str, fn: Callable, from_rows: Callable):
    """In one transaction: load the lock, ask ``fn(lock)`` for what to return, and delete the
    lock (its members and operations with it) unless ``fn`` returned None."""
    ensure_tables(store)
    with store.tx() as cur:
        got = load(cur, lock_id)
        if got is None:
            raise ShardDDLLockError(f"no shard DDL lock {lock_id}")
        if got[0]["mode"] != mode:
            raise ShardDDLLockError(f"lock {lock_id} is a {got[0]['mode']} lock, not {mode}")
        result = fn(from_rows(*got))
        if result is not None:
            cur.execute(f"DELETE FROM {schema()}.shardddl_lock WHERE lock_id = %s", (lock_id,))
            faults.hit("shardddl.ops.before_commit")
    return result


def read(store, task: str, mode: str, from_rows: Callable, lock_id: str | None = None) -> list:
    """Load the task's locks of ``mode`` (consistently: FOR SHARE, in lock id order), in three
    queries whatever their number: a task of thousands of tables may have hundreds of locks."""
    ensure_tables(store)
    s = schema()
    with store.tx() as cur:
        cur.execute(f"SELECT * FROM {s}.shardddl_lock WHERE task = %s AND mode = %s AND (%s IS NULL OR lock_id = %s) "
                    "ORDER BY lock_id FOR SHARE", (task, mode, lock_id, lock_id))
        locks = _rows(cur)
        if not locks:
            return []
        ids = [lk["lock_id"] for lk in locks]
        cur.execute(f"SELECT * FROM {s}.shardddl_member WHERE lock_id = ANY(%s) "
                    "ORDER BY lock_id, source_id, upstream_schema, upstream_table", (ids,))
        members = _by_lock(_rows(cur))
        cur.execute(f"SELECT * FROM {s}.shardddl_operation WHERE lock_id = ANY(%s) "
                    "ORDER BY lock_id, source_id, upstream_schema, upstream_table, step", (ids,))
        ops = _by_lock(_rows(cur))
    return [from_rows(lk, members.get(lk["lock_id"], []), ops.get(lk["lock_id"], [])) for lk in locks]


def _by_lock(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["lock_id"], []).append(r)
    return out


def lock_ids(store, task: str, mode: str | None = None) -> list[str]:
    ensure_tables(store)
    with store.tx() as cur:
        cur.execute(f"SELECT lock_id FROM {schema()}.shardddl_lock WHERE task = %s "
                    + ("AND mode = %s " if mode else "") + "ORDER BY lock_id", (task, mode) if mode else (task,))
        return [r[0] for r in cur.fetchall()]


def waiting_since(store, task: str) -> dict[str, Any]:
    """``{lock_id: when it left idle}`` for the task's locks that are not idle."""
    ensure_tables(store)
    with store.tx() as cur:
        cur.execute(f"SELECT lock_id, waiting_since FROM {schema()}.shardddl_lock "
                    "WHERE task = %s AND waiting_since IS NOT NULL", (task,))
        return dict(cur.fetchall())


def lock_mode(store, lock_id: str) -> str | None:
    got = lock_task_mode(store, lock_id)
    return got[1] if got else None


def lock_task_mode(store, lock_id: str) -> tuple[str, str] | None:
    """(task, mode) of a lock, or None when there is no such lock."""
    ensure_tables(store)
    with store.tx() as cur:
        cur.execute(f"SELECT task, mode FROM {schema()}.shardddl_lock WHERE lock_id = %s", (lock_id,))
        row = cur.fetchone()
    return (row[0], row[1]) if row else None


def remove_task(store, task: str) -> int:
    """Forget every lock of a task (stop-task / a fresh start). Returns how many."""
    ensure_tables(store)
    with store.tx() as cur:
        return delete_task(cur, task)


def delete_task(cur, task: str) -> int:
    """``remove_task`` inside the caller's transaction (the tables exist: ``ensure_tables``)."""
    cur.execute(f"DELETE FROM {schema()}.shardddl_lock WHERE task = %s", (task,))
    return cur.rowcount
