"""DM's `security` section: every form of the CA, certificate and key loads into the same PEM
texts; what cannot work is an error naming the key; what DM would silently ignore is a warning."""

import base64
import json
import stat
from pathlib import Path

import pytest

from dm_core.config.problems import SourceConfigError, TaskConfigError
from dm_core.config.source import parse_source
from dm_core.config.task import parse_task
from dm_core.tls import TLS, jdbc_properties, mysqlclient_ssl, pymysql_ssl

from ..tls_certs import make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    c = make_certs(tmp_path_factory.mktemp("certs"))
    return {k: (v, Path(v).read_text()) for k, v in c.items()}


def _source(security: dict):
    return parse_source("source-id: s\nfrom: " + json.dumps(
        {"host": "127.0.0.1", "port": 3306, "user": "u", "password": "p", "security": security}) + "\n", "source.yaml")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("form", ["path", "base64", "bytes"])
def test_every_form_loads_the_same_material(certs, form):
    def part(name, key):
        path, pem = certs[key]
        return {"path": {f"ssl-{name}": path}, "base64": {f"ssl-{name}-base64": _b64(pem)},
                "bytes": {f"ssl-{name}-bytes": pem}}[form]

    src = _source({**part("ca", "ca"), **part("cert", "client_cert"), **part("key", "client_key")})
    assert src.tls == TLS(certs["ca"][1], certs["client_cert"][1], certs["client_key"][1])
    assert src.warnings == []
    assert certs["client_key"][1] not in repr(src.tls)


def test_bytes_win_over_base64_over_path_as_in_dm(certs):
    src = _source({"ssl-ca": "/nonexistent", "ssl-ca-base64": _b64(certs["ca"][1]), "ssl-ca-bytes": certs["other_ca"][1]})
    assert src.tls.ca == certs["other_ca"][1]


@pytest.mark.parametrize("security,key,message", [
    ({"ssl-ca": "/no/such/ca.pem"}, "from.security.ssl-ca", "cannot read /no/such/ca.pem"),
    ({"ssl-ca-base64": "%%%"}, "from.security.ssl-ca-base64", "not base64"),
    ({"ssl-ca-bytes": "hello"}, "from.security.ssl-ca", "is not a PEM certificate"),
    ({"ssl-ca-bytes": "CA", "ssl-cert-bytes": "CERT"}, "from.security.ssl-ca", "is not a PEM certificate"),
])
def test_material_that_cannot_work_is_an_error_naming_the_key(security, key, message):
    with pytest.raises(SourceConfigError) as e:
        _source(security)
    assert (e.value.problems[0].key, message in e.value.problems[0].message) == (key, True), str(e.value)


def test_a_certificate_without_its_key_is_an_error(certs):
    with pytest.raises(SourceConfigError) as e:
        _source({"ssl-ca-bytes": certs["ca"][1], "ssl-cert-bytes": certs["client_cert"][1]})
    assert [p.key for p in e.value.problems] == ["from.security.ssl-key"]


def test_an_encrypted_private_key_is_an_error(certs, tmp_path):
    import subprocess

    enc = tmp_path / "enc.key"
    subprocess.run(["openssl", "pkey", "-in", certs["client_key"][0], "-aes256", "-passout", "pass:x", "-out", str(enc)],
                   check=True, capture_output=True)
    with pytest.raises(SourceConfigError) as e:
        _source({"ssl-ca": certs["ca"][0], "ssl-cert": certs["client_cert"][0], "ssl-key": str(enc)})
    assert [p.key for p in e.value.problems] == ["from.security.ssl-key"]


def test_client_certificate_without_a_ca_warns_that_there_is_no_tls(certs):
    src = _source({"ssl-cert": certs["client_cert"][0], "ssl-key": certs["client_key"][0]})
    assert src.tls is None and [w.key for w in src.warnings] == ["from.security.ssl-ca"]


def test_target_tls_of_a_task_file(certs):
    t = parse_task("name: t\ntask-mode: all\ntarget-database: " + json.dumps(
        {"host": "h", "port": 4000, "user": "u", "password": "p", "security": {"ssl-ca": certs["ca"][0]}})
        + "\nmysql-instances: [{source-id: s}]\n")
    assert t.target_database.tls == TLS(certs["ca"][1])
    with pytest.raises(TaskConfigError):
        parse_task("name: t\ntask-mode: all\ntarget-database: {host: h, port: 4000, user: u, security: {ssl-ca: /x}}\n"
                   "mysql-instances: [{source-id: s}]\n")


def test_driver_settings_are_private_files_and_jdbc_properties(certs):
    tls = TLS(certs["ca"][1], certs["client_cert"][1], certs["client_key"][1])
    py = pymysql_ssl(tls)
    assert py["check_hostname"] is True
    for k in ("ca", "cert", "key"):
        p = Path(py[k])
        assert stat.S_IMODE(p.stat().st_mode) == 0o600 and stat.S_IMODE(p.parent.stat().st_mode) == 0o700
    assert Path(py["key"]).read_text() == certs["client_key"][1]
    assert mysqlclient_ssl(tls)["ssl"] == {k: py[k] for k in ("ca", "cert", "key")}
    props = jdbc_properties(tls)
    assert props["useSsl"] == "true" and props["serverSslCert"] == certs["ca"][1]
    assert props["keyStoreType"] == "PKCS12" and Path(props["keyStore"]).exists()
    assert jdbc_properties(tls)["keyStore"] == props["keyStore"], "one keystore file per certificate"
    assert pymysql_ssl(None) is None and mysqlclient_ssl(None) == {} and jdbc_properties(None) == {}
