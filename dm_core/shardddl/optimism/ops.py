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
from dm_core.shardddl.common import EXEC, Operation
from dm_core.shardddl.optimism.info import Info
from dm_core.shardddl.optimism.lock import Lock
from dm_core.shardddl.pessimism.ops import Sources, _sources_for

MODE = "optimistic"


def put_info(store, info: Info, sources: Sources = None) -> Operation:
    """Report one upstream table's DDL (idempotent); returns what that table must do now."""
    def fn(lock: Lock) -> Operation:
        lock.set_sources(_sources_for(sources, info.target))
        return lock.report(info)

    return pg.transition(store, info.lock_id, MODE, fn, Lock.from_rows,
                         create={"task": info.task, "target_schema": info.target[0],
                                 "target_table": info.target[1]})


def resolve(store, task: str, sources: Sources) -> list[dict]:
    """The coordinator: set each lock's expected sources and retry its pending changes."""
    out = []
    for lock_id in pg.lock_ids(store, task, MODE):
        def fn(lock: Lock) -> dict:
            lock.set_sources(_sources_for(sources, lock.target))
            lock.settle()
            return lock.describe()

        out.append(pg.transition(store, lock_id, MODE, fn, Lock.from_rows))
    return out


def get_operation(store, task: str, source: str, lock_id: str | None = None,
                  table: tuple[str, str] | None = None) -> Operation | None:
    for lock in pg.read(store, task, MODE, Lock.from_rows, lock_id):
        op = lock.operation_for(source, table)
        if op is not None:
            return op
    return None


def mark_executing(store, task: str, source: str, lock_id: str, step: int, index: int) -> Operation:
    return pg.transition(store, lock_id, MODE, lambda lk: lk.mark_executing(source, step, index), Lock.from_rows)


def mark_executed(store, task: str, source: str, lock_id: str, step: int, index: int) -> Operation:
    return pg.transition(store, lock_id, MODE, lambda lk: lk.mark_executed(source, step, index), Lock.from_rows)


def ack_done(store, task: str, source: str, lock_id: str, step: int) -> Operation:
    return pg.transition(store, lock_id, MODE, lambda lk: lk.ack(source, step), Lock.from_rows)


def unlock(store, lock_id: str, owner: str | None = None, force_remove: bool = False, action: str = EXEC) -> dict:
    def fn(lock: Lock) -> dict:
        lock.unlock(owner, action, force_remove)
        return lock.describe()

    return pg.transition(store, lock_id, MODE, fn, Lock.from_rows)


def list_locks(store, task: str, *, active_only: bool = False) -> list[dict]:
    return [lk.describe() for lk in pg.read(store, task, MODE, Lock.from_rows)
            if not active_only or lk.status != "idle"]


def remove_task(store, task: str) -> int:
    return pg.remove_task(store, task)
