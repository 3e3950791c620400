"""The full load on a real Spark standalone cluster (a master and two workers from the
pyspark package), not local mode: the driver's closures, the JDBC jar shipped with --jars,
the executor JVM settings and the dm_core archive the job ships (executors run the LOAD DATA
writer in Python) must all work across processes. Executors run a Python that cannot see
this checkout (``python -S`` with only the venv's site-packages on its path: setup installs
the project into the venv as an editable package, whose path file ``-S`` skips), in work
directories of their own, as on machines without a copy of shardflow.
Master and workers are always killed.
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from dm_core.full.phase import finish, prepare
from dm_core.state import StateStore
from dm_core.validate.compare import compare_task, render
from tests.integration.helpers import drop_schemas, make_shards, register, shard_task_yaml
from tests.integration.test_full_support import PY, cleanup, read_report, run_load, spark_env

pytestmark = pytest.mark.e2e

MASTER_PORT, MASTER_UI, WORKER_UIS = 7177, 8181, (8182, 8183)
MASTER = f"spark://127.0.0.1:{MASTER_PORT}"


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _master_state() -> dict:
    """The master's state; {} while its web UI is up without its JSON handler yet (it answers
    with its HTML page then: a .ci/run failed on that once)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{MASTER_UI}/json", timeout=5) as r:
        try:
            return json.load(r)
        except ValueError:
            return {}


@pytest.fixture
def standalone(tmp_path):
    busy = [p for p in (MASTER_PORT, MASTER_UI, *WORKER_UIS) if not _port_free(p)]
    if busy:
        pytest.fail(f"ports {busy} are in use: another Spark standalone cluster is running here")
    site = subprocess.run([PY, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    env = spark_env({"SPARK_LOCAL_DIRS": str(tmp_path / "local"), "PYTHONPATH": site})
    cls = os.path.join(env["SPARK_HOME"], "bin", "spark-class")
    procs = []
    daemons = [("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                           "--port", str(MASTER_PORT), "--webui-port", str(MASTER_UI)])]
    daemons += [(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", MASTER, "--cores", "1", "--memory", "1g",
                                "--webui-port", str(port), "--work-dir", str(tmp_path / f"work{i}")])
                for i, port in enumerate(WORKER_UIS, 1)]
    try:
        for name, args in daemons:
            (tmp_path / name).mkdir()
            log = open(tmp_path / f"{name}.log", "w")
            procs.append(subprocess.Popen([cls, *args], env=env, cwd=tmp_path / name, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True))
            if name == "master":
                _wait(lambda: not _port_free(MASTER_PORT) and not _port_free(MASTER_UI), 60, tmp_path / "master.log")
        _wait(lambda: _master_state().get("aliveworkers", 0) >= 2, 60, tmp_path / "worker2.log")
        yield tmp_path
    finally:
        for p in procs:  # always: the whole process group of each daemon
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def _python_without_project(where) -> object:
    """The executors' interpreter: the venv's Python, minus every path file (-S), so dm_core
    can only come from the archive the job ships."""
    wrapper = where / "python-without-project"
    wrapper.write_text(f'#!/bin/sh\nexec {PY} -S "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def _wait(cond, seconds: float, logfile) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"Spark standalone did not come up in {seconds}s:\n{open(logfile).read()[-3000:]}")


def test_full_load_on_spark_standalone(stack, uniq, standalone):
    prefix, tdb, name = f"sa{uniq}", f"sat{uniq}", f"sa{uniq}"
    schemas = [f"{prefix}_1", f"{prefix}_2"]
    make_shards(stack["up1"], schemas, ["t_1", "t_2"], rows=300)
    make_shards(stack["up2"], schemas, ["t_1"], rows=300)
    sources = {f"sa1-{uniq}": stack["up1"], f"sa2-{uniq}": stack["up2"]}
    text = shard_task_yaml(name, stack["down"], [(sid, i + 1) for i, sid in enumerate(sources)], prefix, tdb, mode="full")
    from dm_core.config.task import parse_task

    task = parse_task(text, "standalone.yaml")
    store = StateStore()
    try:
        register(store, sources, name, text)
        prepare(task, store)
        rep = standalone / "report.json"
        r = run_load(name, "--chunk-rows", "100", "--report", str(rep), master=MASTER,
                     env={"PYSPARK_PYTHON": str(_python_without_project(standalone))})
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
        assert read_report(rep)["rows"] == 6 * 300
        finish(task, store)
        diffs = compare_task(task, store)
        assert len(diffs) == 1 and diffs[0].equal and diffs[0].downstream_rows == 1800, render(diffs)
        apps = _master_state().get("completedapps", [])
        assert any(a.get("name") == f"shardflow-full-{name}" for a in apps), "the job did not run on the cluster"
        # both workers ran executors of the job (each has an app directory with an executor's logs)
        for i in (1, 2):
            assert list((standalone / f"work{i}").glob("app-*/*/stderr")), f"worker {i} ran no executor"
    finally:
        cleanup(store, name, text)
        store.close()
        drop_schemas(stack["up1"], schemas)
        drop_schemas(stack["up2"], schemas)
        drop_schemas(stack["down"], [tdb])
