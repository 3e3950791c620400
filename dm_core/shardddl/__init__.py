"""Shard DDL coordination: what lets shards of many sources change their schema while
their rows merge into one downstream table (DM's sharding DDL, seeds 002/003/004).

Modules (one stage, one module):

* ``ddl_norm``      — normalise, route and classify one DDL (coordinate / ignore / create);
* ``schema``        — columns, types, the join of shard schemas, schema diffs;
* ``source_group``  — level 1 (pessimistic): one source's shards in one binlog stream,
  skip-and-rewind;
* ``pessimism/``, ``optimism/`` — level 2, mirrored: ``info`` (what a source reports),
  ``operation`` (the coordinator's answer), ``lock`` (pure state machine), ``keeper``
  (registry), ``ops`` (every Postgres transaction);
* ``pg``            — the three tables (``shardddl_lock``, ``shardddl_member``,
  ``shardddl_operation``) and the one transaction shape of ``ops``;
* ``executor``      — the owner runs an exec operation downstream exactly once;
* ``errors``        — the errors, with codes and workarounds.

How the syncer calls it (per source, pessimistic; ``ops = dm_core.shardddl.pessimism.ops``)
--------------------------------------------------------------------------------------------
Window start: ``groups = SourceShardGroups.from_json(saved)`` or, first time,
``SourceShardGroups.build({target: [this source's upstream tables routed there]})``.

For each transaction:

* row of table X: skip it if ``groups.should_skip_dml(X, txn.start)``;
* DDL on a table of no sharding group: as today, but skip it when
  ``groups.should_skip_ddl(txn.start)`` (already run in an earlier pass);
* DDL on a sharded table X: ``n = ddl_norm.normalize(sql, txn.ddl_schema, router.route)``
  (``ShardDDLUnsupported`` → pause as for any unsupported DDL);
  ``ignore`` → skip it (DROP TABLE: ``group.remove_member(X)``, and report if that
  completes a pending round); ``create`` → run ``n.sql`` downstream unless
  ``should_skip_ddl``, ``group.add_member(X)``; ``coordinate`` → flush and barrier, then
  ``out = groups.on_ddl(X, [n.sql], txn.end)`` and persist ``groups.to_json()`` at once:

  - ``recorded`` / ``done``: skip the event, go on;
  - ``report``: ``op = ops.put_info(store, Info(task, source, n.target,
    tuple(group.members), (n.sql,), txn.end), sources=[every source id of the task])``:
      · ``wait``: stop the window here (checkpoint stays at ``txn.start``); the next poke
        reads the DDL again, gets ``report`` again and calls ``put_info`` again
        (idempotent); ``op.conflict`` → pause the source with ``op.error()``;
      · ``exec``: ``executor.run_operation(store, downstream_conn, op, ops)``;
      · ``skip``: ``ops.ack_done(store, task, source, op.lock_id, op.step)`` unless
        ``op.done``;
    then ``replay = groups.on_resolved(n.target)``; move the checkpoint to
    ``replay.rewind_to`` (durable) *before* persisting ``groups.to_json()``; forget cached
    plans/catalog of the target; end the window (the next starts at the rewind point).

After each checkpoint commit: ``groups.committed(pos)`` (persist when not ``idle``).

Optimistic mode (``ops = dm_core.shardddl.optimism.ops``): no groups; for a coordinated
DDL on table X: flush and barrier, ``op = ops.put_info(store, optimism.Info(task, source,
n.target, X, (n.sql,), txn.end, tables=<this source's tables of the target>,
schema_before=executor.read_table_schema(downstream_conn, *n.target)), sources=...)``;
``exec`` → ``run_operation``; ``skip`` → ``ack_done``; ``wait`` → stop the window at the DDL
(``conflict`` → pause with ``op.error()``); when done the checkpoint moves past the DDL.
A CREATE TABLE of a new shard is reported the same way (the lock learns its schema).

The coordinator task: ``ops.resolve(store, task.name, [i.source_id for i in
task.mysql_instances])`` each run; ``ops.list_locks`` for the UI summary. dmctl:
``show-ddl-locks`` → ``list_locks`` (both modes); ``shard-ddl-lock unlock LOCK`` →
``ops_for(pg.lock_mode(store, LOCK)).unlock(store, LOCK, owner, force_remove, action)``.
"""

from __future__ import annotations


def ops_for(mode: str):
    """The ``ops`` module of a shard mode (``pessimistic`` | ``optimistic``)."""
    if mode == "optimistic":
        from dm_core.shardddl.optimism import ops
    elif mode == "pessimistic":
        from dm_core.shardddl.pessimism import ops
    else:
        raise ValueError(f"unknown shard mode {mode!r}")
    return ops
