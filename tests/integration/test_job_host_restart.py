"""A job host (started as production starts it) that runs older code than the worker's: with
``SHARDFLOW_JOB_HOST=start`` the job keeps spark-submit, and the idle host is replaced in the
background by one that runs the code on disk now; the next job can use it."""

import logging
import time

import pytest

from dm_core import packaging
from dm_core.jobhost import dispatch, service

pytestmark = pytest.mark.integration


def _host_pid(where) -> str | None:
    try:
        return (where / "host.pid").read_text()
    except FileNotFoundError:
        return None


def test_an_idle_host_with_older_code_is_restarted_in_the_background(tmp_path, monkeypatch, caplog):
    where = tmp_path / "host"
    old = service.start(where)
    try:
        on_disk = packaging.code_fingerprint()
        assert service.status(where)["code"] == on_disk
        # the worker sees other code than the host imported (as after an upgrade or an edit)
        monkeypatch.setattr(packaging, "code_fingerprint", lambda: "e0e0e0e0e0e0e0e0")
        log = logging.getLogger("test.jobhost.restart")
        with caplog.at_level(logging.INFO, logger=log.name):
            ran = dispatch.run_on_host("full_load", ["--task", "never_sent"], master="local[2]", conf={}, log=log,
                                       environ={"SHARDFLOW_JOB_HOST": "start"}, directory=where)
        assert ran is False
        assert "runs other code than this worker's" in caplog.text, caplog.text
        assert "the job host restarts with this code in the background" in caplog.text, caplog.text
        deadline = time.monotonic() + service.START_TIMEOUT_S
        got = pid = None
        restart_log = ""
        # the old host drains and exits, the new one starts, then the restart command says so (its
        # line comes after the new host answers, and is flushed when the command exits)
        while time.monotonic() < deadline:
            got, pid = service.status(where), _host_pid(where)   # (no pid file between the two hosts)
            restart_log = (where / "restart.log").read_text() if (where / "restart.log").exists() else ""
            if got and pid not in (None, str(old)) and "job host restarted: pid" in restart_log:
                break
            time.sleep(0.5)
        assert got and pid not in (None, str(old)), restart_log
        assert got["code"] == on_disk and got["master"] == "local[2]", got
        assert "job host restarted: pid" in restart_log, restart_log
    finally:
        service.stop(where)
