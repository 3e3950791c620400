"""Fixtures of the end-to-end tests. ``airflow``: one `airflow standalone` on the worker's stack
for all of them (a start costs about a minute on a 2-core machine). It stops when the last
end-to-end test of the run is done, so that the integration tests and DM cases that follow
on this worker meet no Airflow, as they expect; every test removes the task files, sources and
schemas it made, so the next one finds the same Airflow clean."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "scripts" / "airflow.sh")


def airflow_env(stack) -> dict:
    env = dict(os.environ)
    env.update(stack["env"])
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env['PATH']}"
    env["PYTHONPATH"] = str(ROOT)
    return env


class _Airflow:
    """The stack's Airflow as the tests left it: ``ours`` once these tests started it."""

    def __init__(self):
        self.env, self.ours = None, False

    def ensure(self, stack) -> None:
        self.env = airflow_env(stack)
        if subprocess.run([SCRIPT, "status"], env=self.env, capture_output=True).returncode == 0:
            return
        r = subprocess.run([SCRIPT, "up"], env=self.env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        self.ours = True

    def stop(self) -> None:
        if self.ours:
            subprocess.run([SCRIPT, "down"], env=self.env, capture_output=True, timeout=120)
            self.ours = False


_AIRFLOW = _Airflow()


@pytest.fixture(scope="session")
def airflow(stack):
    """`airflow standalone` on the stack (one already running is used and left running)."""
    _AIRFLOW.ensure(stack)
    yield
    _AIRFLOW.stop()


@pytest.fixture(autouse=True)
def _airflow_still_up(request):
    """A test using Airflow after the end-to-end tests were left once (another ordering of the
    run) finds it started again."""
    if "airflow" in request.fixturenames and _AIRFLOW.env is not None:
        _AIRFLOW.ensure(request.getfixturevalue("stack"))


@pytest.hookimpl(trylast=True)   # after the test's own fixtures (module ones too) are torn down
def pytest_runtest_teardown(item, nextitem):
    if nextitem is None or "tests/e2e/" not in nextitem.nodeid:
        _AIRFLOW.stop()
