"""Optimistic shard DDL coordination (DM's ``pkg/shardddl/optimism``).

Instead of pausing every shard until all have run a DDL, the coordinator tracks each
shard table's schema and keeps the downstream table at the *join* of them (the most
compatible schema, ``schema.join_schemas``): a DDL is executed downstream when, and as
far as, it changes the join, and skipped otherwise.

Assumptions
-----------
* All shards have the same schema as the downstream table when the lock is created
  (``Info.schema_before`` is read from the downstream then).
* Changes are compatible when the join can absorb them: ADD COLUMN nullable or with a
  default, widening a type, adding/dropping indexes, table options (run as they come);
  a DROP COLUMN reaches the downstream only when the last shard drops it (the others keep
  writing it); a unique key only when every shard has it; an index the shards define
  differently is left out until they agree; narrowing a type within its family and
  NULL → NOT NULL change nothing while another shard keeps the wider definition.
* Renaming a column, converting a type to another family, other statements are conflicts
  a person resolves; so are two shards defining one column differently, a column added
  back by a shard that dropped it while the downstream kept it (its old values are still
  there), or a NOT NULL column without default that some shards lack (this one resolves
  by itself when every shard has caught up, and then runs once).
* No first-level group: each upstream table reports its own DDLs (no skip-and-rewind).

Protocol
--------
1. A table of source A runs a DDL at position p: the syncer flushes, then
   ``lock_ops.OPTIMISTIC.put_info(Info(..., table, ddls, p, schema_before=downstream schema))``.
2. The lock computes A's table's new schema and the new join. Answer: ``exec`` with the
   single-change statements that move the downstream to the new join (A's own statement
   text where it matches), ``skip`` when the join does not change, ``wait`` with
   ``conflict`` when it cannot be merged (A pauses; the lock stays until resolved).
3. Exec ops run in the order they were made; every op waits while an earlier exec op
   of the lock is not done (no table writes rows for columns the downstream lacks).
4. A runs the statements (``executor.run_operation``) or skips, then ``ack_done``, and
   goes on with the next event (no rewind).
5. Conflicts are retried at every report and every ``resolve``; ``unlock`` lets the
   operator accept (``skip``) or force (``exec``) a conflicting change, or finish
   everything (``force_remove``).

Guarantees and restarts: as in pessimistic mode (see ``dm_core.shardddl.pessimism``):
every call is one transaction on the lock row and idempotent; a DDL met again after a
restart is recognised by its position; exec statements are bracketed by
``mark_executing``/``mark_executed`` and re-checked downstream after a crash.
"""

from dm_core.shardddl.optimism.info import Info
from dm_core.shardddl.optimism.lock import Lock

__all__ = ["Info", "Lock"]
