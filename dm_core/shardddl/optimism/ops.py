"""Every state-store transaction of optimistic shard DDL (DM's ``optimism/ops.go``).

Same shape and guarantees as ``pessimism.ops``: one transaction per call on one lock row
(``SELECT ... FOR UPDATE``), a pure transition of ``lock.Lock``, idempotent reruns.

Syncer (one upstream table's DDL): ``put_info`` (with ``schema_before``, read from the
downstream, for a new lock) → ``exec``: run the op's statements (``executor``), ``skip``:
nothing downstream, ``wait``: poll again (``conflict`` set: pause the source with
``op.error()``) → ``ack_done``. Coordinator: ``resolve``. dmctl: ``list_locks``, ``unlock``.
"""

from __future__ import annotations

from dm_core.shardddl import pg
from dm_core.shardddl.common import Operation
from dm_core.shardddl.lock_ops import LockOps, Sources
from dm_core.shardddl.optimism.info import Info
from dm_core.shardddl.optimism.lock import Lock

MODE = "optimistic"
_ops = LockOps(MODE, Lock)
put_info = _ops.put_info
resolve = _ops.resolve
mark_executing = _ops.mark_executing
mark_executed = _ops.mark_executed
ack_done = _ops.ack_done
unlock = _ops.unlock

__all__ = ["MODE", "Info", "Sources", "put_info", "resolve", "get_operation", "mark_executing", "mark_executed",
           "ack_done", "unlock", "list_locks", "remove_task"]


def get_operation(store, task: str, source: str, lock_id: str | None = None,
                  table: tuple[str, str] | None = None) -> Operation | None:
    for lock in pg.read(store, task, MODE, Lock.from_rows, lock_id):
        op = lock.operation_for(source, table)
        if op is not None:
            return op
    return None


def list_locks(store, task: str, *, active_only: bool = False) -> list[dict]:
    return [lk.describe() for lk in pg.read(store, task, MODE, Lock.from_rows)
            if not active_only or lk.status != "idle"]


def remove_task(store, task: str) -> int:
    return pg.remove_task(store, task)
