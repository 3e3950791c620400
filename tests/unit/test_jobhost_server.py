"""The job host's socket side (dm_core/jobhost/server.py and client.py) with jobs that are plain
Python functions: several clients at once get one job at a time (the later ones told they
wait), each job's lines while it runs, the job's environment its own; a stopped host refuses
new work so that callers fall back to spark-submit; a job whose client went away (its task
stopped) is cancelled when it runs and never started when it waits."""

import os
import threading
import time

import pytest

from dm_core.jobhost import client, runner
from dm_core.jobhost.runner import run_job
from dm_core.jobhost.server import Server


class _SparkContext:
    """What runner.cancel calls on the host's SparkContext, counted."""

    def __init__(self):
        self.cancels = 0

    def cancelAllJobs(self):
        self.cancels += 1


@pytest.fixture
def host(tmp_path):
    gate = threading.Event()
    ran: list[str] = []

    def hold(spark, argv):
        print("holding")
        gate.wait(30)
        return 0

    def env(spark, argv):
        ran.append("env")
        print("VAR=" + os.environ.get("SHARDFLOW_JOBHOST_TEST_VAR", "unset"))
        print("cancelled" if runner.CANCELLED.is_set() else "not cancelled")
        return 3

    def until_cancelled(spark, argv):   # a driver that checks between its steps, as the full load's
        print("working")
        return 1 if runner.CANCELLED.wait(30) else 0

    def deaf(spark, argv):              # a driver that does not check: only its Spark jobs are cancelled
        print("working")
        time.sleep(float(argv[0]))
        return 0

    sc = _SparkContext()
    jobs = {"hold": hold, "env": env, "until_cancelled": until_cancelled, "deaf": deaf}
    server = Server(tmp_path / "h" / "host.sock", lambda req, sink: run_job(jobs, None, req, sink, sink),
                    describe=lambda: {"master": "local[2]"}, cancel=lambda: runner.cancel(sc))
    server.listen()
    threading.Thread(target=server.serve, daemon=True).start()
    server.sc, server.ran = sc, ran
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


class _LeavingClient:
    """A client that sends a job and goes away when told (its Airflow task stopped), as
    SparkJobOperator.on_kill does: it shuts its connection down."""

    def __init__(self, server, job, argv=()):
        self.conn, self.lines = None, []
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._run, args=(server, job, list(argv)), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while self.conn is None and time.monotonic() < deadline:
            time.sleep(0.01)

    def _run(self, server, job, argv):
        try:
            client.run(job, argv, env={}, on_line=self.lines.append, path=server.path,
                       on_connected=lambda conn: setattr(self, "conn", conn))
        except Exception as e:   # HostLost once it left
            self.error = e

    def leave(self):
        import socket

        self.conn.shutdown(socket.SHUT_RDWR)
        self.thread.join(10)


def _idle(server, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = client.status(server.path)
        if st["running"] == 0 and st["waiting"] == 0:
            return st
        time.sleep(0.02)
    raise AssertionError(f"the host is still busy: {client.status(server.path)}")


def _working(gone: _LeavingClient, timeout=10):
    """Until the job's first line reached its client: the job runs (the host counts a job as
    running a moment before it starts it, and one whose client left by then never starts)."""
    deadline = time.monotonic() + timeout
    while "working" not in gone.lines:
        assert time.monotonic() < deadline, f"the job did not start: {gone.lines}"
        time.sleep(0.01)


def test_a_running_job_whose_client_left_is_cancelled_and_the_next_job_runs_as_usual(host):
    server, _ = host
    gone = _LeavingClient(server, "until_cancelled")
    _working(gone)
    gone.leave()
    assert isinstance(gone.error, client.HostLost), gone.error
    st = _idle(server)
    assert server.sc.cancels >= 1 and st["jobs"] == 1, (server.sc.cancels, st)
    rc, lines, _ = _run(server, "env")
    assert (rc, lines[:2]) == (3, ["VAR=unset", "not cancelled"]), lines


def test_a_driver_that_does_not_check_is_cancelled_again_until_it_returns_and_not_after(host):
    server, _ = host
    gone = _LeavingClient(server, "deaf", ["1.6"])
    _working(gone)
    gone.leave()
    _idle(server)
    cancels = server.sc.cancels
    assert cancels >= 2, cancels   # new Spark jobs of the still running driver are cancelled too
    assert _run(server, "env")[0] == 3
    assert server.sc.cancels == cancels   # nothing of the cancelled job reaches the next one


def test_a_waiting_job_whose_client_left_never_starts(host):
    server, gate = host
    first = threading.Thread(target=_run, args=(server, "hold"), daemon=True)
    first.start()
    while client.status(server.path)["running"] == 0:
        time.sleep(0.01)
    gone = _LeavingClient(server, "env")
    while client.status(server.path)["waiting"] == 0:
        time.sleep(0.01)
    gone.leave()
    deadline = time.monotonic() + 5   # it leaves the queue while the first job still runs
    while client.status(server.path)["waiting"] and time.monotonic() < deadline:
        time.sleep(0.02)
    st = client.status(server.path)
    assert (st["running"], st["waiting"]) == (1, 0), st
    time.sleep(0.5)   # the watcher's poll is 0.2 s: give it the chance to (wrongly) cancel the running job
    assert server.sc.cancels == 0
    gate.set()
    first.join(10)
    st = _idle(server)
    assert server.ran == [] and st["jobs"] == 1, (server.ran, st)
