"""The precheck pipeline: probe every server once, run the items in CHECKS order, apply
ignore-checking-items.

Items whose phase the task does not run are skipped: replication items for task-mode
full (and DM's dump/load), dump items for task-mode incremental (and load). An item listed in ignore-checking-items (or
``all``) still runs, but its failures become warnings tagged "(ignored)", so the report
shows the risk that was accepted. ``connection`` is never ignored.

A task started again after a stop (``resuming``, see dm_core/state/lifecycle.py) skips the
sharding items, as DM does for a task with checkpoints: the shards' current definitions are
not those at the checkpoint (a shard DDL may be half way); once its full phase finished it
skips the dump items too, since it only replicates from then on.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from dm_core.check import (connections, meta_position, online_ddl, privileges, server, sharding, table_creation,
                            table_schema)
from dm_core.check.context import DUMP, REPLICATION, CheckContext, failed, runs_dump, runs_replication
from dm_core.check.result import FAIL, IGNORED_TAG, WARN, CheckReport, CheckResult
from dm_core.db import Endpoint

log = logging.getLogger("shardflow.check")

CHECKS = (
    connections.connection,
    server.version,
    server.server_id,
    server.binlog_enable,
    server.binlog_format,
    server.binlog_row_image,
    server.binlog_row_metadata,
    server.binlog_compression,
    privileges.replication_privilege,
    privileges.dump_privilege,
    connections.conn_number,
    table_schema.table_schema,
    table_schema.extended_columns,
    table_schema.target_charsets,
    table_schema.target_types,
    meta_position.meta_position,
    online_ddl.online_ddl,
    sharding.schema_of_shard_tables,
    sharding.auto_increment_ID,
    privileges.target_privilege,
    table_creation.target_table_creation,
)

# DM's names accepted in ignore-checking-items ("all" ignores every item).
IGNORABLE = frozenset(fn.item for fn in CHECKS) - {"connection"}
NEVER_IGNORED = frozenset({"connection"})


SHARDING_ITEMS = frozenset({sharding.schema_of_shard_tables.item, sharding.auto_increment_ID.item})


def run_prechecks(task, sources: dict[str, Endpoint], target: Endpoint, *, resuming: str = "fresh",
                  start_times: dict[str, str] | None = None) -> CheckReport:
    """Check a task against its real servers. ``sources`` maps source-id -> Endpoint;
    ``resuming``: fresh | full | incremental (lifecycle.resume_point); ``start_times``: the
    sources `start-task --start-time` moves to a time (their `meta` is not used)."""
    ctx = CheckContext.gather(task, sources, target)
    ctx.start_times = dict(start_times or {})
    results: list[CheckResult] = []
    for check in CHECKS:
        if _skipped(check, task) or (resuming != "fresh" and check.item in SHARDING_ITEMS) \
                or (resuming == "incremental" and check.phase == DUMP):
            continue
        results += _run(check, ctx)
    report = CheckReport(apply_ignores(results, getattr(task, "ignore_checking_items", None) or ()),
                         task=getattr(task, "name", ""))
    log.info("%s", report.summary())
    return report


def _skipped(check, task) -> bool:
    return ((check.phase == REPLICATION and not runs_replication(task))
            or (check.phase == DUMP and not runs_dump(task)))


def _run(check, ctx: CheckContext) -> list[CheckResult]:
    servers = {
        "server": [*ctx.sources.values(), ctx.target],
        "source": ctx.reachable_sources(),
        "servers": [*ctx.reachable_sources(), *([ctx.target] if ctx.target.reachable else [])],
        "target": [ctx.target] if ctx.target.reachable else [],
    }.get(check.scope)
    out = []
    for facts in ([None] if servers is None else servers):
        label = facts.label if facts is not None else None
        try:
            got = check(ctx, facts) if facts is not None else check(ctx)
        except Exception as e:  # noqa: BLE001 - a broken item must not hide the others
            log.exception("check item %s crashed", check.item)
            got = [failed(f"the check itself failed: {type(e).__name__}: {e}",
                          "report this as a shardflow bug; ignore-checking-items can skip the item meanwhile")]
        out += [replace(r, item=check.item, source=r.source if r.source is not None else label) for r in got]
    return out


def apply_ignores(results: list[CheckResult], ignore) -> list[CheckResult]:
    """Failures of ignored items become warnings tagged "(ignored)"."""
    names = {str(n).lower() for n in ignore}
    if not names:
        return list(results)
    out = []
    for r in results:
        if (r.state == FAIL and r.item not in NEVER_IGNORED
                and ("all" in names or r.item.lower() in names)):
            r = replace(r, state=WARN, message=f"{r.message} {IGNORED_TAG}", ignored=True)
        out.append(r)
    return out
