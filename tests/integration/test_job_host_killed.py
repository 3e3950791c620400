"""A job host (started as production starts it: dm_core/jobhost/service.py) killed with SIGKILL
in the middle of a full load: the task's Spark step fails with HostLost, and the rerun loads
only the chunks not recorded, ending equal to the upstream. And the other way round: the
task stopped in the middle of its load on the host (its connection shut down, as
SparkJobOperator.on_kill does): the host cancels the load, stays up, and the rerun on it
converges."""

import os
import signal
import socket
import time

import pytest

from dm_core.jobhost import client, dispatch, service
from dm_core.validate.compare import compare_task, render

from .test_full_support import one_table_task, read_report, run_load

pytestmark = pytest.mark.integration

ROWS, CHUNK = 60_000, 2_000


class _TaskLog:
    """The task log; once the job logged a few chunks, ``act()`` runs once (the host is killed,
    or the task stopped)."""

    def __init__(self, act):
        self.act, self.lines, self.acted = act, [], False

    def info(self, fmt, *args):
        self.lines.append(fmt % args)
        if not self.acted and sum(" rows loaded in " in line for line in self.lines) >= 3:
            self.act()
            self.acted = True

    warning = info


def _the_rerun_loaded_the_rest(task, store, report, recorded: int, chunks: int) -> None:
    """The rerun skipped the chunks recorded before and loaded the others; the target is equal."""
    (t,) = read_report(report)["tables"].values()
    assert len(t["skipped"]) == recorded and len(t["skipped"]) + len(t["adopted"]) + len(t["loaded"]) == chunks, t
    diffs = compare_task(task, store)
    assert diffs and all(d.equal for d in diffs), render(diffs)


def test_a_host_killed_mid_load_fails_the_step_and_the_rerun_loads_the_rest(stack, uniq, tmp_path, monkeypatch):
    monkeypatch.setenv("SHARDFLOW_CHUNK_ROWS", str(CHUNK))
    where = tmp_path / "host"
    service.start(where)
    try:
        with one_table_task(stack, f"hk{uniq}", ROWS) as (task, store, _):
            log = _TaskLog(lambda: os.killpg(int((where / "host.pid").read_text()), signal.SIGKILL))
            with pytest.raises(client.HostLost):
                dispatch.run_on_host("full_load", ["--task", task.name], master="local[2]", conf={}, log=log,
                                     directory=where)
            assert log.acted, "\n".join(log.lines[-20:])
            recorded = len(store.done_chunks(task.name, task.mysql_instances[0].source_id, task.name, "t"))
            assert recorded < ROWS // CHUNK, recorded   # killed before the end
            report = tmp_path / "rerun.json"
            r = run_load(task.name, "--report", str(report))
            assert r.returncode == 0, r.stderr[-3000:]
            _the_rerun_loaded_the_rest(task, store, report, recorded, ROWS // CHUNK)
    finally:
        service.stop(where)


def test_a_load_whose_task_was_stopped_is_cancelled_on_the_host_and_the_rerun_there_converges(
        stack, uniq, tmp_path, monkeypatch):
    rows = 2 * ROWS
    monkeypatch.setenv("SHARDFLOW_CHUNK_ROWS", str(CHUNK))
    where = tmp_path / "host"
    service.start(where)
    try:
        with one_table_task(stack, f"hs{uniq}", rows) as (task, store, _):
            conn = []   # the task's connection to the host, shut down as SparkJobOperator.on_kill does
            log = _TaskLog(lambda: conn[0].shutdown(socket.SHUT_RDWR))
            with pytest.raises(client.HostLost):
                dispatch.run_on_host("full_load", ["--task", task.name], master="local[2]", conf={}, log=log,
                                     directory=where, on_connected=conn.append)
            assert log.acted, "\n".join(log.lines[-20:])
            # the host's log is its driver's output copied by the JVM: it lags the job's end a little
            deadline, host_log = time.monotonic() + 60, ""
            while "(cancelled: its client went away)" not in host_log and time.monotonic() < deadline:
                time.sleep(0.1)
                host_log = (where / "host.log").read_text()
            assert "(cancelled: its client went away)" in host_log, host_log[-3000:]
            assert client.status(where / "host.sock")["running"] == 0
            sid = task.mysql_instances[0].source_id
            recorded = len(store.done_chunks(task.name, sid, task.name, "t"))
            assert recorded < rows // CHUNK, recorded   # it stopped before the end
            time.sleep(1)   # nothing of it goes on
            assert len(store.done_chunks(task.name, sid, task.name, "t")) == recorded
            report = tmp_path / "rerun.json"
            assert dispatch.run_on_host("full_load", ["--task", task.name, "--report", str(report)],
                                        master="local[2]", conf={}, log=_TaskLog(lambda: None), directory=where)
            _the_rerun_loaded_the_rest(task, store, report, recorded, rows // CHUNK)
    finally:
        service.stop(where)
