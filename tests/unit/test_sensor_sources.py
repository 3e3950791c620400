"""The source sensor against the file its task runs with (plugins/shardflow_airflow/sensors.py
``_check_sources``): the DAG is built from the file Airflow reads, the sync from the file of the
last start (dm_core/state/runs_with.py), and the two may name other sources."""

from types import SimpleNamespace

import pytest

from dm_core.config.task import parse_task

TEXT = """name: t1
task-mode: incremental
target-database: {host: 127.0.0.1, port: 4000, user: u, password: ''}
mysql-instances:
  - {source-id: s1, block-allow-list: ba}
  - {source-id: s2, block-allow-list: ba}
block-allow-list:
  ba: {do-dbs: [d]}
"""


def _sensor(source_id):
    from shardflow_airflow.sensors import SourceSyncSensor

    return SourceSyncSensor(task_id=f"sync_{source_id}", task_file="/tasks/t1.yaml", source_id=source_id)


def test_a_source_only_the_folders_file_names_fails_saying_how_to_apply_it():
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException) as e:
        _sensor("s3")._check_sources(parse_task(TEXT, "t1.yaml"), {})
    assert "source s3 is not in the file task t1 runs with (its sources: s1, s2)" in str(e.value)
    assert "dmctl stop-task t1" in str(e.value) and "dmctl start-task /tasks/t1.yaml" in str(e.value)


def test_a_source_the_task_runs_with_but_the_dag_has_no_sensor_for_is_warned_about(capsys):
    from dm_core.state.lifecycle import sensor_task_id

    sensor = _sensor("s1")
    dag = SimpleNamespace(task_ids=[sensor_task_id("s1")])   # the folder's file dropped s2
    sensor._check_sources(parse_task(TEXT, "t1.yaml"), {"dag": dag})   # Airflow's task log: structlog, stdout
    said = capsys.readouterr().out
    assert "warning" in said and "source(s) s2, which this DAG has no sensor for" in said, said
    dag.task_ids.append(sensor_task_id("s2"))
    sensor._check_sources(parse_task(TEXT, "t1.yaml"), {"dag": dag})
    assert "no sensor" not in capsys.readouterr().out
