"""The operator of shardflow's Spark jobs: the full load, the validation, the re-sync's comparison."""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from shardflow_airflow import runtime


class SparkJobOperator(SparkSubmitOperator):
    """Run spark_jobs/<job>.py on this machine's job host (dm_core/jobhost) when one runs and
    can take the job, else with spark-submit as SparkSubmitOperator does. The task log says
    which and why, and shows the job's log either way.

    :param job: the job's name (``full_load``, ``validate``): spark_jobs/<job>.py
    Every other parameter is SparkSubmitOperator's (``application_args`` is templated).
    """

    def __init__(self, *, job: str, **kwargs: Any):
        kwargs.setdefault("application", str(runtime.PROJECT_ROOT / "spark_jobs" / f"{job}.py"))
        super().__init__(**kwargs)
        self.job = job

    def execute(self, context) -> None:
        from dm_core.jobhost.dispatch import run_on_host

        if self._hook is None:
            self._hook = self._get_hook()
        if run_on_host(self.job, [str(a) for a in self.application_args or []], master=self._hook._connection["master"],
                       conf=self.conf or {}, log=self.log):
            return
        super().execute(context)
