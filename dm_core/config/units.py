"""The per-unit sections of a task file: target database, meta, mydumper, loader, syncer, validator.

Defaults are DM's. Each ``check_*`` normalizes what DM normalizes (lower-case enum values,
legacy spellings) and reports what DM rejects; the thread shortcuts (``mydumper-thread``...)
are applied by the task loader after copying the named or inline section.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.config.decode import expand_env, go_duration
from dm_core.config.problems import Problems, join
from dm_core.errors import ShardflowError
from dm_core.secrets import dm_cipher
from dm_core.tls import TLS


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


def pem_bytes(v) -> str:
    """``ssl-*-bytes``: PEM text, or what DM's Go []byte field takes in YAML, a list of byte
    values (``[]`` in DM's files for none).

    >>> pem_bytes([]), pem_bytes([45, 45]), pem_bytes("-----BEGIN")
    ('', '--', '-----BEGIN')
    """
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, list) and all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 256 for b in v):
        return bytes(v).decode("utf-8", "replace")
    raise ValueError(f"expected PEM text or a list of byte values, got {v!r}")


BYTES = {"convert": pem_bytes, "fix": "write the certificate's PEM text (or use the ssl-* path or -base64 key)"}


@dataclass
class SecurityConfig:
    """TLS to a database (``security:``); each of CA, cert and key as a path, PEM text or base64."""

    ssl_ca: str = ""
    ssl_cert: str = ""
    ssl_key: str = ""
    cert_allowed_cn: list[str] = field(default_factory=list)
    ssl_ca_bytes: str = field(default="", repr=False, metadata=BYTES)
    ssl_key_bytes: str = field(default="", repr=False, metadata=BYTES)
    ssl_cert_bytes: str = field(default="", repr=False, metadata=BYTES)
    ssl_ca_base64: str = field(default="", repr=False)
    ssl_key_base64: str = field(default="", repr=False)
    ssl_cert_base64: str = field(default="", repr=False)


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
    tls: TLS | None = field(default=None, repr=False, metadata={"yaml": None})   # ``security``, loaded


def check_db(db: DBConfig, path: str, problems: Problems, given: dict, *, expand: bool = True) -> None:
    """``given``: the YAML mapping, to tell a missing key from one already reported as wrong.
    ``expand=False`` leaves ``${ENV}`` in the password as written (commands that connect to
    nothing must not need the variable)."""
    for key, fix in (("host", "add `host:` (name or IP address of the server)"),
                     ("port", "add `port:` (4000 for TiDB, 3306 for MySQL)"), ("user", "add `user:`")):
        if given.get(key) in (None, ""):
            problems.add(join(path, key), "missing", fix)
    if isinstance(given.get("port"), int) and not 0 < db.port < 65536:
        problems.add(join(path, "port"), f"not a TCP port: {db.port}", "use a port in [1, 65535]")
    if expand:
        db.password = expand_env(db.password, join(path, "password"), problems)
        try:
            db.password = dm_cipher.reveal(db.password)     # `dmctl encrypt` output, as DM reads it
        except ShardflowError as e:
            problems.add(join(path, "password"), e.message, e.workaround)
    if db.security is not None:
        db.tls = load_tls(db.security, join(path, "security"), problems)
    if db.max_allowed_packet is not None and db.max_allowed_packet < 0:
        problems.add(join(path, "max-allowed-packet"), "must not be negative", "remove it: DM reads it from the server")


def _pem(sec: SecurityConfig, part: str, path: str, problems: Problems) -> str:
    """One of ca/cert/key as PEM text, DM's precedence: *-bytes, then *-base64, then the file."""
    import base64
    import binascii

    text, b64, file = (getattr(sec, f"ssl_{part}_bytes"), getattr(sec, f"ssl_{part}_base64"), getattr(sec, f"ssl_{part}"))
    if text:
        return text
    if b64:
        try:
            return base64.b64decode(b64, validate=True).decode("ascii")
        except (binascii.Error, ValueError):
            problems.add(join(path, f"ssl-{part}-base64"), "not base64 of a PEM file", f"write `base64 -w0 FILE` of the {part} file")
            return ""
    if file:
        try:
            with open(file, encoding="ascii") as f:
                return f.read()
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) else "not a PEM text file"
            problems.add(join(path, f"ssl-{part}"), f"cannot read {file}: {why}",
                         "give the path of a readable PEM file (it is read where the task file is loaded), "
                         f"or put the PEM text in ssl-{part}-bytes")
    return ""


def load_tls(sec: SecurityConfig, path: str, problems: Problems) -> TLS | None:
    """The TLS material of a ``security`` section (DM's LoadTLSContent), checked; None: no TLS.

    As in DM, TLS is on when a CA is given; a client certificate needs both cert and key."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    n = len(problems)
    ca, cert, key = (_pem(sec, part, path, problems) for part in ("ca", "cert", "key"))
    if len(problems) > n:
        return None
    for part, pem in (("ca", ca), ("cert", cert)):
        if pem:
            try:
                x509.load_pem_x509_certificates(pem.encode())
            except ValueError:
                problems.add(join(path, f"ssl-{part}"), "is not a PEM certificate", "give a file with -----BEGIN CERTIFICATE-----")
    if key:
        try:
            load_pem_private_key(key.encode(), password=None)
        except (ValueError, TypeError):
            problems.add(join(path, "ssl-key"), "is not an unencrypted PEM private key",
                         "give the key without a passphrase (`openssl pkey -in KEY -out KEY.plain`)")
    if bool(cert) != bool(key):
        problems.add(join(path, "ssl-cert" if key else "ssl-key"), "missing: a client certificate needs both ssl-cert and ssl-key",
                     "add the other one, or remove both")
    if not ca and (cert or key):
        problems.warn(join(path, "ssl-ca"), "not set: the connection does not use TLS (as in DM, TLS needs the CA)",
                      "add ssl-ca with the CA that signed the server's certificate")
    if len(problems) > n or not ca:
        return None
    return TLS(ca, cert, key)


@dataclass
class MetaConfig:
    """Where incremental replication starts when there is no checkpoint yet (``meta:``)."""

    binlog_name: str | None = None
    binlog_pos: int | None = None
    binlog_gtid: str | None = None


def check_meta(m: MetaConfig, path: str, problems: Problems) -> None:
    if not m.binlog_name and not m.binlog_gtid:
        problems.add(path, "meta needs binlog-name (binlog-pos) or binlog-gtid (DM: must specify `binlog-name` "
                           "without GTID enabled for the source or specify `binlog-gtid` with GTID enabled for the source)",
                     "set binlog-name/binlog-pos (GTID off) or binlog-gtid (enable-gtid: true), or remove `meta`")
    if m.binlog_pos is not None and m.binlog_pos < 0:
        problems.add(join(path, "binlog-pos"), "must not be negative",
                     "use the position from SHOW BINARY LOG STATUS (SHOW MASTER STATUS before MySQL 8.2)")


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
    batch: int = 1000                       # DM: 100 (docs/compatibility.md)
    queue_size: int = 1024
    checkpoint_flush_interval: int = 30     # seconds
    # compact, multiple_rows unset: on, unless foreign_key_checks is on downstream (then off, as
    # DM requires); DM's default is off. parse_task settles them (task._settle_merging_defaults).
    compact: bool | None = None
    multiple_rows: bool | None = None
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
    """Validator (``validators.NAME``): DM's continuous-validator keys, which shardflow reads
    as the settings of the scheduled validation DAG ``dm_<task>_validate`` (docs/operations.md:
    "Scheduled validation"), plus ``schedule`` (ours): when that DAG runs."""

    mode: str = "none"                      # none | full | fast
    worker_count: int = 4                   # tables validated at once
    validate_interval: float = field(default=10.0, metadata=DURATION)   # not used (DM: binlog batch interval)
    check_interval: float = field(default=5.0, metadata=DURATION)       # pause between re-check rounds
    row_error_delay: float = field(default=1800.0, metadata=DURATION)   # how long a row is re-checked
    meta_flush_interval: float = field(default=300.0, metadata=DURATION)  # partial results to the store
    batch_query_size: int = 100             # keys per re-check query
    max_pending_row_size: str = "500m"      # memory for differing rows kept per table
    max_pending_row_count: int = 10000      # differing rows kept (named) per table
    start_time: str = ""                    # no scheduled run before this time
    schedule: str = ""                      # shardflow: cron or preset (@hourly) of dm_<task>_validate
    repair: bool = False                    # shardflow: a run that finds differences triggers dm_<task>_resync


def size_bytes(text: str) -> int:
    """DM's RAMInBytes: "500m" → 524288000 (k, m, g, t are powers of 1024; "b"/"ib" optional).

    >>> size_bytes("500m"), size_bytes("1GiB"), size_bytes("64")
    (524288000, 1073741824, 64)
    """
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*", str(text).lower())
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return int(float(m.group(1)) * 1024 ** " kmgtp".index(m.group(2) or " "))


def start_time(text: str):
    """``start-time`` as an aware datetime (DM: "2006-01-02 15:04:05" local, or RFC 3339)."""
    import datetime as dt

    t = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return t if t.tzinfo else t.astimezone()


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
    for a in ("check_interval", "row_error_delay", "meta_flush_interval"):
        if getattr(c, a) < 0:
            problems.add(join(path, a.replace("_", "-")), "must not be negative", "write e.g. \"30s\"")
    try:
        size_bytes(c.max_pending_row_size)
    except ValueError:
        problems.add(join(path, "max-pending-row-size"), f"not a size: {c.max_pending_row_size!r}",
                     "write a size such as \"500m\" or \"1g\"")
    if c.start_time:
        try:
            start_time(c.start_time)
        except ValueError:
            problems.add(join(path, "start-time"), f"not a time: {c.start_time!r}",
                         "write it as \"2006-01-02 15:04:05\" or RFC 3339 (\"2006-01-02T15:04:05Z\")")
    if c.schedule:
        why = cron_problem(c.schedule)
        if why:
            problems.add(join(path, "schedule"), why,
                         "write a cron expression such as \"*/30 * * * *\" or a preset (@hourly, @daily, @weekly)")
    elif c.mode != "none":
        problems.warn(join(path, "schedule"), f"not set: mode {c.mode} validates only when dm_<task>_validate "
                      "is triggered (UI, `dmctl validation start`)", "add `schedule: \"@hourly\"` (a cron expression)")


PRESETS = ("@once", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly", "@continuous")


def cron_problem(text: str) -> str | None:
    """Why ``text`` is not a schedule Airflow accepts (None: it is)."""
    if text in PRESETS:
        return None if text not in ("@once", "@continuous") else f"{text} is not a recurring validation schedule"
    try:
        from croniter import croniter
    except ImportError:  # croniter comes with Airflow; without it only the field count is checked
        return None if len(text.split()) in (5, 6) else f"not a cron expression: {text!r}"
    return None if croniter.is_valid(text) else f"not a cron expression: {text!r}"


def check_validators_agree(instances, problems: Problems) -> None:
    """One validation DAG per task: instances that validate must agree on its schedule and mode."""
    on = [(i, inst.validator) for i, inst in enumerate(instances) if inst.validator.mode != "none"]
    for key in ("schedule", "mode", "start_time"):
        seen = {getattr(v, key) for _, v in on}
        if len(seen) > 1:
            i = on[-1][0]
            problems.add(join(f"mysql-instances[{i}]", "continuous-validator-config-name"),
                         f"validators of one task must share `{key.replace('_', '-')}` (they give {sorted(seen)})",
                         "use one validator config for every instance, or the same value in each")
