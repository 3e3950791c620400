"""The job host's socket side (dm_core/jobhost/server.py and client.py) with jobs that are plain
Python functions: several clients at once get one job at a time (the later ones told they
wait), each job's lines while it runs, the job's environment its own; a stopped host refuses
new work so that callers fall back to spark-submit."""

import os
import threading
import time

import pytest

from dm_core.jobhost import client
from dm_core.jobhost.runner import run_job
from dm_core.jobhost.server import Server


@pytest.fixture
def host(tmp_path):
    gate = threading.Event()

    def hold(spark, argv):
        print("holding")
        gate.wait(30)
        return 0

    def env(spark, argv):
        print("VAR=" + os.environ.get("SHARDFLOW_JOBHOST_TEST_VAR", "unset"))
        return 3

    jobs = {"hold": hold, "env": env}
    server = Server(tmp_path / "h" / "host.sock", lambda req, sink: run_job(jobs, None, req, sink, sink),
                    describe=lambda: {"master": "local[2]"})
    server.listen()
    threading.Thread(target=server.serve, daemon=True).start()
    yield server, gate
    gate.set()
    server.stop()


def _run(server, job, env=None):
    lines, notes = [], []
    rc = client.run(job, [], env=env or {}, on_line=lines.append, on_note=notes.append, path=server.path)
    return rc, lines, notes


def test_jobs_from_several_clients_run_one_at_a_time_and_the_later_one_is_told(host):
    server, gate = host
    first: dict = {}
    t = threading.Thread(target=lambda: first.update(zip(("rc", "lines", "notes"), _run(server, "hold"))))
    t.start()
    while client.status(server.path)["running"] == 0:
        time.sleep(0.01)
    second: dict = {}
    t2 = threading.Thread(target=lambda: second.update(zip(("rc", "lines", "notes"), _run(server, "env"))))
    t2.start()
    while client.status(server.path)["waiting"] == 0:
        time.sleep(0.01)
    assert not second   # still waiting for the first
    gate.set()
    t.join(30)
    t2.join(30)
    # a job's log takes the logging of every thread of the process (what a spark-submit's output
    # shows), so lines of other threads (py4j's, in a test process) may follow the job's own
    assert first["rc"] == 0 and first["lines"][:1] == ["holding"] and not first["notes"], first
    assert not any(line.startswith("VAR=") for line in first["lines"]), first
    assert second["rc"] == 3 and second["lines"][:1] == ["VAR=unset"] and "holding" not in second["lines"], second
    assert "waits for 1 job(s) ahead of it" in second["notes"][0]
    deadline = time.monotonic() + 10   # the count moves once the server has closed the job
    while client.status(server.path)["jobs"] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.status(server.path)["jobs"] == 2


def test_a_jobs_environment_is_its_client_s_and_an_armed_executor_variable_is_refused(host):
    server, _ = host
    rc, lines, _ = _run(server, "env", {"SHARDFLOW_JOBHOST_TEST_VAR": "mine"})
    assert (rc, lines[:1]) == (3, ["VAR=mine"])
    rc, lines, _ = _run(server, "env")
    assert (rc, lines[:1]) == (3, ["VAR=unset"])
    rc, lines, _ = _run(server, "env", {"SHARDFLOW_FAULTS": "full.after_chunk_write=1"})
    assert rc == 2 and "spark-submit" in lines[0]


def test_a_stopped_host_takes_no_job(host):
    server, _ = host
    client.request_stop(server.path)
    with pytest.raises(client.HostUnavailable):
        _run(server, "env")
