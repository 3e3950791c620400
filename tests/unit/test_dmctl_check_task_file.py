"""`dmctl check-task` on broken task files, as a user runs it: exit 1, every problem named by
its key path on stderr, and no server contacted (the file is refused before anything runs).
The files are the config tests' table of broken files."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .test_config_task import BROKEN

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text,expected", BROKEN)
def test_check_task_names_every_broken_key(tmp_path, text, expected):
    f = tmp_path / "task.yaml"
    f.write_text(textwrap.dedent(text))
    env = dict(os.environ, PYTHONPATH=str(ROOT), SHARDFLOW_STATE_DSN="postgresql://nobody@127.0.0.1:1/none")
    r = subprocess.run([sys.executable, "-m", "dm_core.cli.dmctl", "check-task", str(f)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "valid" not in r.stdout
    for key, message in expected:
        assert key in r.stderr and message in r.stderr, (key, message, r.stderr)
    assert str(f) in r.stderr


def test_check_task_warns_for_each_key_shardflow_does_not_act_on_before_contacting_servers(tmp_path):
    f = tmp_path / "task.yaml"
    f.write_text(textwrap.dedent("""\
        name: warned
        task-mode: all
        enable-heartbeat: true
        target-database: {host: 127.0.0.1, port: 4000, user: root, password: ""}
        mysql-instances:
          - source-id: s1
            loader: {import-mode: physical}
            syncer: {queue-size: 4096}
        """))
    env = dict(os.environ, PYTHONPATH=str(ROOT), SHARDFLOW_STATE_DSN="postgresql://nobody@127.0.0.1:1/none")
    r = subprocess.run([sys.executable, "-m", "dm_core.cli.dmctl", "check-task", str(f)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert "task file" in r.stdout and "valid" in r.stdout
    warned = [line for line in r.stderr.splitlines() if line.startswith("warning: ")]
    assert [w.split(": ")[2] for w in warned] == [
        "enable-heartbeat", "mysql-instances[0].loader.import-mode", "mysql-instances[0].syncer.queue-size"], r.stderr
    assert all("(fix: " in w for w in warned)
