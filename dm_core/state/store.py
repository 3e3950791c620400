"""The shardflow state store: one Postgres schema holding everything a DM-master and the
dm_meta checkpoint tables would hold.

Design:
- Every poke, Spark task and CLI call is stateless; it opens the store, runs one
  transaction per transition and closes. Nothing lives in an operator instance.
- A checkpoint row is only ever written *after* the downstream effects up to that position
  are committed. The safe-mode exit point is written *before* a batch is sent downstream,
  so after a crash at any point a restart knows how far replay must stay idempotent.
- Passwords of sources are kept here (as DM-master keeps them in etcd): they never go to
  Airflow Variables, XCom or logs. They rest sealed (``dm_core.secrets.state_key``: Fernet,
  key file ``SHARDFLOW_STATE_KEY_FILE``), as do a source's TLS private key and each task's
  file text (it holds the target's password). Rows written before sealing existed are read
  as they are and sealed on their next write or by ``reseal_secrets`` (dmctl rotate-state-key).

The DSN comes from ``SHARDFLOW_STATE_DSN`` (or the Airflow connection ``shardflow_state``,
resolved by the plugin layer and passed in).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from typing import Any, Iterator

from dm_core.errors import ErrorCode
from dm_core.secrets import state_key
from dm_core.state.schema import FENCE_LOCK_CLASS, FULL_FENCE_LOCK_CLASS, SCHEMA, migrate_state, transaction

def _with_tls_key(config: dict, fn) -> dict:
    """``config`` with ``fn`` applied to its TLS private key (sealing or unsealing it)."""
    sec = config.get("security") if isinstance(config, dict) else None
    if not sec or not sec.get("ssl-key-bytes"):
        return config
    return {**config, "security": {**sec, "ssl-key-bytes": fn(sec["ssl-key-bytes"])}}


def default_dsn() -> str:
    """SHARDFLOW_STATE_DSN, else the local stack's Postgres (make stack-up) on loopback."""
    return os.environ.get("SHARDFLOW_STATE_DSN") or (
        f"postgresql://postgres@127.0.0.1:{os.environ.get('SHARDFLOW_PG_PORT', '5433')}/shardflow")




def _fence_key(task: str, source_id: str) -> int:
    """A stable int4 naming one (task, source) fence; a hash, so two pairs may share one
    (they then run one at a time: slower, never wrong)."""
    import hashlib

    return int.from_bytes(hashlib.sha1(f"{task}\0{source_id}".encode()).digest()[:4], "big") & 0x7FFFFFFF


def _scrub_dsn(text: str) -> str:
    import re

    return re.sub(r"(postgres(?:ql)?://[^:/@]+:)[^@]*@", r"\1***@", text)


# what update_source_state may set, and what it may add to
_FIELDS = {
    "stage", "binlog_file", "binlog_pos", "binlog_gtid", "safe_exit_file", "safe_exit_pos",
    "low_file", "low_pos", "low_gtid", "high_file", "high_pos", "high_gtid", "applied_rows",
    "applied_events", "last_event_ts", "lag_seconds", "rows_per_second", "error", "error_code",
    "error_stmt", "error_pos", "shard_groups", "binlog_server", "start_time",
    "keyless_exact_file", "keyless_exact_pos", "keyless_exact_server", "keyless_handoff",
    "upstream_file", "upstream_pos", "remaining_seconds", "worker", "auto_resume_at",
}
# what resuming a source paused on an error clears (resume-task, the source's checker)
_RESUMED = "stage = 'sync', error = NULL, error_code = NULL, auto_resume_at = NULL"
_ADDED = {"applied_rows", "applied_events", "applied_inserts", "applied_updates", "applied_deletes", "applied_ddls",
          "lag_hist", "txn_hist", "ddl_hist"}


def _exit_counter(fields: dict) -> str:
    """Which exit counter a write recording an error moves (DM's ``exit_with_error_count`` of the
    unit, ``resumable_err``): a full-phase error (its code's class is ``load`` or ``full``), a source paused
    on an error (a person must act: not resumable), else a transient error the sensor retries."""
    code = next((c for c in ErrorCode if c.number == fields.get("error_code")), None)
    if code is not None and code.klass in ("load", "full"):
        return "exits_load"
    return "exits_paused" if fields.get("stage") == "paused" else "exits_retried"


class StateStore:
    """All reads and transitions of shardflow state; each public method is one transaction."""

    def __init__(self, dsn: str | None = None, *, migrate: bool = True):
        """``migrate=False``: a second connection of a process whose first one brought the
        schema up to date (the sync's apply thread, opened every window)."""
        import psycopg2  # lazy: dm_core stays importable where only pure logic runs

        self._dsn = dsn or default_dsn()
        try:
            self._conn = psycopg2.connect(self._dsn, connect_timeout=10)
        except psycopg2.OperationalError as e:
            where = "" if os.environ.get("SHARDFLOW_STATE_DSN") else " (SHARDFLOW_STATE_DSN is not set: tried the local stack's)"
            raise ErrorCode.STATE_STORE_UNREACHABLE.error(
                f"cannot connect to the state store{where}: {_scrub_dsn(str(e).strip())}") from None
        self._conn.autocommit = False
        if migrate:
            self.migrate()

    @property
    def dsn(self) -> str:
        return self._dsn

    def close(self) -> None:
        self._conn.close()

    def reconnect(self) -> None:
        """A new connection in place of one that broke (Postgres restarted or was unreachable).
        Raises STATE_STORE_UNREACHABLE while the server stays away. Session state goes with the
        old connection: a fence (``hold_source``) must be taken again."""
        import psycopg2

        try:
            self._conn.close()
        except Exception:   # noqa: BLE001 - it is broken already
            pass
        try:
            self._conn = psycopg2.connect(self._dsn, connect_timeout=10)
        except psycopg2.OperationalError as e:
            raise ErrorCode.STATE_STORE_UNREACHABLE.error(
                f"cannot connect to the state store: {_scrub_dsn(str(e).strip())}") from None
        self._conn.autocommit = False

    def __enter__(self) -> "StateStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def tx(self) -> Iterator[Any]:
        with transaction(self._conn) as cur:
            yield cur

    def migrate(self) -> None:
        with self.tx() as cur:
            migrate_state(cur)

    # ---- sources ---------------------------------------------------------------------
    def put_source(self, source_id: str, config: dict, password: str) -> None:
        config = _with_tls_key(config, state_key.seal)
        with self.tx() as cur:
            cur.execute(
                f"INSERT INTO {SCHEMA}.source (source_id, config, password, enabled) VALUES (%s, %s, %s, true) "
                "ON CONFLICT (source_id) DO UPDATE SET config = EXCLUDED.config, password = EXCLUDED.password, "
                "enabled = true, updated_at = now()",
                (source_id, json.dumps(config), state_key.seal(password)),
            )

    def get_source(self, source_id: str) -> tuple[dict, str] | None:
        """(config, password), secrets unsealed."""
        with self.tx() as cur:
            cur.execute(f"SELECT config, password FROM {SCHEMA}.source WHERE source_id = %s AND enabled", (source_id,))
            row = cur.fetchone()
        return (_with_tls_key(row[0], state_key.unseal), state_key.unseal(row[1])) if row else None

    def list_sources(self) -> list[dict]:
        with self.tx() as cur:
            cur.execute(f"SELECT config FROM {SCHEMA}.source WHERE enabled ORDER BY source_id")
            return [r[0] for r in cur.fetchall()]

    def disable_source(self, source_id: str) -> bool:
        with self.tx() as cur:
            cur.execute(f"UPDATE {SCHEMA}.source SET enabled = false, updated_at = now() WHERE source_id = %s "
                        "AND enabled", (source_id,))
            return cur.rowcount > 0   # False: not registered, or stopped already

    # ---- tasks ---------------------------------------------------------------------
    def put_task(self, name: str, config_text: str, status: str = "running") -> None:
        with self.tx() as cur:
            cur.execute(
                f"INSERT INTO {SCHEMA}.task (name, config_text, started_text, status) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (name) DO UPDATE SET config_text = EXCLUDED.config_text, started_text = "
                "EXCLUDED.started_text, status = EXCLUDED.status, updated_at = now()",
                (name, state_key.seal(config_text), state_key.seal(config_text), status),
            )

    def register_task(self, name: str, config_text: str) -> None:
        """Store the task file's text; a new task starts `running`, a known one keeps its status."""
        with self.tx() as cur:
            cur.execute(
                f"INSERT INTO {SCHEMA}.task (name, config_text) VALUES (%s, %s) "
                "ON CONFLICT (name) DO UPDATE SET config_text = EXCLUDED.config_text, updated_at = now()",
                (name, state_key.seal(config_text)),
            )

    def set_started_text(self, name: str, config_text: str) -> None:
        """The file a running task's processes use from now on (dm_core/state/runs_with.py)."""
        with self.tx() as cur:
            cur.execute(f"INSERT INTO {SCHEMA}.task (name, config_text, started_text) VALUES (%s, %s, %s) "
                        "ON CONFLICT (name) DO UPDATE SET config_text = EXCLUDED.config_text, "
                        "started_text = EXCLUDED.started_text, updated_at = now()",
                        (name, state_key.seal(config_text), state_key.seal(config_text)))

    def get_task(self, name: str) -> tuple[str, str] | None:
        """(config_text, status) or None."""
        with self.tx() as cur:
            cur.execute(f"SELECT config_text, status FROM {SCHEMA}.task WHERE name = %s", (name,))
            row = cur.fetchone()
        return (state_key.unseal(row[0]), row[1]) if row else None

    def reseal_secrets(self) -> dict[str, int]:
        """Seal every stored secret again with the key file's first key (key rotation; also seals
        rows written before sealing existed). One transaction; returns rows rewritten per table."""
        n = {"source": 0, "task": 0}
        with self.tx() as cur:
            cur.execute(f"SELECT source_id, config, password FROM {SCHEMA}.source FOR UPDATE")
            for sid, config, password in cur.fetchall():
                cur.execute(f"UPDATE {SCHEMA}.source SET config = %s, password = %s WHERE source_id = %s",
                            (json.dumps(_with_tls_key(config, state_key.reseal)), state_key.reseal(password), sid))
                n["source"] += 1
            cur.execute(f"SELECT name, config_text, started_text FROM {SCHEMA}.task FOR UPDATE")
            for name, text, started in cur.fetchall():
                cur.execute(f"UPDATE {SCHEMA}.task SET config_text = %s, started_text = %s WHERE name = %s",
                            (state_key.reseal(text), state_key.reseal(started) if started is not None else None, name))
                n["task"] += 1
        return n

    def list_tasks(self) -> list[tuple[str, str]]:
        with self.tx() as cur:
            cur.execute(f"SELECT name, status FROM {SCHEMA}.task ORDER BY name")
            return list(cur.fetchall())

    def set_task_status(self, name: str, status: str) -> bool:
        with self.tx() as cur:
            cur.execute(f"UPDATE {SCHEMA}.task SET status = %s, updated_at = now() WHERE name = %s", (status, name))
            return cur.rowcount > 0

    # ---- lifecycle (the protocol is in dm_core/state/lifecycle.py) -----------------------
    def task_info(self, name: str) -> dict | None:
        """{name, status, generation, config_text, started_text} or None. ``started_text``: the
        file of the last start-task (``config_text`` where no start recorded one)."""
        with self.tx() as cur:
            cur.execute(f"SELECT name, status, generation, config_text, started_text FROM {SCHEMA}.task "
                        "WHERE name = %s", (name,))
            row = cur.fetchone()
        if row is None:
            return None
        config = state_key.unseal(row[3])
        return dict(zip(("name", "status", "generation", "config_text", "started_text"),
                        (*row[:3], config, state_key.unseal(row[4]) if row[4] is not None else config)))

    def start_task(self, name: str, config_text: str) -> int:
        """A new start of ``name``: running, the next generation, every source asked to run
        (sources paused on an error retry their statement). Returns the generation."""
        with self.tx() as cur:
            cur.execute(
                f"INSERT INTO {SCHEMA}.task (name, config_text, started_text, status, generation) "
                "VALUES (%s, %s, %s, 'running', 1) "
                "ON CONFLICT (name) DO UPDATE SET config_text = EXCLUDED.config_text, started_text = "
                "EXCLUDED.started_text, status = 'running', "
                f"generation = {SCHEMA}.task.generation + 1, updated_at = now() RETURNING generation",
                (name, state_key.seal(config_text), state_key.seal(config_text)))
            gen = cur.fetchone()[0]
            # a --start-time belongs to the start-task that gave it (set_start_time, after this)
            cur.execute(f"UPDATE {SCHEMA}.source_state SET requested = 'running', start_time = NULL, updated_at = now() "
                        "WHERE task = %s", (name,))
            cur.execute(f"UPDATE {SCHEMA}.source_state SET stage = 'sync', error = NULL, error_code = NULL, "
                        "updated_at = now() WHERE task = %s AND stage = 'paused'", (name,))
            return gen

    def set_start_time(self, name: str, sources: list[str], text: str) -> None:
        """`start-task --start-time`: each source's next window starts at the binlog position of
        that time (SourcePositions.start_at_time), then the source goes on from its checkpoints."""
        with self.tx() as cur:
            for sid in sources:
                cur.execute(f"INSERT INTO {SCHEMA}.source_state (task, source_id, start_time) VALUES (%s, %s, %s) "
                            "ON CONFLICT (task, source_id) DO UPDATE SET start_time = EXCLUDED.start_time, "
                            "updated_at = now()", (name, sid, text))

    def stop_task(self, name: str) -> int:
        """``name`` stopped; the generation moves on, so no run of an earlier start goes on.
        Checkpoints, watermarks and loaded chunks are kept. Returns the new generation."""
        with self.tx() as cur:
            cur.execute(f"UPDATE {SCHEMA}.task SET status = 'stopped', generation = generation + 1, updated_at = now() "
                        "WHERE name = %s RETURNING generation", (name,))
            row = cur.fetchone()
            return row[0] if row else 0

    def request_sources(self, name: str, sources: list[str], requested: str, *, all_sources: list[str],
                        clear_error: bool = False) -> str:
        """Record what the operator asked of ``sources`` (running | paused | stopped) and
        derive the task's status from every source's (``all_sources``): paused when every
        source not stopped is paused, else running; a stopped task stays stopped.
        ``clear_error``: a source paused on an error retries its statement. Returns the status."""
        with self.tx() as cur:
            for sid in sources:
                cur.execute(f"INSERT INTO {SCHEMA}.source_state (task, source_id, requested) VALUES (%s, %s, %s) "
                            "ON CONFLICT (task, source_id) DO UPDATE SET requested = EXCLUDED.requested, "
                            "updated_at = now()", (name, sid, requested))
                if clear_error:
                    cur.execute(f"UPDATE {SCHEMA}.source_state SET {_RESUMED} WHERE task = %s AND source_id = %s "
                                "AND stage = 'paused'", (name, sid))
            cur.execute(f"SELECT source_id, requested FROM {SCHEMA}.source_state WHERE task = %s", (name,))
            req = {sid: "running" for sid in all_sources}
            req.update({sid: r for sid, r in cur.fetchall() if sid in req})
            cur.execute(f"SELECT status FROM {SCHEMA}.task WHERE name = %s FOR UPDATE", (name,))
            row = cur.fetchone()
            if row is None or row[0] == "stopped":
                return row[0] if row else "stopped"
            live = [r for r in req.values() if r != "stopped"]
            status = "paused" if live and all(r == "paused" for r in live) else "running"
            cur.execute(f"UPDATE {SCHEMA}.task SET status = %s, updated_at = now() WHERE name = %s", (status, name))
            return status

    def hold_source(self, task: str, source_id: str) -> bool:
        """Take the source's fence on this connection (held until it closes): at most one
        syncer of a (task, source) runs at a time, even while a killed one is still dying."""
        with self.tx() as cur:
            cur.execute("SELECT pg_try_advisory_lock(%s, %s)", (FENCE_LOCK_CLASS, _fence_key(task, source_id)))
            return bool(cur.fetchone()[0])

    def held_sources(self, task: str, source_ids: list[str]) -> set[str]:
        """Which of ``source_ids`` have a live syncer (a connection holding their fence)."""
        keys = {_fence_key(task, sid): sid for sid in source_ids}
        with self.tx() as cur:
            cur.execute("SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
                        "AND classid::bigint = %s AND database = (SELECT oid FROM pg_database "
                        "WHERE datname = current_database())", (FENCE_LOCK_CLASS,))
            return {keys[r[0]] for r in cur.fetchall() if r[0] in keys}

    def hold_full_load(self, task: str) -> bool:
        """Take the task's full-load fence on this connection (held until it closes): one
        full-load job of a task writes at a time, even while a stopped one is still ending
        (dm_core/full/fence.py)."""
        with self.tx() as cur:
            cur.execute("SELECT pg_try_advisory_lock(%s, %s)", (FULL_FENCE_LOCK_CLASS, _fence_key(task, "")))
            return bool(cur.fetchone()[0])

    def ping(self) -> None:
        """Raise if the connection broke (what a session lock held on it went with)."""
        with self.tx() as cur:
            cur.execute("SELECT 1")

    def full_load_held(self, task: str) -> bool:
        """Whether a full-load job of the task is alive (a connection holds its fence)."""
        with self.tx() as cur:
            cur.execute("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
                        "AND classid::bigint = %s AND objid::bigint = %s AND database = (SELECT oid FROM pg_database "
                        "WHERE datname = current_database())", (FULL_FENCE_LOCK_CLASS, _fence_key(task, "")))
            return cur.fetchone() is not None

    def forget_task(self, name: str) -> None:
        """Forget every position and chunk of a task (a fresh start of the full phase).
        Only the store's own tables: ``dm_core.reset.reset_task`` also clears what other
        parts keep about those positions."""
        with self.tx() as cur:
            forget_task_rows(cur, name)

    # ---- per-source state ------------------------------------------------------------
    def source_state(self, task: str, source_id: str) -> dict:
        with self.tx() as cur:
            cur.execute(
                f"INSERT INTO {SCHEMA}.source_state (task, source_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (task, source_id),
            )
            cur.execute(f"SELECT * FROM {SCHEMA}.source_state WHERE task = %s AND source_id = %s", (task, source_id))
            cols = [d[0] for d in cur.description]
            return dict(zip(cols, cur.fetchone()))

    def source_gate(self, task: str, source_id: str) -> dict:
        """The columns a sync step's gate reads (lifecycle.gate, a retried error) from
        ``source_state``, without the sharding-group state: that is hundreds of KB of JSON for a
        source of thousands of tables, read again by the window that follows."""
        with self.tx() as cur:
            cur.execute(
                f"INSERT INTO {SCHEMA}.source_state (task, source_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (task, source_id),
            )
            cur.execute(f"SELECT source_id, requested, stage, error, error_code FROM {SCHEMA}.source_state "
                        "WHERE task = %s AND source_id = %s", (task, source_id))
            cols = [d[0] for d in cur.description]
            return dict(zip(cols, cur.fetchone()))

    def all_source_states(self, task: str) -> list[dict]:
        with self.tx() as cur:
            cur.execute(f"SELECT * FROM {SCHEMA}.source_state WHERE task = %s ORDER BY source_id", (task,))
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]

    def auto_resume(self, task: str, source_id: str, code: int) -> bool:
        """Resume a source its checker resumes (dm_core/sync/auto_resume.py), as resume-task
        would, only while it is still paused on ``code`` and neither it nor its task was paused or
        stopped meanwhile. Whether it was."""
        with self.tx() as cur:
            cur.execute(f"UPDATE {SCHEMA}.source_state s SET {_RESUMED}, updated_at = now() WHERE s.task = %s "
                        "AND s.source_id = %s "
                        "AND s.stage = 'paused' AND s.error_code = %s AND s.requested = 'running' AND EXISTS "
                        f"(SELECT 1 FROM {SCHEMA}.task t WHERE t.name = s.task AND t.status = 'running')",
                        (task, source_id, code))
            return cur.rowcount == 1

    def clear_retry(self, task: str, source_id: str) -> None:
        """Forget a transient error a source recorded while retrying (stage not paused): it went
        away. An error it paused on stays until resume-task or `dmctl binlog`."""
        with self.tx() as cur:
            cur.execute(f"UPDATE {SCHEMA}.source_state SET error = NULL, error_code = NULL, updated_at = now() "
                        "WHERE task = %s AND source_id = %s AND stage <> 'paused' AND error IS NOT NULL",
                        (task, source_id))

    def update_source_state(self, task: str, source_id: str, *, added: dict | None = None, **fields: Any) -> None:
        """Set ``fields`` of the source's row; ``added``: amounts to add to its counters and
        histograms (``ADDED``; dm_core/metrics/observe.py), in the same statement. A write that
        records an error also counts it as one of the source's exits (``_exit_counter``)."""
        unknown = set(fields) - _FIELDS
        if unknown:
            raise ValueError(f"unknown source_state fields: {sorted(unknown)}")
        added = {k: v for k, v in (added or {}).items() if v}
        unknown = set(added) - _ADDED
        if unknown:
            raise ValueError(f"unknown source_state counters: {sorted(unknown)}")
        if not fields and not added:
            return
        names = sorted(fields)
        sets = [f"{n} = %s" for n in names]
        args = [fields[n] for n in names]
        if fields.get("error"):
            counter = _exit_counter(fields)
            sets.append(f"{counter} = {counter} + 1")
        for n in sorted(added):
            sets.append(f"{n} = {SCHEMA}.hist_add({n}, %s::double precision[])" if n.endswith("_hist")
                        else f"{n} = {n} + %s")
            args.append(added[n])
        with self.tx() as cur:
            cur.execute(
                f"INSERT INTO {SCHEMA}.source_state (task, source_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (task, source_id),
            )
            cur.execute(
                f"UPDATE {SCHEMA}.source_state SET {', '.join(sets)}, updated_at = now() WHERE task = %s AND source_id = %s",
                args + [task, source_id],
            )

    def add_applied(self, task: str, source_id: str, rows: int, events: int, *, added: dict | None = None,
                    **fields: Any) -> None:
        """Advance counters and the checkpoint in one transaction."""
        self.update_source_state(task, source_id, added={**(added or {}), "applied_rows": rows,
                                                         "applied_events": events}, **fields)

    # ---- full-load chunks ---------------------------------------------------------------
    def done_chunks(self, task: str, source_id: str, schema: str, table: str) -> set[int]:
        with self.tx() as cur:
            cur.execute(
                f"SELECT chunk_id FROM {SCHEMA}.full_chunk WHERE task = %s AND source_id = %s AND schema_name = %s AND table_name = %s",
                (task, source_id, schema, table),
            )
            return {r[0] for r in cur.fetchall()}

    def done_chunks_of(self, task: str, source_id: str) -> dict[tuple[str, str], set[int]]:
        """(schema, table) -> recorded chunk ids, for every table of one source of ``task``."""
        out: dict[tuple[str, str], set[int]] = {}
        with self.tx() as cur:
            cur.execute(f"SELECT schema_name, table_name, chunk_id FROM {SCHEMA}.full_chunk WHERE task = %s "
                        "AND source_id = %s", (task, source_id))
            for schema, table, chunk in cur.fetchall():
                out.setdefault((schema, table), set()).add(chunk)
        return out

    def mark_chunk_done(self, task: str, source_id: str, schema: str, table: str, chunk_id: int, rows: int,
                        read_by=None) -> None:
        """``read_by``: the upstream's binlog end (a Position) once the chunk was committed, or None."""
        self.mark_chunks_done(task, source_id, [(schema, table, chunk_id, rows)], read_by)

    def mark_chunks_done(self, task: str, source_id: str, chunks: list[tuple[str, str, int, int]],
                         read_by=None) -> None:
        """``mark_chunk_done`` of many chunks, (schema, table, chunk_id, rows) each, committed by
        one transaction (a batch of small tables loaded together)."""
        from psycopg2.extras import execute_values

        f, p = (read_by.file, read_by.pos) if read_by is not None else (None, None)
        with self.tx() as cur:
            execute_values(
                cur, f"INSERT INTO {SCHEMA}.full_chunk (task, source_id, schema_name, table_name, chunk_id, rows, "
                     "read_by_file, read_by_pos) VALUES %s ON CONFLICT DO NOTHING",
                [(task, source_id, s, t, c, n, f, p) for s, t, c, n in chunks], page_size=1000)

    def forget_chunks(self, task: str, source_id: str, schema: str, table: str) -> None:
        with self.tx() as cur:
            cur.execute(f"DELETE FROM {SCHEMA}.full_chunk WHERE task = %s AND source_id = %s AND schema_name = %s "
                        "AND table_name = %s", (task, source_id, schema, table))

    def chunk_read_bys(self, task: str, source_id: str) -> dict:
        """(schema, table) -> the ``read_by`` Position (None: unknown) of each recorded chunk."""
        from dm_core.position import Position

        out: dict = {}
        with self.tx() as cur:
            cur.execute(f"SELECT schema_name, table_name, read_by_file, read_by_pos FROM {SCHEMA}.full_chunk "
                        "WHERE task = %s AND source_id = %s", (task, source_id))
            for schema, table, f, p in cur.fetchall():
                out.setdefault((schema, table), []).append(Position(f, int(p)) if f else None)
        return out

    def chunk_totals(self, task: str) -> dict[str, int]:
        with self.tx() as cur:
            cur.execute(f"SELECT source_id, sum(rows) FROM {SCHEMA}.full_chunk WHERE task = %s GROUP BY source_id", (task,))
            return {r[0]: int(r[1]) for r in cur.fetchall()}

    # ---- operator commands (`dmctl binlog`: dm_core/sync/handle_error.py) ----------------
    def add_error_op(self, task: str, source_id: str, op: str, pos, sqls=()) -> None:
        """An operation for the event at ``pos``; it replaces one already waiting there (DM)."""
        with self.tx() as cur:
            cur.execute(f"DELETE FROM {SCHEMA}.operator_command WHERE task = %s AND source_id = %s "
                        "AND binlog_pos = %s AND consumed_at IS NULL", (task, source_id, _pos_text(pos)))
            cur.execute(
                f"INSERT INTO {SCHEMA}.operator_command (task, source_id, command, args, binlog_pos) "
                "VALUES (%s, %s, %s, %s, %s)", (task, source_id, op, json.dumps({"sqls": list(sqls)}), _pos_text(pos)))

    def error_ops(self, task: str, source_id: str) -> list[tuple[int, str, list[str], str]]:
        """The source's operations not yet done: (id, op, statements, binlog position text)."""
        with self.tx() as cur:
            cur.execute(f"SELECT id, command, args, binlog_pos FROM {SCHEMA}.operator_command WHERE task = %s "
                        "AND source_id = %s AND consumed_at IS NULL AND binlog_pos IS NOT NULL ORDER BY id",
                        (task, source_id))
            return [(r[0], r[1], list((r[2] or {}).get("sqls") or ()), r[3]) for r in cur.fetchall()]

    def error_ops_done(self, ids: list[int]) -> None:
        """Operations whose event the checkpoint has passed."""
        if ids:
            with self.tx() as cur:
                cur.execute(f"UPDATE {SCHEMA}.operator_command SET consumed_at = now() WHERE id = ANY(%s)", (ids,))

    def revert_error_op(self, task: str, source_id: str, pos) -> int:
        """Forget the operation waiting at ``pos``; how many there were (0 or 1)."""
        with self.tx() as cur:
            cur.execute(f"DELETE FROM {SCHEMA}.operator_command WHERE task = %s AND source_id = %s "
                        "AND binlog_pos = %s AND consumed_at IS NULL", (task, source_id, _pos_text(pos)))
            return cur.rowcount

    # ---- sync window history (the Migrations page's rows/s and lag chart) -------------------
    def record_window(self, task: str, source_id: str, rows: int, seconds: float, lag_seconds: float | None,
                      keep: int = 120) -> None:
        """Append one window's result and drop all but the newest ``keep`` of the source."""
        with self.tx() as cur:
            cur.execute(f"INSERT INTO {SCHEMA}.sync_window (task, source_id, rows, seconds, lag_seconds) "
                        "VALUES (%s, %s, %s, %s, %s)", (task, source_id, rows, seconds, lag_seconds))
            cur.execute(f"DELETE FROM {SCHEMA}.sync_window WHERE task = %s AND source_id = %s AND id <= "
                        f"(SELECT id FROM {SCHEMA}.sync_window WHERE task = %s AND source_id = %s "
                        "ORDER BY id DESC OFFSET %s LIMIT 1)", (task, source_id, task, source_id, keep))

    def windows(self, task: str, limit: int = 60) -> dict[str, list[dict]]:
        """source_id → its newest ``limit`` windows, oldest first."""
        with self.tx() as cur:
            cur.execute(f"SELECT source_id, ended_at, rows, seconds, lag_seconds FROM ("
                        f"SELECT *, row_number() OVER (PARTITION BY source_id ORDER BY id DESC) AS n "
                        f"FROM {SCHEMA}.sync_window WHERE task = %s) w WHERE n <= %s ORDER BY source_id, ended_at",
                        (task, limit))
            out: dict[str, list[dict]] = {}
            for sid, at, rows, secs, lag in cur.fetchall():
                out.setdefault(sid, []).append({"ended_at": at, "rows": int(rows), "seconds": float(secs),
                                                "lag_seconds": lag})
            return out

    # ---- validation runs ------------------------------------------------------------------
    def put_validation(self, task: str, run_id: str, status: str, result: dict, *, finished: bool) -> None:
        with self.tx() as cur:
            cur.execute(
                f"INSERT INTO {SCHEMA}.validation_run (task, run_id, status, result, finished_at) "
                "VALUES (%s, %s, %s, %s, CASE WHEN %s THEN now() END) ON CONFLICT (task, run_id) DO UPDATE SET "
                "status = EXCLUDED.status, result = EXCLUDED.result, finished_at = EXCLUDED.finished_at",
                (task, run_id, status, json.dumps(result, default=str), finished))

    def validation(self, task: str, run_id: str | None = None, *, finished: bool = False) -> dict | None:
        """The result of run ``run_id``, or of the newest (``finished``: newest finished) run of
        the task; None if none."""
        with self.tx() as cur:
            if run_id:
                cur.execute(f"SELECT result FROM {SCHEMA}.validation_run WHERE task = %s AND run_id = %s",
                            (task, run_id))
            else:
                cur.execute(f"SELECT result FROM {SCHEMA}.validation_run WHERE task = %s "
                            f"{'AND finished_at IS NOT NULL ' if finished else ''}ORDER BY started_at DESC LIMIT 1",
                            (task,))
            row = cur.fetchone()
        return row[0] if row else None


def _pos_text(pos) -> str:
    """How a position is kept in operator_command.binlog_pos (DM's ``-b`` form)."""
    return f"{pos.file}:{pos.pos}"


def forget_task_rows(cur, name: str) -> None:
    """``StateStore.forget_task`` inside the caller's transaction."""
    for table in ("source_state", "full_chunk", "operator_command", "sync_window"):
        cur.execute(f"DELETE FROM {SCHEMA}.{table} WHERE task = %s", (name,))
