"""shardflow DAGs: the operations DAGs (register a source, add / start / pause / resume / stop a
task, skip or replace a paused statement: plugins/shardflow_airflow/operations_dags.py), and the
DAGs of each task file in SHARDFLOW_TASKS_DIR (default config/tasks/).

One file for both, so that `dmctl start-task` can ask Airflow to read it again at once (Airflow's
parseDagFile takes the token of a DAG of the file, and shardflow_operate_task is always here)
instead of waiting for the dag-processor's next pass over an unchanged file.

Broken task files are skipped here so the others still load; dags/shardflow_task_errors.py
reports them as an import error naming the file and the keys.
"""

from shardflow_airflow.factory import build_dags, task_files, task_names
from shardflow_airflow.operations_dags import build_operations_dags

globals().update(build_operations_dags(task_names()))

for _path in task_files():
    try:
        globals().update(build_dags(_path))
    except Exception:  # reported by shardflow_task_errors.py
        continue
