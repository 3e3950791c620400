"""The operator of shardflow's Spark jobs: the full load, the validation, the re-sync's comparison."""

from __future__ import annotations

import socket
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow.sdk.exceptions import AirflowException

from shardflow_airflow import retry, runtime


class SparkJobOperator(SparkSubmitOperator):
    """Run spark_jobs/<job>.py on this machine's job host (dm_core/jobhost) when one runs and
    can take the job, else with spark-submit as SparkSubmitOperator does. The task log says
    which and why, and shows the job's log either way.

    :param job: the job's name (``full_load``, ``validate``): spark_jobs/<job>.py
    :param fence_task: the task whose full-load fence the job takes (dm_core/full/fence.py):
        the operator waits until no other job holds it before it takes a job host's slot or
        starts spark-submit, so a job that would only wait holds neither
    :param ends: the commands that end its tries when a server stayed away (retry.py)
    Every other parameter is SparkSubmitOperator's (``application_args`` is templated).
    """

    def __init__(self, *, job: str, fence_task: str | None = None, ends: str = retry.FULL_PHASE_ENDS, **kwargs: Any):
        kwargs.setdefault("application", str(runtime.PROJECT_ROOT / "spark_jobs" / f"{job}.py"))
        super().__init__(**kwargs)
        self.job = job
        self.fence_task = fence_task
        self.ends = ends
        self._host_conn: socket.socket | None = None   # the job host's connection while a job runs there
        self._stopping = False

    def execute(self, context) -> None:
        """The job's exit code ``SERVERS_AWAY_EXIT`` (it stopped only because a server stayed
        away) raises ``retry.ServersAway``, which the full DAG's retry policy runs again."""
        from dm_core.full.reconnect import SERVERS_AWAY_EXIT
        from dm_core.jobhost.client import HostLost
        from dm_core.jobhost.dispatch import JobFailed, run_on_host, submit_killed

        if self._hook is None:
            self._hook = self._get_hook()
        if self.fence_task:
            from dm_core.full import fence

            fence.wait_free(runtime.state_dsn(), self.fence_task, self.log, cancelled=lambda: self._stopping)
        try:
            ran = run_on_host(self.job, [str(a) for a in self.application_args or []],
                              master=self._hook._connection["master"], conf=self.conf or {}, log=self.log,
                              on_connected=self._on_host)
        except HostLost:
            if self._stopping:
                raise RuntimeError(f"the task was stopped: its {self.job} on the job host was cancelled; "
                                   "the work it recorded is kept, and a rerun goes on from there") from None
            raise
        except JobFailed as e:
            if e.rc == SERVERS_AWAY_EXIT and not self._stopping:
                raise retry.servers_away(f"{self.job} on the job host", None, self.ends) from None
            raise
        finally:
            self._host_conn = None
        if not ran:
            try:
                super().execute(context)
            except AirflowException:
                sp = getattr(self._hook, "_submit_sp", None)   # the hook keeps spark-submit's process
                rc = sp.returncode if sp is not None and not self._stopping else None
                if rc == SERVERS_AWAY_EXIT:
                    raise retry.servers_away(f"{self.job} (spark-submit)", None, self.ends) from None
                if rc is not None and rc < 0:   # the job's own last words went with the JVM's pipes
                    raise AirflowException(submit_killed(self.job, sp.pid, -rc)) from None
                raise

    def _on_host(self, conn: socket.socket) -> None:
        self._host_conn = conn

    def on_kill(self) -> None:
        """A stopped task (dmctl stop-task, a run marked failed) stops its job: spark-submit's
        process is killed (SparkSubmitOperator), a job on the host is cancelled by closing its
        connection (dm_core/jobhost/server.py)."""
        self._stopping = True
        conn = self._host_conn
        if conn is not None:
            self.log.info("stopping: %s on the job host is cancelled (the host cancels its Spark jobs; the work "
                          "recorded so far is kept)", self.job)
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:   # already closed: the host sees the client gone anyway
                pass
        super().on_kill()
