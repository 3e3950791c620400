"""DM's `sync_collation` case (pingcap/tiflow dm/tests/sync_collation/run.sh), with DM's own task
and source files (conf/, vendored unchanged; `collation_compatible: strict`) and its statements
(data/*.sql, transcribed here):

- databases `character set utf8 collate utf8_general_ci` on both upstreams, a table in that
  collation, and a latin1_bin table with a utf8_general_ci column, each holding 'Aa' and 'aA':
  downstream `name = 'aa'` must find both (case-insensitive, as upstream), before the task
  (full phase) and after (binlog);
- a table the user creates downstream in those databases (no charset given) inherits their
  collation;
- `set collation_server = utf8_general_ci; create database ...` with no charset, then a table
  without one: under strict, the database downstream gets the session's collation_server
  (its QUERY event records it), so `name = 'aa'` finds both rows there too; the local
  downstream's default is case-insensitive as well, so the collations' names are compared.

DM's source files say `flavor: mysql`: the local servers are MariaDB (utf8 is utf8mb3 there).
DM's error part (TiDB refusing latin1_swedish_ci with new collations on) is TiDB's, not ported.
"""

import pytest


from .harness import dm_case, register_sources, run_sql, start

pytestmark = pytest.mark.integration

DBS = ("sync_collation", "sync_collation2", "sync_collation_increment", "sync_collation_increment2",
       "sync_collation_server", "sync_collation_server2")


def tables(db: str) -> list[str]:
    return [f"drop database if exists `{db}`", f"create database `{db}` character set utf8 collate utf8_general_ci",
            f"use `{db}`",
            "create table t1 (id int, name varchar(20), primary key(`id`)) character set utf8 collate utf8_general_ci",
            "insert into t1 (id, name) values (1, 'Aa'), (2, 'aA')",
            "create table t2 (id int, name varchar(20) character set utf8 collate utf8_general_ci, primary key(`id`)) "
            "character set latin1 collate latin1_bin",
            "insert into t2 (id, name) values (1, 'Aa'), (2, 'aA')"]


def server_collation(db: str) -> list[str]:
    return ["set collation_server = utf8_general_ci", f"drop database if exists `{db}`", f"create database `{db}`",
            f"use `{db}`", "create table t1 (id int, name varchar(20), primary key(`id`))",
            "insert into t1 (id, name) values (1, 'Aa'), (2, 'aA')"]


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("sync_collation", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {k: list(DBS) for k in ("up1", "up2", "down")}, flavor="mariadb") as got:
        yield got


def _aa(down, db: str, table: str) -> int:
    return run_sql(down, f"select count(1) from `{db}`.`{table}` where name = 'aa'")[0][0]


def test_dm_sync_collation_case(case, stack):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    run_sql(up1, *tables("sync_collation"))
    run_sql(up2, *tables("sync_collation2"))
    register_sources(files)
    task, sync = start(files, store)
    for db in ("sync_collation", "sync_collation2"):
        assert (_aa(down, db, "t1"), _aa(down, db, "t2")) == (2, 2), db
        run_sql(down, f"use `{db}`", "create table t_check (id int, name varchar(20), primary key (`id`))",
                "insert into t_check (id, name) values (1, 'Aa'), (2, 'aA')")
        assert _aa(down, db, "t_check") == 2, f"a table created in {db} downstream does not inherit its collation"

    run_sql(up1, *tables("sync_collation_increment"), *server_collation("sync_collation_server"))
    run_sql(up2, *tables("sync_collation_increment2"), *server_collation("sync_collation_server2"))
    sync.settle()
    for db in ("sync_collation_increment", "sync_collation_increment2"):
        assert (_aa(down, db, "t1"), _aa(down, db, "t2")) == (2, 2), db
        run_sql(down, f"use `{db}`", "create table t_check (id int, name varchar(20), primary key (`id`))",
                "insert into t_check (id, name) values (1, 'Aa'), (2, 'aA')")
        assert _aa(down, db, "t_check") == 2, db
    for db, up in (("sync_collation_server", up1), ("sync_collation_server2", up2)):
        assert _aa(down, db, "t1") == 2, f"{db}: the session's collation_server did not reach the downstream"
        # the local downstream's own default (utf8mb4_general_ci) is case-insensitive too, so compare the names
        assert _collations(down, db) == _collations(up, db) == ("utf8mb3_general_ci", "utf8mb3_general_ci"), db
    for db, up in (("sync_collation_increment", up1), ("sync_collation_increment2", up2)):
        assert _collations(down, db) == _collations(up, db), db


def _collations(ep, db: str) -> tuple[str, str]:
    """(the database's default collation, its t1.name column's)."""
    (d,) = run_sql(ep, "select default_collation_name from information_schema.schemata where schema_name = %s",
                   args=(db,))[0]
    (c,) = run_sql(ep, "select collation_name from information_schema.columns where table_schema = %s and "
                       "table_name = 't1' and column_name = 'name'", args=(db,))[0]
    return d, c
