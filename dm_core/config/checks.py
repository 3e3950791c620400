"""Value checks of the task file's global keys that DM performs in ``TaskConfig.adjust``."""

from __future__ import annotations

import re

from dm_core.config.problems import Problems, closest
from dm_core.rules.re2 import compile_go

TASK_MODES = ("full", "incremental", "all", "dump", "load")
SHARD_MODES = ("pessimistic", "optimistic")
ONLINE_DDL_SCHEMES = ("pt", "gh-ost")
COLLATION_MODES = ("loose", "strict")

# DM's check items that `ignore-checking-items` may name (dm/config/checking_item.go: its
# AllCheckingItems and AdditionalCheckingItems). Items shardflow does not run (physical import's
# region and TiKV checks, primary_key) are accepted and have nothing to ignore.
CHECKING_ITEMS = (
    "all", "dump_privilege", "replication_privilege", "version", "server_id", "binlog_enable",
    "binlog_format", "binlog_row_image", "table_schema", "schema_of_shard_tables", "auto_increment_ID",
    "online_ddl", "binlog_db", "meta_position", "conn_number", "target_privilege",
    "empty_region", "region_distribution", "downstream_version", "free_space", "downstream_mutex_features",
    "downstream_table_empty", "primary_key",
    # shardflow's own: row events must carry column names, and be neither compressed nor partial;
    # a TiDB downstream creates many tables in batches (check/table_creation.py)
    "binlog_row_metadata", "binlog_compression", "target_table_creation",
)

# gh-ost / pt-osc shadow and trash tables, DM's defaults.
DEFAULT_SHADOW_TABLE_RULES = ["^_(.+)_(?:new|gho)$"]
DEFAULT_TRASH_TABLE_RULES = ["^_(.+)_(?:ghc|del|old)$"]

_OFFSET = re.compile(r"^([+-])(\d{1,2}):(\d{2})$")


def check_timezone(tz: str, key: str, problems: Problems) -> None:
    """DM's ParseTimeZone: "SYSTEM", an IANA name, or an offset within [-12:59, +14:00]."""
    if tz.upper() in ("SYSTEM", "LOCAL", "UTC"):
        return
    m = _OFFSET.match(tz)
    if m:
        minutes = int(m.group(2)) * 60 + int(m.group(3))
        if int(m.group(3)) < 60 and (minutes <= 14 * 60 if m.group(1) == "+" else minutes <= 12 * 60 + 59):
            return
    else:
        import zoneinfo

        try:
            zoneinfo.ZoneInfo(tz)
            return
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            if not zoneinfo.available_timezones():    # no tz database here: cannot judge
                return
    problems.add(key, f"unknown time zone {tz!r}", "use an IANA name such as \"Asia/Shanghai\", an offset such "
                 "as \"+08:00\", or remove it to use the target's time zone")


def check_checking_items(items: list[str], key: str, problems: Problems) -> None:
    for i, item in enumerate(items):
        if item not in CHECKING_ITEMS:
            problems.add(f"{key}[{i}]", f"unknown checking item {item!r}", closest(item, CHECKING_ITEMS))


def check_regexps(rules: list[str], key: str, problems: Problems) -> None:
    """DM compiles these with Go: what Go (RE2) refuses is a problem here too."""
    for i, r in enumerate(rules):
        try:
            compile_go(r)
        except ValueError as e:
            problems.add(f"{key}[{i}]", f"invalid regular expression {r!r}: {e}",
                         "rewrite it in Go's syntax (RE2: no lookaround, backreferences or atomic groups)")


def check_choice(value: str, allowed: tuple[str, ...], key: str, problems: Problems) -> None:
    if value not in allowed:
        problems.add(key, f"invalid value {value!r}", f"use one of: {', '.join(allowed)}")
