"""shardflow's operations DAGs (register a source, add / start / pause / resume / stop a task,
skip or replace a paused statement) for the Airflow UI: plugins/shardflow_airflow/operations_dags.py."""

from shardflow_airflow.factory import task_names
from shardflow_airflow.operations_dags import build_operations_dags

globals().update(build_operations_dags(task_names()))
