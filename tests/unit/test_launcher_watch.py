"""spark_jobs/launcher_watch.py with real processes: a driver whose launcher (spark-submit's
JVM) is killed exits by itself; outside spark-submit nothing watches."""

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# the launcher starts the "driver" as its child, prints the driver's pid and sleeps, as spark-submit's JVM
LAUNCHER = """
import subprocess, sys, time
d = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(d.pid, flush=True)
time.sleep(60)
"""
DRIVER = """
import logging, time
from spark_jobs import launcher_watch
print("watching" if launcher_watch.start(logging.getLogger("t")) else "not watching", flush=True)
time.sleep(60)
"""


def _ended(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in state   # exited, not reaped yet by whoever adopted it


def _launch(under_spark_submit: bool, tmp_path):
    """(the launcher, the driver's pid, what the driver said once it started)."""
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    env["PYTHONPATH"] = str(ROOT)
    if under_spark_submit:
        env["PYSPARK_GATEWAY_PORT"] = "1"   # what spark-submit's JVM sets for the driver it starts
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, DRIVER], stdout=subprocess.PIPE,
                                stderr=open(tmp_path / "stderr", "w"), env=env, text=True)
    driver = int(launcher.stdout.readline())
    return launcher, driver, launcher.stdout.readline().strip()   # the driver writes to the same pipe


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_a_driver_whose_launcher_is_killed_exits(tmp_path):
    launcher, driver, said = _launch(True, tmp_path)
    try:
        assert said == "watching" and not _ended(driver)
        launcher.kill()
        launcher.wait()
        assert _wait(lambda: _ended(driver), 5), "the driver outlived its launcher by 5 s"
    finally:
        if not _ended(driver):
            os.kill(driver, 9)


def test_outside_spark_submit_nothing_watches(tmp_path):
    launcher, driver, said = _launch(False, tmp_path)
    try:
        assert said == "not watching"
        launcher.kill()
        launcher.wait()
        assert not _wait(lambda: _ended(driver), 1.5), "a process not under spark-submit ended with its parent"
    finally:
        os.kill(driver, 9)
