"""The pessimistic shard DDL lock of one (task, target table): a pure state machine.

State:

* ``sources`` — the sources expected to take part (the task's sources; set by the caller);
* per source: its upstream tables in the group (the lock's members are every (source,
  table) pair), its pending report (DDLs, position, step, arrival order), the last step it
  finished and that step's position;
* ``step`` / ``ddls`` / ``owner`` — the DDL being coordinated: step N is the N-th DDL of
  the target since the lock exists; ``ddls`` is ``None`` while idle;
* ``ops`` — one operation per (source, step).

Transitions (each one call; ``settle()`` runs after each and applies every consequence):

1. ``report(info)``: the source's next step is ``finished + 1``.
   - the current step: its DDLs must equal the lock's (comparison keys), else the report
     is kept with a conflict and ``ShardDDLInconsistent`` names both statements;
   - the step after the current one: queued (a source that finished the current step may
     report its next DDL while others still finish; that is how ``s1 ddl1, s2 ddl1,
     s1 ddl2, s2 ddl2`` runs without deadlock);
   - idle lock: the report opens the next step and its source becomes the owner (the
     first reporter, DM's rule);
   - a position at or before the source's last finished one: a DDL met again after a
     restart → ``skip``, already ``done`` (nothing is recorded).
2. ``settle``: an idle lock promotes the earliest queued report; a step whose every
   expected source reported the same DDLs becomes ready: ``exec`` for the owner, ``skip``
   for the others (seen as ``wait`` until the owner's op is done); a step whose ops are all
   done finishes and the lock is idle again.
3. ``mark_executing(i)`` / ``mark_executed(i)``: the owner brackets downstream statement i.
4. ``ack(source, step)``: the op is done; the source's report is cleared and its position
   remembered.
5. ``unlock(owner, action, force_remove)``: the operator's way out (see ``unlock``).

Guarantees: at most one exec op per step; skip ops never complete before the exec op;
every transition is idempotent for the same arguments (a caller that died and reruns gets
the same answer), so with the store's row lock a step's DDL is executed once.
"""

from __future__ import annotations

from dataclasses import dataclass

from dm_core.shardddl.common import (DONE, EXEC, EXECUTING, SKIP, WAIT, LockBase, Operation, fmt_tables,
                                     pos_from_json, pos_to_json)
from dm_core.position import Position
from dm_core.shardddl.ddl_norm import comparison_key
from dm_core.shardddl.errors import ShardDDLInconsistent, ShardDDLLockError
from dm_core.shardddl.pessimism.info import Info


def _keys(ddls) -> list[str]:
    return [comparison_key(d) for d in ddls]


@dataclass
class Report:
    ddls: tuple[str, ...]
    position: Position
    step: int
    seq: int
    conflict: str = ""

    def to_json(self) -> dict:
        return {"ddls": list(self.ddls), "position": pos_to_json(self.position), "step": self.step,
                "seq": self.seq, "conflict": self.conflict}

    @classmethod
    def from_json(cls, d: dict | None) -> "Report | None":
        if not d:
            return None
        return cls(tuple(d["ddls"]), pos_from_json(d["position"]), d["step"], d["seq"], d.get("conflict", ""))


@dataclass
class SourceMember:
    source: str
    tables: tuple[tuple[str, str], ...] = ()
    report: Report | None = None
    done_step: int = 0                       # last step this source finished
    done_pos: Position | None = None         # position of that step's info
    forced: tuple[tuple[int, tuple[str, ...]], ...] = ()   # steps unlocked without it: (step, ddls)

    def state_json(self) -> dict:
        return {"report": self.report.to_json() if self.report else None, "done_step": self.done_step,
                "done_pos": pos_to_json(self.done_pos), "forced": [[s, list(d)] for s, d in self.forced]}

    @classmethod
    def from_state(cls, source: str, tables, st: dict) -> "SourceMember":
        return cls(source, tuple(tables), Report.from_json(st.get("report")), st.get("done_step", 0),
                   pos_from_json(st.get("done_pos")), tuple((s, tuple(d)) for s, d in st.get("forced", [])))


class Lock(LockBase):
    mode = "pessimistic"

    def __init__(self, lock_id: str, task: str, target: tuple[str, str], sources=()):
        super().__init__(lock_id, task, target, sources)
        self.step = 0
        self.ddls: tuple[str, ...] | None = None
        self.owner: str | None = None
        self.members: dict[str, SourceMember] = {}

    # ---- queries --------------------------------------------------------------------------------
    @property
    def conflict(self) -> str:
        """The first conflict among the current reports ("" when none)."""
        return next((m.report.conflict for _, m in sorted(self.members.items())
                     if m.report is not None and m.report.conflict), "")

    @property
    def status(self) -> str:
        if self.ddls is None:
            return "idle"
        if self.conflict:
            return "conflict"
        return "ready" if self._step_ops() else "waiting"

    def expected(self) -> list[str]:
        return sorted(set(self.sources) | {s for s, m in self.members.items()
                                          if m.report is not None and m.report.step == self.step})

    def synced(self) -> list[str]:
        """Sources that reached the current step's DDL (reported it, or already finished it)."""
        return [s for s in self.expected() if self._reached(s)]

    def unsynced(self) -> list[str]:
        return [s for s in self.expected() if not self._reached(s)]

    def operation_for(self, source: str) -> Operation | None:
        """What ``source`` must do now (None: nothing pending for it on this lock)."""
        mine = sorted((op for (s, _), op in self.ops.items() if s == source and op.state != DONE),
                      key=lambda o: o.step)
        if mine:
            op = mine[0]
            if op.action == SKIP and not op.forced:
                ex = self._exec_op(op.step)
                if ex is not None and ex.state != DONE:
                    return op.view(action=WAIT, message=f"waiting for the owner {ex.source} to execute the DDL")
            return op.view()
        m = self.members.get(source)
        if m is None or m.report is None:
            return None
        r = m.report
        if r.conflict:
            return Operation(self.lock_id, self.task, source, r.step, WAIT, r.ddls, owner=self.owner or "",
                             message=r.conflict, conflict=r.conflict)
        if r.step > self.step or self.ddls is None:
            msg = f"queued behind DDL step {self.step} (not finished by: {', '.join(self._unfinished())})"
        else:
            msg = f"waiting for {', '.join(self.unsynced()) or 'the coordinator'} to reach the DDL"
        return Operation(self.lock_id, self.task, source, r.step, WAIT, r.ddls, owner=self.owner or "", message=msg)

    def describe(self) -> dict:
        """A JSON-able summary (what `dmctl show-ddl-locks` prints)."""
        return {
            "lock_id": self.lock_id, "task": self.task, "mode": self.mode, "target": list(self.target),
            "status": self.status, "step": self.step, "owner": self.owner, "ddls": list(self.ddls or ()),
            "conflict": self.conflict, "sources": list(self.sources), "synced": self.synced() if self.ddls else [],
            "unsynced": self.unsynced() if self.ddls else [],
            "members": {s: [list(t) for t in m.tables] for s, m in sorted(self.members.items())},
            "operations": [op.to_dict() for _, op in sorted(self.ops.items())],
        }

    # ---- transitions -----------------------------------------------------------------------------
    def report(self, info: Info) -> Operation:
        """Record a source's info (idempotent); raises ShardDDLInconsistent on different DDLs."""
        if info.lock_id != self.lock_id:
            raise ShardDDLLockError(f"info for {info.lock_id} given to lock {self.lock_id}")
        m = self.members.get(info.source)
        if m is None:
            m = self.members[info.source] = SourceMember(
                info.source, done_step=self.step - 1 if self.ddls is not None else self.step)
        m.tables = tuple(info.tables)
        pos, ddls = info.position, tuple(info.ddls)
        if m.done_pos is not None and pos.key() <= m.done_pos.key():
            return Operation(self.lock_id, self.task, info.source, m.done_step, SKIP, ddls, state=DONE,
                             replayed=True, message=f"DDL at {pos} already finished (step {m.done_step})")
        if m.report is not None:
            same = m.report.position == pos and _keys(m.report.ddls) == _keys(ddls)
            if same and not m.report.conflict:
                self.settle()
                return self.operation_for(info.source)
            if not m.report.conflict:
                raise ShardDDLLockError(
                    f"source {info.source} reports `{'; '.join(ddls)}` at {pos} while its DDL "
                    f"`{'; '.join(m.report.ddls)}` at {m.report.position} is not finished in lock {self.lock_id}")
            m.report = None  # a conflicting report is replaced (e.g. after `binlog replace`)
        step = m.done_step + 1
        if m.forced and m.forced[0][0] == step:
            f_step, f_ddls = m.forced[0]
            self.seq += 1
            # DM's unlock: the owner's statement is the step's; every other source skips its own
            # DDL of that step, also one that differed (the operator unlocked it knowing so)
            note = "" if _keys(f_ddls) == _keys(ddls) else (
                f"; its own DDL `{'; '.join(ddls)}` differed from the unlocked `{'; '.join(f_ddls)}` and is skipped")
            m.report = Report(ddls, pos, step, self.seq)
            self.ops[(info.source, step)] = Operation(self.lock_id, self.task, info.source, step, SKIP, f_ddls,
                                                      owner=self.owner or "", forced=True,
                                                      message=f"step {step} was unlocked by the operator{note}")
            return self.operation_for(info.source)
        if step < self.step or step > self.step + 1 or (step == self.step and self.ddls is None):
            raise ShardDDLLockError(f"source {info.source} reports DDL step {step} but lock {self.lock_id} is at "
                                    f"step {self.step}; run `dmctl shard-ddl-lock unlock {self.lock_id} --force-remove`"
                                    f" if a source was removed")
        self.seq += 1
        if step == self.step and self.ddls is not None and _keys(self.ddls) != _keys(ddls):
            msg = self._inconsistent(info, self.ddls, f"the lock's DDL (first reported by {self.owner})")
            m.report = Report(ddls, pos, step, self.seq, msg)
            raise ShardDDLInconsistent(msg)
        m.report = Report(ddls, pos, step, self.seq)
        self.settle()
        op = self.operation_for(info.source)
        if op is not None and op.conflict:
            raise ShardDDLInconsistent(op.conflict)
        return op

    def settle(self) -> None:
        """Apply every consequence of the current state (promote, emit ops, finish steps)."""
        for _ in range(1000):
            if not self._settle_once():
                break
        self._prune()

    def _settle_once(self) -> bool:
        if self.ddls is None:
            nxt = sorted((m for m in self.members.values() if m.report is not None and m.report.step == self.step + 1
                          and not m.report.conflict), key=lambda m: m.report.seq)
            if not nxt:
                return False
            self.step += 1
            self.ddls, self.owner = nxt[0].report.ddls, nxt[0].source
            for m in nxt[1:]:
                if _keys(m.report.ddls) != _keys(self.ddls):
                    msg = self._inconsistent(Info(self.task, m.source, self.target, m.tables, m.report.ddls,
                                                  m.report.position), self.ddls,
                                             f"the lock's DDL (first reported by {self.owner})")
                    m.report.conflict = msg
            return True
        step_ops = self._step_ops()
        if not step_ops:
            if self.sources and all(self._reported_ok(s) for s in self.expected()):
                self._emit(self.owner, EXEC)
                return True
            return False
        late = [s for s in self.expected() if self._reported_ok(s) and (s, self.step) not in self.ops]
        for s in late:  # reached the DDL after the step became ready: the owner executes for it too
            self.ops[(s, self.step)] = Operation(self.lock_id, self.task, s, self.step, SKIP, self.ddls,
                                                 owner=self.owner or "")
        if all(op.state == DONE for op in self._step_ops()):
            self.ddls, self.owner = None, None
            return True
        return bool(late)

    def _emit(self, owner: str, action: str) -> None:
        for s in self.expected():
            m = self.members.get(s)
            if m is None or m.report is None or m.report.step != self.step or m.report.conflict:
                continue
            self.ops[(s, self.step)] = Operation(
                self.lock_id, self.task, s, self.step, action if s == owner else SKIP, self.ddls, owner=owner,
                message="execute the DDL downstream" if s == owner and action == EXEC else "")

    def ack(self, source: str, step: int) -> Operation:
        """The source finished its op of ``step`` (owner: DDLs are downstream; others: skipped)."""
        op = self.ops.get((source, step))
        m = self.members.get(source)
        if op is None:
            if m is not None and m.done_step >= step:
                return Operation(self.lock_id, self.task, source, step, SKIP, (), state=DONE, message="already done")
            raise ShardDDLLockError(f"{source} has no operation for step {step} of lock {self.lock_id}")
        if op.state == DONE:
            return op.view()
        if op.action == SKIP and not op.forced:
            ex = self._exec_op(step)
            if ex is not None and ex.state != DONE:
                raise ShardDDLLockError(f"{source} cannot finish step {step} of lock {self.lock_id} before the "
                                        f"owner {ex.source} has executed the DDL")
        if op.action == EXEC:
            op.exec_index = len(op.ddls)
        op.state = DONE
        if m.report is not None and m.report.step == step:
            m.done_pos = m.report.position
            m.report = None
        m.done_step = max(m.done_step, step)
        if m.forced and m.forced[0][0] == step:
            m.forced = m.forced[1:]
        self.settle()
        return op.view()

    def unlock(self, owner: str | None = None, action: str = EXEC, force_remove: bool = False) -> None:
        """The operator resolves a stuck step (`dmctl shard-ddl-lock unlock`).

        * not ready (sources missing): ``owner`` (default: the lock's owner, who must have
          reported) gets ``action`` (``exec``: run the DDL; ``skip``: the operator already
          did), every other reported source ``skip``; sources that did not report, or reported
          a different DDL, are released: when they reach (or read again) their DDL of that step
          they get ``skip``, as DM's unlock has the non-owners skip theirs;
        * ready: re-assign the exec op to ``owner`` or turn it into ``skip`` (refused while
          the current owner's statement is in flight or partly done);
        * ``force_remove``: nobody executes anything: every op of the step is done now,
          unreported sources are released as above. The operator answers for the downstream.
        """
        if action not in (EXEC, SKIP):
            raise ShardDDLLockError(f"unknown unlock action {action!r}: use exec or skip")
        if self.ddls is None:
            raise ShardDDLLockError(f"lock {self.lock_id} has no DDL waiting")
        step = self.step
        reported = [s for s in self.expected() if self._reported_ok(s)]
        if force_remove:
            if not self._step_ops():
                self._emit(self.owner if self.owner in reported else "", SKIP)
            for op in self._step_ops():
                if op.state != DONE:
                    op.action = SKIP if op.state != EXECUTING and op.exec_index == 0 else op.action
                    self._finish(op)
            self._release_unreported(step)
            self.settle()
            return
        new_owner = owner or self.owner
        if new_owner not in reported:
            raise ShardDDLLockError(f"{new_owner} has not reached the DDL of lock {self.lock_id}; "
                                    f"choose an owner among: {', '.join(reported) or '(none)'}")
        ops = self._step_ops()
        if not ops:
            self.owner = new_owner
            self._emit(new_owner, action)
            self._release_unreported(step)
        else:
            ex = self._exec_op(step)
            if ex is not None and (ex.state == EXECUTING or ex.exec_index > 0) and ex.source != new_owner:
                raise ShardDDLLockError(f"the owner {ex.source} has started executing the DDL of lock {self.lock_id}: "
                                        f"another owner could run it twice; use --action skip (the downstream "
                                        f"is handled) or --force-remove")
            for op in ops:
                if op.state == DONE:
                    continue
                op.action, op.owner = (action if op.source == new_owner else SKIP), new_owner
            self.owner = new_owner
        self.settle()

    def started(self) -> bool:
        """Whether the current step's DDL may have reached the downstream: an op of it is
        done, or the owner's statement is in flight or partly run. A lock that has not
        started can be forgotten (``lock_ops.PESSIMISTIC.forget``): its sources report
        their DDLs again when they read them, and nothing ran twice or went missing."""
        return any(op.state in (DONE, EXECUTING) or op.exec_index > 0 for op in self._step_ops())

    def _release_unreported(self, step: int) -> None:
        for s in self.expected():
            if self._reached(s) and not self._conflicting(s):
                continue
            m = self.members.setdefault(s, SourceMember(s, done_step=step - 1))
            if m.report is not None and m.report.step == step:
                m.report = None  # a conflicting report: the source reports again and skips its DDL (report)
            if all(f[0] != step for f in m.forced):
                m.forced = m.forced + ((step, self.ddls),)

    def _finish(self, op: Operation) -> None:
        op.state = DONE
        m = self.members.get(op.source)
        if m is not None and m.report is not None and m.report.step == op.step:
            m.done_pos, m.report = m.report.position, None
            m.done_step = max(m.done_step, op.step)

    # ---- helpers -------------------------------------------------------------------------------------
    def _reached(self, source: str) -> bool:
        m = self.members.get(source)
        return (self._reported_ok(source) or (source, self.step) in self.ops
                or (m is not None and m.done_step >= self.step))

    def _conflicting(self, source: str) -> bool:
        m = self.members.get(source)
        return m is not None and m.report is not None and m.report.step == self.step and bool(m.report.conflict)

    def _reported_ok(self, source: str) -> bool:
        m = self.members.get(source)
        return (m is not None and m.report is not None and m.report.step == self.step and not m.report.conflict
                and self.ddls is not None and _keys(m.report.ddls) == _keys(self.ddls))

    def _step_ops(self) -> list[Operation]:
        return [op for (s, k), op in self.ops.items() if k == self.step and not op.forced]

    def _exec_op(self, step: int) -> Operation | None:
        return next((op for (s, k), op in self.ops.items() if k == step and op.action == EXEC and not op.forced), None)

    def _unfinished(self) -> list[str]:
        return sorted({op.source for op in self._step_ops() if op.state != DONE}) or self.unsynced()

    def _prune(self) -> None:
        for k in [k for k, op in self.ops.items() if op.state == DONE and (k[1] < self.step or self.ddls is None)]:
            del self.ops[k]

    def _inconsistent(self, info: Info, theirs, what: str) -> str:
        pair = next(((a, b) for a, b in zip(info.ddls, theirs) if comparison_key(a) != comparison_key(b)), None)
        if pair is None:
            pair = ("; ".join(info.ddls), "; ".join(theirs))
        return (f"inconsistent DDL sequence in lock {self.lock_id}: source {info.source} "
                f"({fmt_tables(info.tables)}) reported `{pair[0]}` but {what} is `{pair[1]}`")

    # ---- persistence ---------------------------------------------------------------------------------
    def state_json(self) -> dict:
        return {"sources": list(self.sources), "seq": self.seq}

    def to_rows(self) -> tuple[dict, list[dict], list[dict]]:
        """(lock row, member rows, operation rows) for the store."""
        lock = {"lock_id": self.lock_id, "task": self.task, "mode": self.mode, "target_schema": self.target[0],
                "target_table": self.target[1], "status": self.status, "step": self.step, "owner": self.owner,
                "ddls": list(self.ddls) if self.ddls is not None else None, "conflict": self.conflict or None,
                "state": self.state_json()}
        members = []
        for s, m in sorted(self.members.items()):
            st = m.state_json()
            for t in (m.tables or (("", ""),)):
                members.append({"source_id": s, "upstream_schema": t[0], "upstream_table": t[1],
                                "ddls": list(m.report.ddls) if m.report else None,
                                "position": str(m.report.position) if m.report else None, "state": st})
        return lock, members, self._op_rows()

    @classmethod
    def from_rows(cls, lock: dict, members: list[dict], ops: list[dict]) -> "Lock":
        st = lock.get("state") or {}
        lk = cls(lock["lock_id"], lock["task"], (lock["target_schema"], lock["target_table"]), st.get("sources", ()))
        lk.step, lk.owner, lk.seq = lock["step"], lock.get("owner"), st.get("seq", 0)
        lk.ddls = tuple(lock["ddls"]) if lock.get("ddls") is not None else None
        by_source: dict[str, list[dict]] = {}
        for r in members:
            by_source.setdefault(r["source_id"], []).append(r)
        for s, rows in by_source.items():
            tables = [(r["upstream_schema"], r["upstream_table"]) for r in rows if r["upstream_table"]]
            lk.members[s] = SourceMember.from_state(s, tables, rows[0]["state"])
        lk._restore_ops(ops)
        return lk
