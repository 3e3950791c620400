"""Surfaces broken task files as an Airflow import error (file, key path, fix), without
taking the valid tasks' DAGs down with them (those load from shardflow_dags.py)."""

from shardflow_airflow.factory import task_files

_problems = []
for _path in task_files():
    try:
        from dm_core.config.task import load_task_file

        load_task_file(_path)
    except Exception as e:  # noqa: BLE001 - every failure is a broken file to report
        _problems.append(f"{_path}:\n{e}")

if _problems:
    raise ImportError("shardflow: invalid task files (their DAGs are not created):\n\n" + "\n\n".join(_problems))
