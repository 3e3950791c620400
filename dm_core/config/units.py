"""The per-unit sections of a task file: target database, meta, mydumper, loader, syncer, validator.

Defaults are DM's. Each ``check_*`` normalizes what DM normalizes (lower-case enum values,
legacy spellings) and reports what DM rejects; the thread shortcuts (``mydumper-thread``...)
are applied by the task loader after copying the named or inline section.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.config.decode import expand_env, go_duration
from dm_core.config.problems import Problems, join


def _duration_or_none(v):
    return None if v == "" else go_duration(v)


def _size(v) -> int:
    """chunk-filesize: DM writes it as a string of MB ("64"); accept an integer too."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    raise ValueError(f"expected a size in MB such as 64, got {v!r}")


DURATION = {"convert": go_duration, "fix": "write a Go duration such as \"30s\", \"5m\" or \"1m30s\""}


@dataclass
class SecurityConfig:
    """TLS to a database (``security:``)."""

    ssl_ca: str = ""
    ssl_cert: str = ""
    ssl_key: str = ""
    cert_allowed_cn: list[str] = field(default_factory=list)
    ssl_ca_bytes: str = field(default="", repr=False)
    ssl_key_bytes: str = field(default="", repr=False)
    ssl_cert_bytes: str = field(default="", repr=False)


@dataclass
class DBConfig:
    """``target-database`` of a task, ``from`` of a source."""

    host: str = ""
    port: int = 0
    user: str = ""
    password: str = field(default="", repr=False)   # plain, or ${ENV_VAR} expanded at load time
    session: dict[str, str] = field(default_factory=dict)
    max_allowed_packet: int | None = None           # deprecated in DM >= 2.0 (read from the server)
    security: SecurityConfig | None = None


def check_db(db: DBConfig, path: str, problems: Problems, given: dict) -> None:
    """``given``: the YAML mapping, to tell a missing key from one already reported as wrong."""
    for key, fix in (("host", "add `host:` (name or IP address of the server)"),
                     ("port", "add `port:` (4000 for TiDB, 3306 for MySQL)"), ("user", "add `user:`")):
        if given.get(key) in (None, ""):
            problems.add(join(path, key), "missing", fix)
    if isinstance(given.get("port"), int) and not 0 < db.port < 65536:
        problems.add(join(path, "port"), f"not a TCP port: {db.port}", "use a port in [1, 65535]")
    db.password = expand_env(db.password, join(path, "password"), problems)
    if db.max_allowed_packet is not None and db.max_allowed_packet < 0:
        problems.add(join(path, "max-allowed-packet"), "must not be negative", "remove it: DM reads it from the server")


@dataclass
class MetaConfig:
    """Where incremental replication starts when there is no checkpoint yet (``meta:``)."""

    binlog_name: str | None = None
    binlog_pos: int | None = None
    binlog_gtid: str | None = None


def check_meta(m: MetaConfig, path: str, problems: Problems) -> None:
    if not m.binlog_name and not m.binlog_gtid:
        problems.add(path, "meta needs binlog-name (binlog-pos) or binlog-gtid",
                     "set binlog-name/binlog-pos (GTID off) or binlog-gtid (enable-gtid: true), or remove `meta`")
    if m.binlog_pos is not None and m.binlog_pos < 0:
        problems.add(join(path, "binlog-pos"), "must not be negative", "use the position from SHOW MASTER STATUS")


@dataclass
class MydumperConfig:
    """Dump unit (``mydumpers.NAME`` / inline ``mydumper``)."""

    threads: int = 4
    chunk_filesize: int = field(default=64, metadata={"convert": _size, "fix": "write a size in MB, e.g. 64"})
    rows: int = 0
    extra_args: str = ""
    skip_tz_utc: bool = False
    statement_size: int = 1000000
    where: str = ""
    mydumper_path: str = ""         # deprecated (DM >= 2.0 embeds dumpling)


@dataclass
class LoaderConfig:
    """Load unit (``loaders.NAME`` / inline ``loader``)."""

    pool_size: int = 16
    dir: str = "./dumped_data"
    import_mode: str = "logical"            # logical | physical ("sql", "loader": legacy for logical)
    on_duplicate_logical: str = "replace"   # replace | ignore | error
    on_duplicate_physical: str = "none"     # none | manual
    on_duplicate: str = ""                  # deprecated spelling of on-duplicate-logical
    sorting_dir_physical: str = ""
    disk_quota_physical: str = "0"
    checksum_physical: str = "required"     # required | optional | off
    analyze: str = "optional"               # required | optional | off
    range_concurrency: int = 16
    compress_kv_pairs: str = ""
    pd_addr: str = ""


@dataclass
class SyncerConfig:
    """Sync unit (``syncers.NAME`` / inline ``syncer``)."""

    worker_count: int = 16
    batch: int = 100
    queue_size: int = 1024
    checkpoint_flush_interval: int = 30     # seconds
    compact: bool = False
    multiple_rows: bool = False
    safe_mode: bool = False
    # seconds of automatic safe mode after an abnormal stop; DM default 2 x checkpoint-flush-interval
    safe_mode_duration: float | None = field(default=None, metadata={
        "convert": _duration_or_none, "fix": "write a Go duration such as \"60s\" or \"1m30s\""})
    enable_ansi_quotes: bool = False
    meta_file: str = ""                     # deprecated
    max_retry: int = 0                      # deprecated
    auto_fix_gtid: bool = False             # deprecated
    enable_gtid: bool = False               # deprecated (set it on the source)
    disable_detect: bool = False            # deprecated

    def __post_init__(self):
        if self.safe_mode_duration is None:
            self.safe_mode_duration = 2.0 * self.checkpoint_flush_interval


@dataclass
class ValidatorConfig:
    """Continuous validator (``validators.NAME``)."""

    mode: str = "none"                      # none | full | fast
    worker_count: int = 4
    validate_interval: float = field(default=10.0, metadata=DURATION)
    check_interval: float = field(default=5.0, metadata=DURATION)
    row_error_delay: float = field(default=1800.0, metadata=DURATION)
    meta_flush_interval: float = field(default=300.0, metadata=DURATION)
    batch_query_size: int = 100
    max_pending_row_size: str = "500m"
    max_pending_row_count: int = 10000


def _one_of(obj, attr: str, allowed: tuple[str, ...], path: str, problems: Problems, *, aliases=None) -> None:
    value = str(getattr(obj, attr)).lower()
    value = (aliases or {}).get(value, value)
    setattr(obj, attr, value)
    if value not in allowed:
        problems.add(join(path, attr.replace("_", "-")), f"invalid value {getattr(obj, attr)!r}",
                     f"use one of: {', '.join(allowed)}")


def _positive(obj, attrs: tuple[str, ...], path: str, problems: Problems, *, zero_ok=()) -> None:
    for a in attrs:
        v = getattr(obj, a)
        if v < 0 or v == 0 and a not in zero_ok:
            problems.add(join(path, a.replace("_", "-")), f"must be {'>= 0' if a in zero_ok else 'positive'}, got {v}",
                         "use a positive number, or remove it for DM's default")


def check_mydumper(c: MydumperConfig, path: str, problems: Problems) -> None:
    _positive(c, ("threads",), path, problems)
    _positive(c, ("chunk_filesize", "rows", "statement_size"), path, problems, zero_ok=("chunk_filesize", "rows", "statement_size"))


def check_loader(c: LoaderConfig, path: str, problems: Problems, raw: dict | None = None) -> None:
    _one_of(c, "import_mode", ("logical", "physical"), path, problems, aliases={"sql": "logical", "loader": "logical"})
    if c.on_duplicate and "on-duplicate-logical" not in (raw or {}):
        c.on_duplicate_logical = c.on_duplicate
    _one_of(c, "on_duplicate_logical", ("replace", "ignore", "error"), path, problems)
    _one_of(c, "on_duplicate_physical", ("none", "manual"), path, problems)
    _one_of(c, "checksum_physical", ("required", "optional", "off"), path, problems)
    _one_of(c, "analyze", ("required", "optional", "off"), path, problems)
    _positive(c, ("pool_size", "range_concurrency"), path, problems)


def check_syncer(c: SyncerConfig, path: str, problems: Problems) -> None:
    _positive(c, ("worker_count", "batch", "queue_size", "checkpoint_flush_interval"), path, problems)
    if c.safe_mode_duration is not None and c.safe_mode_duration < 0:
        problems.add(join(path, "safe-mode-duration"), "must not be negative", "write e.g. \"60s\"; \"0s\" disables automatic safe mode")


def check_validator(c: ValidatorConfig, path: str, problems: Problems) -> None:
    _one_of(c, "mode", ("none", "full", "fast"), path, problems)
    _positive(c, ("worker_count", "batch_query_size", "max_pending_row_count"), path, problems)
