"""``online-ddl: true`` on real servers, with gh-ost's and pt-osc's statement sequences played
as plain SQL (the tools themselves are not installed here): the shadow and trash tables never
appear downstream, the row copy is not replicated, the shadow table's ALTER is recorded in the
state store, and the swap becomes the ALTER of the real table -- on a table of its own and
across a pessimistic sharding group (each shard's online DDL is one shard DDL)."""

import pytest

from dm_core.config.task import parse_task
from dm_core.db import qi, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.online_ddl import OnlineDDL
from dm_core.sync.syncer import Syncer
from dm_core.validate.compare import compare_task, render

from .helpers import drop_schemas, one_source_task, register
from .shard_helpers import SourceSpec, assert_settled, assert_union, columns, drive, setup_shards, teardown
from .test_sync_ddl_coverage import run, show_create, sync, tables

pytestmark = pytest.mark.integration

COMMENT = "1  2\\n3😊4"


def gh_ost(db, t, alter, during=(), cols="id, uid, name"):
    """gh-ost's statements for ``ALTER TABLE t <alter>``; ``during``: writes of the
    application while it runs, which gh-ost applies to the shadow table as well."""
    q, gho, ghc, dele = qt(db, t), qt(db, f"_{t}_gho"), qt(db, f"_{t}_ghc"), qt(db, f"_{t}_del")
    out = [f"CREATE TABLE {ghc} (id bigint auto_increment primary key, hint varchar(64), value varchar(4096), "
           "unique key hint_uidx (hint))",
           f"INSERT INTO {ghc} (hint, value) VALUES ('state', 'GhostTableMigrated')",
           f"CREATE TABLE {gho} LIKE {q}",
           f"ALTER TABLE {gho} {alter}",
           f"INSERT IGNORE INTO {gho} ({cols}) SELECT {cols} FROM {q}"]
    for w in during:
        out += [w.format(t=q), w.format(t=gho).replace("INSERT INTO", "REPLACE INTO")]
    return out + [f"INSERT INTO {ghc} (hint, value) VALUES ('state', 'AllEventsUpToLockProcessed') "
                  "ON DUPLICATE KEY UPDATE value = VALUES(value)",
                  f"RENAME TABLE {q} TO {dele}, {gho} TO {q}",
                  f"DROP TABLE IF EXISTS {dele}", f"DROP TABLE IF EXISTS {ghc}"]


def pt_osc(db, t, alter, during=(), cols="id, uid, name"):
    """pt-online-schema-change's statements: a new table, triggers copying writes, the
    chunked copy, the swap."""
    q, new, old = qt(db, t), qt(db, f"_{t}_new"), qt(db, f"_{t}_old")
    vals = ", ".join(f"NEW.{c.strip()}" for c in cols.split(","))
    out = [f"CREATE TABLE {new} LIKE {q}",
           f"ALTER TABLE {new} {alter}",
           f"CREATE TRIGGER {qi(db)}.{qi('pt_osc_ins_' + t)} AFTER INSERT ON {q} FOR EACH ROW "
           f"REPLACE INTO {new} ({cols}) VALUES ({vals})",
           f"CREATE TRIGGER {qi(db)}.{qi('pt_osc_upd_' + t)} AFTER UPDATE ON {q} FOR EACH ROW "
           f"REPLACE INTO {new} ({cols}) VALUES ({vals})",
           f"INSERT LOW_PRIORITY IGNORE INTO {new} ({cols}) SELECT {cols} FROM {q} WHERE id < 1000 LOCK IN SHARE MODE",
           f"INSERT LOW_PRIORITY IGNORE INTO {new} ({cols}) SELECT {cols} FROM {q} WHERE id >= 1000 LOCK IN SHARE MODE"]
    out += [w.format(t=q) for w in during]  # the triggers copy them
    return out + [f"RENAME TABLE {q} TO {old}, {new} TO {q}",
                  f"DROP TABLE IF EXISTS {old}",
                  f"DROP TRIGGER IF EXISTS {qi(db)}.{qi('pt_osc_ins_' + t)}",
                  f"DROP TRIGGER IF EXISTS {qi(db)}.{qi('pt_osc_upd_' + t)}",
                  f"ANALYZE TABLE {q}"]


@pytest.fixture
def online(stack, uniq):
    """A task with online-ddl: true over schema od<uniq> (gho_t, pt_t) -> tod<uniq>, and a
    leftover shadow table from an earlier gh-ost run, which the full phase must leave out."""
    up, down = stack["up1"], stack["down"]
    db, tdb, name, sid = f"od{uniq}", f"tod{uniq}", f"od{uniq}", f"od-{uniq}"
    run(up, f"CREATE DATABASE {db}",
        *[f"CREATE TABLE {qt(db, t)} (id bigint auto_increment, uid int, name varchar(80), info varchar(100), "
          "primary key (id), unique key (uid)) DEFAULT CHARSET=utf8mb4" for t in ("gho_t", "pt_t")],
        f"CREATE TABLE {qt(db, '_old_gho')} (c int)")
    text = one_source_task(name, sid, db, tdb, down, head="online-ddl: true\n")
    task = parse_task(text, "online.yaml")
    store = StateStore()
    register(store, {sid: up}, name, text)
    prepare(task, store)
    finish(task, store)
    run(up, *[f"INSERT INTO {qt(db, t)} (uid, name) VALUES (1, 'Gabriel García Márquez'), (2, 'Cien años')"
              for t in ("gho_t", "pt_t")])
    yield task, store, sid, db, tdb
    reset_task(store, name)
    store.close()
    drop_schemas(up, [db])
    drop_schemas(down, [tdb])


def test_gh_ost_and_pt_osc_changes_replicate_as_the_change(online, stack):
    task, store, sid, db, tdb = online
    up, down = stack["up1"], stack["down"]
    assert tables(down, tdb) == ["gho_t", "pt_t"], "the leftover shadow table is not loaded"
    during = ["INSERT INTO {t} (uid, name) VALUES (3, 'Buenos Aires')",
              "UPDATE {t} SET name = 'One Hundred Years of Solitude' WHERE uid = 2"]
    run(up, *gh_ost(db, "gho_t", f"ADD COLUMN c int COMMENT '{COMMENT}'", during))
    run(up, *pt_osc(db, "pt_t", f"ADD COLUMN c int COMMENT '{COMMENT}', ADD KEY k_name (name)", during))
    run(up, f"INSERT INTO {qt(db, 'gho_t')} (uid, name, c) VALUES (4, 'after', 4)",
        f"INSERT INTO {qt(db, 'pt_t')} (uid, name, c) VALUES (4, 'after', 4)")
    r = sync(task, store, sid)
    assert not r.paused, r.paused
    assert tables(down, tdb) == ["gho_t", "pt_t"], "no shadow or trash table downstream"
    for t in ("gho_t", "pt_t"):
        assert show_create(down, tdb, t) == show_create(up, db, t), t
    diffs = compare_task(task, store)
    assert len(diffs) == 2 and all(d.equal for d in diffs), render(diffs)
    # the shadow table's ALTER was recorded in the state store (kept until its next run)
    od = OnlineDDL(task, sid, store, task.rules_for(sid))
    assert od.recorded(db, "_gho_t_gho") == [f"ALTER TABLE {qt(db, '_gho_t_gho')} ADD COLUMN c int COMMENT '{COMMENT}'"]
    # a crash that lost the checkpoint replays the swap: the change is not made twice
    st = store.source_state(task.name, sid)
    store.update_source_state(task.name, sid, binlog_file=st["low_file"], binlog_pos=st["low_pos"])
    r = sync(task, store, sid)
    assert not r.paused, r.paused
    assert all(d.equal for d in compare_task(task, store))


def test_swap_without_a_recorded_change_pauses(online, stack):
    """The task started while a tool ran (its ALTER is before the task's start): DM's refusal."""
    task, store, sid, db, tdb = online
    up = stack["up1"]
    run(up, f"RENAME TABLE {qt(db, 'gho_t')} TO {qt(db, '_gho_t_del')}, {qt(db, '_old_gho')} TO {qt(db, 'old')}")
    r = Syncer(task, sid, store).run_window()
    assert r.paused and "no change of it was recorded" in r.paused


def test_online_ddl_on_every_shard_is_one_shard_ddl(stack, uniq, tmp_path):
    specs = [SourceSpec(f"g1-{uniq}", stack["up1"], [f"og{uniq}_1"], ["t_1", "t_2"], 1),
             SourceSpec(f"g2-{uniq}", stack["up2"], [f"og{uniq}_2"], ["t_1"], 2)]
    setup = setup_shards(uniq, specs, stack["down"], tmp_path, prefix=f"og{uniq}")
    try:
        setup.text = "online-ddl: true\n" + setup.text
        setup.task_file.write_text(setup.text)
        setup.reload()
        setup.store.put_task(setup.name, setup.text, "running")
        alter = "ADD COLUMN note varchar(20) DEFAULT 'n'"
        for i, sh in enumerate(setup.shards):
            tool = gh_ost if i % 2 == 0 else pt_osc
            run(sh.ep, *tool(sh.schema, sh.table, alter,
                             ["INSERT INTO {t} (name, amount) VALUES ('during', 1)"], cols="id, name, amount"))
            run(sh.ep, f"INSERT INTO {sh.q} (name, amount, note) VALUES ('after', 2, 'N')")
        last = drive(setup.task, setup.store, setup.sources)
        assert_settled(last)
        assert [c for c, _ in columns(setup.down, setup.tdb, "t")] == ["id", "name", "amount", "note"]
        assert tables(setup.down, setup.tdb) == ["t"]
        assert_union(setup.task, setup.store)
    finally:
        teardown(setup)
