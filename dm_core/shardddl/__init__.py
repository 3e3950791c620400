"""Shard DDL coordination: what lets shards of many sources change their schema while
their rows merge into one downstream table (DM's sharding DDL, seeds 002/003/004).

Modules (one stage, one module):

* ``ddl_norm``      — normalise, route and classify one DDL (coordinate / ignore / create);
* ``schema``        — columns, types, the join of shard schemas, schema diffs;
* ``source_group``  — level 1 (pessimistic): one source's shards in one binlog stream,
  skip-and-rewind;
* ``pessimism/``, ``optimism/`` — level 2, mirrored: ``info`` (what a source reports),
  ``lock`` (pure state machine; the protocol is in each package's docstring);
* ``common``        — lock ids, positions as JSON, ``Operation`` (the coordinator's answer);
* ``keeper``        — an in-memory registry of one mode's locks (``Keeper(Lock)``);
* ``lock_ops``      — every Postgres transaction on a lock: one lock store per mode
  (``PESSIMISTIC``, ``OPTIMISTIC``; ``ops_for(mode)``);
* ``pg``            — the three tables (``shardddl_lock``, ``shardddl_member``,
  ``shardddl_operation``) and the one transaction shape of ``lock_ops``;
* ``executor``      — the owner runs an exec operation downstream exactly once;
* ``coordinator``   — the coordinator's round, and the locks as dmctl and the UI show them;
* ``membership``    — which sources take part in each lock (from the upstreams' tables);
* ``errors``        — the errors, with codes and workarounds.

How the syncer drives all this is in ``dm_core.sync.shard_sync``.
"""
