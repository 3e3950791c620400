"""Tables without a unique key across the full phase's handoff: the rows written while the
load ran land exactly, identical rows included.

The full phase reads without a global lock and the sync replays the binlog from the low
watermark in safe mode. Safe mode makes that replay harmless by the row's key; a keyless
table has none, and whether a change is already in what the load read cannot be told from
the row. Before, the replay wrote each keyless change in legacy safe mode (an INSERT as
"delete one identical row, insert it"): a DELETE of one of two identical rows made before
the table was read removed the copy that had to stay, and a duplicate INSERT made after it
was read was folded into the existing copy. Log and counter tables without keys, with
repeated rows, are common, and a full phase of a real fleet runs for hours.
"""

import re

import pytest

from dm_core.config.task import parse_task
from dm_core import faults
from dm_core.db import connect, qi, qt
from dm_core.full import chunk_writer
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.session import Clocks, Pacing, SyncSession

from .helpers import drop_schemas, one_source_task, register
from .helpers import run_sql as run
from .test_full_support import run_load
from .test_sync_errors import rows, steps

pytestmark = pytest.mark.integration

SEED = ("INSERT INTO {k} VALUES (1, 'a'), (1, 'a'), (2, 'b'), (2, 'b'), (2, 'b'), (3, NULL)",
        "INSERT INTO {k2} VALUES (9, 'z'), (9, 'z')",
        "INSERT INTO {t} VALUES (1, 'one'), (2, 'two')")
# after the low watermark, before the load reads the table: in the snapshot already
BEFORE_READ = ("DELETE FROM {k} WHERE a = 1 LIMIT 1",
               "UPDATE {k} SET b = 'c' WHERE a = 2 LIMIT 1",
               "INSERT INTO {k} VALUES (3, NULL)",
               "UPDATE {t} SET name = 'uno' WHERE id = 1",
               "TRUNCATE TABLE {k2}",
               "INSERT INTO {k2} VALUES (5, 'x'), (5, 'x')",
               "FLUSH BINARY LOGS")   # the read's position: the new file's first, where no transaction is yet
# after the load read it, before the high watermark: not in the snapshot
AFTER_READ = ("INSERT INTO {k} VALUES (2, 'b')",
              "INSERT INTO {k} VALUES (1, 'a')",
              "DELETE FROM {k} WHERE a = 3 LIMIT 1",
              "UPDATE {k} SET b = 'd' WHERE a = 2 AND b = 'b' LIMIT 1",
              "INSERT INTO {t} VALUES (3, 'three')",
              "INSERT INTO {k2} VALUES (5, 'x')",
              "CREATE TABLE {k3} (a int, b varchar(10))",     # a table the load never read
              "INSERT INTO {k3} VALUES (7, 'q'), (7, 'q')")
# after the high watermark: the sync proper
AFTER_HIGH = ("INSERT INTO {k} VALUES (1, 'a'), (4, 'e')",
              "INSERT INTO {k3} VALUES (7, 'q')",
              "DELETE FROM {k} WHERE a = 2 AND b = 'b' LIMIT 1")


def _multiset(ep, db, table):
    return sorted(rows(ep, db, table, "a, b"), key=repr)


@pytest.fixture
def handoff(stack, uniq):
    up, down = stack["up1"], stack["down"]
    db, tdb, name, sid = f"kh{uniq}", f"tkh{uniq}", f"kh{uniq}", f"kh-{uniq}"
    run(up, f"CREATE DATABASE {qi(db)}", f"CREATE TABLE {qt(db, 'k')} (a int, b varchar(10))",
        f"CREATE TABLE {qt(db, 'k2')} (a int, b varchar(10))",
        f"CREATE TABLE {qt(db, 't')} (id int PRIMARY KEY, name varchar(20))")
    text = one_source_task(name, sid, db, tdb, down)
    task = parse_task(text, "handoff.yaml")
    store = StateStore()
    register(store, {sid: up}, name, text)
    yield task, store, sid, db, tdb
    reset_task(store, name)
    store.close()
    drop_schemas(up, [db])
    drop_schemas(down, [tdb])


@pytest.mark.parametrize("path", ["small tables", "per table", "staging"])
@pytest.mark.parametrize("fault", [None, "sync.after_batch_apply=raise:1"])
def test_changes_of_a_keyless_table_during_the_full_load_land_exactly(handoff, stack, monkeypatch, path, fault):
    """The rows, and with a failure between the catch-up's commit and its checkpoint (the
    replay asks the ledger). ``path``: the load's one pass of small tables, or a table of its
    own (the estimate over half a chunk), or the staging path (keyless tables on TiDB, where
    LOAD DATA may commit in pieces)."""
    task, store, sid, db, tdb = handoff
    up, down = stack["up1"], stack["down"]
    fmt = {"k": qt(db, "k"), "k2": qt(db, "k2"), "k3": qt(db, "k3"), "t": qt(db, "t")}
    run(up, *(s.format(**fmt) for s in SEED))
    args = []
    if path == "per table":
        run(up, f"ANALYZE TABLE {fmt['k']}, {fmt['k2']}")
        args = ["--chunk-rows", "2"]
    elif path == "staging":                    # TiDB's path for keyless tables
        args = ["--write-mode", "staging"]
    prepare(task, store)                       # the low watermark
    run(up, *(s.format(**fmt) for s in BEFORE_READ))
    done = run_load(task.name, *args)
    assert done.returncode == 0, done.stderr[-4000:]
    small = re.search(r"(\d+) small tables copied in one pass", done.stdout + done.stderr)
    assert (int(small.group(1)) if small else 0) == (3 if path == "small tables" else 0), done.stderr[-3000:]
    run(up, *(s.format(**fmt) for s in AFTER_READ))
    finish(task, store)                        # the high watermark
    run(up, *(s.format(**fmt) for s in AFTER_HIGH))

    snaps = chunk_writer.snapshots_of(connect(down), task.meta_schema, task.name, sid)
    assert sorted(n for n, at in snaps.items() if at) == [f"{db}.k", f"{db}.k2"], \
        "each keyless table records its read's position"
    sess = SyncSession(task, sid, store, pacing=Pacing(transient_retries=2), clocks=Clocks(sleep=lambda s: None))
    if fault:
        monkeypatch.setattr(faults, "_hits", {})
        monkeypatch.setenv("SHARDFLOW_FAULTS", fault)
    steps(sess, "caught_up")
    want = _multiset(up, db, "k")
    assert want == sorted([(1, "a"), (1, "a"), (1, "a"), (2, "b"), (2, "c"), (2, "d"), (3, None),
                           (4, "e")], key=repr)
    assert _multiset(down, tdb, "k") == want
    assert _multiset(down, tdb, "k2") == _multiset(up, db, "k2") == [(5, "x")] * 3
    assert _multiset(down, tdb, "k3") == _multiset(up, db, "k3") == [(7, "q")] * 3
    assert rows(down, tdb, "t") == rows(up, db, "t") == [(1, "uno"), (2, "two"), (3, "three")]


def test_an_xa_transaction_prepared_across_the_read_keeps_its_rows(handoff, stack):
    """An XA transaction's rows are in the binlog at its PREPARE, where the sync applies them;
    one prepared before a keyless table's read and committed after it is not in what the load
    read, although its rows lie before the read's position: the table records no position and
    catches up in safe mode, the row lands."""
    task, store, sid, db, tdb = handoff
    up, down = stack["up1"], stack["down"]
    k = qt(db, "k")
    run(up, f"INSERT INTO {k} VALUES (1, 'a')")
    prepare(task, store)
    xa = connect(up)
    try:
        with xa.cursor() as cur:
            for stmt in ("XA START 'kh1'", f"INSERT INTO {k} VALUES (8, 'xa')", "XA END 'kh1'", "XA PREPARE 'kh1'"):
                cur.execute(stmt)
        done = run_load(task.name)
        assert done.returncode == 0, done.stderr[-4000:]
        with xa.cursor() as cur:
            cur.execute("XA COMMIT 'kh1'")
    finally:
        xa.close()
    finish(task, store)
    assert chunk_writer.snapshots_of(connect(down), task.meta_schema, task.name, sid).get(f"{db}.k") is None
    sess = SyncSession(task, sid, store, clocks=Clocks(sleep=lambda s: None))
    steps(sess, "caught_up")
    assert _multiset(down, tdb, "k") == _multiset(up, db, "k") == [(1, "a"), (8, "xa")]


def test_a_large_transaction_right_after_the_read_lands_whole(handoff, stack):
    """The first transaction after the read's position starts at it; one large enough to come
    in pieces (window.PIECE_BYTES) carries that start in every piece but its last: its rows are
    not in the read and must all land."""
    task, store, sid, db, tdb = handoff
    up, down = stack["up1"], stack["down"]
    run(up, *(s.format(k=qt(db, "k"), k2=qt(db, "k2"), t=qt(db, "t")) for s in SEED))
    prepare(task, store)
    done = run_load(task.name)
    assert done.returncode == 0, done.stderr[-4000:]
    run(up, f"INSERT INTO {qt(db, 'k')} SELECT seq % 7, REPEAT('y', 10) FROM {qi(db)}.seq_1_to_150000")
    finish(task, store)
    steps(SyncSession(task, sid, store, pacing=Pacing(transient_retries=2), clocks=Clocks(sleep=lambda s: None)), "caught_up")
    assert _multiset(down, tdb, "k") == _multiset(up, db, "k")
    assert len(_multiset(down, tdb, "k")) == 150006
