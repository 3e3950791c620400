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
