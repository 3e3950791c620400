"""DM task files (``task.yaml``), read unchanged, checked the way DM checks them.

A task file written for DM loads here as is: every key of DM's task-file reference is
known (deprecated ones included, so an old file still loads), anything else is an error
naming the key and its closest valid spelling. Checks follow DM's ``TaskConfig.adjust``:
rule names an instance refers to must exist, global rules no instance uses are rejected,
source ids are unique, a named unit config and an inline one for the same unit conflict,
the ``*-thread`` shortcuts override the unit config. DM's warnings (``meta`` unused in
``all`` mode, deprecated heartbeat keys, ...) land in ``TaskConfig.warnings``.

Every problem of a file is collected before one ``TaskConfigError`` lists them all.
Rule engines are compiled at load time (so a bad pattern is a config problem, not a
runtime surprise) and kept per instance: ``task.rules_for(source_id)``.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from dm_core.config import checks, inventory, rule_notes
from dm_core.config.decode import decode, load_yaml
from dm_core.config.instances import InstanceConfig, _RawInstance, build_instances
from dm_core.config.problems import ConfigProblem, Problems, TaskConfigError, closest, join
from dm_core.config.units import (DBConfig, LoaderConfig, MetaConfig, MydumperConfig, SyncerConfig, ValidatorConfig,
                                  check_db, check_loader, check_mydumper, check_syncer, check_validator,
                                  check_validators_agree)
from dm_core.errors import ErrorCode, Terminal
from dm_core.rules.binlog_filter import BinlogFilter, FilterRule, usable_rules
from dm_core.rules.block_allow import BAListRule, BlockAllowList
from dm_core.rules.column_mapping import ColumnMapper, ColumnMappingRule
from dm_core.rules.expression_filter import ExpressionFilter, ExprFilterRule
from dm_core.rules.patterns import RuleError
from dm_core.rules.router import RouteRule, TableRouter

log = logging.getLogger("shardflow.config")

__all__ = ["ConfigProblem", "TaskConfigError", "DBConfig", "MetaConfig", "MydumperConfig", "LoaderConfig",
           "SyncerConfig", "ValidatorConfig", "InstanceConfig", "InstanceRules", "TaskConfig", "parse_task",
           "load_task_file"]


# ---- the result -------------------------------------------------------------------------
@dataclass
class InstanceRules:
    """The compiled rule engines of one instance."""

    source_id: str
    block_allow: BlockAllowList
    router: TableRouter
    binlog_filter: BinlogFilter
    column_mapper: ColumnMapper
    expr_filter: ExpressionFilter


class UnknownSourceError(Terminal, KeyError):
    """A source id the task file has no instance for."""

    code = ErrorCode.CONFIG_INVALID
    __str__ = Exception.__str__


@dataclass
class TaskConfig:
    name: str
    task_mode: str                              # full | incremental | all | dump | load
    shard_mode: str | None = None               # None | pessimistic | optimistic
    meta_schema: str = "dm_meta"
    case_sensitive: bool = False
    timezone: str | None = None
    ignore_checking_items: list[str] = field(default_factory=list)
    target_database: DBConfig = field(default_factory=DBConfig)
    mysql_instances: list[InstanceConfig] = field(default_factory=list)
    routes: dict[str, RouteRule] = field(default_factory=dict)
    filters: dict[str, FilterRule] = field(default_factory=dict)
    block_allow_list: dict[str, BAListRule] = field(default_factory=dict)
    column_mappings: dict[str, ColumnMappingRule] = field(default_factory=dict)
    expression_filter: dict[str, ExprFilterRule] = field(default_factory=dict)
    source_file: str | None = None
    raw: dict = field(default_factory=dict, repr=False)      # the parsed YAML (may hold a password)
    strict_optimistic_shard_mode: bool = False
    online_ddl: bool = False
    shadow_table_rules: list[str] = field(default_factory=lambda: list(checks.DEFAULT_SHADOW_TABLE_RULES))
    trash_table_rules: list[str] = field(default_factory=lambda: list(checks.DEFAULT_TRASH_TABLE_RULES))
    collation_compatible: str = "loose"
    clean_dump_file: bool = True
    mydumpers: dict[str, MydumperConfig] = field(default_factory=dict)
    loaders: dict[str, LoaderConfig] = field(default_factory=dict)
    syncers: dict[str, SyncerConfig] = field(default_factory=dict)
    validators: dict[str, ValidatorConfig] = field(default_factory=dict)
    warnings: list[ConfigProblem] = field(default_factory=list, repr=False)
    _rules: dict[str, InstanceRules] = field(default_factory=dict, repr=False, compare=False)

    def instance(self, source_id: str) -> InstanceConfig:
        for inst in self.mysql_instances:
            if inst.source_id == source_id:
                return inst
        raise UnknownSourceError(
            f"task {self.name!r} has no mysql-instance with source-id {source_id!r} "
            f"(it has: {', '.join(i.source_id for i in self.mysql_instances)})",
            workaround="Add the source to the task file's mysql-instances, or use one of the source ids listed.")

    def rules_for(self, source_id: str) -> InstanceRules:
        got = self._rules.get(source_id)
        if got is None:
            got = self._rules[source_id] = _instance_rules(self, self.instance(source_id))
        return got

    def with_source_filters(self, source_id: str, filters: list) -> InstanceRules:
        """The instance's rules with a source file's ``filters`` (FilterRule or their dicts) added
        after the task's, as DM does; a source rule for patterns a task rule has already is dropped."""
        rules = self.rules_for(source_id)
        mine = [self.filters[n] for n in self.instance(source_id).filter_rules if n in self.filters]
        taken = {(r.schema_pattern, r.table_pattern) for r in mine}
        extra = [f if isinstance(f, FilterRule) else FilterRule(**{k.replace("-", "_"): v for k, v in f.items()})
                 for f in filters]
        extra = [f for f in extra if (f.schema_pattern, f.table_pattern) not in taken]
        extra, left_out = usable_rules(extra)
        for _, rule, event in left_out:     # as DM: logged and left out, the task goes on
            log.warning("source %s: binlog filter rule (%r, %r) names event type %r, which DM does not know: "
                        "the rule is left out, as DM leaves it out", source_id, rule.schema_pattern,
                        rule.table_pattern, event)
        if not extra:
            return rules
        return dataclasses.replace(rules, binlog_filter=BinlogFilter(mine + extra, self.case_sensitive))


def _instance_rules(task: TaskConfig, inst: InstanceConfig) -> InstanceRules:
    cs = task.case_sensitive
    ba = BlockAllowList(task.block_allow_list.get(inst.block_allow_list) if inst.block_allow_list else None, cs,
                        meta_schema=task.meta_schema)
    if task.online_ddl:  # gh-ost / pt-osc tables never move themselves (dm_core/sync/online_ddl.py)
        from dm_core.sync.online_ddl import OnlineBlockAllow, kinds_of

        ba = OnlineBlockAllow(ba, kinds_of(task))
    return InstanceRules(
        inst.source_id,
        ba,
        TableRouter([task.routes[n] for n in inst.route_rules], cs),
        BinlogFilter([task.filters[n] for n in inst.filter_rules if n in task.filters], cs),
        ColumnMapper([task.column_mappings[n] for n in inst.column_mapping_rules], cs),
        ExpressionFilter([task.expression_filter[n] for n in inst.expression_filters], cs),
    )


# ---- what the YAML may hold ---------------------------------------------------------------

@dataclass
class _Experimental:
    async_checkpoint_flush: bool = False


@dataclass
class _RawTask:
    name: str = ""
    task_mode: str = ""
    is_sharding: bool = False                       # legacy: true means shard-mode pessimistic
    shard_mode: str = ""
    strict_optimistic_shard_mode: bool = False
    meta_schema: str = ""
    timezone: str = ""
    case_sensitive: bool = False
    online_ddl: bool = False
    online_ddl_scheme: str = ""                     # deprecated: pt | gh-ost
    shadow_table_rules: list[str] = field(default_factory=list)
    trash_table_rules: list[str] = field(default_factory=list)
    clean_dump_file: bool = True
    collation_compatible: str = field(default="", metadata={"yaml": "collation_compatible"})
    ignore_checking_items: list[str] = field(default_factory=list)
    enable_heartbeat: bool = False                  # deprecated
    heartbeat_update_interval: int = 1              # deprecated
    heartbeat_report_interval: int = 10             # deprecated
    ansi_quotes: bool = False                       # deprecated
    remove_meta: bool = False                       # deprecated
    experimental: _Experimental | None = None
    target_database: DBConfig | None = None


# top-level key -> (record class, what an instance refers to it with)
_MAPS: dict[str, tuple[type, str]] = {
    "routes": (RouteRule, "route-rules"),
    "filters": (FilterRule, "filter-rules"),
    "block-allow-list": (BAListRule, "block-allow-list"),
    "black-white-list": (BAListRule, "black-white-list"),
    "column-mappings": (ColumnMappingRule, "column-mapping-rules"),
    "expression-filter": (ExprFilterRule, "expression-filters"),
    "mydumpers": (MydumperConfig, "mydumper-config-name"),
    "loaders": (LoaderConfig, "loader-config-name"),
    "syncers": (SyncerConfig, "syncer-config-name"),
    "validators": (ValidatorConfig, "continuous-validator-config-name"),
}

_ENGINES: dict[str, tuple[Callable[[list, bool], Any], str]] = {
    "routes": (TableRouter, "a route needs schema-pattern and target-schema; see DM's table routing reference"),
    "filters": (BinlogFilter, "see DM's binlog event filter reference for events and actions"),
    "block-allow-list": (lambda rules, cs: BlockAllowList(rules[0], cs), "see DM's block & allow list reference"),
    "black-white-list": (lambda rules, cs: BlockAllowList(rules[0], cs), "see DM's block & allow list reference"),
    "column-mappings": (ColumnMapper, "see DM's column mapping reference"),
    "expression-filter": (ExpressionFilter, "see DM's expression filter reference"),
}

_UNIT_CHECKS = {"mydumpers": check_mydumper, "loaders": check_loader, "syncers": check_syncer,
                "validators": check_validator}


def _decode_map(key: str, data: Any, problems: Problems, cs: bool) -> tuple[dict, set[str]]:
    """(good entries, names of entries that are defined but broken) of one top-level map."""
    cls, _ = _MAPS[key]
    if data is None:
        return {}, set()
    if not isinstance(data, dict):
        problems.add(key, "expected a mapping of names to entries", f"write `{key}:` then `  NAME:` entries under it")
        return {}, set()
    good, bad = {}, set()
    for name, body in data.items():
        path = join(key, str(name))
        n = len(problems)
        item = decode(cls, body, path, problems)
        if item is not None and cls is ExprFilterRule:
            item = dataclasses.replace(item, name=str(name))
        if item is not None and key in _UNIT_CHECKS:
            _UNIT_CHECKS[key](item, path, problems, *((body,) if key == "loaders" else ()))
        if item is not None and key == "filters" and _unknown_events(item, path, problems):
            bad.add(str(name))  # not used, as in DM; a warning, not a problem (see _unknown_events)
            continue
        if item is not None and key in _ENGINES:
            build, fix = _ENGINES[key]
            try:
                build([item], cs)
            except RuleError as e:
                problems.add(join(path, e.key) if e.key else path, e.reason, e.fix or fix)
        if item is None or len(problems) > n:
            bad.add(str(name))
        else:
            good[str(name)] = item
    return good, bad


def _unknown_events(rule: FilterRule, path: str, problems: Problems) -> bool:
    """A binlog filter rule naming an event type DM does not know (``truncate`` for ``truncate
    table``): DM accepts the task, logs "invalid binlog event rule" and leaves the whole rule out,
    so the rule filters nothing there. The same here, said as a warning naming the event."""
    from dm_core.rules.binlog_filter import EVENT_TYPES, normalize_event, unknown_events

    unknown = unknown_events(rule)
    if not unknown:
        return False
    i, e = unknown[0]
    problems.warn(join(path, f"events[{i}]"),
                  f"unknown event type {e!r}: as in DM, a rule with an event type DM does not know is left out "
                  f"whole, so this rule filters nothing (none of its events)",
                  closest(normalize_event(e), sorted(EVENT_TYPES - {""}), "an event type such as"))
    return True


# ---- parsing ------------------------------------------------------------------------------
def parse_task(text: str, filename: str = "<task>", *, expand_env: bool = True) -> TaskConfig:
    """Parse and check a DM task file; TaskConfigError lists every problem found.

    ``expand_env=False``: ``${ENV}`` references (the target password) stay unexpanded, for
    commands that need no credentials (stop, pause, resume, query-status, shard-ddl-lock):
    they work in a shell without the variables. Such a task must not be used to connect.
    """
    problems = Problems(filename)
    data = load_yaml(text, problems)
    problems.raise_if_any(TaskConfigError)
    if not isinstance(data, dict):
        problems.add("(top level)", "the task file must be a mapping of keys", "start from DM's task file template")
        raise TaskConfigError(problems.items)
    raw = decode(_RawTask, data, "", problems, also=tuple(_MAPS) + ("mysql-instances",))
    task = _build(raw, data, problems, filename, expand_env)
    inventory.review(_RawTask, data, "", problems, maps={**{k: cls for k, (cls, _) in _MAPS.items()},
                                                         "mysql-instances": _RawInstance})
    problems.raise_if_any(TaskConfigError)
    task.warnings = problems.warnings
    return task


def load_task_file(path, *, expand_env: bool = True) -> TaskConfig:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TaskConfigError([ConfigProblem(str(p), "(file)", f"cannot read the file: {e}",
                                             "check the path and that the file is readable UTF-8")]) from None
    task = parse_task(text, str(p), expand_env=expand_env)
    task.source_file = str(p)
    return task


def _build(raw: _RawTask, data: dict, problems: Problems, filename: str, expand_env: bool = True) -> TaskConfig:
    cs = raw.case_sensitive
    if not raw.name:
        problems.add("name", "missing", "add `name: NAME`, unique among your tasks")
    if not raw.task_mode:
        problems.add("task-mode", "missing", f"add `task-mode:` with one of: {', '.join(checks.TASK_MODES)}")
    else:
        checks.check_choice(raw.task_mode, checks.TASK_MODES, "task-mode", problems)
    shard_mode = raw.shard_mode or ("pessimistic" if raw.is_sharding else None)
    # DM's dmctl refuses files where the two keys say different things (is-sharding: false with a
    # shard-mode, or an explicit empty shard-mode with is-sharding: true) rather than pick one
    if ("is-sharding" in data and not raw.is_sharding and raw.shard_mode) or (
            "shard-mode" in data and not raw.shard_mode and raw.is_sharding):
        problems.add("is-sharding", f"is {str(raw.is_sharding).lower()} while shard-mode is "
                     f"{raw.shard_mode or 'empty'}: the behaviour of `is-sharding` and `shard-mode` is conflicting",
                     "`is-sharding` is deprecated, please use `shard-mode` only.")
    if raw.shard_mode:
        checks.check_choice(raw.shard_mode, checks.SHARD_MODES, "shard-mode", problems)
    if raw.strict_optimistic_shard_mode and shard_mode != "optimistic":
        problems.warn("strict-optimistic-shard-mode", "has no effect unless shard-mode is optimistic", "remove it")
    online_ddl = raw.online_ddl
    if raw.online_ddl_scheme:
        checks.check_choice(raw.online_ddl_scheme, checks.ONLINE_DDL_SCHEMES, "online-ddl-scheme", problems)
        online_ddl = True
        problems.warn("online-ddl-scheme", "is deprecated", "write `online-ddl: true` instead")
    collation = raw.collation_compatible or "loose"
    checks.check_choice(collation, checks.COLLATION_MODES, "collation_compatible", problems)
    checks.check_checking_items(raw.ignore_checking_items, "ignore-checking-items", problems)
    checks.check_regexps(raw.shadow_table_rules, "shadow-table-rules", problems)
    checks.check_regexps(raw.trash_table_rules, "trash-table-rules", problems)
    if raw.timezone:
        checks.check_timezone(raw.timezone, "timezone", problems)
    for k in ("heartbeat-update-interval", "heartbeat-report-interval"):
        if getattr(raw, k.replace("-", "_")) <= 0:
            problems.add(k, "must be positive", "remove it (heartbeat is deprecated)")

    target = raw.target_database
    if target is None:
        if "target-database" not in data:
            problems.add("target-database", "missing", "add `target-database:` with host, port, user and password")
        target = DBConfig()
    else:
        check_db(target, "target-database", problems, data["target-database"], expand=expand_env)

    maps, broken = {}, {}
    for key in _MAPS:
        maps[key], broken[key] = _decode_map(key, data.get(key), problems, cs)
    rule_notes.review(maps, cs, problems)
    legacy = (maps["black-white-list"] or broken["black-white-list"]) and not (maps["block-allow-list"] or broken["block-allow-list"])
    ba_key = "black-white-list" if legacy else "block-allow-list"
    if maps["block-allow-list"] and maps["black-white-list"]:
        problems.warn("black-white-list", "is ignored because block-allow-list is set", "merge it into block-allow-list")

    instances, used = build_instances(raw.task_mode, data.get("mysql-instances"), maps, broken, ba_key, problems)
    check_validators_agree(instances, problems)
    for key, (_, ref) in _MAPS.items():
        if key in ("block-allow-list", "black-white-list") and key != ba_key:
            continue        # the legacy list is ignored when block-allow-list is set (warned above)
        for name in list(maps[key]) + sorted(broken[key]):
            if not used[(key, name)]:
                problems.add(join(key, name), "defined but no mysql-instance uses it (DM rejects unused global configs)",
                             f"reference it with `{ref}` in an instance, or delete it")
    if raw.task_mode in ("all", "full"):
        for name in sorted({n for i in instances for n in i.expression_filters}):
            rule = maps["expression-filter"].get(name)
            if rule is not None and rule.insert_value_expr:
                problems.warn(join(join("expression-filter", name), "insert-value-expr"),
                              "filters binlog rows only, as in DM: the full phase copies every row of the table, "
                              "including rows this expression would drop",
                              "delete those rows upstream before the full phase, or accept them downstream "
                              "(validation counts them as filtered, not as differences)")
    task = TaskConfig(
        name=raw.name, task_mode=raw.task_mode, shard_mode=shard_mode, meta_schema=raw.meta_schema or "dm_meta",
        case_sensitive=cs, timezone=raw.timezone or None, ignore_checking_items=raw.ignore_checking_items,
        target_database=target, mysql_instances=instances, routes=maps["routes"], filters=maps["filters"],
        block_allow_list=maps[ba_key], column_mappings=maps["column-mappings"],
        expression_filter=maps["expression-filter"], source_file=None,
        raw=data, strict_optimistic_shard_mode=raw.strict_optimistic_shard_mode, online_ddl=online_ddl,
        shadow_table_rules=raw.shadow_table_rules or list(checks.DEFAULT_SHADOW_TABLE_RULES),
        trash_table_rules=raw.trash_table_rules or list(checks.DEFAULT_TRASH_TABLE_RULES),
        collation_compatible=collation, clean_dump_file=raw.clean_dump_file, mydumpers=maps["mydumpers"],
        loaders=maps["loaders"], syncers=maps["syncers"], validators=maps["validators"])
    _check_foreign_key_options(task, problems)
    _settle_merging_defaults(task)
    if not problems.items:
        _compile_instances(task, problems)
    return task


def _check_foreign_key_options(task: TaskConfig, problems: Problems) -> None:
    """DM's CheckForeignKeyChecksSyncerOptions: with foreign key checks on downstream, rows must
    reach it one statement per change in binlog order (parents before children), which `compact`
    and `multiple-rows` give up."""
    from dm_core.sources import foreign_key_checks

    if not foreign_key_checks(task.target_database.session):
        return
    for name, cfg in task.syncers.items():
        for key, on in (("compact", cfg.compact), ("multiple-rows", cfg.multiple_rows)):
            if on:
                problems.add(join(join("syncers", name), key),
                             f"`{key}` is not supported when foreign_key_checks=1 (target-database.session)",
                             "disable `foreign_key_checks`, or disable this syncer option in the task file")


def _settle_merging_defaults(task: TaskConfig) -> None:
    """`compact` and `multiple-rows` left unset are on, unless foreign key checks are on downstream.

    DM's defaults are off: every change of a row, one statement each. Merged changes leave the
    same rows (tests/unit/test_sync_merger.py, tests/integration/test_sync_merger_apply.py) for
    about half the downstream's CPU: with DM's defaults the sync ran 0.62x as fast as with the
    recommended tuning (docs/benchmarks.md, "incremental"). With foreign_key_checks=1 DM refuses
    both, so unset stays off there."""
    from dm_core.sources import foreign_key_checks

    default = not foreign_key_checks(task.target_database.session)
    for cfg in [*task.syncers.values(), *(i.syncer for i in task.mysql_instances)]:
        if cfg is None:
            continue
        if cfg.compact is None:
            cfg.compact = default
        if cfg.multiple_rows is None:
            cfg.multiple_rows = default


def _compile_instances(task: TaskConfig, problems: Problems) -> None:
    """Build each instance's engines now: rules that only clash together (same patterns) show up here."""
    for i, inst in enumerate(task.mysql_instances):
        p = f"mysql-instances[{i}]"
        cs = task.case_sensitive
        for key, build, names, rules in (("route-rules", TableRouter, inst.route_rules, task.routes),
                                         ("filter-rules", BinlogFilter, inst.filter_rules, task.filters),
                                         ("column-mapping-rules", ColumnMapper, inst.column_mapping_rules, task.column_mappings)):
            try:
                build([rules[n] for n in names if n in rules], cs)  # a filter rule left out is not in `filters`
            except RuleError as e:
                problems.add(join(p, key), f"these rules cannot be used together: {e.reason}",
                             "give the rules of one instance different schema-pattern/table-pattern pairs")
        if not problems.items:
            task._rules[inst.source_id] = _instance_rules(task, inst)
