"""The DAG factory under real Airflow parsing: the DAGs of each valid task file (with a
shard-mode also the unlock DAG) and the operations DAGs, and a broken file shows up as an
import error naming the file and the key while the others still load."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]

PARSE = textwrap.dedent("""\
    import json, os
    from airflow.dag_processing.dagbag import DagBag
    from airflow.serialization.serialized_objects import DagSerialization
    bag = DagBag(dag_folder=os.environ["DAGS"])
    for d in bag.dags.values():  # what the dag-processor does before the scheduler sees a DAG
        DagSerialization.to_dict(d)
    print(json.dumps({"dags": sorted(bag.dags), "errors": {os.path.basename(k): v for k, v in bag.import_errors.items()},
                      "tasks": {d: sorted(t.task_id for t in bag.dags[d].tasks) for d in bag.dags},
                      "docs": {d: bag.dags[d].doc_md for d in bag.dags},
                      "schedules": {d: getattr(bag.dags[d].timetable, "expression", None) for d in bag.dags},
                      "retry_policies": {d: sorted(t.task_id for t in bag.dags[d].tasks if t.retry_policy)
                                         for d in bag.dags},
                      "starts": {d: str(bag.dags[d].start_date) for d in bag.dags},
                      "files": {d: os.path.basename(bag.dags[d].fileloc) for d in bag.dags},
                      "params": {d: {k: bag.dags[d].params.get_param(k).schema for k in bag.dags[d].params}
                                 for d in bag.dags}}, default=str))
""")


def _parse(tasks_dir: Path, tmp_path: Path) -> dict:
    import json

    env = dict(os.environ, SHARDFLOW_TASKS_DIR=str(tasks_dir), DAGS=str(ROOT / "dags"),
               AIRFLOW__CORE__LOAD_EXAMPLES="False", AIRFLOW_HOME=str(tmp_path / "airflow"),
               PYTHONPATH=f"{ROOT}:{ROOT / 'plugins'}")
    r = subprocess.run([sys.executable, "-c", PARSE], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_valid_and_broken_task_files(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    shutil.copy(ROOT / "config" / "demo" / "task.yaml", tasks / "demo.yaml")
    (tasks / "broken.yaml").write_text(textwrap.dedent("""\
        name: broken
        task-mode: all
        target-database: {host: 127.0.0.1, port: 4000, user: root, password: ""}
        mysql-instances:
          - source-id: s1
            route-rules: [no-such-route]
        """))
    out = _parse(tasks, tmp_path)
    assert out["dags"] == ["dm_demo_full", "dm_demo_incremental", "dm_demo_precheck", "dm_demo_resync",
                           "dm_demo_shard_ddl_unlock", "dm_demo_validate", "shardflow_add_task", "shardflow_handle_error", "shardflow_operate_task",
                           "shardflow_register_source"]
    # one file defines them all: dmctl start-task has it read again through shardflow_operate_task's
    # file token (lifecycle.parse_again), which would miss the task's DAGs in another file
    assert set(out["files"].values()) == {"shardflow_dags.py"}, out["files"]
    # the operations DAGs' forms offer the tasks that load (a broken file's is not among them)
    operate = out["params"]["shardflow_operate_task"]
    assert operate["task"]["examples"] == ["demo"] and operate["action"]["enum"] == ["start", "pause", "resume", "stop"]
    assert operate["start_time"]["type"] == ["null", "string"]   # dmctl start-task --start-time
    assert set(out["params"]["shardflow_add_task"]) == {"task_yaml", "start", "remove_meta", "start_time"}
    assert set(out["params"]["shardflow_register_source"]) == {"source_yaml", "password_connection"}
    assert out["tasks"]["dm_demo_validate"] == ["full_phase_finished", "publish", "spark_validate"]
    # the re-sync: what to rewrite from Params, a Spark comparison only when tables are named
    assert out["tasks"]["dm_demo_resync"] == ["choose", "repair", "spark_compare", "validate_again"]
    resync = out["params"]["dm_demo_resync"]
    assert resync["what"]["enum"] == ["last_validation", "tables"] and resync["tables"]["type"] == "array"
    assert out["schedules"]["dm_demo_resync"] is None
    assert out["tasks"]["dm_demo_incremental"] == ["coordinate_shard_ddl", "sync_mysql_replica_01",
                                                   "sync_mysql_replica_02"]
    assert out["tasks"]["dm_demo_shard_ddl_unlock"] == ["unlock"]
    # the precheck DAG's next phase is chosen at run time: full, or incremental on a restart
    assert out["tasks"]["dm_demo_precheck"] == ["continue_chain", "precheck", "trigger_next_phase"]
    assert out["tasks"]["dm_demo_full"] == ["continue_chain", "finish", "prepare", "spark_load", "trigger_dm_demo_incremental"]
    # a full-phase step that gave up on a server that stayed away is run again (retry.py)
    assert out["retry_policies"]["dm_demo_full"] == ["finish", "prepare", "spark_load"]
    assert out["retry_policies"]["dm_demo_validate"] == ["spark_validate"]
    assert out["retry_policies"]["dm_demo_resync"] == ["repair", "spark_compare"]
    err = out["errors"]["shardflow_task_errors.py"]
    assert "broken.yaml" in err and "mysql-instances[0].route-rules" in err and "no-such-route" in err


def test_keys_shardflow_does_not_act_on_are_shown_on_the_precheck_dag(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "warned.yaml").write_text(textwrap.dedent("""\
        name: warned
        task-mode: all
        target-database: {host: 127.0.0.1, port: 4000, user: root, password: ""}
        mysql-instances:
          - source-id: s1
            syncer-config-name: y
        syncers: {y: {queue-size: 4096}}
        """))
    out = _parse(tasks, tmp_path)
    assert out["docs"]["dm_warned_precheck"].count("\n- `") == 1 and "`syncers.y.queue-size`" in out["docs"]["dm_warned_precheck"]
    assert out["docs"]["dm_warned_full"] is None


def test_validators_schedule_the_validate_dag(tmp_path):
    """`schedule` and `start-time` of the task file's validator become the validate DAG's
    timetable and start date; without a validator the DAG exists unscheduled."""
    import yaml

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    data = yaml.safe_load((ROOT / "config" / "demo" / "task.yaml").read_text())
    data["name"] = "sched"
    data["validators"] = {"every-15": {"mode": "fast", "schedule": "*/15 * * * *", "start-time": "2030-01-02 03:04:05",
                                       "row-error-delay": "2m", "repair": True}}
    for inst in data["mysql-instances"]:
        inst["continuous-validator-config-name"] = "every-15"
    (tasks / "sched.yaml").write_text(yaml.safe_dump(data))
    data["name"] = "plain"
    del data["validators"]
    for inst in data["mysql-instances"]:
        del inst["continuous-validator-config-name"]
    (tasks / "plain.yaml").write_text(yaml.safe_dump(data))
    shutil.copy(ROOT / "config" / "demo" / "task.yaml", tasks / "demo.yaml")
    out = _parse(tasks, tmp_path)
    assert out["schedules"]["dm_sched_validate"] == "*/15 * * * *"
    assert out["starts"]["dm_sched_validate"].startswith("2030-01-02")
    assert out["schedules"]["dm_plain_validate"] is None
    # repair: true -- differences found trigger the re-sync; without it the validation only reports
    assert out["tasks"]["dm_sched_validate"] == ["full_phase_finished", "publish", "repair_if_different", "spark_validate",
                                                 "trigger_resync"]
    assert out["tasks"]["dm_plain_validate"] == ["full_phase_finished", "publish", "spark_validate"]
    assert out["schedules"]["dm_demo_validate"] in ("@hourly", "0 * * * *")


def test_a_task_name_airflow_would_refuse_still_gets_its_dags(tmp_path):
    """DM accepts any task name (its all_mode case runs `t-Ë!s`t`); DAG ids keep the characters
    Airflow takes and add a hash of the name (dm_core.state.lifecycle.dag_key)."""
    import yaml

    from dm_core.state.lifecycle import dag_id

    name = "t-Ë!s`t"
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    doc = yaml.safe_load((ROOT / "tests" / "dm_cases" / "all_mode" / "conf" / "dm-task.yaml").read_text())
    doc["name"] = name
    (tasks / f"{name}.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True))
    got = _parse(tasks, tmp_path)
    assert got["errors"] == {}
    assert {dag_id(name, p) for p in ("precheck", "full", "incremental", "validate", "resync")} <= set(got["dags"])
    assert "sync_mysql_replica_01" in got["tasks"][dag_id(name, "incremental")]
