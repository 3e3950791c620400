"""What becomes of every key shardflow reads from DM's task and source files.

Every YAML key of every record the decoders know (``decode.yaml_keys`` of each class reachable
from the task and source records) has one entry in ``KEYS``, by (record class, key):

- ``works``: shardflow does what DM does with it (or, like ``clean-dump-file``, what DM does is
  vacuous here: there are no dump files to clean);
- ``warn``: accepted so DM's files load, but shardflow does not act on it: when a file sets it
  to anything but DM's default (or ``when`` holds), ``review`` adds a warning naming the key,
  what shardflow does instead and what to do; ``dmctl check-task``/``start-task`` print the
  warnings, the DAG factory logs them and shows them in the precheck DAG's docs;
- ``deprecated``: DM ignores it too; a warning whenever it is present.

A unit test walks the records and fails on a key without an entry, so a key added to a
record cannot be ignored silently. Keys with a value DM rejects are errors in the decoders
and checks (``units.py``, ``checks.py``), not here.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Callable

from dm_core.config.decode import yaml_keys
from dm_core.config.problems import Problems, join

WORKS, WARN, DEPRECATED = "works", "warn", "deprecated"


@dataclass(frozen=True)
class Key:
    status: str
    why: str = ""                                   # warn/deprecated: what shardflow does instead
    fix: str = ""
    when: Callable[[Any], bool] | None = None       # warn when this holds (default: not DM's default)


def _works(*keys: str) -> dict[str, Key]:
    return {k: Key(WORKS) for k in keys}


def _warn(why: str, fix: str = "remove it", when=None) -> Key:
    return Key(WARN, why, fix, when)


def _deprecated(fix: str = "remove it") -> Key:
    return Key(DEPRECATED, "is deprecated and ignored (as in DM)", fix)


_NO_DUMP_FILES = "there are no dump files: the full load copies tables straight into the target on Spark"
_PHYSICAL = "applies to physical import (TiDB Lightning's local backend), which shardflow does not run: it loads through SQL"
_RELAY = "shardflow has no relay log: each task's sensor reads the upstream binlog directly"
_CHECKER_FIXED = ("is reset to DM's default by DM itself (CheckerConfig.Adjust: check-interval 5s, backoff-min 1s, "
                  "backoff-jitter true, backoff-factor 2), and by shardflow alike; only check-enable, backoff-rollback "
                  "and backoff-max are read")


def _true(v) -> bool:
    return v is True


def _lower_in(*values: str):
    return lambda v: str(v).lower() in values


KEYS: dict[tuple[str, str], Key] = {
    **{("_RawTask", k): v for k, v in {
        **_works("name", "is-sharding", "shard-mode", "meta-schema", "timezone", "case-sensitive", "online-ddl",
                 "online-ddl-scheme", "shadow-table-rules", "trash-table-rules", "ignore-checking-items",
                 "target-database", "experimental", "routes", "filters", "block-allow-list", "black-white-list",
                 "column-mappings", "expression-filter", "mydumpers", "loaders", "syncers", "validators",
                 "mysql-instances"),
        "task-mode": _warn(f"{_NO_DUMP_FILES}; dump and load run as task-mode full", "use task-mode full",
                           when=_lower_in("dump", "load")),
        # true: a rename or conversion the other shards have not run yet pauses the source instead
        # of holding the table back (dm_core/shardddl/optimism/lock.py)
        "strict-optimistic-shard-mode": Key(WORKS),
        "clean-dump-file": Key(WORKS),      # nothing to clean: no dump files are written
        "collation_compatible": Key(WORKS),  # strict: dm_core/ddl/collation.py
        "enable-heartbeat": _deprecated(), "heartbeat-update-interval": _deprecated(),
        "heartbeat-report-interval": _deprecated(), "ansi-quotes": _deprecated(), "remove-meta": _deprecated(
            "remove it; please use `start-task ... --remove-meta` instead, which clears the checkpoints"),
    }.items()},
    ("_Experimental", "async-checkpoint-flush"): _warn(
        "is not used: a checkpoint is written after each batch's rows are committed downstream", when=_true),
    **{("DBConfig", k): Key(WORKS) for k in ("host", "port", "user", "password", "session", "security")},
    ("DBConfig", "max-allowed-packet"): _deprecated("remove it: the server's own max_allowed_packet is used"),
    **{("SecurityConfig", k): Key(WORKS) for k in (
        "ssl-ca", "ssl-cert", "ssl-key", "ssl-ca-bytes", "ssl-key-bytes", "ssl-cert-bytes", "ssl-ca-base64",
        "ssl-key-base64", "ssl-cert-base64")},
    ("SecurityConfig", "cert-allowed-cn"): _warn(
        "is not checked: the server's certificate is verified against ssl-ca and the host name instead",
        "remove it, or make sure the certificate names the host"),
    **{("_RawInstance", k): Key(WORKS) for k in (
        "source-id", "meta", "route-rules", "filter-rules", "column-mapping-rules", "expression-filters",
        "block-allow-list", "black-white-list", "mydumper-config-name", "mydumper", "loader-config-name", "loader",
        "loader-thread", "syncer-config-name", "syncer", "syncer-thread", "continuous-validator-config-name",
        "validator-config-name", "continuous-validator")},
    ("_RawInstance", "mydumper-thread"): _warn(
        "is not used: the dump's parallelism is Spark's cores and loaders.pool-size", "use loader-thread (pool-size)",
        when=lambda v: v not in (0, None)),
    **{("MetaConfig", k): Key(WORKS) for k in ("binlog-name", "binlog-pos", "binlog-gtid")},
    **{("MydumperConfig", k): v for k, v in {
        **_works("rows", "where", "chunk-filesize"),
        "threads": _warn("is not used: the dump's parallelism is Spark's cores and loaders.pool-size",
                         "set loaders.pool-size (tables loaded at once)"),
        "extra-args": _warn("is not used: no mydumper/dumpling process runs", "express table selection with "
                            "block-allow-list and row selection with `where`"),
        "skip-tz-utc": _warn("is not used: the full load reads and writes TIMESTAMP values in UTC on both sides, "
                             "so they never shift", when=_true),
        "statement-size": _warn("is not used: rows are written in JDBC batches (spark_jobs/full_load.py "
                                "--write-batch)"),
        "mydumper-path": _deprecated(),
    }.items()},
    **{("LoaderConfig", k): v for k, v in {
        **_works("pool-size", "on-duplicate-logical", "on-duplicate"),
        "dir": _warn(f"is not used: {_NO_DUMP_FILES}"),
        "import-mode": _warn(f"physical import is not available: {_PHYSICAL}; the load runs as logical",
                             "use import-mode logical", when=_lower_in("physical")),
        **{k: _warn(f"is not used: it {_PHYSICAL}") for k in (
            "on-duplicate-physical", "sorting-dir-physical", "disk-quota-physical", "checksum-physical", "analyze",
            "range-concurrency", "compress-kv-pairs", "pd-addr")},
    }.items()},
    **{("SyncerConfig", k): v for k, v in {
        **_works("worker-count", "batch", "checkpoint-flush-interval", "compact", "multiple-rows", "safe-mode",
                 "safe-mode-duration"),
        "queue-size": _warn("is not used: each sensor poke reads a bounded window of the binlog (events and "
                            "seconds), so there is no job queue to size"),
        "enable-ansi-quotes": _warn("is not used: DDL is parsed with MySQL's default quoting (double quotes are "
                                    "strings)", "remove it; DDL using ANSI_QUOTES identifiers may fail to parse",
                                    when=_true),
        **{k: _deprecated() for k in ("meta-file", "max-retry", "auto-fix-gtid", "disable-detect")},
        "enable-gtid": _deprecated("set enable-gtid in the source file"),
    }.items()},
    # the settings of the scheduled validation DAG dm_<task>_validate (docs/operations.md: "Scheduled validation")
    **{("ValidatorConfig", k): Key(WORKS) for k in (
        "mode", "worker-count", "check-interval", "row-error-delay", "meta-flush-interval", "batch-query-size",
        "max-pending-row-size", "max-pending-row-count", "start-time", "schedule", "repair")},
    ("ValidatorConfig", "validate-interval"): _warn(
        "is not used: validation compares chunks of tables on a schedule, it does not batch binlog rows"),
    **{("_RawSource", k): v for k, v in {
        **_works("source-id", "enable-gtid", "from", "filters"),
        "flavor": Key(WORKS),       # checked against the server by `operate-source create`
        "enable": _warn("is not used: `dmctl operate-source create` registers the source enabled",
                        "use `dmctl operate-source stop SOURCE` to disable it", when=lambda v: v is False),
        "enable-relay": _warn(f"is not used: {_RELAY}", when=_true),
        "relay-binlog-name": _warn(f"is not used: {_RELAY}"), "relay-binlog-gtid": _warn(f"is not used: {_RELAY}"),
        "relay-dir": _warn(f"is not used: {_RELAY}"), "meta-dir": _warn(f"is not used: {_RELAY}"),
        "purge": Key(WORKS),        # its keys are reviewed one by one (_Purge)
        "charset": _warn("is not used: connections to the source use utf8mb4"),
        "checker": Key(WORKS),      # its keys are reviewed one by one (_Checker)
        "server-id": _warn("is not used: each task's binlog reader takes its own server id (derived from the task "
                           "and source names), so two tasks of one source never share one",
                           when=lambda v: v not in (None, 0)),
        "tracer": _deprecated(),
        "case-sensitive": _warn("applies to this source's `filters` only: a task's rules follow the task's "
                                "case-sensitive (DM uses `true` when either says so)",
                                "set case-sensitive: true in the task file too", when=_true),
    }.items()},
    **{("_Purge", k): _warn(f"is not used: {_RELAY}") for k in ("interval", "expires", "remain-space")},
    # the source's auto-resume reads these (dm_core/sync/auto_resume.py)
    **{("_Checker", k): Key(WORKS) for k in ("check-enable", "backoff-rollback", "backoff-max")},
    **{("_Checker", k): _warn(_CHECKER_FIXED) for k in ("check-interval", "backoff-min", "backoff-jitter",
                                                        "backoff-factor")},
    # rule records: each rules engine implements every key it reads
    **{("FilterRule", k): Key(WORKS) for k in ("schema-pattern", "table-pattern", "events", "sql-pattern", "action")},
    **{("RouteRule", k): Key(WORKS) for k in ("schema-pattern", "table-pattern", "target-schema", "target-table",
                                             "extract-table", "extract-schema", "extract-source")},
    **{("BAListRule", k): Key(WORKS) for k in ("do-dbs", "ignore-dbs", "do-tables", "ignore-tables")},
    **{("TableRef", k): Key(WORKS) for k in ("db-name", "tbl-name")},
    **{("ColumnMappingRule", k): Key(WORKS) for k in ("schema-pattern", "table-pattern", "source-column",
                                                     "target-column", "expression", "arguments")},
    ("ColumnMappingRule", "create-table-query"): _deprecated(),
    **{("ExprFilterRule", k): Key(WORKS) for k in ("schema", "table", "insert-value-expr", "update-old-value-expr",
                                                  "update-new-value-expr", "delete-value-expr")},
}


def records(root: type) -> list[type]:
    """``root`` and every record class reachable from its fields (lists, dicts, optionals)."""
    out: list[type] = []

    def visit(cls):
        if cls in out:
            return
        out.append(cls)
        hints = typing.get_type_hints(cls)
        for f in yaml_keys(cls).values():
            for c in _record_types(hints[f.name]):
                visit(c)

    visit(root)
    return out


def _record_types(tp) -> list[type]:
    if dataclasses.is_dataclass(tp):
        return [tp]
    return [c for a in typing.get_args(tp) for c in _record_types(a)]


def review(cls: type, data: Any, path: str, problems: Problems, *, maps: dict[str, type] | None = None) -> None:
    """Warn for every key of ``data`` (the YAML of a ``cls`` record) that shardflow does not act on.

    ``maps``: keys that hold named records of a class (``mydumpers: {NAME: ...}``) or a list of
    them (``mysql-instances: [...]``), for the task file's top level, whose decoder takes them apart."""
    if not isinstance(data, dict):
        return
    fields = yaml_keys(cls)
    hints = typing.get_type_hints(cls)
    for k, v in data.items():
        key = join(path, str(k))
        entry = KEYS.get((cls.__name__, k))
        f = fields.get(k)
        if entry is not None and entry.status != WORKS and v is not None:
            if entry.status == DEPRECATED or (entry.when(v) if entry.when else not _is_default(f, v)):
                problems.warn(key, entry.why, entry.fix)
        if maps and k in maps:
            items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
            for name, body in items:
                review(maps[k], body, f"{key}[{name}]" if isinstance(v, list) else join(key, str(name)), problems)
        elif f is not None:
            _review_nested(hints[f.name], v, key, problems)


def _review_nested(tp, v, key: str, problems: Problems) -> None:
    inner = _record_types(tp)
    if not inner:
        return
    cls = inner[0]
    if isinstance(v, list):
        for i, item in enumerate(v):
            review(cls, item, f"{key}[{i}]", problems)
    elif isinstance(v, dict) and typing.get_origin(tp) is dict:
        for name, body in v.items():
            review(cls, body, join(key, str(name)), problems)
    else:
        review(cls, v, key, problems)


def _is_default(f: dataclasses.Field | None, v: Any) -> bool:
    if f is None:
        return False
    default = f.default if f.default is not dataclasses.MISSING else (
        f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
    conv = f.metadata.get("convert")
    if conv is not None:
        try:
            v = conv(v)
        except ValueError:
            return True         # reported as an error by the decoder already
    if v == default or (isinstance(v, str) and str(default).lower() == v.lower()):
        return True
    return isinstance(default, (int, float)) and not isinstance(v, bool) and str(v) == str(default)
