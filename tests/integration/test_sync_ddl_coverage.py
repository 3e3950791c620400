"""DDL that used to pause the source, replicated on real servers: index drops, RENAME TABLE
through the routes, partition DDL, CONVERT TO CHARACTER SET; OPTIMIZE/ANALYZE/REPAIR
skipped; RENAME inside a shard group refused with DM's message. The user's checks:
every downstream table's SHOW CREATE TABLE equals its upstream's (names aside) and the
rows are the upstream's."""

import re

import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, qi, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.syncer import Syncer
from dm_core.validate.compare import compare_task, render

from .helpers import drop_schemas, register, target_database
from .helpers import run_sql as run

pytestmark = pytest.mark.integration


def show_create(ep, schema, table) -> str:
    """SHOW CREATE TABLE without the table's name and AUTO_INCREMENT counter."""
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SHOW CREATE TABLE {qt(schema, table)}")
            text = cur.fetchone()[1]
    finally:
        conn.close()
    text = re.sub(r"^CREATE TABLE `(?:[^`]|``)+`", "CREATE TABLE", text)
    return re.sub(r" AUTO_INCREMENT=\d+", "", text)


def tables(ep, schema) -> list[str]:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s ORDER BY 1", (schema,))
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


def sync(task, store, sid, windows=40):
    r = Syncer(task, sid, store, budget_events=300).run_until(float("inf"), max_windows=windows)
    assert r.paused or r.caught_up, f"{sid} did not catch up"
    return r


@pytest.fixture
def plain(stack, uniq):
    """A task without shard mode: schema dc<uniq> -> tdc<uniq>, tables old_* -> new_*."""
    up, down = stack["up1"], stack["down"]
    db, tdb, name, sid = f"dc{uniq}", f"tdc{uniq}", f"dc{uniq}", f"dc-{uniq}"
    run(up, f"CREATE DATABASE {db}",
        f"CREATE TABLE {qt(db, 't')} (id int NOT NULL PRIMARY KEY, a int, b varchar(20), KEY i (a), KEY j (b(8))) "
        "DEFAULT CHARSET=latin1",
        f"CREATE TABLE {qt(db, 'p')} (id int NOT NULL PRIMARY KEY, v int)",
        f"CREATE TABLE {qt(db, 'old_r')} (id int NOT NULL PRIMARY KEY, v varchar(10))")
    text = (f"name: {name}\ntask-mode: all\n"
            f"target-database: {target_database(down)}\n"
            f"mysql-instances:\n  - source-id: {sid}\n    block-allow-list: ba\n    route-rules: [rs, rt]\n"
            f"routes:\n  rs: {{schema-pattern: {db}, target-schema: {tdb}}}\n"
            f"  rt: {{schema-pattern: {db}, table-pattern: 'old_*', target-schema: {tdb}, target-table: new_r}}\n"
            f"block-allow-list:\n  ba: {{do-dbs: [{db}]}}\n")
    task = parse_task(text, "plain.yaml")
    store = StateStore()
    register(store, {sid: up}, name, text)
    prepare(task, store)
    finish(task, store)
    yield task, store, sid, db, tdb
    reset_task(store, name)
    store.close()
    drop_schemas(up, [db])
    drop_schemas(down, [tdb])


def test_index_partition_charset_and_rename_ddl_replicate(plain, stack):
    task, store, sid, db, tdb = plain
    up, down = stack["up1"], stack["down"]
    t, p = qt(db, "t"), qt(db, "p")
    run(up, *[f"INSERT INTO {t} VALUES ({i}, {i}, 'row {i} ü')" for i in range(5)],
        f"ALTER TABLE {t} DROP INDEX i",
        f"DROP INDEX j ON {t}",
        f"ALTER TABLE {p} PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100), "
        "PARTITION p1 VALUES LESS THAN (200))",
        f"ALTER TABLE {p} ADD PARTITION (PARTITION p2 VALUES LESS THAN (300))",
        *[f"INSERT INTO {p} VALUES ({i}, {i})" for i in (1, 50, 150, 250)],
        f"ALTER TABLE {p} DROP PARTITION p0",  # rows go without row events, downstream too
        f"ALTER TABLE {p} TRUNCATE PARTITION p1",
        f"ALTER TABLE {p} REORGANIZE PARTITION p2 INTO (PARTITION p2a VALUES LESS THAN (260), "
        "PARTITION p2b VALUES LESS THAN (300))",
        f"ALTER TABLE {t} CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        f"OPTIMIZE TABLE {t}", f"ANALYZE TABLE {t}", f"REPAIR TABLE {t}", f"ALTER TABLE {p} OPTIMIZE PARTITION p1",
        f"INSERT INTO {t} VALUES (10, 10, 'after 笑')",
        f"INSERT INTO {qt(db, 'old_r')} VALUES (1, 'x')",
        f"RENAME TABLE {qt(db, 'old_r')} TO {qt(db, 'r2')}",   # new_r -> r2 downstream
        f"INSERT INTO {qt(db, 'r2')} VALUES (2, 'y')",
        f"ALTER TABLE {t} RENAME TO {qt(db, 't_renamed')}",
        f"UPDATE {qt(db, 't_renamed')} SET a = a + 100")
    r = sync(task, store, sid)
    assert not r.paused, r.paused
    assert tables(down, tdb) == ["p", "r2", "t_renamed"]
    for name in ("p", "r2", "t_renamed"):
        assert show_create(down, tdb, name) == show_create(up, db, name), name
    diffs = compare_task(task, store)
    assert len(diffs) == 3 and all(d.equal for d in diffs), render(diffs)


def test_rename_within_a_shard_group_is_refused_as_dm_does(stack, uniq, tmp_path):
    """Optimistic mode (pessimistic is in test_sync.py): the source pauses with DM's words."""
    from .shard_helpers import SourceSpec, drive, setup_shards, teardown

    setup = setup_shards(uniq, [SourceSpec("o1-" + uniq, stack["up1"], [f"rn{uniq}_1"], ["t_1", "t_2"], 1)],
                         stack["down"], tmp_path, prefix=f"rn{uniq}", shard_mode="optimistic")
    try:
        sh = setup.shards[0]
        run(sh.ep, f"RENAME TABLE {sh.q} TO {qt(sh.schema, 't_9')}")
        last = drive(setup.task, setup.store, setup.sources, fail=False)
        paused = last[setup.sources[0]].paused
        assert paused and "`RENAME TABLE` statement not supported in optimistic mode" in paused
    finally:
        teardown(setup)


def test_replay_from_the_low_watermark_skips_ddl_the_downstream_has(plain, stack):
    """A lost checkpoint (or a crash right after a DDL ran downstream) replays DDLs over a
    downstream that already has them: each change already in effect is left out, the rest
    run; rows of a table renamed later are not written to its old name."""
    task, store, sid, db, tdb = plain
    up, down = stack["up1"], stack["down"]
    t = qt(db, "t")
    run(up, *[f"INSERT INTO {t} VALUES ({i}, {i}, 'r{i}')" for i in range(6)],
        f"ALTER TABLE {t} ADD COLUMN note varchar(20) DEFAULT 'n', ADD INDEX i_note (note)",
        f"UPDATE {t} SET note = 'set' WHERE id % 2 = 0",
        f"ALTER TABLE {t} DROP INDEX i, MODIFY b varchar(40)",
        f"UPDATE {t} SET b = 'a value that needs forty chars at most' WHERE id = 1",
        f"ALTER TABLE {t} CHANGE a a2 bigint",
        f"CREATE TABLE {qt(db, 'made')} (id int PRIMARY KEY)",
        f"INSERT INTO {qt(db, 'made')} VALUES (1), (2)",
        f"ALTER TABLE {t} DROP COLUMN b, ADD COLUMN d int DEFAULT 4",
        f"RENAME TABLE {t} TO {qt(db, 't2')}",
        f"INSERT INTO {qt(db, 't2')} (id, a2, note) VALUES (100, 1, 'after rename')",
        f"DROP TABLE {qt(db, 'p')}")
    assert not sync(task, store, sid).paused
    want = {n: show_create(up, db, n) for n in ("made", "old_r", "t2")}
    assert {n: show_create(down, tdb, n) for n in ("made", "new_r", "t2")} == \
        {"made": want["made"], "new_r": want["old_r"], "t2": want["t2"]}
    st = store.source_state(task.name, sid)
    store.update_source_state(task.name, sid, binlog_file=st["low_file"], binlog_pos=st["low_pos"])
    r = sync(task, store, sid)
    assert not r.paused, r.paused
    assert r.safe_mode and any("already in effect downstream" in d for d in r.ddls), r.ddls
    assert tables(down, tdb) == ["made", "new_r", "t2"]
    assert show_create(down, tdb, "t2") == want["t2"]
    diffs = compare_task(task, store)
    assert len(diffs) == 3 and all(d.equal for d in diffs), render(diffs)


def test_convert_to_character_set_on_every_shard_runs_once(stack, uniq, tmp_path):
    """Pessimistic mode: a statement sqlglot cannot parse is coordinated by its routed text."""
    from .shard_helpers import SourceSpec, assert_settled, assert_union, drive, dml, setup_shards, teardown

    setup = setup_shards(uniq, [SourceSpec(f"c1-{uniq}", stack["up1"], [f"cv{uniq}_1"], ["t_1", "t_2"], 1),
                                SourceSpec(f"c2-{uniq}", stack["up2"], [f"cv{uniq}_2"], ["t_1"], 2)],
                         stack["down"], tmp_path, prefix=f"cv{uniq}")
    try:
        for sh in setup.shards:
            run(sh.ep, f"ALTER TABLE {sh.q} CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
            dml(sh.ep, sh.schema, sh.table, f"{sh.schema}.{sh.table}-ü")
        last = drive(setup.task, setup.store, setup.sources)
        assert_settled(last)
        sh = setup.shards[0]
        assert show_create(setup.down, setup.tdb, "t").split(") ENGINE")[1] == \
            show_create(sh.ep, sh.schema, sh.table).split(") ENGINE")[1]
        assert "utf8mb4_bin" in show_create(setup.down, setup.tdb, "t")
        assert_union(setup.task, setup.store)
    finally:
        teardown(setup)


def test_ddl_on_schemas_outside_the_block_allow_list_never_pauses(plain, stack, uniq):
    """Tables the task does not replicate: their DDL is filtered, whatever its kind."""
    task, store, sid, db, tdb = plain
    up, down = stack["up1"], stack["down"]
    other = f"dcx{uniq}"
    try:
        run(up, f"CREATE DATABASE {qi(other)}",
            f"CREATE TABLE {qt(other, 'a')} (id int PRIMARY KEY)",
            f"INSERT INTO {qt(other, 'a')} VALUES (1)",
            f"RENAME TABLE {qt(other, 'a')} TO {qt(other, 'b')}",
            f"ALTER TABLE {qt(other, 'b')} RENAME TO {qt(other, 'c')}",
            f"ALTER TABLE {qt(other, 'c')} ADD COLUMN v int",
            f"ALTER TABLE {qt(other, 'c')} PARTITION BY HASH (id) PARTITIONS 2",
            f"CREATE TABLE {qt(other, 'd')} LIKE {qt(other, 'c')}",
            f"TRUNCATE TABLE {qt(other, 'd')}",
            f"DROP TABLE {qt(other, 'd')}",
            f"INSERT INTO {qt(db, 'p')} VALUES (7, 7)")
        r = sync(task, store, sid)
        assert not r.paused, r.paused
        assert tables(down, tdb) == ["new_r", "p", "t"]
        assert tables(down, other) == [], "nothing of the other schema downstream"
        diffs = compare_task(task, store)
        assert all(d.equal for d in diffs), render(diffs)
    finally:
        drop_schemas(up, [other])
