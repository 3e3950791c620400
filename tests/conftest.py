"""Shared fixtures: the local stack's endpoints (ports from scripts/stack.sh env)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "plugins"))

from tests.suite_plan import (  # noqa: E402,F401 (hooks: how the suite is spread over workers, where its time went)
    pytest_collection_modifyitems, pytest_runtest_logreport, pytest_terminal_summary)


def _worker() -> int:
    """Which pytest-xdist worker this process is (0 without xdist): worker N runs on stack N."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0


WORKER = _worker()


def _stack_env() -> dict:
    env = dict(os.environ, SHARDFLOW_STACK_WORKER=str(WORKER)) if WORKER else None
    out = subprocess.run([str(ROOT / "scripts" / "stack.sh"), "env"], capture_output=True, text=True, check=True,
                         env=env).stdout
    got = {}
    for line in out.splitlines():
        for part in line.replace("export ", "").split():
            k, _, v = part.partition("=")
            got[k] = v
    return got


STACK = _stack_env()
# what every helper, dmctl and subprocess of this worker reads: its own stack (worker 0 keeps a
# state store DSN or password the caller set)
for _k, _v in STACK.items():
    if _k.startswith("SHARDFLOW_"):
        if WORKER:
            os.environ[_k] = _v
        else:
            os.environ.setdefault(_k, _v)


def _ep(port_key: str, name: str):
    from dm_core.db import Endpoint

    return Endpoint("127.0.0.1", int(STACK[port_key]), STACK["SHARDFLOW_STACK_USER"], STACK["SHARDFLOW_STACK_PASSWORD"], name=name)


@pytest.fixture(autouse=True)
def _log_handlers_outlive_captures():
    """Airflow binds its log handlers to the ``sys.stdout`` of its first import; inside a test that
    is the test's capture (capsys), closed after the test. A later record (py4j logs when the
    garbage collector closes a connection) then fails on it and prints "--- Logging error ---",
    with the current test's source lines, into that test's output. Handlers left on a closed
    stream are moved to the process's own stdout after each test."""
    yield
    import logging

    loggers = [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values()
                                      if isinstance(v, logging.Logger) and v.handlers)]
    for logger in loggers:
        for h in logger.handlers:
            if isinstance(h, logging.StreamHandler) and getattr(h.stream, "closed", False):
                with h.lock:   # not setStream: it flushes the closed stream first
                    h.stream = sys.__stdout__


@pytest.fixture(scope="session")
def stack():
    """The running local stack (make stack-up); tests that need it fail loudly if it is down."""
    r = subprocess.run([str(ROOT / "scripts" / "stack.sh"), "status"], capture_output=True, text=True)
    if r.returncode != 0:
        how = f"SHARDFLOW_STACK_WORKER={WORKER} scripts/stack.sh up" if WORKER else "make stack-up"
        pytest.fail(f"the local stack is not running: run `{how}` first (`make test` starts the stacks of its "
                    f"workers)\n" + r.stdout)
    return {"up1": _ep("SHARDFLOW_UP1_PORT", "up1"), "up2": _ep("SHARDFLOW_UP2_PORT", "up2"),
            "down": _ep("SHARDFLOW_DOWN_PORT", "down"), "state_dsn": STACK["SHARDFLOW_STATE_DSN"], "env": STACK}


@pytest.fixture
def uniq():
    """A short unique suffix so tests never share schemas, tasks or sources."""
    return uuid.uuid4().hex[:8]
