"""Pieces both coordination modes share: lock ids, positions as JSON, the operation record.

An operation is the coordinator's answer to one member for one DDL step:

* ``exec`` — run ``ddls`` downstream (the lock owner), then ``ack_done``;
* ``skip`` — do not run them (another member does or did), then ``ack_done``;
* ``wait`` — not yet: other members have not reached the DDL, the owner has not finished,
  or (``conflict`` set) the DDL conflicts and a person must act.

``state`` tracks an exec op across restarts: ``pending`` (nothing in flight),
``executing`` (statement ``exec_index`` may have started downstream), ``done``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from dm_core.position import Position

EXEC, SKIP, WAIT = "exec", "skip", "wait"
# optimistic: the DDL conflicts now but may not once the other shards run it too (DM's
# ConflictSkipWaitRedirect): the source goes on without the table and replays it when released
HOLD = "hold"
PENDING, EXECUTING, DONE = "pending", "executing", "done"


def lock_id_of(task: str, target: tuple[str, str]) -> str:
    """DM's lock id: ``task-`schema`.`table```.

    >>> lock_id_of("t1", ("db", "orders"))
    't1-`db`.`orders`'
    """
    return f"{task}-`{target[0]}`.`{target[1]}`"


def pos_to_json(p: Position | None) -> list | None:
    return None if p is None else [p.file, int(p.pos)] + ([p.gtid] if p.gtid else [])


def pos_from_json(v) -> Position | None:
    if v is None:
        return None
    if isinstance(v, Position):
        return v
    return Position(v[0], int(v[1]), v[2] if len(v) > 2 else None)


def pos_le(a: Position, b: Position) -> bool:
    return a.key() <= b.key()


def fmt_tables(tables) -> str:
    return ", ".join(f"`{s}`.`{t}`" for s, t in tables)


@dataclass
class Operation:
    lock_id: str
    task: str
    source: str
    step: int                          # the lock's DDL step (pessimistic) / op number (optimistic)
    action: str                        # exec | skip | wait | hold
    ddls: tuple[str, ...] = ()
    state: str = PENDING               # pending | executing | done
    exec_index: int = 0                # statements of ``ddls`` known to be done downstream
    owner: str = ""                    # who executes this step
    message: str = ""                  # why waiting, or what happened
    conflict: str = ""                 # set when a person must act (the source should pause)
    replayed: bool = False             # the info was a re-read of a DDL already finished
    forced: bool = False               # created by `unlock` for a source that had not reported
    upstream: tuple[str, str] = ("", "")   # optimistic: the upstream table this op is for
    order: int = 0                     # creation order within the lock (exec ops run in this order)

    @property
    def done(self) -> bool:
        return self.state == DONE

    @property
    def executing(self) -> bool:
        return self.state == EXECUTING

    def error(self):
        """The error a source should pause with when ``conflict`` is set."""
        from dm_core.shardddl.errors import ShardDDLConflict

        return ShardDDLConflict(self.conflict) if self.conflict else None

    def view(self, **changes) -> "Operation":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ddls"] = list(self.ddls)
        d["upstream"] = list(self.upstream)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Operation":
        d = dict(d)
        d["ddls"] = tuple(d.get("ddls") or ())
        d["upstream"] = tuple(d.get("upstream") or ("", ""))
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


__all__ = ["EXEC", "SKIP", "WAIT", "HOLD", "PENDING", "EXECUTING", "DONE", "Operation", "Position", "lock_id_of",
           "pos_to_json", "pos_from_json", "pos_le", "fmt_tables"]


class LockBase:
    """What a lock of either mode holds and does alike: its identity, the sources it waits
    for, its members and its operations by (source, step), and how operations are looked up,
    stored and read back. The modes differ in members and in how reports become operations."""

    mode = ""
    step_word = "step"      # what an operation's ``step`` counts, in messages

    def __init__(self, lock_id: str, task: str, target: tuple[str, str], sources=()):
        self.lock_id = lock_id
        self.task = task
        self.target = tuple(target)
        self.sources: tuple[str, ...] = tuple(sorted(set(sources)))
        self.members: dict = {}
        self.ops: dict[tuple[str, int], Operation] = {}
        self.seq = 0

    def set_sources(self, sources) -> None:
        if sources is not None:
            self.sources = tuple(sorted(set(sources)))

    def _op(self, source: str, step: int) -> Operation:
        from dm_core.shardddl.errors import ShardDDLLockError

        op = self.ops.get((source, step))
        if op is None:
            raise ShardDDLLockError(f"{source} has no operation for step {step} of lock {self.lock_id}")
        return op

    def _exec_waits_for(self, op: Operation) -> Operation | None:
        """An exec operation that must finish downstream before ``op`` may start (None: none)."""
        return None

    def mark_executing(self, source: str, step: int, index: int) -> Operation:
        """Statement ``index`` of the source's exec op of ``step`` may start downstream now."""
        from dm_core.shardddl.errors import ShardDDLLockError

        op, what = self._op(source, step), f"{self.step_word} {step}"
        if op.action != EXEC or op.state == DONE:
            raise ShardDDLLockError(f"{source} has no DDL to execute for {what} of lock {self.lock_id}")
        before = self._exec_waits_for(op)
        if before is not None:
            raise ShardDDLLockError(f"{what} of lock {self.lock_id} must wait for {before.source}'s DDL")
        if index != op.exec_index:
            raise ShardDDLLockError(f"statement {index} of {what} is not next ({op.exec_index} are done)")
        op.state = EXECUTING
        return op.view()

    def mark_executed(self, source: str, step: int, index: int) -> Operation:
        """Statement ``index`` of the source's exec op of ``step`` is done downstream (again: no change)."""
        from dm_core.shardddl.errors import ShardDDLLockError

        op = self._op(source, step)
        if op.state == DONE or op.exec_index > index:
            return op.view()
        if op.action != EXEC or op.exec_index != index:
            raise ShardDDLLockError(f"statement {index} of {self.step_word} {step} of lock {self.lock_id} "
                                    "is not in flight")
        op.exec_index, op.state = index + 1, PENDING
        return op.view()

    def _op_rows(self) -> list[dict]:
        """The operations as store rows."""
        return [{"source_id": op.source, "upstream_schema": op.upstream[0], "upstream_table": op.upstream[1],
                 "step": op.step, "action": op.action, "ddls": list(op.ddls), "state": op.state,
                 "exec_index": op.exec_index, "detail": op.to_dict()} for _, op in sorted(self.ops.items())]

    def _restore_ops(self, rows: list[dict]) -> None:
        for r in rows:
            op = Operation.from_dict(r["detail"])
            op.action, op.state, op.exec_index = r["action"], r["state"], r["exec_index"]
            self.ops[(op.source, op.step)] = op
