"""The state store's Postgres server restarted while a source syncs (stopped, down for a few
seconds, started again: `scripts/stack.sh pg-bounce`). The source's process rides it out -- it
waits, reconnects, takes its fence again and syncs on -- instead of dying on "server closed
the connection unexpectedly" and waiting for an Airflow that shares that Postgres and may be
gone too. Rows written before, during and after all land once."""

import subprocess
import threading
import time
from pathlib import Path

import pytest

from dm_core.db import qt
from dm_core.sync.session import SyncSession

from .helpers import run_sql as run
from .test_sync_errors import rows, steps

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
DOWN_S = 4


def test_a_state_store_restart_is_ridden_out_and_the_source_syncs_on(plain, stack):
    task, store, sid, db, tdb, _ = plain
    up, down = stack["up1"], stack["down"]
    sess = SyncSession(task, sid, store)   # real sleeps: the outage is waited out on the clock
    steps(sess, "caught_up")
    run(up, f"INSERT INTO {qt(db, 't')} VALUES (1, 'before')")
    bounce = subprocess.Popen([str(ROOT / "scripts" / "stack.sh"), "pg-bounce", str(DOWN_S)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while "postgres stopped" not in (bounce.stdout.readline() or "") and time.monotonic() < deadline:
        pass
    run(up, f"INSERT INTO {qt(db, 't')} VALUES (2, 'during')")
    t0 = time.monotonic()
    out = sess.step()
    waited = time.monotonic() - t0
    rest = threading.Thread(target=bounce.communicate)
    rest.start()
    said = " ".join(text for _, text in out.messages)
    assert out.state == "retrying" and "state store was unreachable" in said and "is back" in said, said
    assert waited >= DOWN_S - 1, f"the step did not wait for the store ({waited:.1f}s)"
    rest.join(timeout=60)
    assert bounce.returncode == 0
    run(up, f"INSERT INTO {qt(db, 't')} VALUES (3, 'after')")
    steps(sess, "caught_up")
    assert rows(down, tdb, "t") == [(1, "before"), (2, "during"), (3, "after")]
    assert store.source_state(task.name, sid)["error"] is None


def test_a_broken_connection_to_a_store_that_answers_at_once_takes_the_fence_again(plain, stack):
    """The session's connection is cut (its backend terminated, as a pooler or a failover of
    the Postgres address does) while the server stays up: the step reconnects at once, and the
    fence, which went with the old connection, must be taken again before anything syncs."""
    from dm_core.state import StateStore
    from dm_core.state.schema import FENCE_LOCK_CLASS
    from dm_core.state.store import _fence_key

    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    steps(sess, "caught_up")
    other = StateStore()
    try:
        assert other.held_sources(task.name, [sid]) == {sid}
        with other.tx() as cur:
            cur.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                        "AND classid::bigint = %s AND objid::bigint = %s", (FENCE_LOCK_CLASS, _fence_key(task.name, sid)))
            assert cur.fetchall() == [(True,)]
        assert other.held_sources(task.name, [sid]) == set()
        out = sess.step()
        said = " ".join(text for _, text in out.messages)
        assert out.state == "retrying" and "reconnected" in said, said
        run(up, f"INSERT INTO {qt(db, 't')} VALUES (1, 'after')")
        steps(sess, "caught_up")
        assert other.held_sources(task.name, [sid]) == {sid}, "the source synced on without its fence"
        assert rows(down, tdb, "t") == [(1, "after")]
    finally:
        other.close()
