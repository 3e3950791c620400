"""TLS to MySQL-protocol servers: DM's ``security`` section turned into what each driver takes.

DM's rule, kept here: a connection uses TLS when the section names a CA (``ssl-ca``,
``ssl-ca-base64`` or ``ssl-ca-bytes``); the server's certificate is then verified against
that CA and the host name, and ``ssl-cert``/``ssl-key`` add a client certificate (for users
created ``REQUIRE X509``). The config loader reads paths and base64 forms into PEM text
(``TLS``), so an endpoint carries the material itself, never a path that might not exist
where it is used (Spark executors, Airflow workers).

The drivers want files: ``pymysql_ssl`` / ``mysqlclient_ssl`` write the PEM texts to a
private directory (mode 0700, files 0600, named by a hash of their content so every
connection of a process reuses them). Spark's JDBC reader (MariaDB Connector/J 2.7) gets
``jdbc_properties``: ``useSsl``, the CA as ``serverSslCert`` (inline PEM, so it works on any
executor) and a client certificate as a PKCS#12 ``keyStore`` file (Connector/J reads no PEM
keys); on a cluster that file must exist on the executors too (same path).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class TLS:
    """PEM texts of one connection's TLS material (the private key never prints)."""

    ca: str
    cert: str = ""
    key: str = field(default="", repr=False)

    def to_dict(self) -> dict:
        return {"ssl-ca-bytes": self.ca, "ssl-cert-bytes": self.cert, "ssl-key-bytes": self.key}

    @classmethod
    def from_dict(cls, d: dict | None) -> "TLS | None":
        if not d or not d.get("ssl-ca-bytes"):
            return None
        return cls(d["ssl-ca-bytes"], d.get("ssl-cert-bytes") or "", d.get("ssl-key-bytes") or "")


_lock = threading.Lock()


def _private_dir() -> Path:
    d = Path(tempfile.gettempdir()) / f"shardflow-tls-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    if d.stat().st_uid != os.getuid() or d.stat().st_mode & 0o077:
        os.chmod(d, 0o700)
    return d


def _materialize(content: bytes, suffix: str, *, make=None) -> str:
    """A 0600 file named by the hash of ``content`` in the private directory, holding
    ``make()`` (default: ``content``); written once, then reused."""
    path = _private_dir() / (hashlib.sha256(content).hexdigest()[:32] + suffix)
    with _lock:
        if not path.exists():
            fd, tmp = tempfile.mkstemp(dir=path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(make() if make else content)
            os.replace(tmp, path)
    return str(path)


def _files(tls: TLS) -> dict:
    out = {"ca": _materialize(tls.ca.encode(), ".pem")}
    if tls.cert and tls.key:
        out["cert"] = _materialize(tls.cert.encode(), ".pem")
        out["key"] = _materialize(tls.key.encode(), ".pem")
    return out


def pymysql_ssl(tls: TLS | None) -> dict | None:
    """``ssl=`` of pymysql.connect (CA + host name verified), or None without TLS."""
    return None if tls is None else {**_files(tls), "check_hostname": True}


def mysqlclient_ssl(tls: TLS | None) -> dict:
    """Keyword arguments of MySQLdb.connect for TLS ({} without it)."""
    if tls is None:
        return {}
    return {"ssl": _files(tls), "ssl_mode": "VERIFY_IDENTITY"}


def jdbc_properties(tls: TLS | None) -> dict:
    """MariaDB Connector/J 2.7 connection properties for TLS ({} without it)."""
    if tls is None:
        return {}
    props = {"useSsl": "true", "trustServerCertificate": "false", "serverSslCert": tls.ca}
    if tls.cert and tls.key:
        path, password = _keystore(tls)
        props.update(keyStore=path, keyStorePassword=password, keyStoreType="PKCS12")
    return props


def _keystore(tls: TLS) -> tuple[str, str]:
    """A PKCS#12 file with the client certificate and key, and its password."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, load_pem_private_key, pkcs12

    # The password only guards a file that sits beside the key in a private directory; deriving
    # it from the material keeps one file per certificate without remembering a random one.
    password = hashlib.sha256(b"shardflow-keystore\0" + tls.key.encode()).hexdigest()[:32]

    def make() -> bytes:
        key = load_pem_private_key(tls.key.encode(), password=None)
        certs = x509.load_pem_x509_certificates(tls.cert.encode())
        return pkcs12.serialize_key_and_certificates(b"shardflow", key, certs[0], certs[1:] or None,
                                                     BestAvailableEncryption(password.encode()))

    return _materialize((tls.cert + "\0" + tls.key).encode(), ".p12", make=make), password
