"""The sync hold: how a re-sync rewrites downstream rows while incremental sync runs, with
nothing lost or applied twice.

A re-sync reads rows upstream *now* and writes them downstream. A syncer applying an older
event to such a row afterwards would undo the repair, and one that applied a newer event
before the repair landed would see it overwritten. The full phase avoids both with its low
and high watermarks; the re-sync uses the same handoff, around a short hold:

1. ``request``: the re-sync run takes the task's hold (one row in ``resync_hold``, with a
   lease). A syncer checks for it at the start of every step (dm_core/sync/session.py),
   that is between two committed windows, and then *acks* with its checkpoint ``C`` and
   applies nothing until the hold ends. ``wait_acks`` returns once every source that has a
   live syncer (its fence is held) has acked; a source with no live syncer applies nothing
   anyway, and one that starts during the hold sees the hold before its first window.
2. Before each write, the re-sync raises every source's safe-mode exit point to the
   upstream position *now* (``raise_safe_exit``): every upstream read so far happened
   before that position. The syncer then resumes from ``C``: the events between ``C`` and
   that position replay over the rewritten rows in safe mode (REPLACE, DELETE + REPLACE),
   so each row ends at its last event's image, which is what upstream holds. This is the
   full phase's low watermark (``C``) and high watermark (the raised exit point).
3. ``release`` ends the hold; syncers resume at their next step.

A re-sync that dies keeps nothing held for long: the hold has a lease the re-sync renews
before every write (``renew``, which fails once the hold is broken). A syncer that finds
the lease expired *breaks* the hold and resumes; the exit point was raised before each
write, so whatever the dead re-sync wrote is replayed over in safe mode. The lease is long
(``LEASE_SECONDS``) against the time between a renewal and the write it guards, which is
one downstream transaction.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from dm_core.errors import ErrorCode

LEASE_SECONDS = 120.0

_DDL = """
CREATE TABLE IF NOT EXISTS {s}.resync_hold (
    task        text PRIMARY KEY,
    run_id      text NOT NULL,
    expires_at  timestamptz NOT NULL,
    acks        jsonb NOT NULL DEFAULT '{{}}',   -- source_id -> the checkpoint it holds at
    broken      boolean NOT NULL DEFAULT false,  -- a syncer found the lease expired and resumed
    created_at  timestamptz NOT NULL DEFAULT now()
);
"""


@dataclass
class Hold:
    task: str
    run_id: str
    expired: bool
    broken: bool
    acks: dict


def _schema(cur) -> str:
    from dm_core.state.schema import SCHEMA, apply_schema

    apply_schema(cur, _DDL.format(s=SCHEMA), "resync_hold", newest=("resync_hold", "broken"))
    return SCHEMA


def active(store, task: str) -> Hold | None:
    """The task's hold that syncers must respect (None: none, or broken)."""
    with store.tx() as cur:
        s = _schema(cur)
        cur.execute(f"SELECT run_id, expires_at < now(), broken, acks FROM {s}.resync_hold WHERE task = %s", (task,))
        row = cur.fetchone()
    if row is None or row[2]:
        return None
    return Hold(task, row[0], bool(row[1]), bool(row[2]), dict(row[3] or {}))


def request(store, task: str, run_id: str, lease: float = LEASE_SECONDS) -> None:
    """Take the task's hold for ``run_id``; refused while another live re-sync holds it."""
    with store.tx() as cur:
        s = _schema(cur)
        cur.execute(
            f"INSERT INTO {s}.resync_hold (task, run_id, expires_at) VALUES (%s, %s, now() + %s * interval '1 second') "
            "ON CONFLICT (task) DO UPDATE SET run_id = EXCLUDED.run_id, expires_at = EXCLUDED.expires_at, "
            "acks = '{}', broken = false, created_at = now() "
            f"WHERE {s}.resync_hold.broken OR {s}.resync_hold.expires_at < now() "
            f"OR {s}.resync_hold.run_id = EXCLUDED.run_id RETURNING run_id", (task, run_id, lease))
        if cur.fetchone() is None:
            cur.execute(f"SELECT run_id, expires_at FROM {s}.resync_hold WHERE task = %s", (task,))
            other = cur.fetchone()
            raise ErrorCode.RESYNC_BUSY.error(
                f"task {task}: re-sync run {other[0]!r} holds the sync until {other[1]:%Y-%m-%d %H:%M:%S %Z}",
                workaround="wait for that run to finish (dm_<task>_resync in Airflow), then trigger again")


def ack(store, task: str, run_id: str, source_id: str, checkpoint: str) -> None:
    with store.tx() as cur:
        s = _schema(cur)
        cur.execute(f"UPDATE {s}.resync_hold SET acks = acks || %s::jsonb WHERE task = %s AND run_id = %s",
                    (json.dumps({source_id: checkpoint}), task, run_id))


def renew(store, task: str, run_id: str, lease: float = LEASE_SECONDS) -> bool:
    """Extend the lease; False once the hold is gone or broken (the re-sync must not write)."""
    with store.tx() as cur:
        s = _schema(cur)
        cur.execute(f"UPDATE {s}.resync_hold SET expires_at = now() + %s * interval '1 second' "
                    "WHERE task = %s AND run_id = %s AND NOT broken AND expires_at >= now() RETURNING 1",
                    (lease, task, run_id))
        return cur.fetchone() is not None


def break_expired(store, task: str, run_id: str) -> bool:
    """A syncer ends an expired hold (its re-sync died); True if this call broke it."""
    with store.tx() as cur:
        s = _schema(cur)
        cur.execute(f"UPDATE {s}.resync_hold SET broken = true WHERE task = %s AND run_id = %s "
                    "AND NOT broken AND expires_at < now() RETURNING 1", (task, run_id))
        return cur.fetchone() is not None


def release(store, task: str, run_id: str) -> None:
    with store.tx() as cur:
        s = _schema(cur)
        cur.execute(f"DELETE FROM {s}.resync_hold WHERE task = %s AND run_id = %s", (task, run_id))


def wait_acks(store, task: str, run_id: str, source_ids: list[str], *, timeout: float = 120.0,
              poll: float = 0.5, sleep=time.sleep, clock=time.monotonic) -> dict:
    """Wait until every source with a live syncer has acked; source_id → checkpoint acked
    (sources with no live syncer are absent). Raises RESYNC_HOLD_TIMEOUT naming the others."""
    deadline = clock() + timeout
    while True:
        h = active(store, task)
        if h is None or h.run_id != run_id:
            raise ErrorCode.RESYNC_HOLD_TIMEOUT.error(f"task {task}: the hold of re-sync run {run_id} was broken or "
                                                      "taken over before every source held")
        live = store.held_sources(task, source_ids)
        waiting = sorted(live - set(h.acks))
        if not waiting:
            return h.acks
        if clock() >= deadline:
            raise ErrorCode.RESYNC_HOLD_TIMEOUT.error(
                f"task {task}: source(s) {', '.join(waiting)} did not hold their sync within {timeout:.0f}s",
                workaround="see the sources' sync task logs in dm_<task>_incremental (a window stuck on the downstream?), "
                           "then trigger the re-sync again")
        renew(store, task, run_id)
        sleep(poll)


def raise_safe_exit(store, task: str, positions: dict) -> None:
    """Safe mode until at least ``positions`` (source_id → Position) on every source; the
    keyless tables' ledger horizon is cleared (the re-sync rewrote rows it knows nothing of)."""
    from dm_core.position import Position
    from dm_core.sync.keyless_ledger import CLEARED

    for sid, pos in positions.items():
        st = store.source_state(task, sid)
        cur = Position(st["safe_exit_file"], int(st["safe_exit_pos"])) if st.get("safe_exit_file") else None
        raised = dict(safe_exit_file=pos.file, safe_exit_pos=pos.pos) if cur is None or pos.key() > cur.key() else {}
        store.update_source_state(task, sid, **raised, **CLEARED)
