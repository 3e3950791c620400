"""A downstream down for longer than a source's retries (a TiDB upgrade, an outage): the source
pauses with 50012, then resumes by itself (the source's checker, DM's task checker) again and
again with a growing backoff, each time said in the task log and in query-status, until the
downstream is back. No one runs resume-task, and the rows downstream end equal to upstream.

With `checker.check-enable: false` in the source file the source stays paused until
resume-task, as DM's does. A pause-task wins over the checker.

The downstream is a private MariaDB, killed with SIGKILL and started again. The session runs on
a clock ten times as fast (the retries' and the checker's backoffs), so the seconds of DM's
defaults pass in tenths."""

import signal
import time

import pytest

from dm_core.cli.dmctl import _fmt_state
from dm_core.cli.status_view import describe
from dm_core.config.source import parse_source
from dm_core.config.task import parse_task
from dm_core.db import qi, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.session import Clocks, Pacing, SyncSession

from .helpers import drop_schemas, one_source_task
from .helpers import run_sql as run
from .mariadb_fixture import free_port, private_port, start_mariadb
from .test_full_support import execute

pytestmark = pytest.mark.integration
FAST = 10.0


def _session(task, sid, store) -> SyncSession:
    return SyncSession(task, sid, store, pacing=Pacing(transient_retries=2, rest_seconds=0.5),
                       clocks=Clocks(clock=lambda: time.monotonic() * FAST, sleep=lambda s: time.sleep(s / FAST)))


def _until(sess, want, what: str, limit: float = 60.0) -> list[str]:
    """Step until ``want(out, said)``; returns every line the steps said."""
    said: list[str] = []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        out = sess.step()
        said += [t for _, t in out.messages]
        if want(out, said):
            return said
    pytest.fail(f"never {what}; last lines: {said[-4:]}")


def _steps_for(sess, seconds: float) -> list[str]:
    said: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        said += [t for _, t in sess.step().messages]
    return said


def _rows(ep, db: str) -> list:
    return execute(ep, f"SELECT id, v FROM {qt(db, 't')} ORDER BY id")


@pytest.mark.parametrize("check_enable", [True, False])
def test_a_downstream_down_longer_than_the_retries_is_resumed_by_the_sources_checker(stack, uniq, tmp_path,
                                                                                    check_enable):
    up = stack["up1"]
    downd = start_mariadb(tmp_path, free_port(private_port(i) for i in range(0, 10)), 76, log_bin=False)
    down = downd.endpoint()
    db, tdb, name, sid = f"ar{uniq}", f"tar{uniq}", f"ar{uniq}", f"ar-{uniq}"
    run(up, f"CREATE DATABASE {qi(db)}", f"CREATE TABLE {qt(db, 't')} (id int PRIMARY KEY, v varchar(20))")
    text = one_source_task(name, sid, db, tdb, down)
    task = parse_task(text, "auto-resume.yaml")
    source = parse_source(f"source-id: {sid}\nfrom: {{host: {up.host}, port: {up.port}, user: {up.user}}}\n"
                          f"checker: {{check-enable: {str(check_enable).lower()}}}\n", "source.yaml")
    store = StateStore()
    try:
        store.put_source(sid, source.to_dict(), up.password)
        reset_task(store, name)
        store.put_task(name, text, "running")
        prepare(task, store)
        run(down, f"CREATE DATABASE IF NOT EXISTS {qi(tdb)}",
            f"CREATE TABLE IF NOT EXISTS {qt(tdb, 't')} (id int PRIMARY KEY, v varchar(20))")
        finish(task, store)
        run(up, f"INSERT INTO {qt(db, 't')} SELECT seq, CONCAT('a', seq) FROM {qi(db)}.seq_1_to_100")
        sess = _session(task, sid, store)
        _until(sess, lambda out, _: out.state == "caught_up", "caught up")
        assert len(_rows(down, tdb)) == 100

        downd.proc.send_signal(signal.SIGKILL)
        downd.proc.wait()
        run(up, f"INSERT INTO {qt(db, 't')} SELECT seq, CONCAT('b', seq) FROM {qi(db)}.seq_101_to_200",
            f"UPDATE {qt(db, 't')} SET v = 'changed' WHERE id <= 10")
        said = _until(sess, lambda out, _: out.state == "paused", "paused on the retries")
        st = store.source_state(name, sid)
        assert st["stage"] == "paused" and st["error_code"] == 50012, st["error"]
        assert "transient error (attempt 2 of 2)" in "\n".join(said)

        def status() -> str:
            return describe(name, store.task_info(name), store.source_state(name, sid), None)[1]

        if not check_enable:
            said = _steps_for(sess, 2.0)   # 20 s on the session's clock: four of the checker's looks
            assert not any("resumes by itself" in s or "auto-resume" in s for s in said), said
            st = store.source_state(name, sid)
            assert st["stage"] == "paused" and st["auto_resume_at"] is None
            assert "resumes by itself" not in status() and "resume-task" in status()
            downd.start()
            _steps_for(sess, 1.0)           # back, but nothing resumes the source but the operator
            assert store.source_state(name, sid)["stage"] == "paused"
            store.request_sources(name, [sid], "running", all_sources=[sid], clear_error=True)   # resume-task
        else:
            said = _until(sess, lambda _, said: any("auto-resume #1 of its pause" in s for s in said), "auto-resumed")
            planned = next(s for s in said if "resumes by itself in" in s)
            assert "auto-resume #1" in planned and f"dmctl resume-task {name} -s {sid}" in planned, planned
            resumed = next(s for s in said if "auto-resume #1 of its pause" in s)
            assert "50012" in resumed, resumed
            # still down: the retries run again and the source pauses again; the next resume waits longer
            said = _until(sess, lambda _, said: any("resumes by itself in" in s for s in said), "planned again")
            assert any("auto-resume #2" in s for s in said), said
            st = store.source_state(name, sid)
            assert st["stage"] == "paused" and st["auto_resume_at"] is not None
            assert "resumes by itself at" in status() and "pause-task" in status(), status()
            assert _fmt_state(st)["auto_resume_at"] == st["auto_resume_at"].isoformat()   # query-status's JSON

            downd.start()
        said = _until(sess, lambda out, _: out.state == "caught_up", "caught up after the downstream is back")
        st = store.source_state(name, sid)
        assert st["stage"] != "paused" and st["error"] is None and st["auto_resume_at"] is None, st["error"]
        assert _rows(down, tdb) == _rows(up, db)
        assert len(_rows(down, tdb)) == 200

        if check_enable:   # a pause-task wins over the checker: nothing resumes the source meanwhile
            store.update_source_state(name, sid, stage="paused", error="[code=50012:sync] injected", error_code=50012)
            store.request_sources(name, [sid], "paused", all_sources=[sid])
            said = _steps_for(sess, 1.5)
            assert not any("auto-resume" in s for s in said), said
            assert store.source_state(name, sid)["stage"] == "paused"
            assert not store.auto_resume(name, sid, 50012)
            store.request_sources(name, [sid], "running", all_sources=[sid])
            assert store.auto_resume(name, sid, 50012) and store.source_state(name, sid)["stage"] == "sync"
    finally:
        reset_task(store, name)
        store.close()
        drop_schemas(up, [db])
        downd.stop()
