"""The Celery configuration of `make airflow-celery-up` (scripts/airflow_celery.sh points
``AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS`` at ``CELERY_CONFIG``): Airflow's default, plus the
modules every worker imports once when it starts (``PRELOAD``), before it forks its pool.

Why: a Celery worker runs each task in a pool process (Airflow's supervisor), which forks the
task process; both start with what the worker had imported. Without the preload, a pool
process's first task imports Airflow's task runner (13 s), and its task process parses the DAG
file with the Spark provider and dm_core (10 s), on a 2-core machine under 16 x 100 txn/s, when a
dead worker's 8 sensors start at once on the survivor: most of the minute a source may take to
resume (docs/operations.md, Sizing). The preloaded pages are shared by every pool and task process.

Read only through the attribute (PEP 562): Airflow's plugin manager imports every file under
plugins/, and `airflow standalone` has no use for the Celery provider.
"""

from __future__ import annotations

PRELOAD = (
    # what a pool process runs: the workload decoder, the supervisor, the task runner it forks
    "airflow.executors.workloads",
    "airflow.sdk.execution_time.supervisor",
    "airflow.sdk.execution_time.task_runner",
    # what the task process parses: the DAG factory and the operators of every DAG it builds
    "airflow.providers.apache.spark.operators.spark_submit",
    "airflow.providers.standard.operators.trigger_dagrun",
    "shardflow_airflow.factory",
    "shardflow_airflow.operators",
    "shardflow_airflow.sensors",
    "shardflow_airflow.validation",
    "shardflow_airflow.resync",
    # what a source's sensor runs
    "dm_core.config.task",
    "dm_core.sync.session",
    "dm_core.sync.syncer",
    "dm_core.state",
)


def __getattr__(name: str):
    if name != "CELERY_CONFIG":
        raise AttributeError(name)
    from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG

    return {**DEFAULT_CELERY_CONFIG, "imports": PRELOAD}
