"""The state-store transactions both shard DDL modes share, bound to one mode's ``Lock``.

Each method is one transaction on one lock row (``pg.transition``: ``SELECT ... FOR
UPDATE``), runs one pure transition of the lock and writes it back, so sensors and the
coordinator may call them concurrently from any process, and a caller killed anywhere
reruns the same call and converges. ``store`` is a ``dm_core.state.StateStore``.
``pessimism.ops`` and ``optimism.ops`` expose these under their own names, beside what
differs between the modes (``get_operation``, ``list_locks``).
"""

from __future__ import annotations

from typing import Iterable, Mapping

from dm_core.shardddl import pg
from dm_core.shardddl.common import EXEC, Operation

Sources = Iterable[str] | Mapping[tuple[str, str], Iterable[str]] | None


def sources_for(sources: Sources, target: tuple[str, str]):
    """The source ids expected at ``target``: all given, or ``sources[target]`` of a map."""
    if sources is None:
        return None
    if isinstance(sources, Mapping):
        got = sources.get(tuple(target))
        return None if got is None else list(got)
    return list(sources)


class LockOps:
    def __init__(self, mode: str, lock_cls):
        self.mode, self.lock_cls = mode, lock_cls

    def _tx(self, store, lock_id: str, fn, **kw):
        return pg.transition(store, lock_id, self.mode, fn, self.lock_cls.from_rows, **kw)

    def put_info(self, store, info, sources: Sources = None) -> Operation:
        """Report a source's (pessimistic: its whole group's; optimistic: one table's) DDL,
        idempotently. ``sources``: the task's source ids (or ``{target: ids}``) that take
        part; the coordinator's ``resolve`` sets them when omitted. Returns what the source
        must do now (``wait`` / ``exec`` / ``skip``; ``skip`` already ``done`` with
        ``replayed`` when the DDL at this position was finished before a restart)."""
        def fn(lock) -> Operation:
            lock.set_sources(sources_for(sources, info.target))
            return lock.report(info)

        return self._tx(store, info.lock_id, fn, create={"task": info.task, "target_schema": info.target[0],
                                                          "target_table": info.target[1]})

    def resolve(self, store, task: str, sources: Sources) -> list[dict]:
        """The coordinator: set each lock's expected sources and settle it. One transaction
        per lock; returns the locks' summaries."""
        out = []
        for lock_id in pg.lock_ids(store, task, self.mode):
            def fn(lock) -> dict:
                lock.set_sources(sources_for(sources, lock.target))
                lock.settle()
                return lock.describe()

            out.append(self._tx(store, lock_id, fn))
        return out

    def mark_executing(self, store, task: str, source: str, lock_id: str, step: int, index: int) -> Operation:
        """The owner is about to send statement ``index`` of its exec op downstream."""
        return self._tx(store, lock_id, lambda lk: lk.mark_executing(source, step, index))

    def mark_executed(self, store, task: str, source: str, lock_id: str, step: int, index: int) -> Operation:
        """Statement ``index`` took effect downstream."""
        return self._tx(store, lock_id, lambda lk: lk.mark_executed(source, step, index))

    def ack_done(self, store, task: str, source: str, lock_id: str, step: int) -> Operation:
        """The source finished its operation of ``step`` (owner: the DDL is downstream;
        others: skipped it). Idempotent; a skip is refused before the owner is done."""
        return self._tx(store, lock_id, lambda lk: lk.ack(source, step))

    def unlock(self, store, lock_id: str, owner: str | None = None, force_remove: bool = False,
               action: str = EXEC) -> dict:
        """`dmctl shard-ddl-lock unlock` (see the mode's ``Lock.unlock``); the lock's summary."""
        def fn(lock) -> dict:
            lock.unlock(owner, action, force_remove)
            return lock.describe()

        return self._tx(store, lock_id, fn)
