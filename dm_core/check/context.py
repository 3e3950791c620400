"""What every check item sees: the task, each server's facts, and the sharding groups.

Check items are plain functions tagged with ``@item(name, scope=..., phase=...)``:

- scope ``"server"``: called once per server, reachable or not (only ``connection``);
- scope ``"source"``: once per reachable source, as ``fn(ctx, facts)``;
- scope ``"servers"``: once per reachable source and for the reachable target;
- scope ``"target"``: once for the reachable target;
- scope ``"task"``: once, as ``fn(ctx)`` (items across sources: sharding groups).

``phase`` says which part of the migration needs the item: ``"replication"`` items are
skipped unless the task replicates (task-mode incremental, all), ``"dump"`` items unless it
reads the upstream tables (task-mode full, all, dump).

An item returns a list of ``CheckResult`` built with ``passed``/``warned``/``failed``;
the runner fills in the item name and, unless the item chose one, the server label.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property

from dm_core.check.probe import ServerFacts, TableInfo, probe
from dm_core.check.result import FAIL, PASS, WARN, CheckResult
from dm_core.db import Endpoint

REPLICATION, DUMP = "replication", "dump"


def runs_replication(task) -> bool:
    """Whether the task reads the binlog (task-mode incremental or all)."""
    return task.task_mode in ("incremental", "all")


def runs_dump(task) -> bool:
    """Whether the task reads the upstream tables (task-mode full, all, or DM's dump)."""
    return task.task_mode in ("full", "all", "dump")


def item(name: str, *, scope: str, phase: str | None = None):
    """Tag a function as the check item ``name`` (DM's name where DM has one)."""
    assert scope in ("server", "source", "servers", "target", "task"), scope
    assert phase in (None, REPLICATION, DUMP), phase

    def deco(fn):
        fn.item, fn.scope, fn.phase = name, scope, phase
        return fn

    return deco


def passed(message: str, *, table: str | None = None, source: str | None = None) -> CheckResult:
    return CheckResult("", PASS, source, table, message, "")


def warned(message: str, fix: str = "", *, table: str | None = None, source: str | None = None) -> CheckResult:
    return CheckResult("", WARN, source, table, message, fix)


def failed(message: str, fix: str = "", *, table: str | None = None, source: str | None = None) -> CheckResult:
    return CheckResult("", FAIL, source, table, message, fix)


def undetermined(facts: ServerFacts, what: str, fact: str) -> CheckResult:
    """A warning for an item whose input could not be read."""
    why = facts.errors.get(fact, "not read")
    return warned(f"cannot determine {what}: {why}",
                  f"let user '{facts.user}' read it, or check by hand")


@dataclass
class CheckContext:
    task: object                                   # dm_core.config.task.TaskConfig
    sources: dict[str, ServerFacts]                # source-id -> facts, in task order
    target: ServerFacts
    endpoints: dict[str, Endpoint] = field(default_factory=dict, repr=False)
    start_times: dict[str, str] = field(default_factory=dict)   # source-id -> start-task --start-time

    @classmethod
    def gather(cls, task, sources: dict[str, Endpoint], target: Endpoint) -> "CheckContext":
        """Probe every source and the target in parallel (one connection each)."""
        jobs, shadows = {}, {}
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(task.mysql_instances) + 1))) as ex:
            for inst in task.mysql_instances:
                sid = inst.source_id
                ep = sources.get(sid)
                if ep is None:
                    continue
                rules = task.rules_for(sid)
                shadows[sid] = []
                allow = _noting_shadows(task, rules.block_allow, shadows[sid]) if getattr(task, "online_ddl", False) \
                    else rules.block_allow.allow_table
                jobs[sid] = ex.submit(probe, sid, ep, allow_table=allow,
                                      want_binary_logs=_wants_binary_logs(task, inst),
                                      want_gtid=_wants_gtid(task, inst))
            tjob = ex.submit(probe, "target", target, downstream=True)
            facts = {}
            for inst in task.mysql_instances:
                sid = inst.source_id
                if sid in jobs:
                    facts[sid] = jobs[sid].result()
                    facts[sid].shadow_tables = shadows[sid]
                else:
                    facts[sid] = ServerFacts(label=sid, address="?", connect_error=(
                        f"no connection settings for source {sid!r}: register it with `dmctl operate-source create`"))
            tfacts = tjob.result()
        ctx = cls(task, facts, tfacts, dict(sources))
        for sid, f in facts.items():
            for t in f.tables or ():
                _apply_rules(task.rules_for(sid), t)
        # target tables that exist already: they must hold extend columns and the upstream's text
        routed = {(t.target[0].lower(), t.target[1].lower()) for f in facts.values() for t in f.tables or ()}
        if routed and tfacts.reachable:
            tfacts.tables = probe("target", target, downstream=True,
                                  allow_table=lambda s, t: (s.lower(), t.lower()) in routed).tables
        return ctx

    def instance(self, source_id: str):
        return next(i for i in self.task.mysql_instances if i.source_id == source_id)

    def reachable_sources(self) -> list[ServerFacts]:
        return [f for f in self.sources.values() if f.reachable]

    @cached_property
    def targets(self) -> dict[tuple[str, str], list[TableInfo]]:
        """Every target table with the upstream tables routed into it (keys lower-cased)."""
        out: dict[tuple[str, str], list[TableInfo]] = {}
        for f in self.reachable_sources():
            for t in f.tables or ():
                out.setdefault((t.target[0].lower(), t.target[1].lower()), []).append(t)
        return out

    @property
    def groups(self) -> dict[tuple[str, str], list[TableInfo]]:
        """Sharding groups: target tables fed by more than one upstream table."""
        return {k: v for k, v in self.targets.items() if len(v) > 1}

    def target_schemas(self) -> list[str]:
        seen: dict[str, str] = {}
        for members in self.targets.values():
            for t in members:
                seen.setdefault(t.target[0].lower(), t.target[0])
        return sorted(seen.values())


def _noting_shadows(task, block_allow, found: list):
    """The source's allow_table, noting on the way the online DDL tools' shadow tables whose real
    table it selects (the ``online_ddl`` item: a tool is running, or left them behind)."""
    from dm_core.sync.online_ddl import SHADOW, kinds_of

    kinds, inner = kinds_of(task), getattr(block_allow, "inner", block_allow)

    def allow(schema: str, table: str) -> bool:
        if kinds.kind(table) == SHADOW and inner.allow_table(schema, kinds.real_name(table)):
            found.append((schema, table, kinds.real_name(table)))
        return block_allow.allow_table(schema, table)

    return allow


def _wants_binary_logs(task, inst) -> bool:
    meta = getattr(inst, "meta", None)
    return (task.task_mode == "incremental" and meta is not None
            and bool(getattr(meta, "binlog_name", None)) and not getattr(meta, "binlog_gtid", None))


def _wants_gtid(task, inst) -> tuple[str, int] | None:
    """A meta the sync starts from by GTID (binlog-gtid without binlog-name): the state, and a
    server id for the probe's binlog client (not the task's reader's: the server would end
    a live reader that shares its id)."""
    from dm_core.sources import replica_server_id

    meta = getattr(inst, "meta", None)
    if task.task_mode != "incremental" or meta is None or getattr(meta, "binlog_name", None) \
            or not getattr(meta, "binlog_gtid", None):
        return None
    return meta.binlog_gtid, replica_server_id(f"{task.name}/precheck", inst.source_id)


def _apply_rules(rules, t: TableInfo) -> None:
    """Route the table and plan its column mapping; a rule that does not fit is recorded."""
    t.target = (t.schema, t.table)
    try:
        t.target = tuple(rules.router.route(t.schema, t.table))
        t.extract_columns = list(rules.router.extract_columns(t.schema, t.table) or ())
        plan = rules.column_mapper.plan(t.schema, t.table, [c.name for c in t.columns])
        t.mapped_columns = mapped_columns(plan)
        bound = rules.expr_filter.compile(t.schema, t.table, [c.name for c in t.columns])
        t.expr_unknown = list(bound.unknown_columns) if bound is not None else []
    except Exception as e:  # noqa: BLE001 - e.g. a column mapping naming a missing column
        t.rule_error = getattr(e, "message", None) or str(e)


def mapped_columns(plan) -> set[str]:
    """Names of the columns a column-mapping plan rewrites (lower-cased)."""
    if plan is None:
        return set()
    return {str(tr.column).lower() for tr in getattr(plan, "transforms", ()) or () if getattr(tr, "column", None)}
