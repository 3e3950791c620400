"""Target tables created by the full phase's prepare step, on real servers: a non-merged
table comes out exactly as SHOW CREATE TABLE says upstream (prefix lengths, FULLTEXT,
generated columns, quoted defaults, charset/collation, comments, CHECK, foreign keys,
AUTO_INCREMENT, partitioning); a merged group gets extract columns in its keys; shards that
differ are refused with the difference named, and nothing is created."""

from contextlib import contextmanager

import pytest

from dm_core.config.task import parse_task
from dm_core.db import qt
from dm_core.errors import ShardflowError
from dm_core.full.phase import prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore

from .helpers import drop_schemas, register, target_database
from .test_sync_ddl_coverage import run, show_create, tables

pytestmark = pytest.mark.integration

RICH = """CREATE TABLE {t} (
  id int unsigned NOT NULL AUTO_INCREMENT,
  name varchar(64) CHARACTER SET latin1 COLLATE latin1_bin DEFAULT 'it''s, (x)' COMMENT 'a, b',
  doc text,
  n2 int GENERATED ALWAYS AS (pid * 2) VIRTUAL,
  n3 varchar(70) AS (concat(name, '!')) STORED,
  created datetime(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  price decimal(10,2) NOT NULL DEFAULT 1.50,
  pid int DEFAULT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk (name(10), n2),
  KEY k (name(4)),
  FULLTEXT KEY ft (doc),
  CONSTRAINT fk FOREIGN KEY (pid) REFERENCES parent (id) ON DELETE CASCADE,
  CONSTRAINT chk CHECK (price >= 0)
) ENGINE=InnoDB AUTO_INCREMENT=42 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci COMMENT='tbl, ok'"""


def _task(name, down, sources, routes, *, shard_mode=""):
    inst = "".join(f"  - source-id: {sid}\n    block-allow-list: ba-{i}\n    route-rules: [{', '.join(routes)}]\n"
                   for i, (sid, _) in enumerate(sources))
    bal = "".join(f"  ba-{i}: {{do-dbs: ['{db}']}}\n" for i, (_, db) in enumerate(sources))
    return (f"name: {name}\ntask-mode: all\n" + (f"shard-mode: {shard_mode}\n" if shard_mode else "")
            + f"target-database: {target_database(down)}\nmysql-instances:\n{inst}"
            + "routes:\n" + "".join(f"  {k}: {v}\n" for k, v in routes.items())
            + f"block-allow-list:\n{bal}")


@contextmanager
def _shards(stack, uniq, p):
    """A merge of two shards: the upstream database ``t<p><uniq>`` (on both upstreams, and the
    task's name), its target database ``tt<p><uniq>`` and the sources ``<p>1-<uniq>``,
    ``<p>2-<uniq>``; every schema is dropped when the test ends."""
    db, tdb = f"t{p}{uniq}", f"tt{p}{uniq}"
    try:
        yield db, tdb, {f"{p}1-{uniq}": stack["up1"], f"{p}2-{uniq}": stack["up2"]}
    finally:
        drop_schemas(stack["up1"], [db])
        drop_schemas(stack["up2"], [db])
        drop_schemas(stack["down"], [tdb])


def _merged_task(make, down, db, tdb, srcs, shard_mode):
    """``db``.``t_*`` of every source merged into ``tdb``.``t``."""
    routes = {"rt": f"{{schema-pattern: {db}, table-pattern: 't_*', target-schema: {tdb}, target-table: t}}"}
    return make(_task(db, down, [(s, db) for s in srcs], routes, shard_mode=shard_mode), srcs)


@pytest.fixture
def env(stack, uniq):
    store = StateStore()
    made = []

    def make(text, sources):
        task = parse_task(text, "t.yaml")
        register(store, sources, task.name, text)
        made.append(task.name)
        return task

    yield make, store
    for n in made:
        reset_task(store, n)
    store.close()


def test_non_merged_table_is_created_as_upstream_shows_it(stack, uniq, env):
    make, store = env
    up, down = stack["up1"], stack["down"]
    db, tdb = f"ts{uniq}", f"tts{uniq}"
    run(up, f"CREATE DATABASE {db}", f"CREATE TABLE {qt(db, 'parent')} (id int PRIMARY KEY)",
        RICH.format(t=qt(db, "rich")),
        f"CREATE TABLE {qt(db, 'parted')} (id int NOT NULL, v int, PRIMARY KEY (id)) "
        "PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)")
    try:
        routes = {"r": f"{{schema-pattern: {db}, target-schema: {tdb}}}"}
        task = make(_task(f"ts{uniq}", down, [(f"ts-{uniq}", db)], routes), {f"ts-{uniq}": up})
        prepare(task, store)
        assert tables(down, tdb) == ["parent", "parted", "rich"]
        for t in ("parent", "parted", "rich"):  # the FK parent, same schema downstream too, prints unqualified
            assert show_create(down, tdb, t) == show_create(up, db, t), t
        # AUTO_INCREMENT carries over
        assert "AUTO_INCREMENT=42" in _raw_show(down, tdb, "rich")
    finally:
        drop_schemas(up, [db])
        drop_schemas(down, [tdb])


def _raw_show(ep, schema, table):
    from dm_core.db import connect

    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SHOW CREATE TABLE {qt(schema, table)}")
            return cur.fetchone()[1]
    finally:
        conn.close()


def test_merged_group_gets_extract_columns_in_its_keys(stack, uniq, env):
    make, store = env
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    with _shards(stack, uniq, "m") as (db, tdb, srcs):
        for ep in (up1, up2):
            run(ep, f"CREATE DATABASE {db}", RICH.replace("CONSTRAINT fk FOREIGN KEY (pid) REFERENCES parent (id) "
                                                          "ON DELETE CASCADE,\n  ", "").format(t=qt(db, "t_1")))
        routes = {"r": f"{{schema-pattern: {db}, target-schema: {tdb}}}",
                  "rt": f"{{schema-pattern: {db}, table-pattern: 't_*', target-schema: {tdb}, target-table: t, "
                        f"extract-source: {{source-regexp: '(.*)', target-column: c_src}}}}"}
        task = make(_task(db, down, [(s, db) for s in srcs], routes, shard_mode="pessimistic"), srcs)
        prepare(task, store)
        got = _raw_show(down, tdb, "t")
        assert "PRIMARY KEY (`id`,`c_src`)" in got
        assert "UNIQUE KEY `uk` (`name`(10),`n2`,`c_src`)" in got
        assert "`c_src` varchar(255) NOT NULL DEFAULT ''" in got
        assert "FULLTEXT KEY `ft` (`doc`)" in got and "`n2` int(11) GENERATED ALWAYS AS (`pid` * 2) VIRTUAL" in got


def test_differing_shards_are_refused_with_the_difference_named(stack, uniq, env):
    make, store = env
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    with _shards(stack, uniq, "d") as (db, tdb, srcs):
        run(up1, f"CREATE DATABASE {db}", f"CREATE TABLE {qt(db, 't_1')} (id int PRIMARY KEY, a int)")
        run(up2, f"CREATE DATABASE {db}", f"CREATE TABLE {qt(db, 't_1')} (id int PRIMARY KEY, a bigint)")
        task = _merged_task(make, down, db, tdb, srcs, "optimistic")
        with pytest.raises(ShardflowError) as e:
            prepare(task, store)
        msg = str(e.value)
        assert f"cannot create merged target `{tdb}`.`t`" in msg
        assert f"column `a` is int(11) DEFAULT NULL in `{db}`.`t_1` (d1-{uniq}) but bigint(20) DEFAULT NULL" in msg
        assert not tables(down, tdb)


def test_a_first_prepare_that_failed_after_its_watermarks_still_records_the_users_targets(stack, uniq, env,
                                                                                         monkeypatch):
    """The first prepare records both sources' low watermarks, then one source's listing fails;
    the rerun finds no source fresh and must still record the target the user made before the
    full phase, or that target's chunks would be written leniently (user_targets.py)."""
    from dm_core import faults
    from dm_core.db import connect
    from dm_core.full import user_targets

    make, store = env
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    with _shards(stack, uniq, "u") as (db, tdb, srcs):
        for ep in (up1, up2):
            run(ep, f"CREATE DATABASE {db}", f"CREATE TABLE {qt(db, 't_1')} (id int PRIMARY KEY, v varchar(20))")
        run(down, f"CREATE DATABASE {tdb}", f"CREATE TABLE {qt(tdb, 't')} (id int PRIMARY KEY, v varchar(20))")
        task = _merged_task(make, down, db, tdb, srcs, "pessimistic")
        monkeypatch.setattr(faults, "_hits", {})
        monkeypatch.setenv("SHARDFLOW_FAULTS", "upstream.list_tables=raise:2")   # one source's listing fails
        with pytest.raises(faults.FaultInjected):
            prepare(task, store)
        assert all(store.source_state(task.name, sid)["low_file"] for sid in srcs), "the watermarks were recorded"
        monkeypatch.delenv("SHARDFLOW_FAULTS")
        out = prepare(task, store)
        assert out.get("user_made") == [f"{tdb}.t"], out
        conn = connect(down)
        try:
            assert user_targets.of_task(conn, task.meta_schema, task.name) == {(tdb.lower(), "t")}
        finally:
            conn.close()
        again = prepare(task, store)   # a later prepare (a resume) keeps the record as it is
        assert "user_made" not in again, again
