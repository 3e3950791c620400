"""A Spark job from Airflow's side: on the job host when route.py says so, its log lines into
the caller's log as they come; otherwise the caller's spark-submit. The one function the
operator (plugins/shardflow_airflow/spark_job.py), the bench and the tests call."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from dm_core import packaging
from dm_core.jobhost import client, route, service, wire


class JobFailed(RuntimeError):
    """The job ran on the host and ended with a non-zero exit code (its log says why)."""

    def __init__(self, job: str, rc: int):
        super().__init__(f"{job} on the job host ended with exit code {rc}: its log is above")
        self.rc = rc


def submit_killed(job: str, pid: int, signum: int) -> str:
    """What a task log says of a spark-submit ended by a signal shardflow did not send
    (SparkJobOperator.on_kill sends one for stop-task and pause-task). The driver it launched
    ends with it (spark_jobs/launcher_watch.py), and what the driver wrote then had nowhere to go.

    >>> print(submit_killed("full_load", 4242, 9))
    full_load (spark-submit, pid 4242) was killed by SIGKILL, not by shardflow (...)...OOM killer...
    >>> print(submit_killed("validate", 4242, 15))
    validate (spark-submit, pid 4242) was killed by SIGTERM, not by shardflow (...); the job's driver ended with it. What...
    """
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    oom = (" The kernel's OOM killer sends SIGKILL when the machine runs out of memory: `dmesg | grep -i "
           "'killed process'` says whether it did and what else held the memory." if signum == signal.SIGKILL
           else "")
    return (f"{job} (spark-submit, pid {pid}) was killed by {name}, not by shardflow (stop-task and pause-task stop "
            f"it through Airflow, and say so above); the job's driver ended with it.{oom} What the job recorded "
            f"is kept: clearing this task in Airflow (or `dmctl start-task`) runs it again from there.")


def run_on_host(job: str, argv: list[str], *, master: str, conf: dict, log, environ=None,
                directory: Path | None = None, on_connected=None) -> bool:
    """True: the host ran the job and it succeeded (JobFailed if it failed; client.HostLost if
    the host died under it). False: the job did not run, the caller runs it with spark-submit;
    ``log`` already says why. ``on_connected(conn)``: see client.run (how a stop cancels it)."""
    environ = os.environ if environ is None else environ
    directory = directory or wire.host_dir()
    sock = wire.socket_path(directory)
    status, down = None, ""
    if route.mode(environ) != "off":
        try:
            status = client.status(sock)
        except client.HostUnavailable as e:
            down = str(e)
    chosen = route.choose(master=master, conf=conf, environ=environ, status=status, down_reason=down,
                          code=packaging.code_fingerprint() if status is not None else None)
    if not chosen.host:
        log.info("%s runs with spark-submit: %s", job, chosen.why)
        if chosen.start_host:
            pid = service.start(directory, master=master, wait=False)
            log.info("a job host (pid %d, log %s) starts for the jobs after this one", pid, directory / "host.log")
        if chosen.restart_host:
            service.restart_detached(directory, master=master)
            log.info("the job host restarts with this code in the background, for the jobs after this one "
                     "(the restart's output in %s, the new host's in %s)", directory / "restart.log",
                     directory / "host.log")
        return False
    log.info("%s runs on the job host: %s", job, chosen.why)
    try:
        rc = client.run(job, argv, env=client.shardflow_env(environ), on_line=lambda line: log.info("%s", line),
                        on_note=lambda note: log.info("%s", note), path=sock, on_connected=on_connected)
    except client.HostUnavailable as e:
        log.warning("the job host did not take %s (%s): running it with spark-submit instead", job, e)
        return False
    if rc != 0:
        raise JobFailed(job, rc)
    return True
