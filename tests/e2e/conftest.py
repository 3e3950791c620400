"""Fixtures of the end-to-end tests. ``airflow``: one `airflow standalone` on the stack for the
whole test session (each start costs about a minute on a 2-core machine); every test removes
the task files, sources and schemas it made, so the next one finds the same Airflow."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def airflow_env(stack) -> dict:
    env = dict(os.environ)
    env.update(stack["env"])
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env['PATH']}"
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.fixture(scope="session")
def airflow(stack):
    """`airflow standalone` on the stack (left as found: one already running is used and kept)."""
    env = airflow_env(stack)
    script = str(ROOT / "scripts" / "airflow.sh")
    running = subprocess.run([script, "status"], env=env, capture_output=True).returncode == 0
    if not running:
        r = subprocess.run([script, "up"], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    yield
    if not running:
        subprocess.run([script, "down"], env=env, capture_output=True, timeout=120)
