"""DM's binlog_999999 case: the upstream's binlog file number grows past six digits
(mysql-bin.999999 → mysql-bin.1000000 → mysql-bin.1000001) while a task replicates, and
across a restart of the sync. Binlog files must order by their number, not by their name
("mysql-bin.1000000" < "mysql-bin.999999" as text), or a checkpoint in the new file looks
older than one in the old and the source replays or stalls.

A private upstream (its binlog renamed while it is stopped, as DM's case does) feeds a task
in incremental mode; the downstream must equal the upstream after each step, and the
checkpoint must name the newest file.
"""

import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, master_position, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.syncer import Syncer
from dm_core.validate.compare import compare_task, render

from .helpers import drop_schemas, make_shards, register, shard_task_yaml
from .mariadb_fixture import free_port, private_port, start_mariadb

pytestmark = pytest.mark.integration


def _binlog_numbered_from(db, first: int) -> None:
    """With the server stopped: its binlog files renumbered from ``first`` on, the index too."""
    index = db.datadir / "mysql-bin.index"
    names = [line.strip() for line in index.read_text().splitlines() if line.strip()]
    renamed = []
    for i, name in enumerate(names):
        new = f"mysql-bin.{first + i:06d}"
        (db.datadir / name.removeprefix("./")).rename(db.datadir / new)
        renamed.append(f"./{new}")
    index.write_text("\n".join(renamed) + "\n")


def _write(ep, schema: str, tag: str, n: int) -> None:
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {qt(schema, 't_1')} (name, amount) VALUES (%s, %s)",
                        [(f"{tag}-{i}", i) for i in range(n)])
        cur.execute(f"UPDATE {qt(schema, 't_1')} SET amount = amount + 1 WHERE name LIKE %s", (f"{tag}-%",))
        cur.execute(f"DELETE FROM {qt(schema, 't_1')} WHERE name = %s", (f"{tag}-0",))
    conn.close()


def _flush(ep) -> str:
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
    file = master_position(conn)[0]
    conn.close()
    return file


def _sync_and_check(task, store, sid) -> dict:
    r = Syncer(task, sid, store, budget_events=200).run_until(float("inf"), max_windows=100)
    assert not r.paused, r.paused
    assert r.caught_up, "did not catch up"
    diffs = compare_task(task, store)
    assert diffs and all(d.equal for d in diffs), render(diffs)
    return store.source_state(task.name, sid)


def test_sync_goes_on_when_the_binlog_number_passes_999999(stack, uniq, tmp_path):
    db = start_mariadb(tmp_path, free_port(private_port(i) for i in range(8, 10)), 99)
    prefix, tdb, name, sid = f"b9{uniq}", f"tb9{uniq}", f"b9{uniq}", f"b9-{uniq}"
    store = StateStore()
    try:
        db.stop()
        _binlog_numbered_from(db, 999998)
        db.start()       # the server opens mysql-bin.999999
        up = db.endpoint()
        assert master_position(connect(up))[0] == "mysql-bin.999999"
        make_shards(up, [f"{prefix}_1"], ["t_1"])   # empty: incremental mode copies no rows
        text = shard_task_yaml(name, stack["down"], [(sid, 1)], prefix, tdb, mode="incremental", shard_mode="")
        task = parse_task(text.replace("shard-mode: \n", ""), "test.yaml")
        register(store, {sid: up}, name, text)
        prepare(task, store)     # incremental: the target table, the start position (mysql-bin.999999)
        finish(task, store)
        _write(up, f"{prefix}_1", "a", 20)
        assert _flush(up) == "mysql-bin.1000000"
        _write(up, f"{prefix}_1", "b", 20)
        st = _sync_and_check(task, store, sid)
        assert st["binlog_file"] == "mysql-bin.1000000", st

        # a new syncer (a restart) resumes from the checkpoint in the seven-digit file
        assert _flush(up) == "mysql-bin.1000001"
        _write(up, f"{prefix}_1", "c", 20)
        st = _sync_and_check(task, store, sid)
        assert st["binlog_file"] == "mysql-bin.1000001", st
    finally:
        reset_task(store, name)
        store.close()
        db.stop()
        drop_schemas(stack["down"], [tdb])
