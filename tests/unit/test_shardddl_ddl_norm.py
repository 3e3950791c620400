"""ddl_norm and schema: normalisation, routing, classification, changes, type join."""


import pytest

from dm_core.shardddl.ddl_norm import (COORDINATE, CREATE, IGNORE, comparison_key, normalize, schema_from_create,
                                       statement_changes)
from dm_core.shardddl.errors import ShardDDLUnsupported
from dm_core.shardddl.schema import (Column, Index, JoinConflict, TableSchema, canonical_type, diff_schemas,
                                     join_schemas, join_type, widen_only)

def route(schema, table):
    if schema.startswith("shard_") and table.startswith("t_"):
        return ("merged", "t")
    if schema.startswith("shard_"):
        return ("merged", table)
    return (schema, table)


# (sql, default schema, action, kind, upstream tables, target, canonical sql)
NORMALIZE = [
    ("alter table t_1 add column c int", "shard_1", COORDINATE, "alter table", [("shard_1", "t_1")],
     ("merged", "t"), "ALTER TABLE `merged`.`t` ADD COLUMN `c` INT"),
    ("ALTER TABLE shard_2.t_7 ADD c INT NOT NULL DEFAULT 0 AFTER id", None, COORDINATE, "alter table",
     [("shard_2", "t_7")], ("merged", "t"), "ALTER TABLE `merged`.`t` ADD COLUMN `c` INT NOT NULL DEFAULT 0 AFTER `id`"),
    ("/* gh-ost */ ALTER TABLE `shard_1`.`t_1` DROP c;", None, COORDINATE, "alter table", [("shard_1", "t_1")],
     ("merged", "t"), "ALTER TABLE `merged`.`t` DROP COLUMN `c`"),
    ("alter table t_1 modify c bigint unsigned not null", "shard_1", COORDINATE, "alter table", [("shard_1", "t_1")],
     ("merged", "t"), "ALTER TABLE `merged`.`t` MODIFY COLUMN `c` BIGINT UNSIGNED NOT NULL"),
    ("ALTER TABLE t_1 ADD INDEX idx_c (c), DROP INDEX idx_d", "shard_1", COORDINATE, "alter table",
     [("shard_1", "t_1")], ("merged", "t"), "ALTER TABLE `merged`.`t` ADD INDEX `idx_c` (`c`), DROP INDEX `idx_d`"),
    ("CREATE INDEX i ON shard_1.t_2 (a, b)", None, COORDINATE, "create index", [("shard_1", "t_2")],
     ("merged", "t"), "CREATE INDEX `i` ON `merged`.`t`(`a`, `b`)"),
    ("DROP INDEX i ON t_2", "shard_1", COORDINATE, "drop index", [("shard_1", "t_2")], ("merged", "t"),
     "DROP INDEX `i` ON `merged`.`t`"),
    ("ALTER TABLE t_1 ADD COLUMN (a INT, b VARCHAR(3))", "shard_1", COORDINATE, "alter table", [("shard_1", "t_1")],
     ("merged", "t"), "ALTER TABLE `merged`.`t` ADD COLUMN `a` INT, ADD COLUMN `b` VARCHAR(3)"),
    ("DROP TABLE shard_1.t_1", None, IGNORE, "drop table", [("shard_1", "t_1")], ("merged", "t"), ""),
    ("DROP TABLE IF EXISTS t_1, t_2", "shard_1", IGNORE, "drop table", [("shard_1", "t_1"), ("shard_1", "t_2")],
     ("merged", "t"), ""),
    ("TRUNCATE TABLE t_3", "shard_9", IGNORE, "truncate table", [("shard_9", "t_3")], ("merged", "t"), ""),
    ("DROP DATABASE shard_1", None, IGNORE, "drop database", [("shard_1", "")], ("merged", ""), ""),
    ("create table t_5 (id int primary key, v varchar(8))", "shard_1", CREATE, "create table", [("shard_1", "t_5")],
     ("merged", "t"), "CREATE TABLE IF NOT EXISTS `merged`.`t` (`id` INT PRIMARY KEY, `v` VARCHAR(8))"),
    ("CREATE DATABASE shard_3", None, CREATE, "create database", [("shard_3", "")], ("merged", ""),
     "CREATE DATABASE IF NOT EXISTS `merged`"),
    # pessimistic mode, as DM: a shard renamed to a name routed to the same target renames the target onto itself
    ("RENAME TABLE shard_1.t_1 TO shard_1.t_9", None, COORDINATE, "rename table", [("shard_1", "t_1"),
     ("shard_1", "t_9")], ("merged", "t"), "RENAME TABLE `merged`.`t` TO `merged`.`t`"),
    # ALTERs sqlglot cannot parse are coordinated by their routed text
    ("ALTER TABLE shard_1.t_1 CONVERT TO CHARACTER SET utf8mb4", None, COORDINATE, "alter table",
     [("shard_1", "t_1")], ("merged", "t"), "ALTER TABLE `merged`.`t` CONVERT TO CHARACTER SET utf8mb4"),
    ("alter table t_2  add partition (partition p3 values less than (30))", "shard_1", COORDINATE,
     "add table partition", [("shard_1", "t_2")], ("merged", "t"),
     "ALTER TABLE `merged`.`t` add partition (partition p3 values less than (30))"),
]


@pytest.mark.parametrize("sql,default,action,kind,tables,target,canonical", NORMALIZE)
def test_normalize(sql, default, action, kind, tables, target, canonical):
    n = normalize(sql, default, route)
    assert (n.action, n.kind, list(n.tables), n.target, n.sql) == (action, kind, tables, target, canonical)
    if action == IGNORE:
        assert n.reason


# (sql, words the message must contain)
UNSUPPORTED = [
    ("RENAME TABLE shard_1.t_1 TO shard_1.x_9", ["RENAME TABLE", "RENAME TABLE shard_1.t_1 TO shard_1.x_9"]),
    ("rename tables shard_1.t_1 to shard_1.t_9, shard_1.t_2 to shard_1.t_8", ["RENAME TABLE", "rename tables"]),
    ("ALTER TABLE shard_1.t_1 RENAME TO shard_1.t_9", ["RENAME TABLE", "ALTER TABLE shard_1.t_1 RENAME TO"]),
    ("ALTER TABLE shard_1.t_1 ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES shard_1.p (id)",
     ["only one table", "`shard_1`.`t_1`, `shard_1`.`p`"]),
    ("CREATE TABLE shard_1.t_9 LIKE shard_1.t_1", ["only one table", "CREATE TABLE shard_1.t_9 LIKE"]),
    ("CREATE VIEW shard_1.v AS SELECT 1", ["not supported", "CREATE VIEW"]),
    ("CREATE TABLE shard_1.t_9 (id int, g point)", ["cannot parse DDL", "g point"]),
    ("ALTER TABLE shard_1.t_1 ADD COLUMN c INT; ALTER TABLE shard_1.t_1 ADD COLUMN d INT", ["exactly one statement"]),
]


def test_rename_table_refused_in_optimistic_mode():
    with pytest.raises(ShardDDLUnsupported) as ei:
        normalize("RENAME TABLE shard_1.t_1 TO shard_1.t_9", None, route, mode="optimistic")
    assert "`RENAME TABLE` statement not supported in optimistic mode" in str(ei.value)


@pytest.mark.parametrize("sql,words", UNSUPPORTED)
def test_unsupported(sql, words):
    with pytest.raises(ShardDDLUnsupported) as ei:
        normalize(sql, "shard_1", route)
    msg = str(ei.value)
    assert ei.value.code.terminal
    for w in words:
        assert w in msg, (w, msg)


# two spellings from two shards that must compare equal (or not)
EQUAL = [
    ("alter table t_1 add c int", "ALTER TABLE `shard_2`.`t_2` ADD COLUMN `c` INT", True),
    ("ALTER TABLE t_1 ADD COLUMN C INT", "alter table shard_2.t_2 add column c int", True),
    ("ALTER TABLE t_1 ADD COLUMN c INT COMMENT 'A'", "ALTER TABLE t_2 ADD COLUMN c INT COMMENT 'a'", False),
    ("ALTER TABLE t_1 ADD COLUMN c INT", "ALTER TABLE t_2 ADD COLUMN c BIGINT", False),
    ("ALTER TABLE t_1 MODIFY c int(11)", "ALTER TABLE t_2 MODIFY COLUMN c INT(11)", True),
]


@pytest.mark.parametrize("a,b,equal", EQUAL)
def test_comparison_key(a, b, equal):
    assert (normalize(a, "shard_1", route).key == normalize(b, "shard_2", route).key) is equal


def test_comparison_key_keeps_string_literals():
    assert comparison_key("ALTER TABLE `D`.`T` ADD COLUMN `X` INT DEFAULT 'MiXed'") == \
        "ALTER TABLE `d`.`t` ADD COLUMN `x` INT DEFAULT 'MiXed'"


SPLIT = [
    ("ALTER TABLE t_1 ADD COLUMN a INT", ["ALTER TABLE `merged`.`t` ADD COLUMN `a` INT"]),
    ("ALTER TABLE t_1 ADD COLUMN a INT, DROP COLUMN b, ENGINE=InnoDB",
     ["ALTER TABLE `merged`.`t` ADD COLUMN `a` INT", "ALTER TABLE `merged`.`t` DROP COLUMN `b`",
      "ALTER TABLE `merged`.`t` ENGINE=InnoDB"]),
    ("CREATE INDEX i ON t_1 (a)", ["CREATE INDEX `i` ON `merged`.`t`(`a`)"]),
]


@pytest.mark.parametrize("sql,pieces", SPLIT)
def test_split(sql, pieces):
    assert [p.sql for p in normalize(sql, "shard_1", route).split()] == pieces


# canonical statement → (op, name, new name, column definition / index definition)
CHANGES = [
    ("ALTER TABLE `d`.`t` ADD COLUMN `c` INT NOT NULL DEFAULT 0", [("add_column", "c", "", "`c` INT NOT NULL DEFAULT 0")]),
    ("ALTER TABLE `d`.`t` DROP COLUMN `c`", [("drop_column", "c", "", None)]),
    ("ALTER TABLE `d`.`t` MODIFY COLUMN `c` BIGINT NULL", [("modify_column", "c", "", "`c` BIGINT")]),
    ("ALTER TABLE `d`.`t` CHANGE COLUMN `c` `e` INT", [("modify_column", "c", "e", "`e` INT")]),
    ("ALTER TABLE `d`.`t` RENAME COLUMN `c` TO `e`", [("rename_column", "c", "e", None)]),
    ("ALTER TABLE `d`.`t` ALTER COLUMN `c` SET DEFAULT 5", [("set_default", "c", "", None)]),
    ("ALTER TABLE `d`.`t` ADD UNIQUE `uk` (`a`, `b`)", [("add_index", "uk", "", "UNIQUE INDEX `uk` (`a`, `b`)")]),
    ("ALTER TABLE `d`.`t` ADD PRIMARY KEY (`id`)", [("add_index", "PRIMARY", "", "PRIMARY KEY (`id`)")]),
    ("ALTER TABLE `d`.`t` DROP PRIMARY KEY", [("drop_index", "PRIMARY", "", None)]),
    ("CREATE UNIQUE INDEX `u` ON `d`.`t`(`a`)", [("add_index", "u", "", "UNIQUE INDEX `u` (`a`)")]),
    ("DROP INDEX `u` ON `d`.`t`", [("drop_index", "u", "", None)]),
    ("ALTER TABLE `d`.`t` ENGINE=InnoDB", [("other", "", "", None)]),
]


@pytest.mark.parametrize("sql,expected", CHANGES)
def test_statement_changes(sql, expected):
    got = []
    for ch in statement_changes(sql):
        d = ch.column.definition() if ch.column else ch.index.definition() if ch.index else None
        got.append((ch.op, ch.name, ch.new_name, d))
    assert got == expected


def test_schema_from_create_and_apply():
    s = schema_from_create("CREATE TABLE t (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, v DECIMAL(10,2) DEFAULT '0.00',"
                           " PRIMARY KEY (id), KEY k (v))")
    assert [c.definition() for c in s.columns] == ["`id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT",
                                                   "`v` DECIMAL(10, 2) DEFAULT 0"]
    after = s.apply(statement_changes("ALTER TABLE `d`.`t` ADD COLUMN `c` INT, DROP COLUMN `v`"))
    assert [c.name for c in after.columns] == ["id", "c"]
    assert [i.name for i in after.indexes] == ["PRIMARY"]  # k lost its only column


# (a, b, join)
JOIN_TYPES = [
    ("INT", "INT", "INT"), ("TINYINT", "BIGINT", "BIGINT"), ("INT UNSIGNED", "SMALLINT UNSIGNED", "INT UNSIGNED"),
    ("INT", "INT UNSIGNED", None), ("INT", "VARCHAR(10)", None), ("VARCHAR(10)", "VARCHAR(20)", "VARCHAR(20)"),
    ("CHAR(4)", "VARCHAR(2)", "VARCHAR(4)"), ("BINARY(4)", "VARBINARY(8)", "VARBINARY(8)"),
    ("DECIMAL(10, 2)", "DECIMAL(8, 4)", "DECIMAL(12, 4)"), ("FLOAT", "DOUBLE", "DOUBLE"),
    ("TEXT", "MEDIUMTEXT", "MEDIUMTEXT"), ("BLOB", "TEXT", None), ("DATETIME", "DATETIME(6)", "DATETIME(6)"),
    ("ENUM('a', 'b')", "ENUM('a', 'b', 'c')", "ENUM('a', 'b', 'c')"), ("ENUM('a', 'b')", "ENUM('b', 'a')", None),
    ("DATE", "DATETIME", None),
]


@pytest.mark.parametrize("a,b,j", JOIN_TYPES)
def test_join_type(a, b, j):
    assert join_type(a, b) == j
    assert join_type(b, a) == j


@pytest.mark.parametrize("text,canon", [("int(11)", "INT"), ("tinyint(1)", "TINYINT"), ("BOOL", "TINYINT"),
                                        ("bigint(20) unsigned zerofill", "BIGINT UNSIGNED"),
                                        ("decimal", "DECIMAL(10, 0)"), ("varchar(255)", "VARCHAR(255)"),
                                        ("datetime(0)", "DATETIME"), ("set('x','y')", "SET('x', 'y')")])
def test_canonical_type(text, canon):
    assert canonical_type(text) == canon


def _t(*cols, idx=()):
    return TableSchema(tuple(cols), tuple(idx))


def test_join_schemas_rules():
    base = (Column("id", "INT", False),)
    a = _t(*base, Column("c", "INT"), idx=[Index("u", "unique", ("id",)), Index("k", "index", ("c",))])
    b = _t(*base)
    j = join_schemas({"A": a, "B": b})
    assert [c.name for c in j.columns] == ["id", "c"]
    assert [i.name for i in j.indexes] == ["k"]  # the unique key is not on every shard
    with pytest.raises(JoinConflict) as ei:
        join_schemas({"A": _t(*base, Column("d", "INT", False)), "B": b})
    assert ei.value.columns == ["d"] and ei.value.members == ["A", "B"]
    assert "NOT NULL without a default" in str(ei.value)
    with pytest.raises(JoinConflict) as ei:
        join_schemas({"A": _t(*base, Column("d", "INT")), "B": _t(*base, Column("d", "VARCHAR(3)"))})
    assert "`d`" in str(ei.value) and "INT in A" in str(ei.value) and "VARCHAR(3) in B" in str(ei.value)
    with pytest.raises(JoinConflict):
        join_schemas({"A": _t(*base, Column("d", "INT", True, "1")), "B": _t(*base, Column("d", "INT", True, "2"))})
    # no default is the lower bound of every default (DM's schemacmp, Maybe): the join has it
    j = join_schemas({"A": _t(Column("id", "BIGINT", False, "10")), "B": _t(*base)})
    assert j.column("id").describe() == "BIGINT NOT NULL DEFAULT 10"


def test_modify_of_a_primary_key_column_keeps_it_not_null():
    """MySQL: a column of the primary key is NOT NULL whatever its new definition says."""
    s = _t(Column("a", "INT", False), Column("b", "INT"), idx=[Index("PRIMARY", "primary", ("a",))])
    after = s.apply(statement_changes("ALTER TABLE `d`.`t` CHANGE COLUMN `a` `a` BIGINT DEFAULT 10"))
    assert after.column("a").describe() == "BIGINT NOT NULL DEFAULT 10"
    assert after.apply(statement_changes("ALTER TABLE `d`.`t` MODIFY COLUMN `b` BIGINT")).column("b").nullable


def test_diff_and_widen_only():
    old = _t(Column("id", "INT", False), Column("x", "BIGINT"), idx=[Index("k", "index", ("x",))])
    new = _t(Column("id", "BIGINT", False), Column("y", "INT"), idx=[Index("k2", "index", ("y",))])
    assert [c.sql for c in diff_schemas("d", "t", old, new)] == [
        "ALTER TABLE `d`.`t` DROP INDEX `k`", "ALTER TABLE `d`.`t` ADD COLUMN `y` INT",
        "ALTER TABLE `d`.`t` MODIFY COLUMN `id` BIGINT NOT NULL", "ALTER TABLE `d`.`t` DROP COLUMN `x`",
        "ALTER TABLE `d`.`t` ADD INDEX `k2` (`y`)"]
    narrowed = _t(Column("id", "INT", False), Column("x", "INT", False))
    assert widen_only(old, narrowed).column("x").type == "BIGINT"
    assert widen_only(old, narrowed).column("x").nullable is True
