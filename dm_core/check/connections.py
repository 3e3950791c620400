"""Can we log in at all (``connection``), and will there be enough connections (``conn_number``).

A failed ``connection`` is never turned into a warning by ignore-checking-items: nothing
else about that server could be checked, and nothing will work without it.

What shardflow opens, which ``conn_number`` compares with max_connections minus the
connections already in use:

- on a source: the full phase's parallel readers (``mydumper-thread``) plus one for the
  watermarks; the incremental phase's binlog stream plus one for schema lookups;
- on the target: each source's loader pool (full) and syncer workers (incremental), plus
  one for DDL and checkpoints.
"""

from __future__ import annotations

from dm_core.check.context import failed, item, passed, runs_dump, runs_replication, undetermined, warned
from dm_core.check.probe import ServerFacts
from dm_core.errors import ErrorCode


@item("connection", scope="server")
def connection(ctx, facts: ServerFacts):
    if facts.reachable:
        return [passed(f"connected to {facts.address} as {facts.user}")]
    code = ErrorCode.DOWNSTREAM_UNREACHABLE if facts.label == "target" else ErrorCode.UPSTREAM_UNREACHABLE
    return [failed(facts.connect_error or f"cannot connect to {facts.address}", code.workaround)]


def _cfg(obj, *paths: str, default: int) -> int:
    """The first attribute path (dotted) that exists on ``obj``, as an int."""
    for p in paths:
        cur = obj
        for part in p.split("."):
            cur = getattr(cur, part, None)
            if cur is None:
                break
        if cur is not None:
            try:
                return int(cur)
            except (TypeError, ValueError):
                continue
    return default


def needed_on_source(task, inst) -> int:
    n = 0
    if runs_dump(task):
        n += _cfg(inst, "mydumper.threads", default=4) + 1
    if runs_replication(task):
        n += 2
    return n


def needed_on_target(task) -> int:
    n = 1
    for inst in task.mysql_instances:
        if task.task_mode != "incremental":
            n += _cfg(inst, "loader.pool_size", default=16)
        if runs_replication(task):
            n += _cfg(inst, "syncer.worker_count", default=16)
    return n


@item("conn_number", scope="servers")
def conn_number(ctx, facts: ServerFacts):
    if "variables" in facts.errors:
        return [undetermined(facts, "max_connections", "variables")]
    try:
        limit = int(facts.var("max_connections") or 0)
    except ValueError:
        limit = 0
    if limit <= 0:
        return [passed("max_connections is not limited")]
    used = facts.threads_connected or 0
    if facts.label == "target":
        need = needed_on_target(ctx.task)
    else:
        need = needed_on_source(ctx.task, ctx.instance(facts.label))
    free = limit - used
    if need > free:
        return [warned(f"shardflow needs up to {need} connections but only {free} are free "
                       f"(max_connections {limit}, {used} in use)",
                       "raise max_connections (SET GLOBAL max_connections = N), or lower the task's "
                       "mydumper-thread / loader pool-size / syncer worker-count")]
    return [passed(f"needs up to {need} connections, {free} free (max_connections {limit})")]
