"""``mysql-instances`` of a task file: one entry per upstream source, checked as DM's
``MySQLInstance.VerifyAndAdjust`` and ``TaskConfig.adjust`` do.

Rule names must exist in the global maps; a named unit config (``syncer-config-name``) is
copied, not shared, and conflicts with an inline section (``syncer:``) for the same unit;
the thread shortcuts (``syncer-thread``...) override the copied value. ``meta`` needs a
binlog name or GTID; it is only used by incremental tasks (DM warns otherwise).
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from dm_core.config.decode import decode
from dm_core.config.problems import Problems, closest, join
from dm_core.config.units import (LoaderConfig, MetaConfig, MydumperConfig, SyncerConfig, ValidatorConfig,
                                  check_loader, check_meta, check_mydumper, check_syncer, check_validator)


@dataclass
class InstanceConfig:
    """One entry of ``mysql-instances``, with rule names resolved and unit configs merged."""

    source_id: str
    meta: MetaConfig | None = None
    route_rules: list[str] = field(default_factory=list)
    filter_rules: list[str] = field(default_factory=list)
    block_allow_list: str | None = None
    column_mapping_rules: list[str] = field(default_factory=list)
    expression_filters: list[str] = field(default_factory=list)
    mydumper: MydumperConfig = field(default_factory=MydumperConfig)
    loader: LoaderConfig = field(default_factory=LoaderConfig)
    syncer: SyncerConfig = field(default_factory=SyncerConfig)
    validator: ValidatorConfig = field(default_factory=ValidatorConfig)


@dataclass
class _RawInstance:
    source_id: str = ""
    meta: MetaConfig | None = None
    route_rules: list[str] = field(default_factory=list)
    filter_rules: list[str] = field(default_factory=list)
    column_mapping_rules: list[str] = field(default_factory=list)
    expression_filters: list[str] = field(default_factory=list)
    block_allow_list: str = ""
    black_white_list: str = ""                      # legacy name of block-allow-list
    mydumper_config_name: str = ""
    mydumper: MydumperConfig | None = None
    mydumper_thread: int = 0
    loader_config_name: str = ""
    loader: LoaderConfig | None = None
    loader_thread: int = 0
    syncer_config_name: str = ""
    syncer: SyncerConfig | None = None
    syncer_thread: int = 0
    continuous_validator_config_name: str = ""
    validator_config_name: str = ""
    continuous_validator: ValidatorConfig | None = None


_REF_LISTS = (("route_rules", "routes", "route"), ("filter_rules", "filters", "filter rule"),
              ("column_mapping_rules", "column-mappings", "column mapping"),
              ("expression_filters", "expression-filter", "expression filter"))


class _Unit(NamedTuple):
    """A unit an instance configures by name, inline or by default, plus its thread shortcut."""

    name: str               # the instance's key (``syncer``; ``syncer-config-name``, ``syncer-thread``)
    key: str                # the global map of named configs (``syncers``)
    cls: type               # its config class (the default when nothing is given)
    check: Callable         # checks an inline section
    thread_attr: str        # the config field ``<unit>-thread`` sets


@dataclass
class _Refs:
    """The task's global maps a reference by name resolves in, and what was found."""

    maps: dict              # global map → name → config
    broken: dict            # global map → names whose entry had problems (not reported again)
    used: Counter           # (global map, name) → references
    problems: Problems


_UNITS = (_Unit("mydumper", "mydumpers", MydumperConfig, check_mydumper, "threads"),
          _Unit("loader", "loaders", LoaderConfig, check_loader, "pool_size"),
          _Unit("syncer", "syncers", SyncerConfig, check_syncer, "worker_count"))


def build_instances(task_mode: str, data: Any, maps: dict, broken: dict, ba_key: str,
                    problems: Problems) -> tuple[list[InstanceConfig], Counter]:
    """The instances, and how often each (global map, name) is referenced."""
    if data is None or data == []:
        problems.add("mysql-instances", "missing: a task needs at least one instance",
                     "add `mysql-instances:` with `- source-id: ...` entries")
        return [], Counter()
    if not isinstance(data, list):
        problems.add("mysql-instances", "expected a list of instances", "write one `- source-id: ...` entry per source")
        return [], Counter()
    used: Counter = Counter()
    seen: dict[str, int] = {}
    out = []
    for i, body in enumerate(data):
        p = f"mysql-instances[{i}]"
        ri = decode(_RawInstance, body, p, problems)
        if ri is None:
            continue
        if not ri.source_id:
            problems.add(join(p, "source-id"), "missing", "add `source-id:` naming a source created with operate-source")
        elif ri.source_id in seen:
            problems.add(join(p, "source-id"), f"source-id {ri.source_id!r} is already used by mysql-instances[{seen[ri.source_id]}]",
                         "give each source one instance; put all its rules in that instance")
        else:
            seen[ri.source_id] = i
        _check_meta(task_mode, ri, p, problems)
        for attr, key, what in _REF_LISTS:
            for k, name in enumerate(getattr(ri, attr)):
                used[(key, name)] += 1
                if name not in maps[key] and name not in broken[key]:
                    problems.add(f"{p}.{attr.replace('_', '-')}[{k}]", f"no {what} named {name!r} in `{key}`",
                                 _ref_fix(name, maps[key], key))
        ba = ri.block_allow_list or ri.black_white_list or None
        if ba:
            used[(ba_key, ba)] += 1
            if ba not in maps[ba_key] and ba not in broken[ba_key]:
                k = "block-allow-list" if ri.block_allow_list else "black-white-list"
                problems.add(join(p, k), f"no block & allow list named {ba!r} in `{ba_key}`",
                             _ref_fix(ba, maps[ba_key], ba_key))
        refs = _Refs(maps, broken, used, problems)
        units = {u.name: _unit(ri, p, body, u, refs) for u in _UNITS}
        vname = ri.continuous_validator_config_name or ri.validator_config_name
        validator = ValidatorConfig()
        if vname:
            used[("validators", vname)] += 1
            if vname in maps["validators"]:
                validator = copy.deepcopy(maps["validators"][vname])
            elif vname not in broken["validators"]:
                k = "continuous-validator-config-name" if ri.continuous_validator_config_name else "validator-config-name"
                problems.add(join(p, k), f"no validator config named {vname!r} in `validators`",
                             _ref_fix(vname, maps["validators"], "validators"))
        elif ri.continuous_validator is not None:
            validator = ri.continuous_validator
            check_validator(validator, join(p, "continuous-validator"), problems)
        out.append(InstanceConfig(
            source_id=ri.source_id, meta=ri.meta, route_rules=ri.route_rules, filter_rules=ri.filter_rules,
            block_allow_list=ba, column_mapping_rules=ri.column_mapping_rules,
            expression_filters=ri.expression_filters, validator=validator, **units))
    return out, used


def _ref_fix(name: str, defined, key: str) -> str:
    if not defined:
        return f"define `{key}.{name}`, or remove the reference"
    return closest(name, defined, f"a name defined in `{key}`")


def _check_meta(mode: str, ri: _RawInstance, p: str, problems: Problems) -> None:
    if ri.meta is not None:
        check_meta(ri.meta, join(p, "meta"), problems)
        if mode in ("full", "all", "dump", "load"):
            problems.warn(join(p, "meta"), f"is not used in task-mode {mode} (the dump's own position is)",
                          "remove it, or use task-mode incremental")
    elif mode == "incremental":
        problems.warn(join(p, "meta"), "not set: replication starts at the checkpoint, else at the upstream's current position",
                      "set meta to start from a known binlog position")


def _unit(ri: _RawInstance, p: str, body, u: _Unit, refs: _Refs):
    """One unit config of an instance: named (copied) or inline or default, then the thread shortcut."""
    unit, key, problems = u.name, u.key, refs.problems
    cname = getattr(ri, f"{unit}_config_name")
    inline = getattr(ri, unit)
    cfg = None
    if cname and inline is not None:
        problems.add(join(p, f"{unit}-config-name"), f"set together with an inline `{unit}` section",
                     f"keep one of {unit}-config-name and {unit}")
    if cname:
        refs.used[(key, cname)] += 1
        if cname in refs.maps[key]:
            cfg = copy.deepcopy(refs.maps[key][cname])
        elif cname not in refs.broken[key]:
            problems.add(join(p, f"{unit}-config-name"), f"no {unit} config named {cname!r} in `{key}`",
                         _ref_fix(cname, refs.maps[key], key))
    elif inline is not None:
        cfg = inline
        u.check(cfg, join(p, unit), problems,
                *((body.get(unit) if isinstance(body, dict) else None,) if unit == "loader" else ()))
    cfg = cfg if cfg is not None else u.cls()
    threads = getattr(ri, f"{unit}_thread")
    if threads < 0:
        problems.add(join(p, f"{unit}-thread"), f"must not be negative, got {threads}", "use a positive number, or remove it")
    elif threads > 0:
        setattr(cfg, u.thread_attr, threads)
    return cfg
