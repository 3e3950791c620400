"""Every state-store transaction of shard DDL locks (DM's ``pessimism/ops.go`` and
``optimism/ops.go``): one lock store per mode, ``PESSIMISTIC`` and ``OPTIMISTIC``
(``ops_for(mode)`` picks one), sharing the transactions in ``LockOps``.

Each method is one transaction on one lock row (``pg.transition``: ``SELECT ... FOR
UPDATE``), runs one pure transition of the mode's ``Lock`` and writes it back, so sensors
and the coordinator may call them concurrently from any process, and a caller killed
anywhere reruns the same call and converges. ``store`` is a ``dm_core.state.StateStore``
(anything with its ``tx()``).
"""

from __future__ import annotations

from typing import Iterable, Mapping

from dm_core.shardddl import pg
from dm_core.shardddl.common import EXEC, Operation
from dm_core.shardddl.optimism.lock import Lock as OptimisticLock
from dm_core.shardddl.pessimism.lock import Lock as PessimisticLock

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
    """The transactions both modes share, bound to one mode's ``Lock``; a subclass per mode
    adds what differs (``get_operation``, which locks ``list_locks`` counts as active)."""

    def __init__(self, mode: str, lock_cls):
        self.mode, self.lock_cls = mode, lock_cls

    def _tx(self, store, lock_id: str, fn, **kw):
        return pg.transition(store, lock_id, self.mode, fn, self.lock_cls.from_rows, **kw)

    def _read(self, store, task: str, lock_id: str | None = None) -> list:
        return pg.read(store, task, self.mode, self.lock_cls.from_rows, lock_id)

    @staticmethod
    def _active(lock) -> bool:
        raise NotImplementedError

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
               action: str = EXEC, table: tuple[str, str] | None = None) -> dict:
        """`dmctl shard-ddl-lock unlock` (see the mode's ``Lock.unlock``; ``table``: optimistic
        mode's member, DM's ``-d DB -t TABLE``); the lock's summary."""
        def fn(lock) -> dict:
            if table is None:
                lock.unlock(owner, action, force_remove)
            else:
                lock.unlock(owner, action, force_remove, table=table)
            return lock.describe()

        return self._tx(store, lock_id, fn)

    def list_locks(self, store, task: str, *, active_only: bool = False) -> list[dict]:
        """Summaries of the task's locks of this mode (`dmctl shard-ddl-lock`)."""
        return [lk.describe() for lk in self._read(store, task) if not active_only or self._active(lk)]


class PessimisticOps(LockOps):
    """Syncer (one source, see ``dm_core.shardddl.pessimism`` for the whole protocol):
    ``put_info`` → poll ``get_operation`` (or ``put_info`` again) → owner: ``mark_executing``
    / ``mark_executed`` around each statement (``dm_core.shardddl.executor`` does this) →
    ``ack_done``. Coordinator: ``resolve``. dmctl: ``list_locks``, ``unlock``."""

    def __init__(self) -> None:
        super().__init__("pessimistic", PessimisticLock)

    @staticmethod
    def _active(lock) -> bool:
        return lock.ddls is not None

    def forget(self, store, lock_id: str) -> dict | None:
        """Delete the lock if its current DDL cannot have reached the downstream yet
        (``Lock.started``); returns its summary as it was, or None (kept). What unlocking a
        stopped task's lock does, as DM force-removes the lock of a task without subtasks:
        its sources read their DDLs again from their checkpoints when the task starts, and
        report them to a new lock."""
        return pg.remove_lock(store, lock_id, self.mode, lambda lk: None if lk.started() else lk.describe(),
                              self.lock_cls.from_rows)

    def get_operation(self, store, task: str, source: str, lock_id: str | None = None) -> Operation | None:
        """What ``source`` must do now in ``task`` (first lock in id order), None if nothing."""
        for lock in self._read(store, task, lock_id):
            op = lock.operation_for(source)
            if op is not None:
                return op
        return None


class OptimisticOps(LockOps):
    """Syncer (one upstream table's DDL): ``put_info`` (with ``schema_before``, read from the
    downstream, for a new lock) → ``exec``: run the op's statements (``executor``), ``skip``:
    nothing downstream, ``wait``: poll again (``conflict`` set: pause the source with
    ``op.error()``) → ``ack_done``. Coordinator: ``resolve``. dmctl: ``list_locks``, ``unlock``."""

    def __init__(self) -> None:
        super().__init__("optimistic", OptimisticLock)

    @staticmethod
    def _active(lock) -> bool:
        return lock.status != "idle"

    def put_info(self, store, info, sources: Sources = None) -> Operation:
        return super().put_info(store, info, _without_stopped(store, info.task, sources))

    def resolve(self, store, task: str, sources: Sources) -> list[dict]:
        return super().resolve(store, task, _without_stopped(store, task, sources))

    def get_operation(self, store, task: str, source: str, lock_id: str | None = None,
                      table: tuple[str, str] | None = None) -> Operation | None:
        for lock in self._read(store, task, lock_id):
            op = lock.operation_for(source, table)
            if op is not None:
                return op
        return None


    def seed(self, store, task: str, target: tuple[str, str], initial, members: dict) -> None:
        """Create the lock of ``target`` (if new) with the target's schema and each member
        table's ``{(source, schema, table): TableSchema}`` (``Lock.seed``)."""
        from dm_core.shardddl.common import lock_id_of

        self._tx(store, lock_id_of(task, target), lambda lk: lk.seed(initial, members),
                 create={"task": task, "target_schema": target[0], "target_table": target[1]})

    def set_schema(self, store, task: str, target: tuple[str, str], key: tuple[str, str, str], schema,
                   initial) -> str:
        """`binlog-schema update`'s ``--sync``: member ``key`` of the lock of ``target`` has
        ``schema`` (``Lock.set_schema``). A new lock starts from ``initial``, the target's
        schema downstream (None: no target table yet, nothing to tell a lock)."""
        from dm_core.shardddl.common import lock_id_of

        lock_id = lock_id_of(task, target)
        if initial is None and lock_id not in pg.lock_ids(store, task, self.mode):
            return f"no lock of `{target[0]}`.`{target[1]}`: the downstream has no such table yet"

        def fn(lk):
            if lk.initial is None:
                lk.seed(initial, {})
            return lk.set_schema(key, schema)

        return self._tx(store, lock_id, fn, create={"task": task, "target_schema": target[0],
                                                    "target_table": target[1]})

    def prune(self, store, task: str, by_target: Mapping[tuple[str, str], Mapping[str, Iterable]]) -> list:
        """Members whose table the task no longer replicates leave their locks (DM: a subtask
        started with another block-allow list puts its source tables again, and the master
        removes the tables that left). ``by_target``: ``Membership.by_target``; only the
        sources named there for a target are judged (one that could not be asked keeps its
        members). Returns the members removed."""
        gone = []
        for lock in self._read(store, task):
            now = by_target.get(tuple(lock.target), {})
            # by lower case: a statement may name a table in another case than information_schema
            # lists it (lower_case_table_names); a member nobody could confirm gone stays in its lock
            have = {src: {(s.lower(), t.lower()) for s, t in tables} for src, tables in now.items()}
            stale = [k for k in lock.members if k[0] in have and (k[1].lower(), k[2].lower()) not in have[k[0]]]
            gone += [k for k in stale
                     if self._tx(store, lock.lock_id, lambda lk, k=k: lk.remove_member(k, remember=True))]
        return gone

    def remove_member(self, store, task: str, target: tuple[str, str], key: tuple[str, str, str]) -> bool:
        """A shard dropped upstream leaves the lock of ``target``, if there is one (``Lock.remove_member``)."""
        from dm_core.shardddl.common import lock_id_of

        lock_id = lock_id_of(task, target)
        if lock_id not in pg.lock_ids(store, task, self.mode):
            return False
        return self._tx(store, lock_id, lambda lk: lk.remove_member(key))


def _without_stopped(store, task: str, sources: Sources) -> Sources:
    """``sources`` less those `stop-task -s` stopped: in optimistic mode their tables leave the
    join until they start again (DM removes a stopped source's tables from its locks), so the
    others' DROP COLUMN is not held back by a source that is not syncing."""
    if sources is None or not hasattr(store, "all_source_states"):
        return sources
    from dm_core.state.lifecycle import STOPPED

    stopped = {s["source_id"] for s in store.all_source_states(task) if s.get("requested") == STOPPED}
    if not stopped:
        return sources
    if isinstance(sources, Mapping):
        return {t: [s for s in ids if s not in stopped] for t, ids in sources.items()}
    return [s for s in sources if s not in stopped]


PESSIMISTIC = PessimisticOps()
OPTIMISTIC = OptimisticOps()
_BY_MODE = {PESSIMISTIC.mode: PESSIMISTIC, OPTIMISTIC.mode: OPTIMISTIC}


def ops_for(mode: str) -> LockOps:
    """The lock store of a shard mode (``pessimistic`` | ``optimistic``)."""
    try:
        return _BY_MODE[mode]
    except KeyError:
        raise ValueError(f"unknown shard mode {mode!r}") from None
