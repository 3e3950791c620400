"""Where the Airflow tasks find their inputs: the task file, the state store, Spark."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def tasks_dir() -> Path:
    return Path(os.environ.get("SHARDFLOW_TASKS_DIR") or PROJECT_ROOT / "config" / "tasks")


def state_dsn() -> str:
    """SHARDFLOW_STATE_DSN, else the Airflow connection `shardflow_state`."""
    dsn = os.environ.get("SHARDFLOW_STATE_DSN")
    if dsn:
        return dsn
    from airflow.sdk import Connection

    conn = Connection.get("shardflow_state")
    uri = conn.get_uri()
    return uri.replace("postgres://", "postgresql://", 1)


def open_store():
    from dm_core.state import StateStore

    return StateStore(state_dsn())


def load_task(task_file: str, log=None):
    """The task as its last start checked it (dm_core/state/runs_with.py); a different file
    where Airflow reads it is said on ``log`` and not applied."""
    import logging

    from dm_core.state.runs_with import task_it_runs_with

    with open_store() as store:
        got = task_it_runs_with(store, task_file)
    if got.note:
        (log or logging.getLogger(__name__)).warning("%s", got.note)
    return got.task


def sensor_retry_delay() -> float:
    """Seconds before Airflow retries a source's sensor whose process died or failed:
    SHARDFLOW_SENSOR_RETRY_DELAY_S, default 10. The Celery target sets 3, so that the sources of a
    dead worker resume on another within a minute (the fence in the state store, not the delay,
    keeps two processes from syncing one source)."""
    return float(os.environ.get("SHARDFLOW_SENSOR_RETRY_DELAY_S") or 10)


def spark_submit_binary() -> str:
    import shutil
    import sys

    here = Path(sys.executable).parent / "spark-submit"
    return str(here) if here.exists() else (shutil.which("spark-submit") or "spark-submit")


def submit_conf(python: str) -> dict[str, str]:
    """The ``--conf`` of every shardflow spark-submit. The driver JVM compiles with C1 only and
    maps the class-data archive ``make setup`` built (dm_core/spark_options.py says why);
    both must be given at submit time, since a running JVM ignores them."""
    from dm_core.spark_options import driver_java_options

    return {"spark.ui.enabled": "false", "spark.pyspark.python": python, "spark.pyspark.driver.python": python,
            "spark.driver.extraJavaOptions": driver_java_options()}


def jdbc_jar() -> str:
    return os.environ.get("SHARDFLOW_JDBC_JAR", "/usr/share/java/mariadb-java-client.jar")


def run_generation(context) -> int | None:
    """The start (dm_core/state/lifecycle.py) this DAG run belongs to, from its conf."""
    from dm_core.state.lifecycle import parse_generation

    run = context.get("dag_run")
    conf = getattr(run, "conf", None) or {}
    return parse_generation(conf.get("generation"))


def chain_target(task_file: str, after: str, context) -> str:
    """The DAG a finished phase (precheck | full) triggers next, or "" to end the chain:
    the run belongs to a stopped task or an earlier start, or nothing follows."""
    from dm_core.state import lifecycle

    task = load_task(task_file)
    with open_store() as store:
        gate = lifecycle.gate(store.task_info(task.name), None, run_generation(context))
        if gate.state == lifecycle.STOPPED:
            return ""
        nxt = lifecycle.next_phase(task, store.all_source_states(task.name), after)
    return lifecycle.dag_id(task.name, nxt) if nxt else ""
