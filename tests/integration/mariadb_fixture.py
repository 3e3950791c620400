"""Private throw-away MariaDB servers for integration tests (about 2 s each:
``mariadb-install-db`` then ``mariadbd`` on a private port and data directory).

    db = start_mariadb(tmp_path, private_port(0), server_id=20)
    conn = connect(db.endpoint())
    ...
    db.stop()

Use ``private_port(0..9)``: ten ports just above the local stack's first upstream port
(3320-3329 on the default stack), so stacks on other ports (CI's, a second checkout's)
run their private servers on ports of their own.

A server outlives its test when the test process is killed (a timeout, a CI run cut short):
it runs in a session of its own. Each server's directory names its owner (``owner.pid``, the
test process), and the first ``free_port`` of a process stops the servers whose owner is gone,
so the next run finds its ports free.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from dm_core.db import Endpoint

HOST = "127.0.0.1"


@dataclass
class MariaDB:
    port: int
    datadir: Path
    socket: Path
    proc: subprocess.Popen = field(repr=False)
    log: Path = field(repr=False)
    args: list = field(default_factory=list, repr=False)  # mariadbd's command line, for start()

    def endpoint(self, user: str = "root", password: str = "", name: str = "") -> Endpoint:
        return Endpoint(host=HOST, port=self.port, user=user, password=password, name=name)

    def connect(self, **kw):
        import pymysql

        return pymysql.connect(host=HOST, port=self.port, user="root", password="", autocommit=True, **kw)

    def sql(self, *statements: str) -> list:
        """Run statements as root; return the rows of the last one."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                rows = []
                for s in statements:
                    cur.execute(s)
                    rows = list(cur.fetchall())
                return rows
        finally:
            conn.close()

    def start(self, timeout: float = 60.0) -> None:
        """Start the server again on the same data directory (after ``stop``)."""
        if self.proc.poll() is None:
            return
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        _wait_up(self, timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def _binary(name: str, fallback: str) -> str:
    for n in (name, fallback):
        p = shutil.which(n) or (f"/usr/sbin/{n}" if os.path.exists(f"/usr/sbin/{n}") else None)
        if p:
            return p
    raise RuntimeError(f"{name} not found: apt-get install -y mariadb-server")


def start_mariadb(tmpdir, port: int, server_id: int, extra_args=(), *, log_bin: bool = True,
                  timeout: float = 60.0) -> MariaDB:
    """Initialise a data directory under ``tmpdir`` and start mariadbd on 127.0.0.1:``port``.

    With ``log_bin`` (the default) the server writes a ROW/FULL/FULL-metadata binlog, as
    shardflow needs; ``extra_args`` are appended to mariadbd's command line.
    """
    base = Path(tmpdir) / f"mariadb-{port}"
    if base.exists():
        shutil.rmtree(base)
    datadir = base / "data"
    datadir.mkdir(parents=True)
    socket = base / "mysqld.sock"
    # its own, for the install's bootstrap server too: a starting mariadbd deletes the #sql* files
    # of its tmpdir, and an install on /tmp aborted on another's ("Error on delete of
    # '/tmp/#sql-temptable-…'") while the other test worker started a server (stack.sh)
    (base / "tmp").mkdir()
    (base / OWNER).write_text(str(os.getpid()))
    log = base / "mariadbd.log"
    subprocess.run(
        [_binary("mariadb-install-db", "mysql_install_db"), "--no-defaults", f"--datadir={datadir}",
         "--user=root", "--auth-root-authentication-method=normal", "--skip-test-db", f"--tmpdir={base / 'tmp'}"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    args = [_binary("mariadbd", "mysqld"), "--no-defaults", f"--datadir={datadir}", f"--port={port}",
            f"--socket={socket}", "--user=root", f"--server-id={server_id}", f"--bind-address={HOST}",
            f"--pid-file={base / 'mariadbd.pid'}", f"--log-error={log}",
            f"--tmpdir={base / 'tmp'}", "--innodb-buffer-pool-size=32M"]
    if log_bin:
        args += ["--log-bin=mysql-bin", "--binlog-format=ROW", "--binlog-row-image=FULL",
                 "--binlog-row-metadata=FULL"]
    args += list(extra_args)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    db = MariaDB(port, datadir, socket, proc, log, args)
    _wait_up(db, timeout)
    return db


def _wait_up(db: MariaDB, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if db.proc.poll() is not None:
            raise RuntimeError(f"mariadbd on port {db.port} exited with {db.proc.returncode}:\n{_tail(db.log)}")
        try:
            db.sql("SELECT 1")
            return
        except Exception as e:  # noqa: BLE001 - not up yet
            last = e
            time.sleep(0.2)
    db.stop()
    raise RuntimeError(f"mariadbd on port {db.port} did not answer in {timeout}s ({last}):\n{_tail(db.log)}")


def private_port(offset: int) -> int:
    """Port ``offset`` (0-9) of this stack's private range: SHARDFLOW_UP1_PORT + 13 + offset."""
    if not 0 <= offset <= 9:
        raise ValueError(f"private ports are 0-9, got {offset}")
    return int(os.environ.get("SHARDFLOW_UP1_PORT", "3307")) + 13 + offset


def free_port(candidates) -> int:
    """The first of ``candidates`` nobody listens on (modules pick disjoint ranges), after the
    servers of dead test processes are stopped (once a process)."""
    import socket

    import pytest

    global _reaped
    if not _reaped:
        _reaped = True
        reap_orphans()
    for p in candidates:
        with socket.socket() as s:
            # as mariadbd binds: a port whose last connections are only in TIME_WAIT is free
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((HOST, p))
                return p
            except OSError:
                continue
    pytest.fail(f"no free port in {candidates} for a private MariaDB")


OWNER = "owner.pid"
_reaped = False


def _owner_alive(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"python" in cmd or b"pytest" in cmd   # a reused pid of another program is no owner


def reap_orphans(proc_root: str = "/proc") -> list[int]:
    """Kill the private servers (``mariadbd`` with a data directory whose parent holds
    :data:`OWNER`) whose owning test process is gone; return their pids."""
    killed = []
    for entry in Path(proc_root).iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or Path(argv[0].decode(errors="replace")).name not in ("mariadbd", "mysqld"):
            continue
        datadir = next((a[len(b"--datadir="):].decode(errors="replace") for a in argv
                        if a.startswith(b"--datadir=")), None)
        owner = Path(datadir).parent / OWNER if datadir else None
        try:
            pid = int(owner.read_text()) if owner else None
        except (OSError, ValueError):
            continue
        if pid is None or _owner_alive(pid):
            continue
        try:
            os.kill(int(entry.name), signal.SIGKILL)
            killed.append(int(entry.name))
        except OSError:
            pass
    return killed


def _tail(path: Path, n: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""
