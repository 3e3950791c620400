"""The lock owner's side: run an ``exec`` operation's DDLs downstream exactly once, across
restarts. Postgres is reached only through the mode's lock store (``lock_ops``); what the
downstream table looks like is read by ``downstream``.

Protocol of ``run_operation`` for statement i of the op (each step durable before the next):

1. ``ops.mark_executing(i)`` — the store says "statement i may be in flight";
2. the statement is sent downstream (MySQL protocol, autocommit);
3. ``ops.mark_executed(i)`` — "statement i took effect";
... and after the last statement ``ops.ack_done`` (which lets the skipping members go on).

Restart rule: the process may die anywhere. On the rerun the op is read again:

* state ``pending``: statements ``< exec_index`` are done, nothing is in flight: go on at
  ``exec_index`` (a death between 3 and the next 1, or before the first 1);
* state ``executing``: statement ``exec_index`` may or may not have taken effect (a death
  between 1 and 3). ``statement_applied`` looks at the downstream table in
  information_schema: ADD COLUMN → the column exists; DROP COLUMN → it does not;
  CHANGE/RENAME COLUMN a→b → b exists and a does not; ADD/CREATE INDEX → the index
  exists; DROP INDEX → it does not. Applied → step 3 without re-running it; not applied →
  step 2 again. Statements whose re-run is harmless by nature (MODIFY COLUMN to a
  definition, ALTER COLUMN SET/DROP DEFAULT, table options) are simply re-run when the
  check cannot decide. Anything else that cannot be decided (a multi-change ALTER found
  half applied, which an atomic DDL cannot leave) stops with ``ShardDDLExecUnknown``:
  the operator looks and runs ``dmctl shard-ddl-lock unlock --action skip|exec``.

Hence each statement takes effect downstream exactly once, whoever dies when.

Replay (``run_operation(..., replay=True)``): when the owner's DDL lies in its source's
safe-mode range, the target may have been created after the DDL ran upstream (the full
phase's catch-up, dm_core/full/phase.py). Then each statement runs only its changes not yet
in effect (dm_core/ddl/replay.py), which also settles a statement left ``executing``.
"""

from __future__ import annotations

from dm_core import faults
from dm_core.classify import ddl_error
from dm_core.shardddl.common import EXEC, Operation
from dm_core.shardddl.ddl_norm import normalize, statement_changes
from dm_core.shardddl.downstream import change_applied, read_table_schema
from dm_core.shardddl.errors import ShardDDLExecUnknown, ShardDDLLockError, ShardDDLUnsupported

_IDEMPOTENT = {"set_default", "charset", "index_visibility", "other", "partition"}   # again: the same, or an error DM ignores


def statement_applied(conn, sql: str) -> bool | None:
    """Whether a (canonical, routed) DDL statement has taken effect downstream; None: cannot tell."""
    try:
        n = normalize(sql, None)
        if n.kind == "rename table":
            return True  # the target renamed onto itself (ddl_norm._rename_in_place): nothing to apply
        changes = statement_changes(n.sql)
    except ShardDDLUnsupported:
        return None
    cur = read_table_schema(conn, *n.target)
    got = [change_applied(ch, cur) for ch in changes]
    if got and all(g is True for g in got):
        return True
    if got and all(g is False or (g is None and ch.op in _IDEMPOTENT) for g, ch in zip(got, changes)):
        return False  # nothing applied (parts that cannot tell are harmless to run again)
    return None


def _rerun_is_harmless(sql: str) -> bool:
    try:
        return all(ch.op in _IDEMPOTENT or (ch.op == "modify_column" and not ch.new_name)
                   for ch in statement_changes(sql))
    except ShardDDLUnsupported:
        return False


def _execute(conn, sql: str, ddl_replay, *, replay: bool) -> None:
    """The statement downstream; errors DM ignores (ddl/replay.IGNORABLE) are logged only."""
    from dm_core.ddl.kind import ddl_event_type

    try:
        ddl_replay.run(conn, sql, ddl_event_type(sql), replay=replay)
    except Exception as e:  # pymysql errors: report the server's code and message
        raise ddl_error(e, f"shard DDL `{sql}`") from None


def run_operation(store, conn, op: Operation, ops, *, replay: bool = False) -> Operation:
    """Execute ``op`` (an ``exec`` operation of this source) downstream and acknowledge it.

    ``ops`` is the mode's lock store (``lock_ops.PESSIMISTIC`` or ``lock_ops.OPTIMISTIC``);
    ``conn`` a downstream connection in autocommit mode. Safe to call again after any crash
    with the operation as ``get_operation`` returns it then.

    ``replay``: the owner's DDL lies in its safe-mode range (the full phase's catch-up, see
    dm_core/ddl/replay.py), where the target may have been created with the change
    already in it: each statement then runs only the parts not yet in effect downstream,
    which also settles a statement left ``executing`` by a crash.
    """
    from dm_core.ddl import replay as ddl_replay

    if op.action != EXEC:
        raise ShardDDLLockError(f"operation {op.step} of lock {op.lock_id} for {op.source} is `{op.action}`, "
                                f"not exec")
    i = op.exec_index
    if op.executing and i < len(op.ddls) and not replay:
        applied = statement_applied(conn, op.ddls[i])
        if applied is True:
            ops.mark_executed(store, op.task, op.source, op.lock_id, op.step, i)
            i += 1
        elif applied is None and not _rerun_is_harmless(op.ddls[i]):
            raise ShardDDLExecUnknown(f"the owner {op.source} was executing `{op.ddls[i]}` (lock {op.lock_id}) "
                                      f"when it stopped, and the downstream table does not show whether it "
                                      f"took effect")
    for j in range(i, len(op.ddls)):
        ops.mark_executing(store, op.task, op.source, op.lock_id, op.step, j)
        faults.hit("shardddl.exec.before_downstream")
        _execute(conn, op.ddls[j], ddl_replay, replay=replay)
        faults.hit("shardddl.exec.after_downstream")
        ops.mark_executed(store, op.task, op.source, op.lock_id, op.step, j)
    return ops.ack_done(store, op.task, op.source, op.lock_id, op.step)
