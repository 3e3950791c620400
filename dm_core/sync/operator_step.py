"""The syncer's side of `dmctl binlog`: an operator's skip / replace / inject carried out at
the event it names (handle_error.py says what each means and how long it waits).

Four places call in, in window order: ``held`` before each event (a source paused on an
error goes on only where an operation says what to do), ``on_rows`` for a row transaction,
``on_statement`` for a statement logged among a transaction's rows, ``on_ddl`` for a DDL.
Statements an operator gives are read as the upstream's own at that event (routed, filtered,
a shard DDL on a sharded table: ``Syncer._handle_statement`` / ``Syncer._shard_ddl``), and
run as a replay, since an operation stays until the checkpoint is past its event and a
window that dies midway reads them again.

On a sharded table an operation may meet a shard DDL lock this source is part of:

* the source was to run the lock's statements downstream and could not (it paused on it):
  ``skip`` settles the lock with nothing run (as ``shard-ddl-lock unlock --force-remove``),
  ``replace`` runs the given statements in place of the lock's, then settles it, ``inject``
  runs them, then the lock's own as usual; every member then goes on;
* the source reported the DDL and waits for others: ``skip`` settles the lock too (the
  others would wait for a DDL this source no longer runs);
* the source reported the DDL and the lock was settled since (another member's skip): the
  DDL is read as usual, so that this source's round ends (its rows are no longer held back);
* otherwise (an operation set ahead, no lock yet): ``skip`` passes the event by, ``replace``
  and ``inject`` report the statements as this source's DDL of the event. In pessimistic
  mode every source must then do the same (DM's rule: the shards' DDLs must agree).
"""

from __future__ import annotations

import dataclasses
import logging

from dm_core.ddl import replay as ddl_replay
from dm_core.ddl.parsed import parse_ddl
from dm_core.errors import ErrorCode
from dm_core.secrets.redact import redact_sql
from dm_core.shardddl.common import EXEC, lock_id_of
from dm_core.shardddl.ddl_norm import normalize
from dm_core.shardddl.lock_ops import ops_for
from dm_core.sync.handle_error import is_ddl, statements_for

log = logging.getLogger("shardflow.sync")

HOLD = object()   # ``held``: stay paused, end the window before the event


def held(syncer, w, txn):
    """The operation for this event (None: none), or ``HOLD`` when the source is held at the
    event it paused on and nothing says what to do with it (no retry of a failing event)."""
    op = w.ops.at(txn.start, txn.event_start) if w.ops else None
    if w.held is not None and txn.start is not None and txn.start.key() >= w.held.key():
        if op is None:
            return HOLD
        _resume(syncer, w, txn.start)
    if op is not None:
        log.warning("source %s: operator's binlog %s", syncer.source_id, op.describe())
    return op


def on_rows(syncer, w, txn, op):
    """skip / replace / inject on a row transaction; an error to pause with, else None."""
    what = f"the transaction at {txn.start} ({len(txn.rows)} row changes)"
    if op.op == "skip":
        w.res.ddls.append(f"{what}: skipped by operator")
        return None
    if op.op == "replace" and not all(is_ddl(s) for s in op.sqls):
        _run_as_written(w, op.sqls)   # shardflow's extension
        w.res.ddls.append(f"{what}: replaced by operator with {redact_sql('; '.join(op.sqls))}")
        return None
    out = _statements(syncer, w, txn, list(op.sqls), op)
    if out is not None and not isinstance(out, Exception):
        return ErrorCode.DDL_UNSUPPORTED.error(
            f"binlog {op.op} at {txn.start}: statements on a sharded table cannot be given for a row "
            f"transaction (they would wait for a shard DDL lock): {'; '.join(op.sqls)}")
    if out is None:
        w.res.ddls.append(f"{what}: {op.op} by operator")
    return out


def on_statement(syncer, w, stmt, op):
    """skip / replace / inject at a statement logged among a transaction's rows (a STATEMENT or
    MIXED session's, which never runs downstream): skip passes it by, replace and inject run the
    given statements downstream as written; the transaction's rows apply after. An error to
    pause with, else None."""
    if w.held is not None and stmt.event_start.key() >= w.held.key():   # the statement it paused on
        _resume(syncer, w, stmt.start)
    log.warning("source %s: operator's binlog %s", syncer.source_id, op.describe())
    what = f"the statement at {stmt.event_start} in the transaction at {stmt.start}"
    if op.op == "skip":
        w.res.ddls.append(f"{what}: skipped by operator")
        return None
    ddl = [s for s in op.sqls if is_ddl(s)]
    if ddl:
        return ErrorCode.DDL_UNSUPPORTED.error(
            f"binlog {op.op} at {stmt.event_start}: a statement inside a transaction can only be replaced by "
            f"statements run downstream as written (DML), not: {ddl[0]}")
    _run_as_written(w, op.sqls)
    w.res.ddls.append(f"{what}: {op.op} by operator with {redact_sql('; '.join(op.sqls))}")
    return None


def _resume(syncer, w, at) -> None:
    """The event the source paused on has its operation: no longer held, no longer paused."""
    w.held, w.resumed_at = None, at
    syncer.store.update_source_state(syncer.task.name, syncer.source_id, stage="sync", error=None,
                                     error_code=None, error_stmt=None)


def _run_as_written(w, sqls) -> None:
    """An operator's statements run downstream as given (no routing: they name downstream tables)."""
    with w.dconn.cursor() as cur:
        for sql in sqls:
            cur.execute(sql)


def on_ddl(syncer, w, txn, op):
    """skip / replace / inject on a DDL: what ``Syncer._handle_ddl`` would return."""
    lock = _lock_of(syncer, txn)
    # runs: the lock gave this source its statements to run and the source paused at this very
    # event, so the run failed (a source that only waited, or runs them now, reads them as usual)
    runs = lock is not None and lock[1] and w.resumed_at is not None and w.resumed_at == txn.start
    if lock is not None and (runs or op.op == "skip"):
        return _settle(syncer, w, txn, op, lock[0], runs=runs)
    table = syncer._sharded_table(parse_ddl(txn.ddl, txn.ddl_schema).tables)
    if op.op == "skip" and table is not None and syncer.shard.in_round(syncer.rules.router.route(*table)):
        # reported before, and the lock was settled since (by another member's skip): the round
        # must end as usual, else the group would hold this shard's rows back for good
        w.res.ddls.append(f"{redact_sql(txn.ddl)}: skipped by operator (its shard DDL lock is settled)")
        return syncer._shard_ddl(txn, txn.ddl, w.dconn, w.res, replay=True)
    if op.op == "skip":
        syncer.skipped_ddl(txn, w.dconn)   # DM's tracker still reads a skipped DDL
        w.res.ddls.append(f"{redact_sql(txn.ddl)}: skipped by operator")
        return None
    out = _statements(syncer, w, txn, statements_for(op, txn.ddl), op)
    if out is None:
        w.res.ddls.append(f"{redact_sql(txn.ddl)}: {op.op} by operator")
    return out


def _statements(syncer, w, txn, sqls, op):
    bad = [s for s in sqls if not is_ddl(s)]
    if bad:
        return ErrorCode.DDL_UNSUPPORTED.error(f"binlog {op.op} at {txn.start}: a DDL can only be replaced by "
                                               f"DDL statements, not: {bad[0]}")
    own = [dataclasses.replace(txn, ddl=s, sql_mode=None) for s in sqls]
    sharded = [t for t in own if syncer._sharded_table(parse_ddl(t.ddl, t.ddl_schema).tables)]
    if sharded:
        if len(sharded) != len(own):
            return ErrorCode.SHARD_DDL_UNSUPPORTED.error(
                f"binlog {op.op} at {txn.start}: the statements mix tables of a sharding group with others: "
                f"{'; '.join(sqls)}")
        return syncer._shard_ddl(txn, [t.ddl for t in own], w.dconn, w.res, replay=True)
    for t in own:
        out = syncer._handle_statement(t, t.ddl, w.dconn, w.res, replay=True)
        if out is not None:
            return out
    return None


def _lock_of(syncer, txn) -> tuple[str, bool] | None:
    """(lock id, this source runs its statements) when this source's DDL at ``txn`` is in a
    shard DDL lock not settled yet."""
    table = syncer._sharded_table(parse_ddl(txn.ddl, txn.ddl_schema).tables)
    if table is None:
        return None
    mode, task, source = syncer.task.shard_mode, syncer.task.name, syncer.source_id
    lock_id = lock_id_of(task, syncer.rules.router.route(*table))
    ops = ops_for(mode)
    mine = ops.get_operation(syncer.store, task, source, lock_id, **({"table": table} if mode == "optimistic" else {}))
    if mine is not None and not mine.done:
        return lock_id, mine.action == EXEC
    for lk in ops.list_locks(syncer.store, task, active_only=True):
        if lk["lock_id"] != lock_id:
            continue
        if mode == "pessimistic" and source in (lk.get("synced") or ()):
            return lock_id, False
        if mode == "optimistic" and any(m["source"] == source and tuple(m["table"]) == tuple(table) and m["pending"]
                                        for m in lk.get("members") or ()):
            return lock_id, False
    return None


def _settle(syncer, w, txn, op, lock_id: str, *, runs: bool):
    from dm_core.shardddl.coordinator import unlock

    for sql in (op.sqls if runs and op.op in ("replace", "inject") else ()):
        n = normalize(sql, txn.ddl_schema, syncer.rules.router.route, mode=syncer.task.shard_mode)
        for part in (n.split() if n.action == "coordinate" else [n]):
            if part.sql:
                w.res.ddls.extend(ddl_replay.run(w.dconn, part.sql, n.kind, replay=True))
        syncer.rows.forget(*n.target)
    if op.op != "inject":
        unlock(syncer.store, lock_id, force_remove=True)
        log.warning("source %s: shard DDL lock %s settled by the operator's binlog %s", syncer.source_id, lock_id,
                    op.op)
    w.res.ddls.append(f"{redact_sql(txn.ddl)}: {op.op} by operator (shard DDL lock {lock_id})")
    return syncer._shard_ddl(txn, txn.ddl, w.dconn, w.res, replay=True)
