"""The operations DAGs: everything dmctl does to sources and tasks, from the Airflow UI's
trigger form (typed Params), one DAG per kind of operation, shared by all tasks:

    shardflow_register_source   paste a DM source.yaml; the password from an Airflow Connection
    shardflow_add_task          paste a DM task file: check-task, then start it (or only add it)
    shardflow_operate_task      start / pause / resume / stop a task, or some of its sources
    shardflow_handle_error      skip, replace or inject statements at a binlog event (dmctl binlog)

Each run's task log is dmctl's output: what was done, or why not. A shard DDL lock is
released with the task's own dm_<task>_shard_ddl_unlock DAG.
"""

from __future__ import annotations

import datetime

# on from the start: a form a user fills in must run when submitted
_COMMON = dict(schedule=None, start_date=datetime.datetime(2024, 1, 1), catchup=False, tags=["shardflow", "operations"],
               is_paused_upon_creation=False)

_SOURCE_EXAMPLE = """source-id: mysql-01
enable-gtid: false
from:
  host: 10.0.0.11
  port: 3306
  user: dm
  password: ""   # from password_connection, or ${ENV_VAR}
"""


def _task_param(names: list[str]):
    from airflow.sdk import Param

    return Param(names[0] if len(names) == 1 else "", type="string", minLength=1,
                 description="task name (the task file's `name`)", **({"examples": names} if names else {}))


def _start_time_param():
    from airflow.sdk import Param

    return Param("", type=["null", "string"],
                 description="start: task-mode incremental only: sync from the binlog position of this time "
                             "(dmctl start-task --start-time), e.g. 2021-10-21 00:01:00 in the upstream's time "
                             "zone, or 2021-10-21T00:01:00+08:00; empty: from meta or the checkpoints")


def build_operations_dags(task_names: list[str]) -> dict:
    """``task_names``: the tasks the factory found, offered in the forms (any name may be typed)."""
    from airflow.sdk import DAG, Param

    from shardflow_airflow.dmctl_operators import AddTaskOperator, HandleErrorOperator, OperateTaskOperator, RegisterSourceOperator

    dags = {}
    with DAG("shardflow_register_source", description="register an upstream MySQL/MariaDB source (dmctl operate-source "
             "create)", doc_md=__doc__, params={
                 "source_yaml": Param(_SOURCE_EXAMPLE, type="string", format="multiline", minLength=1,
                                      description="DM's source.yaml. Leave from.password empty and name a Connection "
                                                  "below, or write ${ENV_VAR}: this text is kept in the run's conf"),
                 "password_connection": Param("", type=["null", "string"],
                                              description="Airflow Connection (Admin > Connections) holding the "
                                                          "source's password; its host, port and login fill what "
                                                          "the file leaves out"),
             }, **_COMMON) as d:
        RegisterSourceOperator(task_id="register_source")
    dags[d.dag_id] = d

    with DAG("shardflow_add_task", description="add a DM task file (checked as dmctl check-task does) and start it",
             doc_md=__doc__, params={
                 "task_yaml": Param("", type="string", format="multiline", minLength=1,
                                    description="DM's task file. target-database.password must be ${ENV_VAR} or "
                                                "`dmctl encrypt` output: this text is kept in the run's conf"),
                 "start": Param(True, type="boolean", description="start it now (else only add it: its DAGs appear)"),
                 "remove_meta": Param(False, type="boolean",
                                      description="forget earlier checkpoints and loaded chunks of a task of this name"),
                 "start_time": _start_time_param(),
             }, **_COMMON) as d:
        AddTaskOperator(task_id="add_task")
    dags[d.dag_id] = d

    with DAG("shardflow_operate_task", description="start, pause, resume or stop a task, or some of its sources",
             doc_md=__doc__, params={
                 "task": _task_param(task_names),
                 "action": Param("pause", enum=["start", "pause", "resume", "stop"],
                                 description="stop keeps checkpoints (start resumes from them); pause and resume keep "
                                             "everything"),
                 "sources": Param([], type="array", items={"type": "string"},
                                  description="only these source ids (one per line); empty: the whole task"),
                 "remove_meta": Param(False, type="boolean", description="start: begin again from a new full dump"),
                 "start_time": _start_time_param(),
             }, **_COMMON) as d:
        OperateTaskOperator(task_id="operate_task")
    dags[d.dag_id] = d

    with DAG("shardflow_handle_error", description="skip, replace or inject statements at a binlog event, revert "
             "or list what waits (dmctl binlog)", doc_md=__doc__, params={
                 "task": _task_param(task_names),
                 "source": Param("", type=["null", "string"],
                                 description="source id; empty: every source of the task paused on an error"),
                 "op": Param("skip", enum=["skip", "replace", "inject", "revert", "list"],
                             description="skip: drop the statement; replace: read the statements below instead; "
                                         "inject: read them first, then the statement; revert: forget what "
                                         "waits at the position; list: what waits"),
                 "binlog_pos": Param("", type=["null", "string"],
                                     description="FILE:POS of the event (SHOW BINLOG EVENTS); empty: where the "
                                                 "source is paused"),
                 "statements": Param("", type=["null", "string"], format="multiline",
                                     description="replace / inject: DDL on the upstream tables (db.table), "
                                                 "separated by ;"),
             }, **_COMMON) as d:
        HandleErrorOperator(task_id="handle_error")
    dags[d.dag_id] = d
    return dags
