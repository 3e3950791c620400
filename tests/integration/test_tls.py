"""TLS (DM's ``security`` section) on real servers: a private MariaDB started with
--ssl-ca/--ssl-cert/--ssl-key, users created REQUIRE SSL and REQUIRE X509 (so a connection
without TLS, or without the client certificate, is refused by the server itself).

Every way shardflow talks to a source or the target is checked: pymysql (checks, DDL, the
binlog dump), mysqlclient (the DML executors), Spark's JDBC reader and writer (full load)."""

import base64
import os
import ssl
import textwrap

import pytest
import yaml

from dm_core.binlog.dump import BinlogDump
from dm_core.config.source import parse_source
from dm_core.config.task import parse_task
from dm_core.db import Endpoint, connect, connect_native, qi, qt
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.sources import source_endpoint, target_endpoint
from dm_core.state import StateStore
from dm_core.state.schema import SCHEMA
from dm_core.sync.syncer import Syncer
from dm_core.tls import TLS
from dm_core.validate.compare import compare_task, render

from ..tls_certs import make_certs
from .mariadb_fixture import free_port, start_mariadb
from .test_full_load_types import _spark_load

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    certs = make_certs(d)
    db = start_mariadb(d, free_port(range(25390, 25400)), server_id=95,
                       extra_args=[f"--ssl-ca={certs['ca']}", f"--ssl-cert={certs['server_cert']}",
                                   f"--ssl-key={certs['server_key']}"])
    db.sql("CREATE USER 'tls_only'@'%' IDENTIFIED BY 'pw-ssl' REQUIRE SSL",
           "GRANT ALL ON *.* TO 'tls_only'@'%'",
           "CREATE USER 'x509_only'@'%' IDENTIFIED BY 'pw-x509' REQUIRE X509",
           "GRANT ALL ON *.* TO 'x509_only'@'%'")
    yield db, certs
    db.stop()


def _pem(path: str) -> str:
    with open(path) as f:
        return f.read()


def _cipher_via(kind: str, ep: Endpoint) -> str:
    """The TLS cipher of a session opened the way ``kind`` opens it ("" if not encrypted)."""
    if kind == "binlog dump":     # the session is dumping: ask the socket, after an event came through it
        dump = BinlogDump(ep, "mysql-bin.000001", 4, server_id=4242, non_block=True)
        try:
            assert next(iter(dump.events()))
            sock = dump.conn._sock
            return sock.cipher()[0] if isinstance(sock, ssl.SSLSocket) else ""
        finally:
            dump.close()
    conn = connect_native(ep) if kind == "mysqlclient" else connect(ep)
    try:
        cur = conn.cursor()
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        got = cur.fetchone()[1]
        cur.close()
        return got.decode() if isinstance(got, bytes) else got
    finally:
        conn.close()


@pytest.mark.parametrize("kind", ["pymysql", "mysqlclient", "binlog dump"])
def test_every_driver_connects_with_tls_and_a_client_certificate(tls_server, kind):
    db, c = tls_server
    ca = TLS(_pem(c["ca"]))
    x509 = TLS(_pem(c["ca"]), _pem(c["client_cert"]), _pem(c["client_key"]))
    assert _cipher_via(kind, Endpoint("127.0.0.1", db.port, "tls_only", "pw-ssl", tls=ca))
    assert _cipher_via(kind, Endpoint("127.0.0.1", db.port, "x509_only", "pw-x509", tls=x509))


@pytest.mark.parametrize("kind", ["pymysql", "mysqlclient"])
@pytest.mark.parametrize("case", ["no tls", "wrong ca", "no client certificate"])
def test_the_server_or_the_client_refuses_what_tls_settings_do_not_allow(tls_server, kind, case):
    db, c = tls_server
    user, pw, tls = {
        "no tls": ("tls_only", "pw-ssl", None),
        "wrong ca": ("tls_only", "pw-ssl", TLS(_pem(c["other_ca"]))),
        "no client certificate": ("x509_only", "pw-x509", TLS(_pem(c["ca"]))),
    }[case]
    with pytest.raises(ShardflowError) as e:
        _cipher_via(kind, Endpoint("127.0.0.1", db.port, user, pw, name="source tls", tls=tls))
    want = ErrorCode.DOWNSTREAM_UNREACHABLE if kind == "mysqlclient" else ErrorCode.UPSTREAM_UNREACHABLE
    assert e.value.code is want and pw not in str(e.value)
    assert f"source tls {user}@127.0.0.1:{db.port}" in str(e.value)


def test_source_and_target_over_tls_full_load_on_spark_then_sync(tls_server, stack, uniq):
    """A DM source file (certificate paths) and task file (base64 and inline PEM forms) whose
    users only log in with a client certificate: the Spark full load and the binlog sync converge."""
    db, c = tls_server
    schema, tdb, name, sid = f"tls{uniq}", f"tlst{uniq}", f"tls{uniq}", f"tls-{uniq}"
    db.sql(f"CREATE DATABASE {qi(schema)}",
           f"CREATE TABLE {qt(schema, 't')} (id int PRIMARY KEY, v varchar(40), ts timestamp NULL)",
           f"INSERT INTO {qt(schema, 't')} VALUES " + ", ".join(f"({i}, 'v{i}', '2024-01-02 03:04:05')" for i in range(1, 301)))
    src = parse_source(textwrap.dedent(f"""\
        source-id: {sid}
        from:
          host: 127.0.0.1
          port: {db.port}
          user: x509_only
          password: pw-x509
          security:
            ssl-ca: {c['ca']}
            ssl-cert: {c['client_cert']}
            ssl-key: {c['client_key']}
        """), "source.yaml")
    b64 = lambda p: base64.b64encode(_pem(p).encode()).decode()   # noqa: E731
    text = yaml.safe_dump({
        "name": name, "task-mode": "all",
        "target-database": {"host": "127.0.0.1", "port": db.port, "user": "x509_only", "password": "pw-x509",
                            "security": {"ssl-ca-base64": b64(c["ca"]), "ssl-cert-base64": b64(c["client_cert"]),
                                         "ssl-key-bytes": _pem(c["client_key"])}},
        "mysql-instances": [{"source-id": sid, "block-allow-list": "ba", "route-rules": ["r"]}],
        "routes": {"r": {"schema-pattern": schema, "target-schema": tdb}},
        "block-allow-list": {"ba": {"do-dbs": [schema]}}}, sort_keys=False)
    task = parse_task(text, "task.yaml")
    assert task.target_database.tls is not None and src.tls is not None
    store = StateStore()
    try:
        store.put_source(sid, src.to_dict(), src.password)
        ep = source_endpoint(store, sid)
        assert ep.tls == src.tls, "the source's TLS material survives the state store"
        reset_task(store, name)
        store.put_task(name, text, "running")
        prepare(task, store)
        db.sql(f"UPDATE {qt(schema, 't')} SET v = 'during-dump' WHERE id <= 10")
        _spark_load(name, dict(os.environ))
        finish(task, store)
        db.sql(f"INSERT INTO {qt(schema, 't')} VALUES (1000, 'after', NULL)", f"DELETE FROM {qt(schema, 't')} WHERE id = 5")
        r = Syncer(task, sid, store, budget_events=500).run_until(float("inf"), max_windows=50)
        assert not r.paused and r.caught_up, r.paused
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
        conn = connect(target_endpoint(task))
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {qt(tdb, 't')}")
            assert cur.fetchone()[0] == 300
        conn.close()
    finally:
        reset_task(store, name)
        with store.tx() as cur:
            cur.execute(f"DELETE FROM {SCHEMA}.source WHERE source_id = %s", (sid,))
        store.close()
        db.sql(f"DROP DATABASE IF EXISTS {qi(schema)}", f"DROP DATABASE IF EXISTS {qi(tdb)}")
