"""No silently ignored keys: every key the task and source decoders read has an inventory entry,
and every key shardflow does not act on warns (naming the key) when a file sets it."""

import json
import textwrap

import pytest

from dm_core.config import inventory
from dm_core.config.decode import yaml_keys
from dm_core.config.instances import _RawInstance
from dm_core.config.source import _RawSource, parse_source
from dm_core.config.task import _MAPS, _RawTask, parse_task

ROOTS = [_RawTask, _RawInstance, _RawSource, *(cls for cls, _ in _MAPS.values())]


def _all_keys() -> set[tuple[str, str]]:
    return {(cls.__name__, k) for root in ROOTS for cls in inventory.records(root) for k in yaml_keys(cls)}


def test_every_parsed_key_has_an_entry():
    missing = sorted(_all_keys() - set(inventory.KEYS))
    assert not missing, f"keys without an inventory entry (dm_core/config/inventory.py): {missing}"


def test_no_entry_for_a_key_nobody_parses():
    containers = {("_RawTask", k) for k in (*_MAPS, "mysql-instances")}     # decoded apart from _RawTask
    stale = sorted(set(inventory.KEYS) - _all_keys() - containers)
    assert not stale, f"inventory entries for keys no record has: {stale}"


def test_warned_keys_say_why_and_what_to_do():
    for (cls, key), entry in inventory.KEYS.items():
        assert entry.status in (inventory.WORKS, inventory.WARN, inventory.DEPRECATED), (cls, key)
        if entry.status != inventory.WORKS:
            assert entry.why and entry.fix, (cls, key)


TASK = """\
name: t
task-mode: all
target-database: {host: 127.0.0.1, port: 4000, user: root, password: pw}
mysql-instances:
  - source-id: s1
    mydumper-config-name: d
    loader-config-name: l
    syncer-config-name: y
mydumpers: {d: {rows: 0}}
loaders: {l: {on-duplicate: ''}}
syncers: {y: {batch: 100}}
"""

# (where the key goes, YAML to put there, dotted key expected in the warning) -- the keys issue 15
# found parsed and ignored, and others shardflow does not act on
WARNED_TASK_KEYS = [
    ("loaders.l", "import-mode: physical", "loaders.l.import-mode"),
    ("loaders.l", "import-mode: PHYSICAL", "loaders.l.import-mode"),
    ("loaders.l", "dir: /data/dump", "loaders.l.dir"),
    ("loaders.l", "range-concurrency: 8", "loaders.l.range-concurrency"),
    ("syncers.y", "queue-size: 4096", "syncers.y.queue-size"),
    ("syncers.y", "enable-ansi-quotes: true", "syncers.y.enable-ansi-quotes"),
    ("syncers.y", "max-retry: 3", "syncers.y.max-retry"),
    ("mydumpers.d", "threads: 32", "mydumpers.d.threads"),
    ("mydumpers.d", "skip-tz-utc: true", "mydumpers.d.skip-tz-utc"),
    ("mydumpers.d", "extra-args: '--consistency none'", "mydumpers.d.extra-args"),
    ("mydumpers.d", "statement-size: 50000", "mydumpers.d.statement-size"),
    ("", "experimental: {async-checkpoint-flush: true}", "experimental.async-checkpoint-flush"),
    ("", "enable-heartbeat: true", "enable-heartbeat"),
    ("target-database", "max-allowed-packet: 67108864", "target-database.max-allowed-packet"),
    ("target-database", "security: {ssl-ca-bytes: x, cert-allowed-cn: [dm]}", "target-database.security.cert-allowed-cn"),
    ("", "validators: {v: {validate-interval: 1m}}", "validators.v.validate-interval"),
]


def _with(where: str, yaml_line: str, base: str = TASK) -> str:
    if not where:
        return base + yaml_line + "\n"
    if where == "target-database":
        inner = yaml_line.replace(": ", ": ", 1)
        return base.replace("password: pw}", f"password: pw, {inner}}}")
    top, name = where.split(".")
    return base.replace(f"{top}: {{{name}: {{", f"{top}: {{{name}: {{{yaml_line}, ")


@pytest.mark.parametrize("where,line,key", WARNED_TASK_KEYS, ids=[k for _, _, k in WARNED_TASK_KEYS])
def test_task_key_shardflow_does_not_act_on_warns(where, line, key):
    text = _with(where, line)
    if "validators" in line:
        text = text.replace("syncer-config-name: y", "syncer-config-name: y\n    continuous-validator-config-name: v")
    if "ssl-ca-bytes" in line:      # a real CA is needed for the section to load
        pytest.importorskip("cryptography")
        text = text.replace("ssl-ca-bytes: x", f"ssl-ca-bytes: {json.dumps(_ca_pem())}")
    t = parse_task(text, "task.yaml")
    got = [w for w in t.warnings if w.key == key]
    assert got, f"no warning for {key}: {[str(w) for w in t.warnings]}"
    assert got[0].message and got[0].fix


@pytest.mark.parametrize("line", [
    "import-mode: logical", "import-mode: sql", "dir: ./dumped_data", "pool-size: 4", "on-duplicate-logical: ignore"])
def test_loader_keys_that_work_or_keep_dm_defaults_do_not_warn(line):
    t = parse_task(_with("loaders.l", line), "task.yaml")
    assert t.warnings == []


@pytest.mark.parametrize("where,line", [
    ("mydumpers.d", "threads: 4"), ("mydumpers.d", "chunk-filesize: '64'"), ("mydumpers.d", "skip-tz-utc: false"),
    ("mydumpers.d", "chunk-filesize: '128'"), ("mydumpers.d", "where: 'id > 10'"), ("mydumpers.d", "statement-size: 1000000"), ("syncers.y", "queue-size: 1024"),
    ("syncers.y", "safe-mode-duration: 60s"), ("syncers.y", "compact: true"), ("", "timezone: '+08:00'"),
    ("", "online-ddl: true"), ("", "collation_compatible: loose"), ("", "collation_compatible: strict"), ("", "clean-dump-file: true"),
    ("", "validators: {v: {mode: none}}")])
def test_keys_that_work_or_keep_dm_defaults_do_not_warn(where, line):
    text = _with(where, line)
    if "validators" in line:
        text = text.replace("syncer-config-name: y", "syncer-config-name: y\n    continuous-validator-config-name: v")
    t = parse_task(text, "task.yaml")
    assert [str(w) for w in t.warnings] == []


SOURCE = "source-id: s1\nfrom: {host: 127.0.0.1, port: 3306, user: root, password: pw}\n"


@pytest.mark.parametrize("line,key", [
    ("enable-relay: true", "enable-relay"), ("relay-binlog-name: mysql-bin.000003", "relay-binlog-name"),
    ("relay-dir: /relay", "relay-dir"), ("server-id: 4321", "server-id"), ("charset: latin1", "charset"),
    ("purge: {interval: 60}", "purge.interval"), ("checker: {check-interval: 1s}", "checker.check-interval"),
    ("checker: {backoff-factor: 3}", "checker.backoff-factor"), ("enable: false", "enable"),
    ("case-sensitive: true", "case-sensitive"), ("tracer: {enable: true}", "tracer")])
def test_source_key_shardflow_does_not_act_on_warns(line, key):
    src = parse_source(SOURCE + line + "\n", "source.yaml")
    assert [w.key for w in src.warnings] == [key]


def test_dm_source_defaults_do_not_warn():
    src = parse_source(SOURCE + textwrap.dedent("""\
        enable-gtid: true
        enable-relay: false
        relay-binlog-name: ''
        flavor: mariadb
        checker: {check-enable: true, backoff-rollback: 5m, backoff-max: 5m}
        purge: {interval: 3600, expires: 0, remain-space: 15}
        filters: [{schema-pattern: s, events: [delete], action: Ignore}]
        """), "source.yaml")
    assert [str(w) for w in src.warnings] == []


def _ca_pem() -> str:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ca")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


# DM's check item names (dm/config/checking_item.go: AllCheckingItems + AdditionalCheckingItems)
DM_CHECK_ITEMS = [
    "all", "dump_privilege", "replication_privilege", "version", "server_id", "binlog_enable", "binlog_format",
    "binlog_row_image", "table_schema", "schema_of_shard_tables", "auto_increment_ID", "online_ddl", "binlog_db",
    "meta_position", "conn_number", "target_privilege", "empty_region", "region_distribution", "downstream_version",
    "free_space", "downstream_mutex_features", "downstream_table_empty", "primary_key"]


def test_every_dm_check_item_name_is_accepted_in_ignore_checking_items():
    t = parse_task(TASK + f"ignore-checking-items: {json.dumps(DM_CHECK_ITEMS)}\n", "task.yaml")
    assert t.ignore_checking_items == DM_CHECK_ITEMS


def test_every_item_shardflow_checks_can_be_ignored_by_name():
    from dm_core.check import IGNORABLE

    t = parse_task(TASK + f"ignore-checking-items: {json.dumps(sorted(IGNORABLE))}\n", "task.yaml")
    assert sorted(t.ignore_checking_items) == sorted(IGNORABLE)


def test_unknown_check_item_names_the_entry_and_the_nearest_dm_name():
    from dm_core.config.problems import TaskConfigError

    with pytest.raises(TaskConfigError) as e:
        parse_task(TASK + "ignore-checking-items: [free_space, lightning_free_space]\n", "task.yaml")
    (p,) = e.value.problems
    assert p.key == "ignore-checking-items[1]" and "free_space" in p.fix
