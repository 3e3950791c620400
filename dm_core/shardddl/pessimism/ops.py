"""Every state-store transaction of pessimistic shard DDL (DM's ``pessimism/ops.go``).

Each function is one transaction on one lock row (``SELECT ... FOR UPDATE``), runs one
pure transition of ``lock.Lock`` and writes the lock back, so sensors and the
coordinator may call them concurrently from any process, and a caller killed anywhere
reruns the same call and converges. ``store`` is a ``dm_core.state.StateStore`` (anything
with its ``tx()``).

Syncer (one source, see ``dm_core.shardddl.pessimism`` for the whole protocol):
``put_info`` → poll ``get_operation`` (or ``put_info`` again) → owner: ``mark_executing`` /
``mark_executed`` around each statement (``dm_core.shardddl.executor`` does this) →
``ack_done``. Coordinator: ``resolve``. dmctl: ``list_locks``, ``unlock``.
"""

from __future__ import annotations

from dm_core.shardddl import pg
from dm_core.shardddl.common import Operation
from dm_core.shardddl.lock_ops import LockOps, Sources
from dm_core.shardddl.pessimism.info import Info
from dm_core.shardddl.pessimism.lock import Lock

MODE = "pessimistic"
_ops = LockOps(MODE, Lock)
put_info = _ops.put_info
resolve = _ops.resolve
mark_executing = _ops.mark_executing
mark_executed = _ops.mark_executed
ack_done = _ops.ack_done
unlock = _ops.unlock

__all__ = ["MODE", "Info", "Sources", "put_info", "resolve", "get_operation", "mark_executing", "mark_executed",
           "ack_done", "unlock", "list_locks", "remove_task"]


def get_operation(store, task: str, source: str, lock_id: str | None = None) -> Operation | None:
    """What ``source`` must do now in ``task`` (first lock in id order), None if nothing."""
    for lock in pg.read(store, task, MODE, Lock.from_rows, lock_id):
        op = lock.operation_for(source)
        if op is not None:
            return op
    return None


def list_locks(store, task: str, *, active_only: bool = False) -> list[dict]:
    """Summaries of the task's pessimistic locks (`dmctl shard-ddl-lock`)."""
    return [lk.describe() for lk in pg.read(store, task, MODE, Lock.from_rows)
            if not active_only or lk.ddls is not None]


def remove_task(store, task: str) -> int:
    return pg.remove_task(store, task)
