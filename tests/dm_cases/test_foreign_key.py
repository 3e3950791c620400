"""DM's `foreign_key` case (pingcap/tiflow dm/tests/foreign_key/run.sh), with DM's own task and source
files (conf/, vendored unchanged: `enable-ansi-quotes`, the deprecated `black-white-list`, relay on)
and our own statements:

1. the downstream's global foreign_key_checks on; upstream, a client with foreign_key_checks on:
   parent/child pairs with ON DELETE/UPDATE CASCADE (rows inserted, parents deleted and re-keyed in one
   transaction, and a parent deleted with checks off, which leaves its child), ON DELETE/UPDATE SET
   NULL, RESTRICT (parents changed with checks off), two tables with a foreign key created and dropped
   together, a self-referencing table whose root deletion cascades down three levels, and a foreign
   key added by ALTER TABLE afterwards, then its cascades;
2. the task (all mode): the full phase copies every table with its foreign keys; every table equals
   upstream (DM's sync_diff over `foreign_key.?*`), the foreign keys included;
3. through the binlog, with checks on upstream: parents and children inserted, a parent deleted: the
   upstream cascades to its child, and that change is not in the binlog (the server writes only the
   statement's own rows); DM's downstream session runs with foreign_key_checks=0 (its default), so
   nothing cascades downstream either: upstream `t2` has 4 rows, downstream 5 (DM checks exactly
   this), the task keeps running, and every other table still equals upstream.

Not ported: relay (`relayCatchUpMaster`).
"""

import json

import pytest

from .harness import dm_case, dmctl, register_sources, run_sql, start, table_rows

pytestmark = pytest.mark.integration

DB = "foreign_key"
TABLES = {"t1": ["id"], "t2": ["id"], "t3": ["id"], "t4": ["id", "b"], "t5": ["id"], "t6": ["id"],
          "t9": ["id", "name", "leader"], "t10": ["id", "b"], "t11": ["id", "b"]}


@pytest.fixture
def case(stack, tmp_path):
    old = run_sql(stack["down"], "SELECT @@GLOBAL.foreign_key_checks")[0][0]
    run_sql(stack["down"], "SET GLOBAL foreign_key_checks = 1")
    try:
        with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [DB], "down": [DB]},
                     flavor="mariadb") as got:
            yield got
    finally:
        run_sql(stack["down"], "SET GLOBAL foreign_key_checks = %s", args=(old,))


def _foreign_keys(ep) -> list[tuple]:
    return sorted(tuple(r) for r in run_sql(
        ep, "SELECT k.table_name, k.column_name, k.referenced_table_name, k.referenced_column_name, "
            "r.update_rule, r.delete_rule FROM information_schema.key_column_usage k "
            "JOIN information_schema.referential_constraints r ON r.constraint_schema = k.constraint_schema "
            "AND r.constraint_name = k.constraint_name AND r.table_name = k.table_name "
            "WHERE k.table_schema = %s AND k.referenced_table_name IS NOT NULL", args=(DB,)))


def _ids(ep, table: str) -> list[int]:
    return sorted(r[0] for r in run_sql(ep, f"SELECT id FROM {DB}.{table}"))


def _same(up, down, *, but=()):
    for t, cols in TABLES.items():
        if t not in but:
            assert table_rows(down, DB, t, cols) == table_rows(up, DB, t, cols), t


def test_dm_foreign_key_case(case, stack):
    files, store = case
    up, down = stack["up1"], stack["down"]
    run_sql(up, f"CREATE DATABASE {DB}", f"USE {DB}", "SET SESSION foreign_key_checks = 1",
            # ON DELETE / UPDATE CASCADE
            "CREATE TABLE t1 (id int PRIMARY KEY)",
            "CREATE TABLE t2 (id int PRIMARY KEY, FOREIGN KEY (id) REFERENCES t1 (id) ON DELETE CASCADE "
            "ON UPDATE CASCADE)",
            "BEGIN", "INSERT INTO t1 VALUES (1), (2), (3), (4), (5)", "INSERT INTO t2 VALUES (1), (2), (3), (4), (5)",
            "DELETE FROM t1 WHERE id IN (1, 2)", "UPDATE t1 SET id = id + 10 WHERE id = 3", "COMMIT",
            "SET SESSION foreign_key_checks = 0", "DELETE FROM t1 WHERE id = 4", "SET SESSION foreign_key_checks = 1",
            # ON DELETE / UPDATE SET NULL
            "CREATE TABLE t3 (id int PRIMARY KEY)",
            "CREATE TABLE t4 (id int PRIMARY KEY, b int, FOREIGN KEY (b) REFERENCES t3 (id) ON DELETE SET NULL "
            "ON UPDATE SET NULL)",
            "BEGIN", "INSERT INTO t3 VALUES (1), (2), (3), (4), (5)",
            "INSERT INTO t4 VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)",
            "DELETE FROM t3 WHERE id IN (1, 2)", "UPDATE t3 SET id = id + 10 WHERE id = 3", "COMMIT",
            # RESTRICT, parents changed with checks off
            "CREATE TABLE t5 (id int PRIMARY KEY)",
            "CREATE TABLE t6 (id int PRIMARY KEY, FOREIGN KEY (id) REFERENCES t5 (id) ON DELETE RESTRICT "
            "ON UPDATE RESTRICT)",
            "INSERT INTO t5 VALUES (1), (2), (3), (4), (5)", "INSERT INTO t6 VALUES (1), (2), (3), (4), (5)",
            "SET SESSION foreign_key_checks = 0", "DELETE FROM t5 WHERE id IN (1, 2)",
            "UPDATE t5 SET id = id + 10 WHERE id = 3", "DELETE FROM t5 WHERE id = 4",
            "SET SESSION foreign_key_checks = 1",
            # tables with a foreign key created and dropped together
            "CREATE TABLE t7 (id int PRIMARY KEY)",
            "CREATE TABLE t8 (id int PRIMARY KEY, FOREIGN KEY (id) REFERENCES t5 (id) ON DELETE RESTRICT "
            "ON UPDATE RESTRICT)",
            "DROP TABLE t7, t8",
            # a self-referencing table: deleting the root cascades three levels down
            "CREATE TABLE t9 (id int PRIMARY KEY, name varchar(10), leader int, INDEX (leader), "
            "FOREIGN KEY (leader) REFERENCES t9 (id) ON DELETE CASCADE)",
            "INSERT INTO t9 VALUES (1, 'root', NULL), (10, 'a', 1), (11, 'b', 1), (12, 'c', 1)",
            "INSERT INTO t9 VALUES (100, 'a1', 10), (101, 'a2', 10), (110, 'b1', 11), (111, 'b2', 11), "
            "(120, 'c1', 12), (121, 'c2', 12)",
            "INSERT INTO t9 VALUES (1000, 'a1x', 100), (7, 'other', NULL), (70, 'o1', 7)",
            "DELETE FROM t9 WHERE id = 1",
            # a foreign key added by ALTER TABLE, then its cascades
            "CREATE TABLE t10 (id int PRIMARY KEY, b int, INDEX (b))", "CREATE TABLE t11 (id int PRIMARY KEY, b int)",
            "INSERT INTO t10 VALUES (1, 1), (2, 2), (3, 3)", "INSERT INTO t11 VALUES (1, 1), (2, 2), (3, 3)",
            "ALTER TABLE t11 ADD FOREIGN KEY (b) REFERENCES t10 (id) ON DELETE CASCADE ON UPDATE CASCADE",
            "DELETE FROM t10 WHERE id = 1", "UPDATE t10 SET id = id + 10 WHERE id = 2")
    assert _ids(up, "t2") == [4, 5, 13]
    assert _ids(up, "t9") == [7, 70]
    assert sorted(table_rows(up, DB, "t11", ["id", "b"])) == [(2, 12), (3, 3)]
    assert run_sql(down, "SELECT @@GLOBAL.foreign_key_checks") == [(1,)]

    register_sources(files)
    task, sync = start(files, store)
    sid = task.mysql_instances[0].source_id
    _same(up, down)
    assert {r[0] for r in run_sql(down, f"SHOW TABLES FROM {DB}")} == set(TABLES)
    assert _foreign_keys(down) == _foreign_keys(up) and len(_foreign_keys(up)) == 5

    # through the binlog: a parent's delete cascades upstream only
    run_sql(up, f"USE {DB}", "SET SESSION foreign_key_checks = 1", "INSERT INTO t1 VALUES (7), (8)",
            "INSERT INTO t2 VALUES (7), (8)", "DELETE FROM t1 WHERE id = 7",
            "INSERT INTO t9 VALUES (2, 'root2', NULL), (20, 'x', 2)",
            "INSERT INTO t10 VALUES (5, 5)", "INSERT INTO t11 VALUES (5, 5)")
    sync.settle()
    rc, out, err = dmctl("query-status", task.name)
    assert rc == 0 and json.loads(out)["tasks"][0]["sources"][0]["status"] == "running", out + err
    assert run_sql(up, f"SELECT COUNT(1) FROM {DB}.t2") == [(4,)]
    assert run_sql(down, f"SELECT COUNT(1) FROM {DB}.t2") == [(5,)], "the cascade is not in the binlog"
    assert _ids(down, "t2") == [4, 5, 7, 8, 13]
    _same(up, down, but=("t2",))
    assert not store.source_state(task.name, sid)["error"]


# ---- foreign_key_checks on downstream (DM's foreign_key_multi_worker) -----------------------------
FK = "fk_chain"


@pytest.fixture
def fk_case(stack, tmp_path):
    with dm_case("foreign_key_multi_worker", tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [FK], "down": [FK]},
                 flavor="mariadb") as got:
        yield got


def _chain(ep) -> dict:
    return {t: sorted(tuple(r) for r in run_sql(ep, f"SELECT * FROM {FK}.{t}")) for t in ("grandparent", "parent", "child")}


def _chain_tables(up) -> None:
    run_sql(up, f"CREATE DATABASE {FK}", f"USE {FK}", "SET SESSION foreign_key_checks = 1",
            "CREATE TABLE grandparent (gp_id int PRIMARY KEY, note varchar(64) NOT NULL) ENGINE=InnoDB",
            "CREATE TABLE parent (parent_id int PRIMARY KEY, gp_id int NOT NULL, info varchar(64) NOT NULL, "
            "CONSTRAINT fk_parent_gp FOREIGN KEY (gp_id) REFERENCES grandparent (gp_id) ON DELETE CASCADE "
            "ON UPDATE CASCADE) ENGINE=InnoDB",
            "CREATE TABLE child (child_id int PRIMARY KEY, parent_id int NOT NULL, data varchar(64) NOT NULL, "
            "CONSTRAINT fk_child_parent FOREIGN KEY (parent_id) REFERENCES parent (parent_id) ON DELETE CASCADE "
            "ON UPDATE CASCADE) ENGINE=InnoDB",
            "INSERT INTO grandparent VALUES (1, 'gp1'), (2, 'gp2'), (3, 'gp3')",
            "INSERT INTO parent VALUES (10, 1, 'p10'), (20, 2, 'p20'), (30, 3, 'p30')",
            "INSERT INTO child VALUES (100, 10, 'c100'), (101, 10, 'c101'), (200, 20, 'c200'), (201, 20, 'c201'), "
            "(300, 30, 'c300')")


CHAIN_CHANGES = ["UPDATE parent SET info = 'p20_updated' WHERE parent_id = 20",
                 "INSERT INTO child VALUES (202, 20, 'c202')",
                 "UPDATE child SET parent_id = 10, data = 'c201_moved' WHERE child_id = 201",
                 "DELETE FROM grandparent WHERE gp_id = 3",
                 "DELETE FROM parent WHERE parent_id = 20",
                 "INSERT INTO grandparent VALUES (4, 'gp4')", "INSERT INTO parent VALUES (40, 4, 'p40')",
                 "INSERT INTO child VALUES (400, 40, 'c400')",
                 "UPDATE child SET data = 'c100_updated' WHERE child_id = 100"]


def _no_orphans(down) -> None:
    assert run_sql(down, f"SELECT COUNT(*) FROM {FK}.child c LEFT JOIN {FK}.parent p ON c.parent_id = p.parent_id "
                         "WHERE p.parent_id IS NULL") == [(0,)]
    assert run_sql(down, f"SELECT COUNT(*) FROM {FK}.parent p LEFT JOIN {FK}.grandparent g ON p.gp_id = g.gp_id "
                         "WHERE g.gp_id IS NULL") == [(0,)]


def test_foreign_keys_checked_downstream_while_the_full_phase_loads(fk_case, stack):
    """DM's foreign_key_multi_worker task file again, with the same changes written while the full
    phase runs (after its low watermark, before the load): sync replays them from the low
    watermark in safe mode, where an UPDATE is DELETE + REPLACE and an INSERT a REPLACE. With
    foreign key checks on, a REPLACE or DELETE of a parent row cascades to its children downstream:
    DM runs safe-mode INSERT and UPDATE with the checks off, so replay never deletes a child."""
    from dm_core.full.phase import finish
    from tests.integration.test_full_support import run_load

    from .harness import Sync, checked_prepare

    files, store = fk_case
    up, down = stack["up1"], stack["down"]
    _chain_tables(up)
    register_sources(files)
    task = checked_prepare(files, store)                      # the low watermark
    run_sql(up, f"USE {FK}", "SET SESSION foreign_key_checks = 1", *CHAIN_CHANGES,
            "UPDATE grandparent SET note = 'gp1_renamed' WHERE gp_id = 1",   # parents and children under it
            "UPDATE parent SET info = 'p10_updated' WHERE parent_id = 10")   # stay as they are
    r = run_load(task.name)
    assert r.returncode == 0, r.stderr[-4000:]
    finish(task, store)                                    # the high watermark
    sync = Sync(task, store)
    sync.settle()
    assert _chain(down) == _chain(up)
    _no_orphans(down)
    run_sql(up, f"USE {FK}", "UPDATE parent SET info = 'p10_again' WHERE parent_id = 10",
            "INSERT INTO child VALUES (401, 40, 'c401')")
    sync.settle()
    assert _chain(down) == _chain(up)


def test_dm_foreign_key_multi_worker_case(fk_case, stack):
    """DM's `foreign_key_multi_worker` (its task file: `session: {foreign_key_checks: 1}`, 4 workers,
    safe-mode off): a grandparent / parent / child chain with ON DELETE / UPDATE CASCADE. The
    downstream session keeps foreign key checks on, so the downstream cascades itself what the
    upstream's cascades did (not in the binlog), and rows must reach it parent first: a child
    written by one worker before its parent by another would be refused. Full phase, then through
    the binlog: an update, a child added, a child moved to another parent, a grandparent deleted
    (cascading two levels), a parent deleted, a new branch, an update; every table equals upstream
    and no child is orphaned."""
    files, store = fk_case
    up, down = stack["up1"], stack["down"]
    run_sql(up, f"CREATE DATABASE {FK}", f"USE {FK}", "SET SESSION foreign_key_checks = 1",
            "CREATE TABLE grandparent (gp_id int PRIMARY KEY, note varchar(64) NOT NULL) ENGINE=InnoDB",
            "CREATE TABLE parent (parent_id int PRIMARY KEY, gp_id int NOT NULL, info varchar(64) NOT NULL, "
            "CONSTRAINT fk_parent_gp FOREIGN KEY (gp_id) REFERENCES grandparent (gp_id) ON DELETE CASCADE "
            "ON UPDATE CASCADE) ENGINE=InnoDB",
            "CREATE TABLE child (child_id int PRIMARY KEY, parent_id int NOT NULL, data varchar(64) NOT NULL, "
            "CONSTRAINT fk_child_parent FOREIGN KEY (parent_id) REFERENCES parent (parent_id) ON DELETE CASCADE "
            "ON UPDATE CASCADE) ENGINE=InnoDB",
            "INSERT INTO grandparent VALUES (1, 'gp1'), (2, 'gp2'), (3, 'gp3')",
            "INSERT INTO parent VALUES (10, 1, 'p10'), (20, 2, 'p20'), (30, 3, 'p30')",
            "INSERT INTO child VALUES (100, 10, 'c100'), (101, 10, 'c101'), (200, 20, 'c200'), (201, 20, 'c201'), "
            "(300, 30, 'c300')")
    register_sources(files)
    task, sync = start(files, store)
    assert _chain(down) == _chain(up)

    run_sql(up, f"USE {FK}", "SET SESSION foreign_key_checks = 1",
            "UPDATE parent SET info = 'p20_updated' WHERE parent_id = 20",
            "INSERT INTO child VALUES (202, 20, 'c202')",
            "UPDATE child SET parent_id = 10, data = 'c201_moved' WHERE child_id = 201",
            "DELETE FROM grandparent WHERE gp_id = 3",
            "DELETE FROM parent WHERE parent_id = 20",
            "INSERT INTO grandparent VALUES (4, 'gp4')", "INSERT INTO parent VALUES (40, 4, 'p40')",
            "INSERT INTO child VALUES (400, 40, 'c400')",
            "UPDATE child SET data = 'c100_updated' WHERE child_id = 100")
    sync.settle()
    got = _chain(down)
    assert got == _chain(up), got
    assert [len(got[t]) for t in ("grandparent", "parent", "child")] == [3, 2, 4]
    assert run_sql(down, f"SELECT COUNT(*) FROM {FK}.child c LEFT JOIN {FK}.parent p ON c.parent_id = p.parent_id "
                         "WHERE p.parent_id IS NULL") == [(0,)]
