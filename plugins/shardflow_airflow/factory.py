"""DAG factory: one task file → the task's DAGs (those its task-mode and shard-mode call for).

    dm_<task>_precheck     precheck ─▶ trigger full (or incremental when task-mode is incremental,
                           or when the full phase finished before a stop: a restart)
    dm_<task>_full         prepare (low watermark, target tables) ─▶ Spark load ─▶ finish
                           (high watermark) ─▶ trigger incremental (task-mode all)
    dm_<task>_incremental  one SourceSyncSensor per source (+ the shard DDL coordinator
                           when the task has a shard-mode)
    dm_<task>_shard_ddl_unlock
                           (shard-mode only) resolve a stuck lock from the UI: Params
                           lock_id, owner, action, force_remove (= `dmctl shard-ddl-lock unlock`)
    dm_<task>_validate     Spark validation ─▶ publish (log, XCom, Variable); scheduled by the
                           task file's validators (`schedule`, `start-time`), Param `mode`;
                           with `repair: true`, differences trigger dm_<task>_resync
    dm_<task>_resync       choose ─▶ (Spark comparison of named tables) ─▶ repair under the sync
                           hold (dm_core/resync) ─▶ trigger the validation again; Params what,
                           tables, validation_run

Triggering the precheck DAG runs the whole migration in order; each DAG can also be
triggered alone (conf {"chain": false} stops the chain after that phase). dmctl start-task
puts the start's generation in the conf ({"generation": N}); each phase hands it on, and a
run of an earlier start ends by itself (dm_core/state/lifecycle.py).
"""

from __future__ import annotations

import datetime
import logging
import sys
from pathlib import Path

from shardflow_airflow import retry, runtime

log = logging.getLogger("shardflow.dags")


def task_files() -> list[Path]:
    d = runtime.tasks_dir()
    return sorted(p for p in d.glob("*.y*ml") if p.suffix in (".yaml", ".yml")) if d.is_dir() else []


def task_names() -> list[str]:
    """Names of the tasks whose files load (naming one needs no credentials)."""
    from dm_core.config.task import load_task_file

    out = []
    for p in task_files():
        try:
            out.append(load_task_file(p, expand_env=False).name)
        except Exception:  # noqa: BLE001 - reported by dags/shardflow_task_errors.py
            continue
    return out


def dag_ids(name: str) -> dict[str, str]:
    from dm_core.state.lifecycle import dag_id

    return {p: dag_id(name, p) for p in ("precheck", "full", "incremental", "shard_ddl_unlock", "validate", "resync")}


def build_dags(task_file: Path) -> dict:
    from shardflow_airflow.spark_job import SparkJobOperator
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
    from airflow.sdk import DAG, Param

    from dm_core.config.task import load_task_file
    from dm_core.state.lifecycle import sensor_task_id
    from shardflow_airflow.operators import (FullFinishOperator, FullPrepareOperator, PrecheckOperator,
                                             ShardDDLUnlockOperator)
    from dm_core.sync.session import POKE_INTERVAL
    from shardflow_airflow.sensors import ShardDDLCoordinatorSensor, SourceSyncSensor

    task = load_task_file(task_file)
    ids = dag_ids(task.name)
    path = str(task_file)
    common = dict(schedule=None, start_date=datetime.datetime(2024, 1, 1), catchup=False,
                  tags=["shardflow", f"task:{task.name}"], max_active_runs=1)
    chain = "{{ (dag_run.conf or {}).get('chain', True) }}"
    dags = {}

    for w in task.warnings:     # keys accepted but not acted on (dm_core/config/inventory.py)
        log.warning("task file %s: %s", task_file, w)
    doc = "".join(f"- `{w.key}`: {w.message} (fix: {w.fix})\n" for w in task.warnings)
    with DAG(ids["precheck"], description=f"precheck of DM task {task.name} ({task_file.name})",
             doc_md=f"**Task file warnings**\n\n{doc}" if doc else None, **common) as d:
        pre = PrecheckOperator(task_id="precheck", task_file=path)
        # full, or straight to incremental once the full phase has finished (a restart)
        pre >> _chain_trigger(TriggerDagRunOperator, path, "precheck", None, chain)
    dags[ids["precheck"]] = d

    if task.task_mode != "incremental":
        with DAG(ids["full"], description=f"full dump/load of DM task {task.name} on Spark", **common) as d:
            # a step that gave up on a server that stayed away runs again with DM's checker backoff (retry.py)
            prep = FullPrepareOperator(task_id="prepare", task_file=path, **retry.when_servers_away())
            load = SparkJobOperator(
                task_id="spark_load", job="full_load", fence_task=task.name, application_args=["--task", task.name],
                conn_id="spark_default",
                spark_binary=runtime.spark_submit_binary(), jars=runtime.jdbc_jar(),
                name=f"shardflow-full-{task.name}",
                conf=runtime.submit_conf(sys.executable), **retry.when_servers_away(),
            )
            fin = FullFinishOperator(task_id="finish", task_file=path, **retry.when_servers_away())
            prep >> load >> fin
            if task.task_mode == "all":
                fin >> _chain_trigger(TriggerDagRunOperator, path, "full", ids["incremental"], chain)
        dags[ids["full"]] = d

    if task.task_mode in ("incremental", "all"):
        # every source's sensor and the coordinator run at once, for as long as the task syncs:
        # Airflow's default cap of 16 running tasks per DAG would leave the 16th source unsynced
        with DAG(ids["incremental"], description=f"binlog replication of DM task {task.name}",
                 max_active_tasks=len(task.mysql_instances) + 1, **common) as d:
            for inst in task.mysql_instances:
                SourceSyncSensor(
                    task_id=sensor_task_id(inst.source_id), task_file=path, source_id=inst.source_id,
                    # poke mode: one process per source for as long as it syncs (sensors.py says why)
                    mode="poke", poke_interval=POKE_INTERVAL, timeout=datetime.timedelta(days=3650).total_seconds(),
                    retries=1000, retry_delay=datetime.timedelta(seconds=runtime.sensor_retry_delay()),
                )
            if task.shard_mode:
                ShardDDLCoordinatorSensor(
                    task_id="coordinate_shard_ddl", task_file=path, mode="poke", poke_interval=2,
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
    dags[ids["validate"]] = _validate_dag(task, ids["validate"], common, ids["resync"])
    dags[ids["resync"]] = _resync_dag(task, path, ids["resync"], common, ids["validate"])
    return dags


def _validate_dag(task, dag_id: str, common: dict, resync_id: str):
    from shardflow_airflow.spark_job import SparkJobOperator
    from airflow.sdk import DAG, Param

    from dm_core.validate.settings import settings_for
    from shardflow_airflow.validation import ValidationPublishOperator

    vs = settings_for(task)
    when = dict(common, schedule=vs.schedule if vs.enabled else None)
    if vs.start is not None:
        when["start_date"] = vs.start
    with DAG(dag_id, description=f"validate DM task {task.name}: upstream union vs downstream, on Spark",
             params={"mode": Param(vs.mode, enum=["full", "fast"],
                                   description="full: compare every column; fast: only that each row exists")},
             **when) as d:
        spark = SparkJobOperator(
            task_id="spark_validate", job="validate",
            application_args=["--task", task.name, "--run-id", "{{ run_id }}", "--mode", "{{ params.mode }}"],
            conn_id="spark_default", spark_binary=runtime.spark_submit_binary(), jars=runtime.jdbc_jar(),
            name=f"shardflow-validate-{task.name}",
            conf=runtime.submit_conf(sys.executable), ends=retry.validation_ends(task.name),
            **retry.when_servers_away(),   # a rerun overwrites the run's result
        )
        publish = ValidationPublishOperator(task_id="publish", task_name=task.name, run_id="{{ run_id }}", retries=0)
        _full_phase_finished(task.name) >> spark >> publish
        if vs.repair:
            publish >> _repair_trigger(task.name, resync_id)
    return d


def _full_phase_finished(task_name: str):
    """The validation's gate: a run before the task's full phase has finished skips the rest
    and logs why (dm_core/validate/ready.py)."""
    from airflow.sdk import task as task_decorator

    @task_decorator.short_circuit(task_id="full_phase_finished")
    def full_phase_finished() -> bool:
        from dm_core.config.task import parse_task
        from dm_core.validate.ready import not_ready

        with runtime.open_store() as store:
            got = store.get_task(task_name)
            if got is None:   # never started: the Spark job says so, as before
                return True
            why = not_ready(parse_task(got[0], f"<state store: {task_name}>"), store.all_source_states(task_name))
        if why:
            print(why)
            return False
        return True

    return full_phase_finished()


def _repair_trigger(task_name: str, resync_id: str):
    """``repair: true``: a run that found differences (publish failed on them) triggers the
    re-sync of what it found -- unless the run is the check after a re-sync, so a difference
    the re-sync cannot mend does not loop."""
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
    from airflow.sdk import get_current_context
    from airflow.sdk import task as task_decorator

    @task_decorator.short_circuit(task_id="repair_if_different", trigger_rule="all_done",
                                  ignore_downstream_trigger_rules=False)
    def repair_if_different() -> bool:
        ctx = get_current_context()
        if (ctx["dag_run"].conf or {}).get("after_repair"):
            print("this run checks a re-sync: no automatic re-sync after it")
            return False
        with runtime.open_store() as store:
            got = store.validation(task_name, ctx["run_id"]) or {}
        print(f"validation {ctx['run_id']}: {got.get('status', 'no result')}")
        return got.get("status") in ("different", "pending") and bool(got.get("finished_at"))

    gate = repair_if_different()
    gate >> TriggerDagRunOperator(task_id="trigger_resync", trigger_dag_id=resync_id, wait_for_completion=False,
                                  conf={"what": "last_validation", "tables": [], "validation_run": "{{ run_id }}"})
    return gate


def _resync_dag(task, path: str, dag_id: str, common: dict, validate_id: str):
    from shardflow_airflow.spark_job import SparkJobOperator
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
    from airflow.sdk import DAG, Param

    from shardflow_airflow.resync import ResyncChooseOperator, ResyncRepairOperator

    with DAG(dag_id, description=f"re-sync rows of DM task {task.name} from the upstream union while sync runs",
             params={
                 "what": Param("last_validation", enum=["last_validation", "tables"],
                               description="last_validation: rewrite the rows the newest finished validation named "
                                           "(tables it could not name in full are compared again first); tables: "
                                           "compare the tables below on Spark, then rewrite the rows that differ"),
                 "tables": Param([], type="array", items={"type": "string"},
                                 description="with what=tables: target tables, as schema.table"),
                 "validation_run": Param("", type="string",
                                         description="with what=last_validation: this validation run instead of "
                                                     "the newest"),
             }, **dict(common, schedule=None)) as d:
        choose = ResyncChooseOperator(task_id="choose", task_file=path)
        compare = SparkJobOperator(
            task_id="spark_compare", job="validate",
            application_args=["--task", task.name, "--run-id", "{{ run_id }}", "--mode", "full", "--tables",
                              "{{ (ti.xcom_pull(task_ids='choose', key='choice') or {}).get('compare', []) | join(',') }}"],
            conn_id="spark_default", spark_binary=runtime.spark_submit_binary(), jars=runtime.jdbc_jar(),
            name=f"shardflow-resync-compare-{task.name}", conf=runtime.submit_conf(sys.executable),
            ends=retry.resync_ends(task.name), **retry.when_servers_away(),
        )
        # a repair rewrites whole rows from the upstream: run again, it rewrites them again
        repair = ResyncRepairOperator(task_id="repair", task_file=path, trigger_rule="none_failed_min_one_success",
                                      **retry.when_servers_away())
        again = TriggerDagRunOperator(task_id="validate_again", trigger_dag_id=validate_id, wait_for_completion=False,
                                      conf={"after_repair": True})
        choose >> [compare, repair]
        compare >> repair >> again
    return d


def _chain_trigger(cls, task_file: str, after: str, target: str | None, chain: str):
    """continue_chain (short-circuit: the chain is on, the run belongs to the task's current
    start, and a phase follows) ─▶ trigger the next DAG with this run's generation.
    ``target``: the next DAG when it is fixed, else the one continue_chain names."""
    from airflow.sdk import get_current_context
    from airflow.sdk import task as task_decorator

    @task_decorator.short_circuit(task_id="continue_chain", ignore_downstream_trigger_rules=False)
    def continue_chain(flag: str) -> str:
        if str(flag).lower() in ("false", "0", "no"):
            return ""
        return runtime.chain_target(task_file, after, get_current_context())

    gate = continue_chain(chain)
    trig = cls(task_id=f"trigger_{target}" if target else "trigger_next_phase",
               trigger_dag_id=target or "{{ ti.xcom_pull(task_ids='continue_chain') }}", wait_for_completion=False,
               conf={"chain": True, "generation": "{{ (dag_run.conf or {}).get('generation', '') }}"})
    gate >> trig
    return gate
