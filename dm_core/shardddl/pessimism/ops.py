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

from typing import Iterable, Mapping

from dm_core.shardddl import pg
from dm_core.shardddl.common import EXEC, Operation
from dm_core.shardddl.pessimism.info import Info
from dm_core.shardddl.pessimism.lock import Lock

MODE = "pessimistic"

Sources = Iterable[str] | Mapping[tuple[str, str], Iterable[str]] | None


def _sources_for(sources: Sources, target: tuple[str, str]):
    if sources is None:
        return None
    if isinstance(sources, Mapping):
        got = sources.get(tuple(target))
        return None if got is None else list(got)
    return list(sources)


def put_info(store, info: Info, sources: Sources = None) -> Operation:
    """Report that ``info.source``'s whole sharding group reached ``info.ddls`` (idempotent).

    ``sources``: the task's source ids (or ``{target: ids}``) that must all reach the DDL;
    given by the coordinator's ``resolve`` when omitted here. Returns what the source must
    do now (``wait`` / ``exec`` / ``skip``; ``skip`` already ``done`` with ``replayed`` when
    the DDL at this position was finished before a restart). Raises ``ShardDDLInconsistent``
    when the source's DDLs differ from the lock's (the conflict stays visible on the lock).
    """
    def fn(lock: Lock) -> Operation:
        lock.set_sources(_sources_for(sources, info.target))
        return lock.report(info)

    return pg.transition(store, info.lock_id, MODE, fn, Lock.from_rows,
                         create={"task": info.task, "target_schema": info.target[0],
                                 "target_table": info.target[1]})


def resolve(store, task: str, sources: Sources) -> list[dict]:
    """The coordinator: set each lock's expected sources and settle it (make ready steps'
    operations, finish steps whose operations are all done). One transaction per lock."""
    out = []
    for lock_id in pg.lock_ids(store, task, MODE):
        def fn(lock: Lock) -> dict:
            lock.set_sources(_sources_for(sources, lock.target))
            lock.settle()
            return lock.describe()

        out.append(pg.transition(store, lock_id, MODE, fn, Lock.from_rows))
    return out


def get_operation(store, task: str, source: str, lock_id: str | None = None) -> Operation | None:
    """What ``source`` must do now in ``task`` (first lock in id order), None if nothing."""
    for lock in pg.read(store, task, MODE, Lock.from_rows, lock_id):
        op = lock.operation_for(source)
        if op is not None:
            return op
    return None


def mark_executing(store, task: str, source: str, lock_id: str, step: int, index: int) -> Operation:
    """The owner is about to send statement ``index`` of its exec op downstream."""
    return pg.transition(store, lock_id, MODE, lambda lk: lk.mark_executing(source, step, index), Lock.from_rows)


def mark_executed(store, task: str, source: str, lock_id: str, step: int, index: int) -> Operation:
    """Statement ``index`` took effect downstream."""
    return pg.transition(store, lock_id, MODE, lambda lk: lk.mark_executed(source, step, index), Lock.from_rows)


def ack_done(store, task: str, source: str, lock_id: str, step: int) -> Operation:
    """The source finished its operation of ``step`` (owner: after the DDL is downstream;
    others: after skipping it). Idempotent; a skip is refused before the owner is done."""
    return pg.transition(store, lock_id, MODE, lambda lk: lk.ack(source, step), Lock.from_rows)


def unlock(store, lock_id: str, owner: str | None = None, force_remove: bool = False, action: str = EXEC) -> dict:
    """`dmctl shard-ddl-lock unlock` (see ``Lock.unlock``); returns the lock's summary."""
    def fn(lock: Lock) -> dict:
        lock.unlock(owner, action, force_remove)
        return lock.describe()

    return pg.transition(store, lock_id, MODE, fn, Lock.from_rows)


def list_locks(store, task: str, *, active_only: bool = False) -> list[dict]:
    """Summaries of the task's pessimistic locks (`dmctl show-ddl-locks`)."""
    return [lk.describe() for lk in pg.read(store, task, MODE, Lock.from_rows)
            if not active_only or lk.ddls is not None]


def remove_task(store, task: str) -> int:
    return pg.remove_task(store, task)
