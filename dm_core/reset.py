"""Forgetting a task's progress (``dmctl start-task --remove-meta``, and tests that start a
task afresh): one function, so that no part that keeps state for a task is left out.

The order matters: the state store's positions and chunks first, then what describes
those positions (shard DDL locks, recorded online-DDL changes), then the full phase's plans
and downstream markers. A reset that dies part way leaves only state that the next reset
(or the next low watermark) clears as well.

This module sits above ``state``, ``shardddl``, ``sync`` and ``full`` so that none of them
has to import another to reset a task.
"""

from __future__ import annotations

from dm_core.full import phase as full_phase
from dm_core.shardddl import pg as shardddl_pg
from dm_core.sync import online_ddl, schema_overlay


def reset_task(store, name: str, task=None) -> None:
    """Forget every position, chunk, shard DDL lock, online-DDL record and schema overlay of task ``name``
    in ``store`` (a ``StateStore``). With the parsed ``task`` (``TaskConfig``) also the full
    phase's chunk plans, downstream markers and staging leftovers, which need its target."""
    store.forget_task(name)
    shardddl_pg.remove_task(store, name)
    online_ddl.remove_task(store, name)
    schema_overlay.remove_task(store, name)
    if task is not None:
        full_phase.forget(task, store)
