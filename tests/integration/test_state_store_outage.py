"""The state store (Postgres) away for a few seconds while a source syncs, as in a restart:
every connection to it cut and new ones refused. The source's process rides it out -- it waits,
reconnects, takes its fence again and syncs on -- instead of dying on "server closed the
connection unexpectedly" and waiting for an Airflow that shares that Postgres and may be gone
too. Rows written meanwhile all land once."""

import threading
import time

import psycopg2
import pytest

from dm_core.db import qt
from dm_core.sync.session import SyncSession

from .helpers import run_sql as run
from .test_sync_errors import rows, steps

pytestmark = pytest.mark.integration
OUTAGE_S = 4.0


def _admin(dsn: str):
    """A superuser connection to the server's maintenance database (not the store's)."""
    conn = psycopg2.connect(dsn.rsplit("/", 1)[0] + "/postgres")
    conn.autocommit = True
    return conn


def test_a_state_store_outage_is_ridden_out_and_the_source_syncs_on(plain, stack):
    task, store, sid, db, tdb, _ = plain
    up, down = stack["up1"], stack["down"]
    dbname = stack["state_dsn"].rsplit("/", 1)[1]
    sess = SyncSession(task, sid, store)   # real sleeps: the outage is waited out on the clock
    steps(sess, "caught_up")
    run(up, f"INSERT INTO {qt(db, 't')} VALUES (1, 'before')")
    admin = _admin(stack["state_dsn"])
    try:
        with admin.cursor() as cur:
            cur.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS false')
            cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                        "AND pid <> pg_backend_pid()", (dbname,))
        back = threading.Timer(OUTAGE_S, lambda: admin.cursor().execute(
            f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true'))
        back.start()
        run(up, f"INSERT INTO {qt(db, 't')} VALUES (2, 'during')")
        t0 = time.monotonic()
        out = sess.step()
        assert time.monotonic() - t0 >= OUTAGE_S - 0.5, "the step did not wait for the store"
        said = " ".join(text for _, text in out.messages)
        assert out.state == "retrying" and "state store was unreachable" in said and "is back" in said, said
        back.join()
        run(up, f"INSERT INTO {qt(db, 't')} VALUES (3, 'after')")
        steps(sess, "caught_up")
        assert rows(down, tdb, "t") == [(1, "before"), (2, "during"), (3, "after")]
        assert store.source_state(task.name, sid)["error"] is None
    finally:
        with admin.cursor() as cur:
            cur.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
        admin.close()
