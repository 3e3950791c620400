"""A transaction larger than the window holds whole (binlog/window.PIECE_BYTES of row events: a
nightly purge or backfill of millions of rows) comes in pieces, on real servers:

- the window's pieces are the transaction's rows in order, each but the last with ``end`` at the
  transaction's start (nothing checkpoints inside a transaction), the last with its real end;
- the syncer applies the pieces as they come; killed after a piece committed downstream, its
  checkpoint is still before the transaction, and the restart replays it (safe mode) to the
  union of the shards, the checkpoint at the transaction's end.

Before pieces, the window decoded such a transaction whole: 1M updated rows of six columns took
1.3 GB in the reader alone, so a large enough one killed the task process at the same place on
every retry."""

import subprocess
import sys

import pytest

from dm_core.binlog.window import PIECE_BYTES, BinlogWindow
from dm_core.config.task import parse_task
from dm_core.db import connect, master_position, qt
from dm_core.full.phase import finish, prepare
from dm_core.position import Position
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.syncer import Syncer

from .helpers import drop_schemas, make_shards, register, run_sql, shard_task_yaml

pytestmark = pytest.mark.integration

ROWS = 30_000   # one INSERT ... SELECT of this many rows: about 2.5 MB of row events, so several pieces


def _position(ep) -> Position:
    conn = connect(ep)
    try:
        f, p = master_position(conn)[:2]
    finally:
        conn.close()
    return Position(f, int(p))


def _big_insert(ep, schema: str, first: int) -> None:
    """ROWS rows in one transaction (pad makes each row event ~80 bytes)."""
    run_sql(ep, f"INSERT INTO {qt(schema, 't_1')} (id, name, amount) SELECT seq, CONCAT('big-', seq, REPEAT('x', 40)), "
             f"seq % 1000 FROM {qt(schema, f'seq_{first}_to_{first + ROWS - 1}')}")


def test_the_window_hands_a_large_transaction_on_in_pieces(stack, uniq):
    up = stack["up1"]
    schema = f"lt{uniq}"
    make_shards(up, [schema], ["t_1"])
    try:
        start = _position(up)
        run_sql(up, f"INSERT INTO {qt(schema, 't_1')} (id, name) VALUES (0, 'small before')")
        _big_insert(up, schema, 1)
        run_sql(up, f"UPDATE {qt(schema, 't_1')} SET amount = amount + 1 WHERE id = 0")
        until = _position(up)
        sid = 990000 + int(uniq[:4], 16) % 9000

        whole = list(BinlogWindow(up, start, until, server_id=sid, piece_bytes=1 << 30))
        assert [len(t.rows) for t in whole] == [1, ROWS, 1] and not any(t.more for t in whole)
        w = BinlogWindow(up, start, until, server_id=sid, piece_bytes=PIECE_BYTES)
        got = list(w)
        big = [t for t in got if t.start == whole[1].start]
        assert len(big) >= 2, f"{ROWS} rows should exceed {PIECE_BYTES} bytes of row events"
        assert [t.piece for t in big] == list(range(len(big)))
        assert [t.more for t in big] == [True] * (len(big) - 1) + [False]
        assert all(t.end == t.start == whole[1].start for t in big[:-1]), "no checkpoint inside a transaction"
        assert big[-1].end == whole[1].end and big[-1].gtid == whole[1].gtid
        assert [r for t in big for r in t.rows] == whole[1].rows
        assert max(len(t.rows) for t in big) < ROWS
        assert w.position == until and got[0].rows == whole[0].rows and got[-1].rows == whole[2].rows
    finally:
        drop_schemas(up, [schema])


@pytest.fixture
def merged(stack, uniq, tmp_path):
    prefix, tdb, name = f"lg{uniq}", f"lgt{uniq}", f"lg{uniq}"
    schemas = [f"{prefix}_1"]
    make_shards(stack["up1"], schemas, ["t_1"])
    sources = {f"g1-{uniq}": stack["up1"]}
    text = shard_task_yaml(name, stack["down"], [(sid, i + 1) for i, sid in enumerate(sources)], prefix, tdb,
                           shard_mode=None)
    task_file = tmp_path / f"{name}.yaml"
    task_file.write_text(text)
    task = parse_task(text, str(task_file))
    store = StateStore()
    register(store, sources, name, text)
    prepare(task, store)
    finish(task, store)
    yield task, task_file, store, list(sources)[0], schemas[0], tdb
    reset_task(store, name)
    store.close()
    drop_schemas(stack["up1"], schemas)
    drop_schemas(stack["down"], [tdb])


def _sync_process(task_file, sid, tmp_path, faults=None) -> int:
    import os

    from .shard_helpers import ROOT

    env = {k: v for k, v in os.environ.items() if k != "SHARDFLOW_FAULTS"}
    if faults:
        env["SHARDFLOW_FAULTS"] = faults
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with open(tmp_path / f"sync-{faults or 'plain'}.log", "w") as f:
        return subprocess.run([sys.executable, "-m", "tests.integration.shard_helpers", "run", str(task_file), sid,
                               "--mode", "settle", "--timeout", "120", "--budget-events", "100000"], cwd=ROOT, env=env,
                              stdout=f, stderr=subprocess.STDOUT, timeout=300).returncode


def test_killed_inside_a_large_transaction_the_restart_converges(merged, stack, tmp_path):
    task, task_file, store, sid, schema, tdb = merged
    up, down = stack["up1"], stack["down"]
    Syncer(task, sid, store).run_until(float("inf"), max_windows=5)   # caught up: an empty start
    start = _position(up)
    _big_insert(up, schema, 1)
    run_sql(up, f"UPDATE {qt(schema, 't_1')} SET amount = amount + 1, name = CONCAT(name, '!')")   # another, larger
    until = _position(up)

    # killed once the first batch committed downstream: the first piece of the first large
    # transaction (a piece is one batch: it holds more than DM's batch 100 x 16 workers)
    assert _sync_process(task_file, sid, tmp_path, "sync.after_batch_apply=1") == 97
    st = store.source_state(task.name, sid)
    assert Position(st["binlog_file"], st["binlog_pos"]).key() <= start.key(), \
        f"the checkpoint {st['binlog_file']}:{st['binlog_pos']} is inside the transaction that began at {start}"
    landed = _count(down, tdb)
    assert 0 < landed < ROWS, f"{landed} rows downstream: the kill should fall between two pieces"

    assert _sync_process(task_file, sid, tmp_path) == 0
    st = store.source_state(task.name, sid)
    assert Position(st["binlog_file"], st["binlog_pos"]).key() >= until.key()
    conn = connect(up)
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*), SUM(CRC32(CONCAT_WS('|', name, amount))) FROM {qt(schema, 't_1')}")
        want = tuple(cur.fetchone())
    conn.close()
    conn = connect(down)
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*), SUM(CRC32(CONCAT_WS('|', name, amount))) FROM {qt(tdb, 't')}")
        got = tuple(cur.fetchone())
    conn.close()
    assert got == want and want[0] == ROWS


def _count(ep, tdb) -> int:
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {qt(tdb, 't')}")
        n = cur.fetchone()[0]
    conn.close()
    return n
