"""Shared pieces of the full-load tests (no tests here): a one-source task over one upstream
schema, and spark-submit of spark_jobs/full_load.py the way the full DAG runs it."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import threading
import time
from pathlib import Path

from dm_core.config.task import parse_task
from dm_core.db import connect, qi
from dm_core.reset import reset_task

ROOT = Path(__file__).resolve().parents[2]
PY = str(ROOT / ".venv/bin/python")
JAR = os.environ.get("SHARDFLOW_JDBC_JAR", "/usr/share/java/mariadb-java-client.jar")


@functools.cache
def _spark_home() -> str:
    return subprocess.run([PY, "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                          capture_output=True, text=True, check=True).stdout.strip()


def spark_env(extra: dict | None = None) -> dict:
    return {**os.environ, "SPARK_HOME": _spark_home(), "PYSPARK_PYTHON": PY, "PYSPARK_DRIVER_PYTHON": PY,
            **(extra or {})}


def submit_cmd(task_name: str, *args: str, master: str = "local[2]", app: str = "full_load.py") -> list[str]:
    from dm_core.spark_options import driver_java_options

    cmd = [str(ROOT / ".venv/bin/spark-submit"), "--master", master, "--jars", JAR,
           "--conf", "spark.ui.enabled=false", "--conf", f"spark.driver.extraJavaOptions={driver_java_options()}",
           str(ROOT / "spark_jobs" / app)]
    return cmd + (["--task", task_name, *args] if task_name else [])


def run_load(task_name: str, *args: str, master: str = "local[2]", env: dict | None = None,
             timeout: int = 900) -> subprocess.CompletedProcess:
    """The full phase's Spark job for a registered task, as the full DAG runs it: on the test
    session's Spark application (tests/spark_host.py), or with a spark-submit of its own where
    the process itself is under test (a fault point armed on executors, another master)."""
    from tests import spark_host

    wanted = spark_env(env)
    if spark_host.usable(master, wanted):
        host = spark_host.shared_host(submit_cmd("", app="job_host.py"), spark_env())
        return host.run("full_load", ["--task", task_name, *args], host.env_delta(wanted), timeout)
    return subprocess.run(submit_cmd(task_name, *args, master=master), env=wanted,
                          capture_output=True, text=True, timeout=timeout)


def job_lines(path, tail: int = 5000) -> str:
    """A spark-submit's stderr without Spark's own log lines: the job's log and traceback,
    which Spark's start-up and shut-down lines would push out of an assertion message. A
    ``.out`` beside a ``.err`` is the job's stdout, where the driver's log and its traceback
    go: its tail comes first."""
    import re

    spark = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (INFO|WARN|DEBUG) ")
    path = Path(path)
    text = path.read_text(errors="replace")
    kept = "\n".join(line for line in text.splitlines() if not spark.match(line))[-tail:]
    out = path.with_suffix(".out")
    if path.suffix == ".err" and out.exists():
        kept = f"--- the job's stdout (tail) ---\n{out.read_text(errors='replace')[-tail:]}\n--- its stderr ---\n{kept}"
    return kept


def read_report(path) -> dict:
    return json.loads(Path(path).read_text())


def task_yaml(name: str, down, sources: list[tuple], target_db: str, *, loader: str = "", mydumper: str = "",
              meta_schema: str = "") -> str:
    """One instance per (source_id, upstream schema[, loader]); every schema routes into
    ``target_db`` (tables keep their names). ``loader``/``mydumper``: inline YAML mappings such
    as "{pool-size: 1}", for every instance unless the source's tuple brings its own loader."""
    inst = ""
    for i, (sid, _, *own) in enumerate(sources):
        inst += f"  - source-id: {sid}\n    block-allow-list: ba-{i}\n    route-rules: [r-{i}]\n"
        if own or loader:
            inst += f"    loader: {own[0] if own else loader}\n"
        if mydumper:
            inst += f"    mydumper: {mydumper}\n"
    routes = "".join(f'  r-{i}: {{schema-pattern: "{s[1]}", target-schema: "{target_db}"}}\n' for i, s in enumerate(sources))
    bal = "".join(f'  ba-{i}: {{do-dbs: ["{s[1]}"]}}\n' for i, s in enumerate(sources))
    head = f"name: {name}\ntask-mode: full\n" + (f"meta-schema: {meta_schema}\n" if meta_schema else "")
    head += (f"target-database: {{host: {down.host}, port: {down.port}, user: {down.user}, "
             f"password: \"{down.password}\"}}\nmysql-instances:\n")
    return head + inst + "routes:\n" + routes + "block-allow-list:\n" + bal


def register(store, name: str, text: str, sources: dict) -> object:
    """Register sources and the task (fresh), return the parsed task."""
    for sid, ep in sources.items():
        store.put_source(sid, {"source-id": sid, "host": ep.host, "port": ep.port, "user": ep.user}, ep.password)
    reset_task(store, name)
    store.put_task(name, text, "running")
    return parse_task(text, f"{name}.yaml")


def cleanup(store, name: str, text: str) -> None:
    """Forget a test task everywhere: plans, downstream markers and staging, chunk progress."""
    from dm_core.full.phase import forget

    forget(parse_task(text, f"{name}.yaml"), store)
    reset_task(store, name)


class PhaseStep:
    """The full phase's ``prepare`` or ``finish`` (``step``) run in a thread, so that a test can
    take a server away while it runs."""

    def __init__(self, step: str, task, store):
        from dm_core.full.phase import finish, prepare

        self.out: dict = {}
        call = {"prepare": prepare, "finish": finish}[step]

        def run():
            try:
                self.out["got"] = call(task, store)
            except Exception as e:  # noqa: BLE001 - the test reports it
                self.out["error"] = e

        self.thread = threading.Thread(target=run)
        self.thread.start()

    def wait_for(self, reached, timeout: float = 60) -> None:
        """Poll until ``reached()``; the step must still run meanwhile."""
        deadline = time.monotonic() + timeout
        while not reached():
            assert time.monotonic() < deadline and self.thread.is_alive(), self.out
            time.sleep(0.05)

    def result(self, timeout: float = 120):
        """The step's return value once it ended; it must not have raised."""
        self.thread.join(timeout)
        assert "got" in self.out, self.out
        return self.out["got"]


def execute(ep, *sql: str, args=None) -> list:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            out = []
            for s in sql:
                cur.execute(s, args)
                out = list(cur.fetchall())
            return out
    finally:
        conn.close()


def drop(ep, *schemas: str) -> None:
    execute(ep, *[f"DROP DATABASE IF EXISTS {qi(s)}" for s in schemas])


def staging_leftovers(down, meta_schema: str, plan_ids) -> list[str]:
    names = [r[0] for r in execute(down, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                                         "AND table_name LIKE '\\_sf\\_stage\\_%%'", args=(meta_schema,))]
    return [n for n in names if any(n.startswith(f"_sf_stage_{p[:20]}_") for p in plan_ids)]


@contextlib.contextmanager
def one_table_task(stack, tag: str, rows: int):
    """A registered, prepared task ``tag`` over one upstream table ``t`` (id, v) of ``rows``
    rows, routed into the database ``t<tag>``: yields (task, store, that database); the task,
    its state and both databases are dropped afterwards."""
    from dm_core.full.phase import prepare
    from dm_core.state import StateStore

    schema, tdb, sid = tag, f"t{tag}", f"{tag}-src"
    up, down = stack["up1"], stack["down"]
    execute(up, f"CREATE DATABASE {schema}", f"CREATE TABLE {schema}.t (id int PRIMARY KEY, v varchar(10))",
            f"INSERT INTO {schema}.t SELECT seq, CONCAT('v', seq) FROM {schema}.seq_1_to_{rows}")
    text = task_yaml(tag, down, [(sid, schema)], tdb)
    store = StateStore()
    try:
        task = register(store, tag, text, {sid: up})
        prepare(task, store)
        yield task, store, tdb
    finally:
        cleanup(store, tag, text)
        store.close()
        drop(up, schema)
        drop(down, tdb)
