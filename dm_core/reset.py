"""Forgetting a task's progress (``dmctl start-task --remove-meta``, and tests that start a
task afresh): one function, so that no part that keeps state for a task is left out.

The state store's positions and chunks go in one transaction with what describes those
positions (shard DDL locks, recorded online-DDL changes, schema overlays, tracked tables): a
reset killed after the positions alone went would leave locks that the next start, seeing no
positions, would take over into a new full phase. The full phase's plans and downstream markers follow; a
reset that dies before them leaves what the next reset clears (a fresh full phase plans
again and replaces markers).

This module sits above ``state``, ``shardddl``, ``sync`` and ``full`` so that none of them
has to import another to reset a task.
"""

from __future__ import annotations

from dm_core.full import phase as full_phase
from dm_core.schema_tracker import store as schema_tracker
from dm_core.shardddl import pg as shardddl_pg
from dm_core.state.store import forget_task_rows
from dm_core.sync import online_ddl, schema_overlay


def reset_task(store, name: str, task=None) -> None:
    """Forget every position, chunk, shard DDL lock, online-DDL record, schema overlay and tracked table of task ``name``
    in ``store`` (a ``StateStore``). With the parsed ``task`` (``TaskConfig``) also the full
    phase's chunk plans, downstream markers and staging leftovers, which need its target."""
    shardddl_pg.ensure_tables(store)
    online_ddl.ensure(store)
    schema_overlay.ensure(store)
    schema_tracker.ensure(store)
    with store.tx() as cur:
        forget_task_rows(cur, name)
        shardddl_pg.delete_task(cur, name)
        online_ddl.delete_task(cur, name)
        schema_overlay.delete_task(cur, name)
        schema_tracker.delete_task(cur, name)
    if task is not None:
        full_phase.forget(task, store)
