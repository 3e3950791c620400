"""Pessimistic shard DDL coordination (DM's ``pkg/shardddl/pessimism``).

Correctness (seed 002): the merged table must at every moment equal the union of the
shards at some past instant. A DDL changes the shared schema, so it may reach the
downstream only once every shard has reached it; until then the shards that ran it wait.

Assumptions
-----------
* Every shard of a sharding group runs the same DDLs in the same order (compared after
  routing and normalisation, ``ddl_norm``); DROP/TRUNCATE TABLE and DROP DATABASE of shards
  are ignored, RENAME TABLE and multi-table statements are refused.
* All shards have the same schema when incremental replication starts.
* The task's sources are known to the coordinator (``resolve(sources=...)``); each one
  takes part in every lock of the task (DM's rule: one sharding group per task is best).
* A DDL runs downstream only after every row before it in that source is durable there
  (the syncer flushes before it), and DDLs are not transactional downstream.

Two levels (seed 003)
---------------------
Level 1 is in the source (``source_group``): its sharded tables reach the DDL at different
binlog positions of one stream; the syncer skips rows of tables past it, and once all its
tables have it the source reports. Level 2 is this package: the sources' reports meet in
a lock in the state store, keyed by (task, target table).

Protocol (seed 004: the lock owner flow)
----------------------------------------
1. Source A's group completes a DDL at position p:
   ``lock_ops.PESSIMISTIC.put_info(Info(..., ddls, p))``.
   The lock (created if new) records A's report; A, first to report, is the owner. A
   stops reading (checkpoint stays before the DDL) and polls.
2. Source B reaches the same DDL: ``put_info`` again. DDLs different from the lock's →
   ``ShardDDLInconsistent`` naming both statements; B pauses.
3. When every expected source has reported the same DDLs (checked at each ``put_info``
   and at the coordinator's ``resolve``) the lock makes operations: ``exec`` for A,
   ``skip`` for the others (they see ``wait`` until A's is done).
4. A runs the DDLs downstream (``executor.run_operation``: ``mark_executing`` before and
   ``mark_executed`` after each statement), then ``ack_done``.
5. The others ``ack_done`` their skip. Every source, once done, rewinds inside its own
   stream (``source_group.on_resolved``) and replays the rows it skipped.
6. When every operation of the step is done the lock is idle; a source that already
   finished may have reported its next DDL meanwhile: it is queued and opens the next
   step (so ``s1 ddl1, s2 ddl1, s1 ddl2, s2 ddl2`` proceeds without deadlock).

Guarantees
----------
* The DDLs of a step run downstream once (the owner's exec op; its statement-level
  ``executing``/``executed`` marks decide after a crash, see ``executor``), and before any
  member writes rows for the new schema (skip ops cannot finish before it).
* Rows: at least once; exact because every replayed row lies below the source's
  safe-mode exit point (see ``source_group``).

Restarts (every ``lock_ops`` call is one transaction on the lock row; all are idempotent)
-----------------------------------------------------------------------------------------
* died before ``put_info`` committed: nothing recorded; the rerun meets the DDL again.
* died after ``put_info``: the rerun meets the DDL again; the same report is recognised.
* the owner died after ``mark_executing`` (statement maybe run): the rerun sees the op
  ``executing`` and checks the downstream before running it again (``executor``).
* died after ``mark_executed``/before ``ack_done``: the rerun acknowledges without
  running anything.
* died after ``ack_done`` but before moving its checkpoint: the rerun reports the same
  DDL (same position) and gets ``skip``, already ``done`` (``replayed``).
* the coordinator died: ``resolve`` is re-run by its next run. When the syncers pass
  ``sources`` to ``put_info`` every transition settles the lock itself and the coordinator
  is only a safety net (and the only caller when they do not).
* a source is gone for good: ``unlock`` (operator) executes with the reported sources and
  releases the missing ones (they get ``skip`` if they ever reach the DDL).
"""

from dm_core.shardddl.pessimism.info import Info
from dm_core.shardddl.pessimism.lock import Lock

__all__ = ["Info", "Lock"]
