"""Routing of DDL outside sharding groups (dm_core.sync.ddl): input SQL + routes -> the
statement run downstream, or why nothing runs, or the error that pauses the source."""


import pytest

from dm_core.ddl.kind import ddl_event_type
from dm_core.sync.ddl import TABLE_DDL, route_ddl
from dm_core.ddl.text import table_spans, tokenize


def route(schema, table):
    """src.* -> dst.*, src.old_* -> dst.new_*, other schemas unchanged."""
    if schema == "src":
        return ("dst", "new_" + table[4:] if table.startswith("old_") else table)
    return (schema, table)


def allow(schema, table):
    return schema in ("src", "d2") and not table.startswith("skip")


# (sql, default schema, kind, routed sql or None)
RENDER = [
    # index names are never routed (the bug of the sqlglot rendering: DROP INDEX `db`.`i`)
    ("ALTER TABLE t DROP INDEX i", "src", "alter table", "ALTER TABLE `dst`.`t` DROP INDEX i"),
    ("alter table `src`.`t` drop key `i`, add index j (a(10))", None, "alter table",
     "alter table `dst`.`t` drop key `i`, add index j (a(10))"),
    ("DROP INDEX i ON t", "src", "drop index", "DROP INDEX i ON `dst`.`t`"),
    ("create unique index uk using btree on src.t (a, b)", None, "create index",
     "create unique index uk using btree on `dst`.`t` (a, b)"),
    ("ALTER TABLE t RENAME INDEX a TO b, RENAME COLUMN c TO d", "src", "alter table",
     "ALTER TABLE `dst`.`t` RENAME INDEX a TO b, RENAME COLUMN c TO d"),
    ("ALTER TABLE t DROP FOREIGN KEY fk, ADD CONSTRAINT fk2 FOREIGN KEY (a) REFERENCES p (id)", "src", "alter table",
     "ALTER TABLE `dst`.`t` DROP FOREIGN KEY fk, ADD CONSTRAINT fk2 FOREIGN KEY (a) REFERENCES `dst`.`p` (id)"),
    # routes rename tables
    ("alter table old_t add column c int comment 'old_t stays'", "src", "alter table",
     "alter table `dst`.`new_t` add column c int comment 'old_t stays'"),
    # partition DDL passes through, byte for byte apart from the name
    ("ALTER TABLE t ADD PARTITION (PARTITION p3 VALUES LESS THAN (300))", "src", "add table partition",
     "ALTER TABLE `dst`.`t` ADD PARTITION (PARTITION p3 VALUES LESS THAN (300))"),
    ("alter table t partition by hash(id) partitions 4", "src", "alter table",
     "alter table `dst`.`t` partition by hash(id) partitions 4"),
    ("ALTER TABLE t DROP PARTITION p0", "src", "drop table partition", "ALTER TABLE `dst`.`t` DROP PARTITION p0"),
    ("ALTER TABLE t TRUNCATE PARTITION p1", "src", "truncate table partition",
     "ALTER TABLE `dst`.`t` TRUNCATE PARTITION p1"),
    ("ALTER TABLE t REORGANIZE PARTITION p1 INTO (PARTITION p1a VALUES LESS THAN (5), PARTITION p1b VALUES LESS THAN (10))",
     "src", "reorganize table partition",
     "ALTER TABLE `dst`.`t` REORGANIZE PARTITION p1 INTO (PARTITION p1a VALUES LESS THAN (5), PARTITION p1b VALUES LESS THAN (10))"),
    ("ALTER TABLE t EXCHANGE PARTITION p1 WITH TABLE old_x", "src", "exchange table partition",
     "ALTER TABLE `dst`.`t` EXCHANGE PARTITION p1 WITH TABLE `dst`.`new_x`"),
    ("alter table t remove partitioning", "src", "alter table", "alter table `dst`.`t` remove partitioning"),
    ("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "src", "alter table",
     "ALTER TABLE `dst`.`t` CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"),
    # CREATE TABLE gets IF NOT EXISTS (as DM renders it); LIKE and REFERENCES route too
    ("CREATE TABLE t (id int primary key, g int GENERATED ALWAYS AS (id * 2) VIRTUAL, "
     "FULLTEXT KEY ft (n), n text) PARTITION BY KEY (id) PARTITIONS 2", "src", "create table",
     "CREATE TABLE IF NOT EXISTS `dst`.`t` (id int primary key, g int GENERATED ALWAYS AS (id * 2) VIRTUAL, "
     "FULLTEXT KEY ft (n), n text) PARTITION BY KEY (id) PARTITIONS 2"),
    ("CREATE OR REPLACE TABLE t (id int)", "src", "create table", "CREATE OR REPLACE TABLE `dst`.`t` (id int)"),
    ("create table if not exists `src`.`t2` like old_t", "src", "create table",
     "create table if not exists `dst`.`t2` like `dst`.`new_t`"),
    ("CREATE TABLE c (id int, pid int, FOREIGN KEY (pid) REFERENCES other.p (id))", "src", "create table",
     "CREATE TABLE IF NOT EXISTS `dst`.`c` (id int, pid int, FOREIGN KEY (pid) REFERENCES `other`.`p` (id))"),
    # an unqualified parent table is in the child's schema, not the session's
    ("CREATE TABLE src.c (id int, pid int, FOREIGN KEY (pid) REFERENCES old_p (id))", "d2", "create table",
     "CREATE TABLE IF NOT EXISTS `dst`.`c` (id int, pid int, FOREIGN KEY (pid) REFERENCES `dst`.`new_p` (id))"),
    # comments and executable comments stay; names inside executable comments route
    ("/* gh-ost */ ALTER /*!32312 IGNORE*/ TABLE `src`.`t` ADD c INT -- trailing", None, "alter table",
     "/* gh-ost */ ALTER /*!32312 IGNORE*/ TABLE `dst`.`t` ADD c INT -- trailing"),
    ("TRUNCATE t", "src", "truncate table", "TRUNCATE `dst`.`t`"),
    # names needing quotes
    ("ALTER TABLE `we``ird`.`a b` ADD c INT", None, "alter table", "ALTER TABLE `we``ird`.`a b` ADD c INT"),
    # RENAME TABLE follows the routes; ALTER TABLE ... RENAME TO too
    ("RENAME TABLE t1 TO t2", "src", "rename table", "RENAME TABLE `dst`.`t1` TO `dst`.`t2`"),
    ("RENAME TABLE src.old_a TO src.b, d2.x TO d2.y", None, "rename table",
     "RENAME TABLE `dst`.`new_a` TO `dst`.`b`, `d2`.`x` TO `d2`.`y`"),
    ("ALTER TABLE t RENAME TO old_u", "src", "alter table", "ALTER TABLE `dst`.`t` RENAME TO `dst`.`new_u`"),
    # DROP TABLE: replicated tables only, IF EXISTS
    ("DROP TABLE t, skip_me, `d2`.`z` /* generated by server */", "src", "drop table",
     "DROP TABLE IF EXISTS `dst`.`t`, `d2`.`z`"),
]


@pytest.mark.parametrize("sql, schema, kind, out", RENDER, ids=[r[0][:60] for r in RENDER])
def test_render(sql, schema, kind, out):
    r = route_ddl(sql, schema, route, allow)
    assert (r.kind, r.sql, r.error) == (kind, out, None)
    assert r.kind in TABLE_DDL


# (sql, default schema, note or error fragment): nothing runs downstream
NOTHING = [
    ("RENAME TABLE old_a TO new_a", "src", None, "both go to `dst`.`new_a`"),         # same target after routing
    ("RENAME TABLE skip_a TO skip_b", "src", None, "no replicated table is renamed"),
    ("DROP TABLE skip_a", "src", None, "no replicated table is dropped"),
    ("RENAME TABLE t TO skip_t", "src", "moves `src`.`t` out of the tables this task replicates", None),
    ("RENAME TABLE skip_t TO t", "src", "which this task does not replicate, to `src`.`t`", None),
    ("ALTER TABLE t RENAME TO skip_t", "src", "moves `src`.`t` out of", None),
]


@pytest.mark.parametrize("sql, schema, error, note", NOTHING, ids=[r[0] for r in NOTHING])
def test_nothing_to_run(sql, schema, error, note):
    r = route_ddl(sql, schema, route, allow)
    assert r.sql is None
    if error:
        assert error in r.error
    else:
        assert r.error is None and note in r.note


# statements the plain path skips (not table data), as DM does
SKIPPED = ["OPTIMIZE TABLE t", "optimize no_write_to_binlog table t1, t2", "ANALYZE TABLE t", "REPAIR TABLE t",
           "CHECK TABLE t", "ALTER TABLE t OPTIMIZE PARTITION p1", "alter table t analyze partition p1, p2",
           "ALTER TABLE t REPAIR PARTITION ALL", "ALTER TABLE t CHECK PARTITION p1", "FLUSH TABLES",
           "CREATE VIEW v AS SELECT 1", "GRANT SELECT ON *.* TO 'u'@'%'"]


@pytest.mark.parametrize("sql", SKIPPED)
def test_maintenance_is_not_table_ddl(sql):
    assert ddl_event_type(sql) not in TABLE_DDL


def test_database_statements_name_the_database():
    assert route_ddl("CREATE DATABASE IF NOT EXISTS `a b`", None, route).tables == [("a b", "")]
    assert route_ddl("drop schema src", None, route).tables == [("src", "")]


def test_statement_without_a_known_table_is_an_error():
    r = route_ddl("ALTER TABLE", "src", route, allow)
    assert r.sql is None and "cannot tell which table" in r.error


def test_tokenizer_keeps_quoted_text_whole():
    toks = tokenize("ALTER TABLE t ADD c VARCHAR(5) DEFAULT 'a ''REFERENCES'' x\\' y' COMMENT \"RENAME t\"")
    assert [t.kind for t in toks][-3:] == ["string", "word", "string"]
    assert [s.role for s in table_spans("ALTER TABLE t ADD c INT DEFAULT 'REFERENCES p'", "d")] == ["table"]
