"""docker-compose.yaml is valid and stays in step with the local stack's server settings."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
REQUIRED_BINLOG_FLAGS = ["--binlog-format=ROW", "--binlog-row-image=FULL", "--binlog-row-metadata=FULL"]


def _compose_cmd():
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.skip("no docker-compose binary (make setup installs it)")


def test_compose_file_is_valid():
    out = subprocess.run(_compose_cmd() + ["-f", str(ROOT / "docker-compose.yaml"), "config", "-q"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_compose_services_match_the_local_stack():
    doc = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    services = doc["services"]
    for name in ("postgres", "mysql-upstream-1", "mysql-upstream-2", "tidb", "spark-master", "spark-worker",
                 "airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"):
        assert name in services, name
    stack = (ROOT / "scripts" / "stack.sh").read_text()
    ids = set()
    for up in ("mysql-upstream-1", "mysql-upstream-2"):
        cmd = services[up]["command"]
        for flag in REQUIRED_BINLOG_FLAGS:
            assert flag in cmd, f"{up} lacks {flag}"
            assert flag.split("=")[0] in stack and flag.split("=")[1] in stack
        ids.add(next(c for c in cmd if c.startswith("--server-id")))
    assert len(ids) == 2, "upstreams need distinct server ids"
    ports = {s: services[s]["ports"][0].split(":")[1] for s in ("mysql-upstream-1", "mysql-upstream-2", "tidb", "postgres")}
    assert ports == {"mysql-upstream-1": "3307", "mysql-upstream-2": "3308", "tidb": "4000", "postgres": "5433"}


def test_the_job_host_runs_beside_the_scheduler_that_sends_it_jobs():
    """The sidecar runs the host in the foreground; the scheduler (LocalExecutor: it runs the
    tasks) finds its socket in the same directory, and both name the master of spark_default,
    else every job would keep spark-submit (dm_core/jobhost/route.py)."""
    import json

    services = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())["services"]
    host, scheduler = services["shardflow-job-host"], services["airflow-scheduler"]
    assert host["command"] == ["python", "-m", "dm_core.jobhost", "run"] and host["restart"] == "always"
    assert host["image"] == scheduler["image"]   # the same user and code: the host refuses other users
    directory = scheduler["environment"]["SHARDFLOW_JOB_HOST_DIR"]
    assert host["environment"]["SHARDFLOW_JOB_HOST_DIR"] == directory
    shared = [v for v in host["volumes"] if v.endswith(":" + directory)]
    assert shared and shared == [v for v in scheduler["volumes"] if v.endswith(":" + directory)], host["volumes"]
    master = json.loads(scheduler["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"])["host"]
    assert host["environment"]["SHARDFLOW_JOB_HOST_MASTER"] == master
