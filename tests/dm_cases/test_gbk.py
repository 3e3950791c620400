"""DM's `gbk` case (pingcap/tiflow dm/tests/gbk/run.sh), with DM's own task and source files
(conf/, vendored unchanged) and its statements (data/*.sql and run.sh, transcribed here):

- databases created with ``character set gbk`` on both upstreams, tables in gbk and utf8 with
  gbk columns, Chinese text: full phase, then inserts, updates, deletes and new tables through
  the binlog;
- DM's `test_from_tidb` part: a table that inherits its database's charset, CREATE TABLE ...
  LIKE, a partitioned table, CREATE DATABASE ... charset utf8 then ALTER DATABASE ... charset
  gbk, and a DDL sent by a client whose connection charset is gbk (its text is gbk bytes in
  the binlog), whose Chinese comment must arrive as written.

Each table downstream must equal its upstream: rows (as bytes: HEX) and column definitions
(charsets included); databases keep their default charset. DM's source files say `flavor:
mysql` (its CI runs MySQL): the local servers are MariaDB, so the test says so. DM's failpoint parts (a DDL whose
connection breaks while TiDB runs it) are DM internals and not ported; their statements (MODIFY
COLUMN ... DEFAULT _UTF8MB4'0', ADD UNIQUE) are run as plain DDL.
"""

import pymysql
import pytest


from .harness import dm_case, register_sources, run_sql, start, table_rows

pytestmark = pytest.mark.integration

DBS = ("gbk", "gbk2", "gbk3")


def prepare(db: str, tail: tuple[str, str]) -> list[str]:
    a, b = tail
    return [f"drop database if exists `{db}`", f"create database `{db}` character set gbk", f"use `{db}`",
            "create table t1 (id int, name varchar(20), primary key(`id`)) character set gbk",
            f"insert into t1 (id, name) values (0, '你好{a}')",
            f"insert into t1 (id, name) values (1, '你好{b}1'), (2, '你好{b}2')",
            "create table t3 (id int, name varchar(20) character set gbk, primary key(`id`)) character set utf8",
            f"insert into t3 (id, name) values (0, '你好{a}')",
            f"insert into t3 (id, name) values (1, '你好{b}1'), (2, '你好{b}2')"]


def increment(db: str) -> list[str]:
    out = [f"use `{db}`", "insert into t1 (id, name) values (3, '你好3'), (4, '你好4')",
           "update t1 set name = '你好5' where id = 1", "delete from t1 where id = 2"]
    for t, cs in (("t2", "character set gbk"), ("t4", "character set utf8")):
        col = "name varchar(20)" if t == "t2" else "name varchar(20) character set gbk"
        out += [f"create table {t} (id int, {col}, primary key(`id`)) {cs}",
                f"insert into {t} (id, name) values (1, '你好1'), (2, '你好2')",
                f"insert into {t} (id, name) values (3, '你好3'), (4, '你好4')",
                f"update {t} set name = '你好5' where id = 1", f"delete from {t} where id = 2"]
    return out


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("gbk", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {k: list(DBS) for k in ("up1", "up2", "down")}, flavor="mariadb") as got:
        yield got


def _columns(ep, db: str, table: str) -> list[tuple]:
    return [tuple(r) for r in run_sql(
        ep, "SELECT column_name, column_type, character_set_name, collation_name, is_nullable, column_default, "
            "column_comment FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
            "ORDER BY ordinal_position", args=(db, table))]


def _tables(ep, db: str) -> list[str]:
    return sorted(r[0] for r in run_sql(ep, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                                        args=(db,)))


def _assert_equal(ep, down, db: str) -> None:
    assert _tables(down, db) == _tables(ep, db), f"tables of {db}"
    for t in _tables(ep, db):
        assert _columns(down, db, t) == _columns(ep, db, t), f"definition of {db}.{t}"
        cols = [f"HEX(`{c[0]}`)" for c in _columns(ep, db, t)]
        assert table_rows(down, db, t, cols) == table_rows(ep, db, t, cols), f"rows of {db}.{t}"


def _db_charset(ep, db: str) -> str:
    return run_sql(ep, "SELECT default_character_set_name FROM information_schema.schemata WHERE schema_name = %s",
                   args=(db,))[0][0]


def test_dm_gbk_case(case, stack):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    run_sql(up1, *prepare("gbk", ("0", "")))
    run_sql(up2, *prepare("gbk2", ("", "Aa")))
    register_sources(files)
    task, sync = start(files, store)
    _assert_equal(up1, down, "gbk")
    _assert_equal(up2, down, "gbk2")
    assert _db_charset(down, "gbk") == "gbk"

    run_sql(up1, *increment("gbk"))
    run_sql(up2, *increment("gbk2"))
    sync.settle()
    _assert_equal(up1, down, "gbk")
    _assert_equal(up2, down, "gbk2")

    # DM's test_from_tidb
    run_sql(up1, "use gbk", "create table ddl1(b char(20))",
            "create table ddl2(a char(20) charset gbk, b char(20) charset utf8mb4)",
            "create table ddl2_copy like ddl2", "insert into ddl2_copy values('一二三', '一二三')",
            "create table ddl3(id int, a char(20) charset gbk) partition by hash(id) partitions 4",
            "insert into ddl3 values (1, '四'), (2, '五')",
            "create database gbk3 charset utf8", "alter database gbk3 charset gbk",
            "use gbk3", "alter database collate gbk_bin", "use gbk",   # ours: ALTER DATABASE naming none
            "create table gbk3.t (id int primary key, s varchar(10))", "insert into gbk3.t values (1, '六')")
    conn = pymysql.connect(host=up1.host, port=up1.port, user=up1.user, password=up1.password, charset="gbk")
    try:
        with conn.cursor() as cur:
            cur.execute("create table gbk.ddl4 (c int primary key comment '你好', d varchar(8) default '七')")
            cur.execute("insert into gbk.ddl4 (c) values (1)")
        conn.commit()
    finally:
        conn.close()
    run_sql(up1, "CREATE TABLE IF NOT EXISTS gbk.invalid_conn_test1(i TINYINT, j INT UNIQUE KEY, k TINYINT, "
                 "m TINYINT, n TINYINT, h TINYINT)",
            "ALTER TABLE gbk.invalid_conn_test1 MODIFY COLUMN j SMALLINT(4) NOT NULL DEFAULT _UTF8MB4'0'",
            "INSERT INTO gbk.invalid_conn_test1 VALUES (1,1,1,1,1,1), (2,2,2,2,2,2)",
            "ALTER TABLE gbk.invalid_conn_test1 MODIFY COLUMN i INT(4) NOT NULL DEFAULT _UTF8MB4'0', "
            "MODIFY COLUMN m INT(4) NOT NULL DEFAULT _UTF8MB4'0'")
    sync.settle()
    assert run_sql(down, "select hex(a), hex(b) from gbk.ddl2_copy") == [("D2BBB6FEC8FD", "E4B880E4BA8CE4B889")]
    assert "PARTITIONS 4" in run_sql(down, "show create table gbk.ddl3")[0][1].upper().replace("\n", " ")
    assert _db_charset(down, "gbk3") == "gbk", "ALTER DATABASE ... charset gbk did not reach the downstream"
    assert run_sql(down, "SELECT default_collation_name FROM information_schema.schemata WHERE schema_name = "
                         "'gbk3'") == [("gbk_bin",)], "ALTER DATABASE without a name did not reach the downstream"
    _assert_equal(up1, down, "gbk")
    _assert_equal(up1, down, "gbk3")
    assert run_sql(down, "SELECT column_comment FROM information_schema.columns WHERE table_schema = 'gbk' "
                         "AND table_name = 'ddl4' AND column_name = 'c'") == [("你好",)]
