"""``python -m dm_core.jobhost run``: the job host in the foreground, as a supervisor runs it (a
systemd unit, docker-compose.yaml's shardflow-job-host): the supervised process is the host
(its driver answers as that process's child), jobs run on it, a second ``run`` is refused while
it answers, and ``stop`` ends the supervised process with exit code 0."""

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dm_core.jobhost import dispatch, service

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def test_run_is_the_host_in_the_foreground_until_it_is_stopped(tmp_path, caplog):
    where = tmp_path / "host"
    env = {**os.environ, "SHARDFLOW_JOB_HOST_DIR": str(where)}
    out = tmp_path / "run.out"
    with open(out, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "dm_core.jobhost", "run"], env=env, cwd=ROOT,
                                stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + service.START_TIMEOUT_S
        while service.status(where) is None:
            assert proc.poll() is None and time.monotonic() < deadline, out.read_text()[-3000:]
            time.sleep(0.2)
        got = service.status(where)
        assert _parent(got["pid"]) == proc.pid, (got, proc.pid)   # the driver of the supervised spark-submit
        assert (where / "host.pid").read_text() == str(proc.pid)

        log = logging.getLogger("test.jobhost.run")
        with caplog.at_level(logging.INFO, logger=log.name), pytest.raises(dispatch.JobFailed):
            dispatch.run_on_host("validate", ["--task", "no_such_task", "--run-id", "r"], master="local[2]", conf={},
                                 log=log, directory=where)
        assert "runs on the job host" in caplog.text and "'no_such_task' is not registered" in caplog.text, caplog.text

        second = subprocess.run([sys.executable, "-m", "dm_core.jobhost", "run"], env=env, cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and "already answers" in second.stderr, second.stderr

        assert service.stop(where)
        assert proc.wait(timeout=service.STOP_TIMEOUT_S) == 0, out.read_text()[-3000:]
        assert "job validate --task no_such_task" in out.read_text()   # the host's log is the process's output
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)   # its own group (stdin is no terminal): the driver too
            proc.wait()
