"""The registry of shard DDL locks of one mode (DM's ``LockKeeper``, both modes).

DM-master keeps its locks in memory and rebuilds them from etcd; here the Postgres store
is the truth and ``lock_ops`` loads one lock per transaction. The keeper is the same registry
in memory: for simulations (tests drive several sources through it) and for tools that
load many locks at once. Lock ids are ``task-`schema`.`table``` (one lock per target).
"""

from __future__ import annotations

from dm_core.shardddl.common import Operation, lock_id_of


class Keeper:
    """``Keeper(pessimism.Lock)`` or ``Keeper(optimism.Lock)``: the mode is the lock class."""

    def __init__(self, lock_cls: type) -> None:
        self.lock_cls = lock_cls
        self._locks: dict = {}

    def lock_for(self, info, sources=None):
        lk = self._locks.get(info.lock_id)
        if lk is None:
            lk = self._locks[info.lock_id] = self.lock_cls(info.lock_id, info.task, info.target, sources or ())
        lk.set_sources(sources)
        return lk

    def report(self, info, sources=None) -> Operation:
        return self.lock_for(info, sources).report(info)

    def get(self, lock_id: str) :
        return self._locks.get(lock_id)

    def get_by_target(self, task: str, target: tuple[str, str]) :
        return self._locks.get(lock_id_of(task, target))

    def add(self, lock) -> None:
        self._locks[lock.lock_id] = lock

    def remove(self, lock_id: str) :
        return self._locks.pop(lock_id, None)

    def locks(self, task: str | None = None) -> list:
        return [lk for _, lk in sorted(self._locks.items()) if task is None or lk.task == task]

    def operation(self, task: str, source: str) -> Operation | None:
        """The first thing ``source`` must do in ``task`` (locks in id order)."""
        for lk in self.locks(task):
            op = lk.operation_for(source)
            if op is not None:
                return op
        return None
