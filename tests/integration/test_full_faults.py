"""A server that goes away during the full load: the load carries on once it is back, with no
one running anything (before: the full phase failed and waited for `dmctl start-task`).

The downstream here is a private MariaDB, killed with SIGKILL in the middle of the load and
started again 3 s later; the load runs in a spark-submit of its own (chunks slowed by a fault
point so that the kill lands mid-load). Rows downstream must equal upstream, each once."""

import signal
import subprocess
import time

import pytest

from dm_core.db import Endpoint, connect, qi, qt
from dm_core.full.phase import prepare
from dm_core.state import StateStore
from dm_core.validate.compare import compare_task, render

from .mariadb_fixture import free_port, private_port, start_mariadb
from .test_full_support import cleanup, drop, execute, register, spark_env, submit_cmd, task_yaml

pytestmark = pytest.mark.integration
ROWS = 40_000


def _landed(ep: Endpoint, tdb: str) -> int:
    try:
        conn = connect(ep)
    except Exception:   # the server is away
        return -1
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {qt(tdb, 't')}")
            return cur.fetchone()[0]
    except Exception:
        return -1
    finally:
        conn.close()


def test_downstream_killed_mid_load_the_load_finishes_by_itself(stack, uniq, tmp_path):
    schema, tdb, name, sid = f"fk{uniq}", f"fkt{uniq}", f"fk{uniq}", f"fk-{uniq}"
    up = stack["up1"]
    db = start_mariadb(tmp_path, free_port(private_port(i) for i in range(0, 4)), 73, log_bin=False,
                       extra_args=["--local-infile=1"])
    down = db.endpoint()
    execute(up, f"CREATE DATABASE {qi(schema)}",
            f"CREATE TABLE {qt(schema, 't')} (id int PRIMARY KEY, v varchar(40), n bigint)",
            f"INSERT INTO {qt(schema, 't')} SELECT seq, CONCAT('row-', seq), seq * 7 FROM {schema}.seq_1_to_{ROWS}")
    text = task_yaml(name, down, [(sid, schema)], tdb)
    store = StateStore()
    try:
        task = register(store, name, text, {sid: up})
        prepare(task, store)
        env = spark_env({"SHARDFLOW_FAULTS": "full.before_chunk_merge=sleep:0.25", "SHARDFLOW_FULL_RECONNECT_S": "120"})
        log = tmp_path / "load.log"
        with open(log, "w") as out:
            job = subprocess.Popen(submit_cmd(name, "--chunk-rows", "2000"), env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + 180
            while _landed(down, tdb) < 4000 and job.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert job.poll() is None, "the load ended before the kill: " + log.read_text()[-3000:]
            landed = _landed(down, tdb)
            assert 0 < landed < ROWS, f"{landed} rows landed before the kill"
            db.proc.send_signal(signal.SIGKILL)
            db.proc.wait()
            time.sleep(3)
            db.start()
            rc = job.wait(timeout=300)
        said = log.read_text()
        assert rc == 0, said[-5000:]
        assert "a server went away" in said and "loading the chunk again" in said, said[-5000:]
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
    finally:
        cleanup(store, name, text)
        store.close()
        drop(up, schema)
        db.stop()
