"""A job host (started as production starts it: dm_core/jobhost/service.py) killed with SIGKILL
in the middle of a full load: the task's Spark step fails with HostLost, and the rerun loads
only the chunks not recorded, ending equal to the upstream."""

import os
import signal

import pytest

from dm_core.jobhost import client, dispatch, service
from dm_core.validate.compare import compare_task, render

from .test_full_support import one_table_task, read_report, run_load

pytestmark = pytest.mark.integration

ROWS, CHUNK = 60_000, 2_000


class _KillingLog:
    """The task log; kills the host's process group once the job logged a few chunks."""

    def __init__(self, directory):
        self.directory, self.lines, self.killed = directory, [], False

    def info(self, fmt, *args):
        self.lines.append(fmt % args)
        if not self.killed and sum(" rows loaded in " in line for line in self.lines) >= 3:
            os.killpg(int((self.directory / "host.pid").read_text()), signal.SIGKILL)
            self.killed = True

    warning = info


def test_a_host_killed_mid_load_fails_the_step_and_the_rerun_loads_the_rest(stack, uniq, tmp_path, monkeypatch):
    monkeypatch.setenv("SHARDFLOW_CHUNK_ROWS", str(CHUNK))
    where = tmp_path / "host"
    service.start(where)
    try:
        with one_table_task(stack, f"hk{uniq}", ROWS) as (task, store, _):
            log = _KillingLog(where)
            with pytest.raises(client.HostLost):
                dispatch.run_on_host("full_load", ["--task", task.name], master="local[2]", conf={}, log=log,
                                     directory=where)
            assert log.killed, "\n".join(log.lines[-20:])
            recorded = len(store.done_chunks(task.name, task.mysql_instances[0].source_id, task.name, "t"))
            assert recorded < ROWS // CHUNK, recorded   # killed before the end
            report = tmp_path / "rerun.json"
            r = run_load(task.name, "--report", str(report))
            assert r.returncode == 0, r.stderr[-3000:]
            (t,) = read_report(report)["tables"].values()
            assert len(t["skipped"]) == recorded and len(t["skipped"]) + len(t["adopted"]) + len(t["loaded"]) == \
                ROWS // CHUNK, t
            diffs = compare_task(task, store)
            assert diffs and all(d.equal for d in diffs), render(diffs)
    finally:
        service.stop(where)
