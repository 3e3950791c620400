"""A private test server whose test process died is stopped by the next run's first
``free_port`` (mariadb_fixture.reap_orphans); one whose owner lives, or that is not a private
test server, is left alone. The servers here are stand-ins: processes named ``mariadbd`` with a
``--datadir`` argument, as /proc shows a real one."""

import os
import subprocess
import sys
import time

import pytest

from .mariadb_fixture import OWNER, reap_orphans


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _stand_in(base, owner):
    data = base / "data"
    data.mkdir(parents=True)
    if owner is not None:
        (base / OWNER).write_text(str(owner))
    return subprocess.Popen(["bash", "-c", f'exec -a mariadbd {sys.executable} -c "import time; time.sleep(120)" '
                                           f'--datadir={data}'], start_new_session=True)


def _argv0(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().split(b"\0")[0]


@pytest.mark.parametrize("owner, reaped", [
    ("dead", True),      # its test process is gone: stopped
    ("self", False),     # its test process runs (this one): left alone
    (None, False),       # not a private test server (no owner file): left alone
])
def test_servers_of_dead_test_processes_are_stopped(tmp_path, owner, reaped):
    pid = {"dead": _dead_pid(), "self": os.getpid(), None: None}[owner]
    proc = _stand_in(tmp_path / "mariadb-1", pid)
    try:
        deadline = time.monotonic() + 5   # until exec has replaced bash (whose -c text names mariadbd too)
        while _argv0(proc.pid) != b"mariadbd" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _argv0(proc.pid) == b"mariadbd"
        killed = reap_orphans()
        assert (proc.pid in killed) is reaped
        if reaped:
            assert proc.wait(timeout=5) == -9
        else:
            assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
