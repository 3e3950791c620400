"""Whether a source's sync sensor waits for an Airflow worker slot: the one decision that
query-status (dm_core/cli/status_view.py) and the Migrations page (dm_core/overview.py) both show.

Every syncing source holds one slot for as long as it syncs (docs/operations.md, Sizing), so a
source beyond the slots there are is queued by Airflow and would sync nothing without a word. A
sensor task instance (as Airflow's REST API returns it) scheduled or queued for longer than
``SLOT_WAIT_S`` while its run is active waits for a slot; shorter than that, it is only being started.
"""

from __future__ import annotations

import datetime
import os

WAITING_STATES = ("scheduled", "queued")
# long enough that a sensor being handed to a free worker is not named, short against a sync's life
SLOT_WAIT_S = float(os.environ.get("SHARDFLOW_SLOT_WAIT_S") or 30)


def waited(ti: dict, now: datetime.datetime | None = None) -> float | None:
    """Seconds the sensor ``ti`` has been scheduled or queued, or None when it is neither or
    Airflow gave no time for it."""
    state = ti.get("state")
    if state not in WAITING_STATES:
        return None
    since = _when(ti.get("queued_when") if state == "queued" else ti.get("scheduled_when"))
    if since is None:
        return None
    return ((now or datetime.datetime.now(datetime.timezone.utc)) - since).total_seconds()


def slot_wait(ti: dict | None, now: datetime.datetime | None = None) -> str | None:
    """"waiting for a worker slot: ..." with what holds the sensor ``ti``, or None when it does
    not wait for one (running, ended, or scheduled or queued for less than ``SLOT_WAIT_S``)."""
    if not ti:
        return None
    seconds = waited(ti, now)
    if seconds is None or seconds < SLOT_WAIT_S:
        return None
    state = ti["state"]
    where = ("the scheduler has no slot to give it (AIRFLOW__CORE__PARALLELISM, the pool "
             f"{ti.get('pool') or 'default_pool'})" if state == "scheduled" else
             f"no worker takes it from queue {ti.get('queue') or 'default'} (every slot busy, or no worker runs)")
    return (f"waiting for a worker slot: its sensor has been {state} in Airflow for {seconds:.0f}s while the task "
            f"runs; {where}. Each syncing source holds one slot for as long as it syncs: add slots or a worker "
            f"(docs/operations.md, Sizing)")


def _when(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        t = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)
