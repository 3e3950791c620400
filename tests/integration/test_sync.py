"""The incremental path on real servers: shards → routed, mapped, merged downstream; safe-mode
replay after a lost checkpoint converges; an unsupported DDL on a sharded table pauses with
the statement and its position, and `binlog skip` resumes."""

import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, qt
from dm_core.full.phase import finish, prepare
from dm_core.position import Position
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.syncer import Syncer
from dm_core.validate.compare import compare_task, render

from .helpers import drop_schemas, make_shards, register, shard_task_yaml

pytestmark = pytest.mark.integration


def _sync_until_caught_up(task, store, source_ids, max_windows=50):
    for sid in source_ids:
        r = Syncer(task, sid, store, budget_events=500).run_until(float("inf"), max_windows=max_windows)
        assert r.paused or r.caught_up, f"{sid} did not catch up"
    return r


@pytest.fixture
def scenario(stack, uniq):
    prefix = f"sy{uniq}"
    tdb = f"tg{uniq}"
    schemas = [f"{prefix}_1", f"{prefix}_2"]
    make_shards(stack["up1"], schemas, ["t_1", "t_2"])
    make_shards(stack["up2"], schemas, ["t_1"])
    name = f"sync{uniq}"
    sources = {f"s1-{uniq}": stack["up1"], f"s2-{uniq}": stack["up2"]}
    text = shard_task_yaml(name, stack["down"], [(sid, i + 1) for i, sid in enumerate(sources)], prefix, tdb)
    task = parse_task(text, "test.yaml")
    store = StateStore()
    register(store, sources, name, text)
    yield task, store, sources, schemas, tdb
    reset_task(store, name)
    store.close()
    drop_schemas(stack["up1"], schemas)
    drop_schemas(stack["up2"], schemas)
    drop_schemas(stack["down"], [tdb])


def _churn(ep, schemas, tables):
    conn = connect(ep)
    with conn.cursor() as cur:
        for s in schemas:
            for t in tables:
                cur.executemany(f"INSERT INTO {qt(s, t)} (name, amount) VALUES (%s, %s)",
                                [("new", i) if i % 3 else (None, i) for i in range(30)] + [("ünï 笑", 3)])
                cur.execute(f"UPDATE {qt(s, t)} SET amount = amount + 100, name = 'upd' WHERE id % 3 = 0")
                cur.execute(f"DELETE FROM {qt(s, t)} WHERE id % 4 = 0")
                cur.execute(f"UPDATE {qt(s, t)} SET id = id + 1000 WHERE id = 5")  # a primary-key update
                cur.execute(f"DELETE FROM {qt(s, t)} WHERE id = 6")
                cur.execute(f"INSERT INTO {qt(s, t)} (id, name, amount) VALUES (6, 're-inserted', 6)")
    conn.close()


def _run_scenario(task, store, sources, schemas, stack):
    prepare(task, store)  # low watermark + merged target table (the Spark copy is tested in e2e)
    _churn(stack["up1"], schemas, ["t_1", "t_2"])
    _churn(stack["up2"], schemas, ["t_1"])
    finish(task, store)
    _sync_until_caught_up(task, store, sources)


def test_binlog_changes_merge_into_union_of_shards(scenario, stack):
    task, store, sources, schemas, tdb = scenario
    _run_scenario(task, store, sources, schemas, stack)
    diffs = compare_task(task, store)
    assert [d.target for d in diffs] == [f"{tdb}.t"]
    assert diffs[0].upstream_rows == 6 * 24  # per shard: 31 inserted, 7 deleted (id % 4 = 0)
    assert all(d.equal for d in diffs), render(diffs)


def test_lost_checkpoint_replays_in_safe_mode_and_converges(scenario, stack):
    task, store, sources, schemas, tdb = scenario
    _run_scenario(task, store, sources, schemas, stack)
    assert all(d.equal for d in compare_task(task, store))
    # A crash that lost every checkpoint: rewind to the low watermark; replay must be idempotent.
    for sid in sources:
        st = store.source_state(task.name, sid)
        store.update_source_state(task.name, sid, binlog_file=st["low_file"], binlog_pos=st["low_pos"])
    r = _sync_until_caught_up(task, store, sources)
    assert r.safe_mode
    diffs = compare_task(task, store)
    assert all(d.equal for d in diffs), render(diffs)


def test_unsupported_sharded_ddl_pauses_with_statement_and_position_and_skip_resumes(scenario, stack):
    task, store, sources, schemas, tdb = scenario
    sid = next(iter(sources))
    prepare(task, store)
    finish(task, store)
    conn = connect(stack["up1"])
    with conn.cursor() as cur:
        # renamed out of the sharding group (a name routed to another target): refused, as in DM
        cur.execute(f"RENAME TABLE {qt(schemas[0], 't_1')} TO {qt(schemas[0], 'x_1_extra')}")
        cur.execute(f"INSERT INTO {qt(schemas[0], 't_2')} (name, amount) VALUES ('after-ddl', 9)")
    conn.close()
    r = _sync_until_caught_up(task, store, [sid])
    assert r.paused and "x_1_extra" in r.paused and "`RENAME TABLE` statement not supported in pessimistic mode" in r.paused
    st = store.source_state(task.name, sid)
    assert st["stage"] == "paused" and "x_1_extra" in st["error_stmt"] and st["error_pos"].startswith("(mysql-bin.")
    assert st["error_code"] == 50006
    r = Syncer(task, sid, store).run_window()
    assert r.state == "paused", "without an operator command the source stays paused"
    from dm_core.cli.dmctl import main as dmctl

    assert dmctl(["binlog", "skip", task.name, "-s", sid]) == 0
    r = _sync_until_caught_up(task, store, [sid])
    assert not r.paused
    assert store.source_state(task.name, sid)["stage"] == "sync"
    down = connect(stack["down"])
    with down.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {qt(tdb, 't')} WHERE name = 'after-ddl'")
        assert cur.fetchone()[0] == 1
    down.close()


def test_idle_source_records_its_start_as_checkpoint(scenario, stack):
    """A source with nothing to replay after the full phase is synced, and says so."""
    task, store, sources, schemas, tdb = scenario
    prepare(task, store)
    finish(task, store)
    for sid in sources:
        r = Syncer(task, sid, store).run_window()
        assert r.rows == 0 and r.end == r.until  # other schemas' writes may still pass by
        st = store.source_state(task.name, sid)
        assert st["binlog_file"] is not None, "an idle source must still record a checkpoint"
        assert Position(st["binlog_file"], st["binlog_pos"]).key() >= Position(st["low_file"], st["low_pos"]).key()


def test_statements_outside_the_task_never_pause_it(scenario, stack, uniq):
    """Account statements, and DDL sqlglot cannot parse on schemas the task does not
    replicate, pass by; such a DDL on a replicated schema is routed by its text and runs."""
    task, store, sources, schemas, tdb = scenario
    sid = next(iter(sources))
    prepare(task, store)
    finish(task, store)
    other = f"other{uniq}"
    conn = connect(stack["up1"])
    with conn.cursor() as cur:
        cur.execute(f"CREATE USER IF NOT EXISTS 'u{uniq}'@'%' IDENTIFIED BY 'pw-{uniq}'")
        cur.execute(f"GRANT SELECT ON *.* TO 'u{uniq}'@'%'")
        cur.execute(f"DROP USER 'u{uniq}'@'%'")
        cur.execute(f"CREATE DATABASE {other}")
        cur.execute(f"CREATE TABLE {other}.g (id int primary key, gm point NULL)")  # sqlglot rejects POINT
        cur.execute(f"INSERT INTO {qt(schemas[0], 't_1')} (name, amount) VALUES ('still-flowing', 1)")
    r = _sync_until_caught_up(task, store, [sid])
    assert not r.paused, r.paused
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE {other}")
        cur.execute(f"CREATE TABLE {qt(schemas[0], 'geo')} (id int primary key, gm point NULL)")
        cur.execute(f"INSERT INTO {qt(schemas[0], 'geo')} VALUES (1, ST_GeomFromText('POINT(1 2)'))")
    conn.close()
    r = _sync_until_caught_up(task, store, [sid])
    assert not r.paused, r.paused
    down = connect(stack["down"])
    with down.cursor() as cur:
        cur.execute(f"SELECT id, ST_AsText(gm) FROM {qt(tdb, 'geo')}")
        assert cur.fetchall() == ((1, "POINT(1 2)"),)
    down.close()
