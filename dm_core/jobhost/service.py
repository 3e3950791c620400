"""Start, stop and look at a machine's job host (``python -m dm_core.jobhost start|stop|status``,
``scripts/stack.sh job-host ...``, or the Airflow operator at first use with
``SHARDFLOW_JOB_HOST=start``), or run it in the foreground under a supervisor (``run``: a
systemd unit, a sidecar container), which restarts it when it ends.

The host is a spark-submit of spark_jobs/job_host.py in a session of its own (it outlives the
process that started it), with the same ``--conf`` as every shardflow submit. Its directory
(wire.host_dir) holds the socket, ``host.pid`` and ``host.log`` (Spark's output and one line
per job: queued, started, ended). A lock file keeps two starters from starting two hosts.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from dm_core.jobhost import client, wire
from dm_core.jobhost.runner import EXECUTOR_ENV

PROJECT_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180
STOP_TIMEOUT_S = 60


def default_master(environ=None) -> str:
    return (environ or os.environ).get("SHARDFLOW_JOB_HOST_MASTER") or "local[2]"


def submit_command(master: str, socket_path: Path) -> list[str]:
    from dm_core.spark_options import driver_java_options

    here = Path(sys.executable).parent / "spark-submit"
    binary = str(here) if here.exists() else (shutil.which("spark-submit") or "spark-submit")
    jar = os.environ.get("SHARDFLOW_JDBC_JAR", "/usr/share/java/mariadb-java-client.jar")
    conf = {"spark.ui.enabled": "false", "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable, "spark.driver.extraJavaOptions": driver_java_options()}
    return [binary, "--master", master, "--jars", jar, "--name", "shardflow-job-host",
            *[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")],
            str(PROJECT_ROOT / "spark_jobs" / "job_host.py"), "--socket", str(socket_path)]


def _pid(directory: Path) -> int | None:
    """The host's pid when that process still runs."""
    try:
        pid = int((directory / "host.pid").read_text())
    except (FileNotFoundError, ValueError):
        return None
    _reap(pid)   # a host this process started and that ended is a zombie until reaped
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return None
    return None if _zombie(pid) else pid


def _zombie(pid: int) -> bool:
    """An ended host that another live process started (and has not reaped): the Airflow worker
    whose task started it, while `jobhost stop` or a restart waits for it to end."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def status(directory: Path | None = None) -> dict | None:
    try:
        return client.status(wire.socket_path(directory or wire.host_dir()))
    except client.HostUnavailable:
        return None


def _host_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in EXECUTOR_ENV}
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def run_foreground(directory: Path | None = None, *, master: str | None = None) -> None:
    """Become the host (exec): its output goes to this process's stdout and stderr, and this
    process ends when the host does. For a supervisor that keeps it running: with ``start``
    the supervised process would return at once, leaving a host the supervisor does not see.
    RuntimeError when a host already answers on the directory."""
    directory = wire.private_dir(directory or wire.host_dir())
    with open(directory / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        got = status(directory)
        if got:
            raise RuntimeError(f"a job host (pid {got['pid']}) already answers on {wire.socket_path(directory)}: "
                               "stop it first (python -m dm_core.jobhost stop)")
        pid = _pid(directory)
        if pid is not None:   # one that does not answer: a broken host, or one starting that we replace
            _kill(pid)
        wire.socket_path(directory).unlink(missing_ok=True)
        (directory / "host.pid").write_text(str(os.getpid()))   # exec keeps the pid
        if not os.isatty(0):   # supervised: its process group is its pid, as a started host's (stop's kill
            os.setpgrp()       # reaches it all); at a terminal it stays in the foreground group, for Ctrl-C
        cmd = submit_command(master or default_master(), wire.socket_path(directory))
        os.chdir(PROJECT_ROOT)
        os.execvpe(cmd[0], cmd, _host_env())


def start(directory: Path | None = None, *, master: str | None = None, wait: bool = True) -> int:
    """The host's pid: the running one, or one started now (``wait``: until it takes jobs)."""
    directory = wire.private_dir(directory or wire.host_dir())
    with open(directory / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        got = status(directory)
        if got:
            return got["pid"]
        pid = _pid(directory)
        if pid is not None and _broken(directory, pid):
            _kill(pid)
            pid = None
        if pid is None:
            wire.socket_path(directory).unlink(missing_ok=True)   # a killed host's: nobody answers on it
            with open(directory / "host.log", "ab") as out:
                proc = subprocess.Popen(submit_command(master or default_master(), wire.socket_path(directory)),
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=_host_env(),
                                        cwd=PROJECT_ROOT, start_new_session=True)
            pid = proc.pid
            (directory / "host.pid").write_text(str(pid))
    if wait:
        _await_ready(directory, pid)
    return pid


def _broken(directory: Path, pid: int) -> bool:
    """A host process that runs and does not answer: listened once (its socket is there) or
    has been starting for longer than a start takes. Else another caller is starting it."""
    started = (directory / "host.pid").stat().st_mtime
    return wire.socket_path(directory).exists() or time.time() - started > START_TIMEOUT_S


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:   # not a group of its own (run_foreground at a terminal): the process alone
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _reap(pid)


def _await_ready(directory: Path, pid: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while status(directory) is None:
        if _pid(directory) != pid:
            raise RuntimeError(f"the job host (pid {pid}) ended while starting: see {directory / 'host.log'}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the job host (pid {pid}) did not start in {START_TIMEOUT_S}s: see "
                               f"{directory / 'host.log'}")
        time.sleep(0.2)


def restart_detached(directory: Path, *, master: str) -> None:
    """``python -m dm_core.jobhost restart`` in a session of its own: the caller (an Airflow
    task) does not wait for the old host to drain nor for the new one to start."""
    env = {**os.environ, "SHARDFLOW_JOB_HOST_DIR": str(directory)}
    with open(wire.private_dir(directory) / "restart.log", "ab") as out:
        subprocess.Popen([sys.executable, "-m", "dm_core.jobhost", "restart", "--master", master],
                         stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, cwd=PROJECT_ROOT,
                         start_new_session=True)


def stop(directory: Path | None = None) -> bool:
    """Stop the host after its running job (queued jobs are refused and fall back to
    spark-submit); killed if it has not ended within STOP_TIMEOUT_S. False if none ran."""
    directory = directory or wire.host_dir()
    pid = _pid(directory)
    try:
        client.request_stop(wire.socket_path(directory))
    except client.HostUnavailable:
        if pid is None:
            return False
    if pid is not None:
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while _pid(directory) == pid and time.monotonic() < deadline:
            time.sleep(0.2)
        if _pid(directory) == pid:
            _kill(pid)
    (directory / "host.pid").unlink(missing_ok=True)
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:   # not our child: its own parent reaps it
        pass
