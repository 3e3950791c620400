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


def _stack_env() -> dict:
    out = subprocess.run([str(ROOT / "scripts" / "stack.sh"), "env"], capture_output=True, text=True, check=True).stdout
    env = {}
    for line in out.splitlines():
        for part in line.replace("export ", "").split():
            k, _, v = part.partition("=")
            env[k] = v
    return env


STACK = _stack_env()
os.environ.setdefault("SHARDFLOW_STATE_DSN", STACK["SHARDFLOW_STATE_DSN"])
os.environ.setdefault("SHARDFLOW_STACK_PASSWORD", STACK["SHARDFLOW_STACK_PASSWORD"])


def _ep(port_key: str, name: str):
    from dm_core.db import Endpoint

    return Endpoint("127.0.0.1", int(STACK[port_key]), STACK["SHARDFLOW_STACK_USER"], STACK["SHARDFLOW_STACK_PASSWORD"], name=name)


@pytest.fixture(scope="session")
def stack():
    """The running local stack (make stack-up); tests that need it fail loudly if it is down."""
    r = subprocess.run([str(ROOT / "scripts" / "stack.sh"), "status"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail("the local stack is not running: run `make stack-up` first\n" + r.stdout)
    return {"up1": _ep("SHARDFLOW_UP1_PORT", "up1"), "up2": _ep("SHARDFLOW_UP2_PORT", "up2"),
            "down": _ep("SHARDFLOW_DOWN_PORT", "down"), "state_dsn": STACK["SHARDFLOW_STATE_DSN"], "env": STACK}


@pytest.fixture
def uniq():
    """A short unique suffix so tests never share schemas, tasks or sources."""
    return uuid.uuid4().hex[:8]
