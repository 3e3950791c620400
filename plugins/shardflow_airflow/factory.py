"""DAG factory: one task file → three DAGs.

    dm_<task>_precheck     precheck ─▶ trigger full (or incremental when task-mode is incremental)
    dm_<task>_full         prepare (low watermark, target tables) ─▶ Spark load ─▶ finish
                           (high watermark) ─▶ trigger incremental (task-mode all)
    dm_<task>_incremental  one SourceSyncSensor per source (+ the shard DDL coordinator
                           when the task has a shard-mode)
    dm_<task>_shard_ddl_unlock
                           (shard-mode only) resolve a stuck lock from the UI: Params
                           lock_id, owner, action, force_remove (= `dmctl shard-ddl-lock unlock`)

Triggering the precheck DAG runs the whole migration in order; each DAG can also be
triggered alone (conf {"chain": false} stops the chain after that phase).
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

from shardflow_airflow import runtime


def task_files() -> list[Path]:
    d = runtime.tasks_dir()
    return sorted(p for p in d.glob("*.y*ml") if p.suffix in (".yaml", ".yml")) if d.is_dir() else []


def dag_ids(name: str) -> dict[str, str]:
    return {p: f"dm_{name}_{p}" for p in ("precheck", "full", "incremental", "shard_ddl_unlock")}


def build_dags(task_file: Path) -> dict:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
    from airflow.sdk import DAG, Param

    from dm_core.config.task import load_task_file
    from shardflow_airflow.operators import (FullFinishOperator, FullPrepareOperator, PrecheckOperator,
                                             ShardDDLUnlockOperator)
    from shardflow_airflow.sensors import ShardDDLCoordinatorSensor, SourceSyncSensor

    task = load_task_file(task_file)
    ids = dag_ids(task.name)
    path = str(task_file)
    common = dict(schedule=None, start_date=datetime.datetime(2024, 1, 1), catchup=False,
                  tags=["shardflow", f"task:{task.name}"], max_active_runs=1)
    chain = "{{ (dag_run.conf or {}).get('chain', True) }}"
    dags = {}

    with DAG(ids["precheck"], description=f"precheck of DM task {task.name} ({task_file.name})", **common) as d:
        pre = PrecheckOperator(task_id="precheck", task_file=path)
        nxt = "incremental" if task.task_mode == "incremental" else "full"
        pre >> _chain_trigger(TriggerDagRunOperator, ids[nxt], chain)
    dags[ids["precheck"]] = d

    if task.task_mode != "incremental":
        with DAG(ids["full"], description=f"full dump/load of DM task {task.name} on Spark", **common) as d:
            prep = FullPrepareOperator(task_id="prepare", task_file=path)
            load = SparkSubmitOperator(
                task_id="spark_load", application=str(runtime.PROJECT_ROOT / "spark_jobs" / "full_load.py"),
                application_args=["--task", task.name], conn_id="spark_default",
                spark_binary=runtime.spark_submit_binary(), jars=runtime.jdbc_jar(),
                name=f"shardflow-full-{task.name}",
                conf={"spark.ui.enabled": "false", "spark.pyspark.python": sys.executable,
                      "spark.pyspark.driver.python": sys.executable},
            )
            fin = FullFinishOperator(task_id="finish", task_file=path)
            prep >> load >> fin
            if task.task_mode == "all":
                fin >> _chain_trigger(TriggerDagRunOperator, ids["incremental"], chain)
        dags[ids["full"]] = d

    if task.task_mode in ("incremental", "all"):
        with DAG(ids["incremental"], description=f"binlog replication of DM task {task.name}", **common) as d:
            for inst in task.mysql_instances:
                SourceSyncSensor(
                    task_id=f"sync_{inst.source_id}".replace("-", "_"), task_file=path, source_id=inst.source_id,
                    mode="reschedule", poke_interval=2, timeout=datetime.timedelta(days=3650).total_seconds(),
                    retries=1000, retry_delay=datetime.timedelta(seconds=10),
                )
            if task.shard_mode:
                ShardDDLCoordinatorSensor(
                    task_id="coordinate_shard_ddl", task_file=path, mode="reschedule", poke_interval=5,
                    timeout=datetime.timedelta(days=3650).total_seconds(), retries=1000,
                    retry_delay=datetime.timedelta(seconds=10),
                )
        dags[ids["incremental"]] = d

    if task.shard_mode:
        with DAG(ids["shard_ddl_unlock"], description=f"resolve a stuck shard DDL lock of DM task {task.name}",
                 params={
                     "lock_id": Param("", type="string", description="the lock (dmctl shard-ddl-lock TASK lists them)"),
                     "owner": Param("", type="string", description="source that executes the DDL (empty: the owner)"),
                     "action": Param("exec", enum=["exec", "skip"],
                                     description="exec: the owner runs the DDL; skip: it already ran downstream"),
                     "force_remove": Param(False, type="boolean",
                                           description="release the lock without anyone executing the DDL"),
                 }, **common) as d:
            ShardDDLUnlockOperator(task_id="unlock", lock_id="{{ params.lock_id }}", lock_owner="{{ params.owner }}",
                                   action="{{ params.action }}", force_remove="{{ params.force_remove }}")
        dags[ids["shard_ddl_unlock"]] = d
    return dags


def _chain_trigger(cls, target: str, chain: str):
    from airflow.sdk import task as task_decorator

    @task_decorator.short_circuit(task_id="continue_chain", ignore_downstream_trigger_rules=False)
    def continue_chain(flag: str) -> bool:
        return str(flag).lower() not in ("false", "0", "no")

    gate = continue_chain(chain)
    trig = cls(task_id=f"trigger_{target}", trigger_dag_id=target, wait_for_completion=False,
               conf={"chain": True})
    gate >> trig
    return gate
