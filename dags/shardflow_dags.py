"""shardflow DAGs: three per task file in SHARDFLOW_TASKS_DIR (default config/tasks/).

Broken task files are skipped here so the others still load; dags/shardflow_task_errors.py
reports them as an import error naming the file and the keys.
"""

from shardflow_airflow.factory import build_dags, task_files

for _path in task_files():
    try:
        globals().update(build_dags(_path))
    except Exception:  # reported by shardflow_task_errors.py
        continue
