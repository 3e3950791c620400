"""Tables without a primary or unique key, replayed after a failure: the keyless ledger
(dm_core/sync/keyless_ledger.py) makes the replay exact where safe mode cannot.

Before it, a failure between a batch's commit and its checkpoint (or a worker failing while
the others committed) replayed the batch in safe mode, and a table holding identical rows
ended with a copy too few or too many: the replayed DELETE of one of two identical rows took
the copy that had to stay, a replayed UPDATE moved a second copy.
"""

import pytest

from dm_core import faults
from dm_core.db import connect, qt
from dm_core.sync import keyless_ledger

from .helpers import run_sql as run
from .test_sync_errors import rows, steps

pytestmark = pytest.mark.integration

# what a user's log table looks like: no key, rows that can repeat
WORKLOAD = (
    "INSERT INTO {k} VALUES (1, 'x'), (1, 'x'), (2, 'y')",
    "INSERT INTO {k} VALUES (1, 'x')",
    "UPDATE {k} SET b = 'z' WHERE a = 2",
    "DELETE FROM {k} WHERE a = 1 LIMIT 1",
    "INSERT INTO {t} VALUES (7, 'keyed'), (8, 'keyed'), (9, 'keyed'), (10, 'keyed'), (11, 'keyed')",
    "UPDATE {k} SET b = 'x2' WHERE a = 1 LIMIT 1",
    "INSERT INTO {k} VALUES (3, NULL), (3, NULL)",
    "DELETE FROM {k} WHERE a = 3 LIMIT 1",
)


def _said(sess, want, n=20):
    said = []
    for _ in range(n):
        out = sess.step()
        said += [m for _, m in out.messages]
        if out.state == want:
            return said
    pytest.fail(f"never {want!r}: {said}")


@pytest.mark.parametrize("fault", [
    "sync.after_batch_apply=raise:1",     # every worker committed, the checkpoint not moved
    "sync.apply.before_commit=raise:1",   # one worker failed, the others may have committed
    "sync.apply.before_commit=raise:2",
])
def test_a_replay_after_a_failure_leaves_identical_rows_of_a_keyless_table_exact(plain, stack, monkeypatch, fault):
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    k, t = qt(db, "k"), qt(db, "t")
    run(up, f"CREATE TABLE {k} (a int, b varchar(10))", f"INSERT INTO {k} VALUES (0, 'first')")
    steps(sess, "caught_up")
    st = store.source_state(task.name, sid)
    assert st["keyless_exact_file"], "the first transaction written outside safe mode starts the ledger"

    run(up, *(s.format(k=k, t=t) for s in WORKLOAD))
    monkeypatch.setattr(faults, "_hits", {})
    monkeypatch.setenv("SHARDFLOW_FAULTS", fault)
    said = _said(sess, "caught_up")
    assert any("injected error at hit" in m for m in said), said   # the failure happened, then the replay

    want = sorted(rows(up, db, "k", "a, b"), key=repr)
    assert want == sorted([(0, "first"), (1, "x"), (1, "x2"), (2, "z"), (3, None)], key=repr)
    assert sorted(rows(down, tdb, "k", "a, b"), key=repr) == want
    assert rows(down, tdb, "t") == rows(up, db, "t") == [(i, "keyed") for i in range(7, 12)]

    monkeypatch.delenv("SHARDFLOW_FAULTS")   # and the replay left the source able to go on
    run(up, f"DELETE FROM {k} WHERE a = 1 LIMIT 1", f"INSERT INTO {k} VALUES (0, 'first')")
    steps(sess, "caught_up")
    assert sorted(rows(down, tdb, "k", "a, b"), key=repr) == sorted(rows(up, db, "k", "a, b"), key=repr)


def test_rows_of_a_keyless_table_before_the_ledger_began_replay_in_safe_mode(plain, stack):
    """Rows replayed from before the first transaction written outside safe mode (here: every
    checkpoint moved back to the full phase's low watermark) have no ledger to ask: distinct
    rows still land once (safe mode's delete-one-then-insert), nothing pauses."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    k = qt(db, "k")
    run(up, f"CREATE TABLE {k} (a int, b varchar(10))", f"INSERT INTO {k} VALUES (1, 'a'), (2, 'b')")
    steps(sess, "caught_up")
    st = store.source_state(task.name, sid)
    store.update_source_state(task.name, sid, binlog_file=st["low_file"], binlog_pos=st["low_pos"],
                              **keyless_ledger.CLEARED)   # no ledger, no handoff: the legacy write
    run(up, f"INSERT INTO {k} VALUES (3, 'c')")
    steps(sess, "caught_up")
    assert sorted(rows(down, tdb, "k", "a, b")) == sorted(rows(up, db, "k", "a, b")) == [(1, "a"), (2, "b"), (3, "c")]


def test_a_transaction_paused_on_a_rejected_row_and_resumed_writes_its_keyless_rows_once(plain, stack):
    """The downstream rejects a keyed row of a transaction whose keyless rows another worker
    committed; after the fix and resume-task the same syncer reads the transaction again."""
    task, store, sid, db, tdb, sess = plain
    up, down = stack["up1"], stack["down"]
    k, t = qt(db, "k"), qt(db, "t")
    run(up, f"CREATE TABLE {k} (a int, b varchar(10))", f"INSERT INTO {k} VALUES (0, 'first')")
    steps(sess, "caught_up")
    run(down, f"ALTER TABLE {qt(tdb, 't')} MODIFY name varchar(5)")   # the downstream drifted: too narrow
    conn = connect(up)
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO {k} VALUES (1, 'x'), (1, 'x'), (2, 'y')")
            cur.execute(f"INSERT INTO {t} VALUES (3, 'far too long for it')")
            cur.execute(f"DELETE FROM {k} WHERE a = 0")
            cur.execute("COMMIT")
    finally:
        conn.close()
    run(up, f"INSERT INTO {t} VALUES (4, 'ok')")   # no keyless row after it: the syncer's last
    steps(sess, "paused")
    assert "Data too long" in store.source_state(task.name, sid)["error"]

    run(down, f"ALTER TABLE {qt(tdb, 't')} MODIFY name varchar(20)")
    store.request_sources(task.name, [sid], "running", all_sources=[sid], clear_error=True)
    steps(sess, "caught_up")
    want = sorted(rows(up, db, "k", "a, b"))
    assert want == [(1, "x"), (1, "x"), (2, "y")]
    assert sorted(rows(down, tdb, "k", "a, b")) == want
    assert rows(down, tdb, "t") == rows(up, db, "t")
