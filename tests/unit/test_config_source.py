"""DM source files: DM's template loads unchanged; errors carry SOURCE_INVALID and every problem."""

import textwrap

import pytest

from dm_core.config.problems import SourceConfigError
from dm_core.config.source import load_source_file, parse_source
from dm_core.errors import ErrorCode

# DM's source configuration file reference (source.yaml), plain-text password.
DM_SOURCE = """\
source-id: "mysql-replica-01"
enable-gtid: false
enable-relay: false
relay-binlog-name: ""
relay-binlog-gtid: ""
flavor: ""
case-sensitive: false

from:
  host: "127.0.0.1"
  port: 3306
  user: "root"
  password: "secret"
  security:
    ssl-ca: "/path/to/ca.pem"
    ssl-cert: "/path/to/cert.pem"
    ssl-key: "/path/to/key.pem"

purge:
  interval: 3600
  expires: 0
  remain-space: 15

checker:
  check-enable: true
  backoff-rollback: 5m0s
  backoff-max: 5m0s

filters:
  - schema-pattern: "dmctl"
    table-pattern: "t_1"
    events: ["all"]
    sql-pattern: ["alter table .* add column aaa int"]
    action: Ignore
"""


@pytest.fixture(scope="module")
def dm_source(tmp_path_factory):
    """DM's template with its placeholder certificate paths pointing at real files."""
    from ..tls_certs import make_certs

    c = make_certs(tmp_path_factory.mktemp("certs"))
    return DM_SOURCE.replace("/path/to/ca.pem", c["ca"]).replace("/path/to/cert.pem", c["client_cert"]) \
        .replace("/path/to/key.pem", c["client_key"])


def test_dm_source_template_with_missing_certificate_files_names_each_key():
    with pytest.raises(SourceConfigError) as e:
        parse_source(DM_SOURCE, "source.yaml")
    assert [p.key for p in e.value.problems] == ["from.security.ssl-ca", "from.security.ssl-cert", "from.security.ssl-key"]
    assert "cannot read /path/to/ca.pem" in e.value.problems[0].message


def test_dm_source_template_loads(dm_source):
    src = parse_source(dm_source, "source.yaml")
    assert (src.source_id, src.host, src.port, src.user, src.password) == ("mysql-replica-01", "127.0.0.1", 3306, "root", "secret")
    assert (src.enable_gtid, src.enable_relay, src.flavor, src.server_id) == (False, False, "", None)
    assert src.filters[0].sql_pattern == ["alter table .* add column aaa int"]
    assert src.raw["purge"]["remain-space"] == 15
    assert "secret" not in repr(src)


def test_to_dict_is_flat_and_hides_the_password(dm_source):
    src = parse_source(dm_source)
    d = src.to_dict()
    assert (d["source-id"], d["host"], d["port"], d["user"]) == ("mysql-replica-01", "127.0.0.1", 3306, "root")
    assert "password" not in d and "secret" not in repr(d)
    assert src.to_dict(with_password=True)["password"] == "secret"
    assert d["filters"] == [{"schema-pattern": "dmctl", "table-pattern": "t_1", "events": ["all"],
                             "sql-pattern": ["alter table .* add column aaa int"], "action": "Ignore"}]


def test_password_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SF_SRC_PW", "from-env")
    f = tmp_path / "s.yaml"
    f.write_text("source-id: s\nflavor: MariaDB\nserver-id: 429\nenable-gtid: true\n"
                 "from: {host: h, port: 3307, user: u, password: '${SF_SRC_PW}'}\n")
    src = load_source_file(f)
    assert (src.password, src.flavor, src.server_id, src.enable_gtid) == ("from-env", "mariadb", 429, True)


BROKEN = [
    ("from: {host: h, port: 3306, user: u}\n", [("source-id", "missing")]),
    ("source-id: s\n", [("from", "missing")]),
    ("source-id: s\nfrom: {host: h, user: u, passwd: x}\nflavor: percona\n",
     [("from.passwd", "unknown key"), ("from.port", "missing"), ("flavor", "invalid value 'percona'")]),
    ("source-id: " + "x" * 33 + "\nenable-gtdi: true\nfrom: {host: h, port: 3306, user: u}\nserver-id: -1\n",
     [("enable-gtdi", "unknown key"), ("source-id", "longer than 32 characters"), ("server-id", "out of range: -1")]),
    ("source-id: s\nfrom: {host: h, port: 3306, user: u}\nchecker: {backoff-max: 5}\n"
     "filters:\n  - {schema-pattern: a, events: [inserts], action: Ignore}\n",
     # an unknown event type leaves its rule out with a warning, as DM does (test_dm_binlog_filter_cases)
     [("checker.backoff-max", "expected a duration string such as \"60s\" or \"1m30s\", got a number (5)")]),
    ("source-id: s\nsource-id: t\n", [("line 2", "duplicate key 'source-id'")]),
]


@pytest.mark.parametrize("text,expected", BROKEN)
def test_broken_sources(text, expected):
    with pytest.raises(SourceConfigError) as e:
        parse_source(textwrap.dedent(text), "source.yaml")
    assert [(p.key, p.message) for p in e.value.problems] == expected
    assert e.value.code is ErrorCode.SOURCE_INVALID
    assert str(e.value).startswith("[code=10002:config] source file source.yaml has ")


def test_missing_env_password_names_the_key(monkeypatch):
    monkeypatch.delenv("SF_NOPE", raising=False)
    with pytest.raises(SourceConfigError) as e:
        parse_source("source-id: s\nfrom: {host: h, port: 1, user: u, password: '${SF_NOPE}'}\n")
    assert [(p.key, p.message) for p in e.value.problems] == [("from.password", "environment variable SF_NOPE is not set")]
