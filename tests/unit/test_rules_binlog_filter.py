"""Binlog event filter, table-driven as DM's filter_test.go: (schema, table, event, sql) -> action."""

import pytest

from dm_core.rules import binlog_filter as bf
from dm_core.rules.binlog_filter import BinlogFilter, FilterRule
from dm_core.rules.patterns import RuleError

RULES = [
    FilterRule("Test_1_*", "abc*", ["delete", "insert", "create index", "drop index", "drop view"],
               ["^DROP\\s+PROCEDURE", "^CREATE\\s+PROCEDURE"], "Ignore"),
    FilterRule("xxx_*", "abc_*", ["all dml", "none ddl"], [], "Ignore"),
    FilterRule("yyy_*", "abc_*", ["ALL DML"], [], "Do"),
    FilterRule("zzz_*", "abc_*", ["all ddl"], ["^ALTER"], "Do"),
    FilterRule("err_*", "", ["drop database", "truncate table"], [], "Error"),
    FilterRule("err_*", "keep*", ["truncate table"], [], "Ignore"),
    FilterRule("sch_*", "", ["all dml"], [], "Ignore"),
    FilterRule("sch_*", "t_*", ["all"], [], "Do"),
    FilterRule("inc_*", "", ["incompatible ddl changes"], [], "Error"),
]

# schema, table, event, sql, action
CASES = [
    ("test_1_a", "abc1", "delete", None, "ignore"),
    ("test_1_a", "abc1", "insert", None, "ignore"),
    ("test_1_a", "abc1", "update", None, "do"),
    ("test_1_a", "abc1", "create index", None, "ignore"),
    ("test_1_a", "abc1", "rename table", None, "do"),
    ("test_1_a", "abc1", "", "drop procedure abc", "ignore"),       # null event: sql-pattern only
    ("test_1_a", "abc1", None, "CREATE  PROCEDURE abc", "ignore"),
    ("test_1_a", "abc1", "", "create function abc", "do"),
    ("test_1_a", "xyz", "insert", None, "do"),                       # table pattern does not match
    ("xxx_1", "abc_1", "insert", None, "ignore"),
    ("xxx_1", "abc_1", "create index", None, "do"),                  # `none ddl` stops the search
    ("xxx_1", "abc_1", "", "create function abc", "do"),
    ("yyy_1", "abc_1", "insert", None, "do"),
    ("yyy_1", "abc_1", "create index", None, "ignore"),              # Do is an allow list
    ("yyy_1", "abc_1", "", "create function abc", "do"),
    ("zzz_1", "abc_1", "alter table", "ALTER TABLE abc_1 ADD c INT", "do"),
    ("zzz_1", "abc_1", "alter table", "alter table abc_1 add c int", "do"),   # sql-pattern is case-insensitive
    ("zzz_1", "abc_1", "create table", "CREATE TABLE abc_1 (a INT)", "ignore"),  # listed, but the sql does not match
    ("zzz_1", "abc_1", "insert", None, "ignore"),
    ("err_1", "", "drop database", "DROP DATABASE err_1", "error"),
    ("err_1", "t", "truncate table", None, "error"),
    ("err_1", "keep_1", "truncate table", None, "error"),             # DM asks schema level first: its Error wins
    ("err_1", "keep_1", "drop database", None, "error"),
    ("sch_1", "t_1", "insert", None, "ignore"),                       # a Do never overrides an Ignore
    ("sch_1", "t_1", "create table", None, "do"),
    ("sch_1", "other", "delete", None, "ignore"),
    ("inc_1", "t", "drop column", None, "error"),
    ("inc_1", "t", "rename index", None, "error"),
    ("inc_1", "t", "alter table", None, "do"),
    # DM's ClassifyEvent: statements that drop, rename or empty are incompatible changes too
    ("inc_1", "t", "drop table", None, "error"),
    ("inc_1", "t", "truncate table", None, "error"),
    ("inc_1", "t", "rename table", None, "error"),
    ("inc_1", "", "drop database", None, "error"),
    ("inc_1", "t", "drop table partition", None, "error"),
    ("inc_1", "t", "add table partition", None, "do"),
    ("inc_1", "t", "create index", None, "do"),
    ("inc_1", "t", "create schema", None, "do"),                      # alias of create database
    ("nothing", "t", "drop table", None, "do"),
]


@pytest.mark.parametrize("schema,table,event,sql,action", CASES)
def test_action(schema, table, event, sql, action):
    assert BinlogFilter(RULES).action(schema, table, event, sql) == action


def test_case_sensitive_patterns():
    f = BinlogFilter([FilterRule("Test_*", "", ["all"], [], "Ignore")], case_sensitive=True)
    assert f.action("Test_1", "t", "insert") == "ignore"
    assert f.action("test_1", "t", "insert") == "do"


def test_event_and_action_spellings_are_normalized():
    f = BinlogFilter([FilterRule("s", "t", ["Truncate  Table", "CREATE SCHEMA"], [], "ignore")])
    assert f.action("s", "t", "truncate table") == "ignore"
    assert f.action("s", "t", "create database") == "ignore"


@pytest.mark.parametrize("rule,key", [
    (FilterRule("s", "t", ["insert", "drop tabel"], [], "Ignore"), "events[1]"),
    (FilterRule("s", "t", ["insert"], [], "Skip"), "action"),
    (FilterRule("s", "t", ["insert"], [], ""), "action"),
    (FilterRule("s", "t", [], ["(unclosed"], "Ignore"), "sql-pattern"),
    (FilterRule("", "t", ["insert"], [], "Ignore"), "schema-pattern"),
])
def test_invalid_rules(rule, key):
    with pytest.raises(RuleError) as e:
        BinlogFilter([rule])
    assert e.value.key == key


def test_event_constants_are_dm_names():
    assert (bf.ALL, bf.ALL_DML, bf.ALL_DDL, bf.NONE, bf.NONE_DDL, bf.NONE_DML) == (
        "all", "all dml", "all ddl", "none", "none ddl", "none dml")
    assert bf.ADD_TABLE_PARTITION == "add table partition"
    assert bf.ALTER_DATABASE == "alter database"
    assert {bf.INSERT, bf.UPDATE, bf.DELETE} == bf.DML_EVENTS


@pytest.mark.parametrize("sql,event", [
    ("CREATE DATABASE d", "create database"),
    ("create schema if not exists d", "create database"),
    ("DROP DATABASE IF EXISTS d", "drop database"),
    ("ALTER DATABASE d CHARACTER SET utf8mb4", "alter database"),
    ("CREATE TABLE t (a INT PRIMARY KEY)", "create table"),
    ("create table t like s", "create table"),
    ("CREATE TABLE t (a int) /*!50100 PARTITION BY HASH (a) */", "create table"),
    ("DROP TABLE IF EXISTS a, b", "drop table"),
    ("TRUNCATE TABLE t", "truncate table"),
    ("RENAME TABLE a TO b, c TO d", "rename table"),
    ("ALTER TABLE t ADD COLUMN c INT", "alter table"),
    ("alter table `db`.`t` drop column c", "alter table"),
    ("CREATE UNIQUE INDEX i ON t (a)", "create index"),
    ("DROP INDEX i ON t", "drop index"),
    ("CREATE OR REPLACE VIEW v AS SELECT 1", "create view"),
    ("DROP VIEW v", "drop view"),
    ("ALTER TABLE t ADD PARTITION (PARTITION p3 VALUES LESS THAN (30))", "add table partition"),
    ("ALTER TABLE t DROP PARTITION p1", "drop table partition"),
    ("ALTER TABLE t TRUNCATE PARTITION p1", "truncate table partition"),
    ("ALTER TABLE t REORGANIZE PARTITION p INTO (PARTITION p1 VALUES LESS THAN (5))", "reorganize table partition"),
    ("ALTER TABLE t EXCHANGE PARTITION p WITH TABLE t2", "exchange table partition"),
    ("alter table t coalesce partition 2", "coalesce table partition"),
    ("ALTER TABLE t REBUILD PARTITION p1", "rebuild table partition"),
    ("-- comment\nDROP TABLE t", "drop table"),
    ("CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET @a = 1", ""),
    ("DROP PROCEDURE p", ""),
    ("GRANT ALL ON *.* TO u", ""),
])
def test_ddl_event_type(sql, event):
    assert BinlogFilter.ddl_event_type(sql) == event
    assert bf.ddl_event_type(sql) == event


def test_event_names_dm_accepts_but_never_gives_keep_the_rule():
    """DM accepts `add column` (and its other newer names) in a rule; its syncer reads ADD COLUMN as
    `alter table`, so the name matches nothing while the rule's other events still apply."""
    f = BinlogFilter([FilterRule("s", "t", ["add column", "drop column"], [], "Error")])
    assert f.action("s", "t", "drop column") == "error"
    assert f.action("s", "t", "alter table") == "do"
