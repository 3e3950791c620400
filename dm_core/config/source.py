"""DM source files (``source.yaml``): one upstream MySQL/MariaDB server, read unchanged.

Same strict decoding and problem list as task files (``decode.py``, ``problems.py``);
errors carry SOURCE_INVALID. The checker's keys DM reads drive the source's auto-resume
(dm_core/sync/auto_resume.py). DM's keys for relay log and purge are accepted and
kept in ``raw`` even where shardflow has no use for them, so a DM file loads as is; those
set to anything but DM's default come back as warnings (``inventory.py``). A password may be
``dmctl encrypt`` output (``units.check_db``); ``from.security`` is read into PEM text.

    >>> src = parse_source("source-id: mysql-01\\nfrom: {host: 127.0.0.1, port: 3306, user: root, password: pw}\\n")
    >>> src.to_dict()["host"], "password" in src.to_dict(), "pw" in repr(src)
    ('127.0.0.1', False, False)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dm_core.config import inventory
from dm_core.config.decode import decode, load_yaml
from dm_core.config.problems import ConfigProblem, Problems, SourceConfigError, closest, join
from dm_core.config.rule_notes import literal_tilde
from dm_core.config.units import DURATION, DBConfig, check_db
from dm_core.db import Endpoint
from dm_core.tls import TLS
from dm_core.rules.binlog_filter import EVENT_TYPES, BinlogFilter, FilterRule, normalize_event, usable_rules
from dm_core.rules.patterns import RuleError

MAX_SOURCE_ID_LENGTH = 32       # DM: source ids name relay directories and metrics labels
FLAVORS = ("", "mysql", "mariadb")


@dataclass
class SourceConfig:
    source_id: str
    host: str
    port: int
    user: str
    password: str = field(default="", repr=False)
    enable_gtid: bool = False
    enable_relay: bool = False
    flavor: str = ""                    # "mysql" | "mariadb" | "" (detected)
    server_id: int | None = None        # our replica's server id; None: derived
    raw: dict = field(default_factory=dict, repr=False)
    case_sensitive: bool = False
    filters: list[FilterRule] = field(default_factory=list)   # source-level binlog event filters
    relay_binlog_name: str = ""
    relay_binlog_gtid: str = ""
    session: dict[str, str] = field(default_factory=dict)
    tls: TLS | None = field(default=None, repr=False)           # from.security, loaded
    warnings: list[ConfigProblem] = field(default_factory=list, repr=False)
    # what the source's checker reads (dm_core/sync/auto_resume.py): check-enable, backoff-rollback, backoff-max
    checker: dict = field(default_factory=dict)

    def endpoint(self) -> Endpoint:
        return Endpoint(self.host, self.port, self.user, self.password, name=f"source {self.source_id}",
                        session=tuple(sorted(self.session.items())), tls=self.tls)

    def to_dict(self, with_password: bool = False) -> dict:
        """JSON-ready, flat: what a registry stores (the password only when asked for)."""
        out = {"source-id": self.source_id, "host": self.host, "port": self.port, "user": self.user,
               "enable-gtid": self.enable_gtid, "enable-relay": self.enable_relay, "flavor": self.flavor,
               "server-id": self.server_id, "case-sensitive": self.case_sensitive,
               "relay-binlog-name": self.relay_binlog_name, "relay-binlog-gtid": self.relay_binlog_gtid,
               "session": dict(self.session),
               "filters": [{"schema-pattern": f.schema_pattern, "table-pattern": f.table_pattern, "events": list(f.events),
                            "sql-pattern": list(f.sql_pattern), "action": f.action} for f in self.filters]}
        if self.checker:
            out["checker"] = dict(self.checker)
        if self.tls is not None:       # the key is sealed by the state store (store.put_source)
            out["security"] = self.tls.to_dict()
        if with_password:
            out["password"] = self.password
        return out


@dataclass
class _Purge:
    interval: int = 3600
    expires: int = 0
    remain_space: int = 15


@dataclass
class _Checker:
    check_enable: bool = True
    backoff_rollback: float = field(default=300.0, metadata=DURATION)
    backoff_max: float = field(default=300.0, metadata=DURATION)
    check_interval: float = field(default=5.0, metadata=DURATION)
    backoff_min: float = field(default=1.0, metadata=DURATION)
    backoff_jitter: bool = True
    backoff_factor: float = 2.0


@dataclass
class _RawSource:
    source_id: str = ""
    enable: bool = True
    enable_gtid: bool = False
    enable_relay: bool = False
    relay_binlog_name: str = ""
    relay_binlog_gtid: str = ""
    relay_dir: str = ""
    meta_dir: str = ""
    flavor: str = ""
    charset: str = ""
    from_: DBConfig | None = field(default=None, metadata={"yaml": "from"})
    purge: _Purge | None = None
    checker: _Checker | None = None
    server_id: int | None = None
    tracer: dict | None = None          # deprecated
    case_sensitive: bool = False
    filters: list[FilterRule] = field(default_factory=list)


def parse_source(text: str, filename: str = "<source>") -> SourceConfig:
    problems = Problems(filename)
    data = load_yaml(text, problems)
    problems.raise_if_any(SourceConfigError)
    if not isinstance(data, dict):
        problems.add("(top level)", "the source file must be a mapping of keys", "start from DM's source.yaml template")
        raise SourceConfigError(problems.items)
    raw = decode(_RawSource, data, "", problems) or _RawSource()
    if not raw.source_id:
        problems.add("source-id", "missing", "add `source-id: NAME`, unique among your sources")
    elif len(raw.source_id) > MAX_SOURCE_ID_LENGTH:
        problems.add("source-id", f"longer than {MAX_SOURCE_ID_LENGTH} characters", "use a shorter source id")
    ck = raw.checker
    if ck is not None and ck.backoff_max < _Checker.backoff_min:   # DM refuses it too (ErrConfigCheckerMaxTooSmall)
        problems.add("checker.backoff-max", f"`backoff-max` value {ck.backoff_max:g}s is less than `backoff-min` "
                                            f"value {_Checker.backoff_min:g}s (DM's, whatever the file says)",
                     "Please increase `backoff-max` to 1s or more, or remove it for DM's 5m")
    db = raw.from_
    if db is None:
        if "from" not in data or data.get("from") is None:
            problems.add("from", "missing", "add `from:` with host, port, user and password of the upstream")
        db = DBConfig()
    else:
        check_db(db, "from", problems, data["from"])
    flavor = raw.flavor.lower()
    if flavor not in FLAVORS:
        problems.add("flavor", f"invalid value {raw.flavor!r}", "use mysql or mariadb, or remove it to detect it")
    if raw.server_id is not None and not 0 <= raw.server_id < 1 << 32:
        problems.add("server-id", f"out of range: {raw.server_id}", "use an integer in [1, 4294967295], or remove it")
    raw.filters = _usable_filters(raw.filters, raw.case_sensitive, problems)
    if raw.filters and not problems.items:
        try:
            BinlogFilter(raw.filters, raw.case_sensitive)
        except RuleError as e:
            problems.add("filters", f"these rules cannot be used together: {e.reason}",
                         "give each rule a different schema-pattern/table-pattern pair")
    if raw.purge is not None and raw.purge.remain_space < 0:
        problems.add("purge.remain-space", "must not be negative", "use a size in GB")
    inventory.review(_RawSource, data, "", problems)
    problems.raise_if_any(SourceConfigError)
    return SourceConfig(raw.source_id, db.host, db.port, db.user, db.password, raw.enable_gtid, raw.enable_relay,
                        flavor, raw.server_id or None, data, raw.case_sensitive, raw.filters,
                        raw.relay_binlog_name, raw.relay_binlog_gtid, db.session, db.tls, problems.warnings,
                        _checker_read(raw.checker or _Checker()))


def _checker_read(ck: _Checker) -> dict:
    """The checker keys DM reads; it resets the others to their defaults (``CheckerConfig.Adjust``)."""
    return {"check-enable": ck.check_enable, "backoff-rollback": ck.backoff_rollback, "backoff-max": ck.backoff_max}


def _usable_filters(rules: list[FilterRule], case_sensitive: bool, problems: Problems) -> list[FilterRule]:
    """The rules that compile; a rule naming an event type DM does not know is left out with a
    warning, as DM leaves it out (and starts), every other fault is a problem."""
    kept, left_out = usable_rules(rules)
    for i, _, event in left_out:
        problems.warn(f"filters[{i}]", f"unknown event type {event!r}: as in DM, a rule with an event type DM does not "
                      "know is left out whole, so this rule filters nothing (none of its events)",
                      closest(normalize_event(event), sorted(EVENT_TYPES - {""}), "an event type such as"))
    for rule in kept:
        literal_tilde(f"filters[{rules.index(rule)}]", rule, "binlog filter", problems)
        try:
            BinlogFilter([rule], case_sensitive)
        except RuleError as e:
            i = rules.index(rule)
            problems.add(join(f"filters[{i}]", e.key) if e.key else f"filters[{i}]", e.reason,
                         e.fix or "see DM's binlog event filter reference")
    return kept


def check_server_flavor(src: SourceConfig, server_version: str, filename: str = "<source>") -> None:
    """SourceConfigError when the file's ``flavor`` is not what the server is (shardflow reads
    the binlog the way the server's own flavor needs, so a wrong value would otherwise go unseen)."""
    actual = "mariadb" if "mariadb" in server_version.lower() else "mysql"
    if src.flavor and src.flavor != actual:
        raise SourceConfigError([ConfigProblem(filename, "flavor", f"is {src.flavor}, but the server is {server_version}",
                                               f"write `flavor: {actual}`, or remove it to detect it")])


def check_gtid_mode(src: SourceConfig, server_version: str, gtid_mode: str | None, filename: str = "<source>") -> None:
    """SourceConfigError (DM's 26007) when ``enable-gtid: true`` names a MySQL server whose
    ``gtid_mode`` is not ON (None: the server has no such variable): its binlog holds no GTID
    to resume from. MariaDB logs GTIDs whatever its settings."""
    if not src.enable_gtid or "mariadb" in server_version.lower() or (gtid_mode or "").upper() == "ON":
        return
    raise SourceConfigError([ConfigProblem(
        filename, "enable-gtid",
        f"is true, but the server ({server_version}) has gtid_mode = {gtid_mode or '(none)'} instead of ON "
        "(DM's 26007): its binlog holds no GTIDs to resume from",
        "set gtid_mode = ON with enforce_gtid_consistency = ON on the server (MySQL switches it online through "
        "OFF_PERMISSIVE and ON_PERMISSIVE), or write `enable-gtid: false` to read the binlog by file and position")])


def load_source_file(path) -> SourceConfig:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SourceConfigError([ConfigProblem(str(p), "(file)", f"cannot read the file: {e}",
                                               "check the path and that the file is readable UTF-8")]) from None
    return parse_source(text, str(p))
