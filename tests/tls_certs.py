"""Throw-away TLS material for tests, made with the openssl command line.

    certs = make_certs(tmp_path)   # {"ca", "server_cert", "server_key", "client_cert", "client_key", "other_ca"}

The server certificate names 127.0.0.1 and localhost (subjectAltName), so host name checks
pass; ``other_ca`` signed nothing here (a wrong CA for negative tests).
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def _ssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(directory) -> dict[str, str]:
    d = Path(directory) / "tls"
    d.mkdir(parents=True, exist_ok=True)
    for name in ("ca", "other_ca"):
        _ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem",
             "-days", "2", "-subj", f"/CN=shardflow-test-{name}", cwd=d)
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, cn, ext in (("server", "127.0.0.1", ["-extfile", "san.cnf"]), ("client", "shardflow-client", [])):
        _ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", f"/CN={cn}", cwd=d)
        _ssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", f"{name}.pem", "-days", "2", *ext, cwd=d)
    return {"ca": str(d / "ca.pem"), "other_ca": str(d / "other_ca.pem"),
            "server_cert": str(d / "server.pem"), "server_key": str(d / "server.key"),
            "client_cert": str(d / "client.pem"), "client_key": str(d / "client.key")}
