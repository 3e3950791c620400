"""shardflow's operations DAGs (register a source, add / start / pause / resume / stop a task,
skip or replace a paused statement) for the Airflow UI: plugins/shardflow_airflow/ops_dags.py."""

from shardflow_airflow.factory import task_names
from shardflow_airflow.ops_dags import build_ops_dags

globals().update(build_ops_dags(task_names()))
