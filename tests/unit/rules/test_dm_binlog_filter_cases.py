"""tiflow pkg/binlog-filter (filter_test.go), its data as our own table-driven test:
(schema, table, event, statement) -> Do / Ignore / Error, through each stage of DM's test
(rules updated, a rule added, a rule removed), plus its event-name and event-class tables.

DM edits one filter in place (UpdateRule, AddRule, RemoveRule); here each stage builds a filter
from the rules as they stand then. DM's NewBinlogEvent leaves out a rule naming an event it
does not know; so does ``usable_rules``, which every file path goes through.
"""

import pytest

from dm_core.config.task import parse_task
from dm_core.rules import binlog_filter as bf
from dm_core.rules.binlog_filter import BinlogFilter, FilterRule, normalize_event, usable_rules

PROC = ["^DROP\\s+PROCEDURE", "^CREATE\\s+PROCEDURE"]
RULES = [
    FilterRule("Test_1_*", "abc*", ["delete", "insert", "create index", "drop index", "drop view"], PROC, "Ignore"),
    FilterRule("xxx_*", "abc_*", ["all dml", "none ddl"], [], "Ignore"),
    FilterRule("yyy_*", "abc_*", ["ALL DML"], [], "Do"),
    FilterRule("Test_1_*", "abc*", ["wrong event"], PROC, "Ignore"),      # left out: DM does not know the event
    FilterRule("cdc", "t1", ["rebase auto id"], [], "Ignore"),
]

# schema, table, event ("" is DM's null event), statement, action at each stage:
# initial, updated, + a multiple-rule, - the first rule
CASES = [
    ("test_1_a", "abc1", "delete", "", ["ignore", "do", "ignore", "ignore"]),
    ("test_1_a", "abc1", "insert", "", ["ignore", "do", "do", "do"]),
    ("test_1_a", "abc1", "update", "", ["do", "do", "ignore", "ignore"]),
    ("test_1_a", "abc1", "create index", "", ["ignore", "do", "do", "do"]),
    ("test_1_a", "abc1", "rename table", "", ["do", "do", "do", "do"]),
    ("test_1_a", "abc1", "", "drop procedure abc", ["ignore", "ignore", "ignore", "do"]),
    ("test_1_a", "abc1", "", "create procedure abc", ["ignore", "ignore", "ignore", "ignore"]),
    ("test_1_a", "abc1", "", "create function abc", ["do", "do", "ignore", "ignore"]),
    ("xxx_1", "abc_1", "", "create function abc", ["do", "do", "do", "do"]),
    ("xxx_1", "abc_1", "insert", "", ["ignore", "do", "do", "do"]),
    ("xxx_1", "abc_1", "create index", "", ["do", "ignore", "ignore", "ignore"]),
    ("yyy_1", "abc_1", "insert", "", ["do", "ignore", "ignore", "ignore"]),
    ("yyy_1", "abc_1", "create index", "", ["ignore", "do", "do", "do"]),
    ("test_1_a", "abc1", "drop view", "", ["ignore", "do", "do", "do"]),
    ("cdc", "t1", "rebase auto id", "", ["ignore", "ignore", "ignore", "ignore"]),
]


def _stages() -> list[list[FilterRule]]:
    initial, left_out = usable_rules(RULES)
    assert [i for i, _, _ in left_out] == [3]
    updated = [FilterRule("Test_1_*", "abc*", [], PROC, "Ignore"),
               FilterRule("xxx_*", "abc_*", ["all dml", "none ddl"], [], "Do"),
               FilterRule("yyy_*", "abc_*", ["ALL DDL"], [], "Do"),
               RULES[4]]                                # DM's test updates the first three only
    added = updated + [FilterRule("test_*", "ab*", ["insert", "all ddl"], ["^DROP\\s+PROCEDURE"], "Do")]
    return [initial, updated, added, added[1:]]


@pytest.mark.parametrize("stage", range(4))
@pytest.mark.parametrize("schema,table,event,sql,actions", CASES)
def test_filter(stage, schema, table, event, sql, actions):
    f = BinlogFilter(_stages()[stage])
    assert f.action(schema, table, event, sql or None) == actions[stage]


def test_no_rule_for_the_table_is_do():
    assert BinlogFilter(_stages()[3]).action("xxx_a", "", "insert") == "do"


CASE_SENSITIVE_CASES = [
    ("test_1_a", "abc1", "delete", "", "do"),
    ("test_1_a", "abc1", "insert", "", "do"),
    ("test_1_a", "abc1", "update", "", "do"),
    ("test_1_a", "abc1", "create index", "", "do"),
    ("test_1_a", "abc1", "rename table", "", "do"),
    ("test_1_a", "abc1", "", "drop procedure abc", "do"),
    ("test_1_a", "abc1", "", "create procedure abc", "do"),
    ("test_1_a", "abc1", "", "create function abc", "do"),
    ("xxx_1", "abc_1", "", "create function abc", "do"),
    ("xxx_1", "abc_1", "insert", "", "ignore"),
    ("xxx_1", "abc_1", "create index", "", "do"),
]


@pytest.mark.parametrize("schema,table,event,sql,action", CASE_SENSITIVE_CASES)
def test_case_sensitive(schema, table, event, sql, action):
    f = BinlogFilter([FilterRule("Test_1_*", "abc*", ["delete", "insert", "create index", "drop index"], PROC, "Ignore"),
                      FilterRule("xxx_*", "abc_*", ["all dml", "none ddl"], [], "Ignore")], case_sensitive=True)
    assert f.action(schema, table, event, sql or None) == action


@pytest.mark.parametrize("table_pattern", ["", "*"])        # DM's schema rule, then its table rule
@pytest.mark.parametrize("schema,table", [("db", "tbl"), ("db", ""), ("", "tbl"), ("", "")])
def test_global_sql_pattern(table_pattern, schema, table):
    f = BinlogFilter([FilterRule("*", table_pattern, [], ["^FLUSH"], "Ignore")])
    assert f.action(schema, table, "", "FLUSH ENGINE LOGS") == "ignore"


# name, what DM reads (None: an event DM does not know)
EVENT_NAMES = [
    ("", ""), ("insert", "insert"), ("Insert", "insert"), ("update", "update"), ("UPDATE", "update"),
    ("delete", "delete"), ("create", None), ("create schema", "create database"),
    ("create SCHEMA", "create database"), ("create database", "create database"), ("drop schema", "drop database"),
    ("drop Schema", "drop database"), ("drop database", "drop database"), ("alter database", "alter database"),
    ("alter schema", "alter database"), ("create index", "create index"),
    ("add table partition", "add table partition"), ("drop taBle partition", "drop table partition"),
    ("truncate tablE parTition", "truncate table partition"), ("rebase auto id", "rebase auto id"),
    ("xxx", None), ("I don't know", None),
]


@pytest.mark.parametrize("name,event", EVENT_NAMES)
def test_event_names(name, event):
    n = normalize_event(name)
    assert (n if n in bf.EVENT_TYPES else None) == event


# event, DM's class (dml, ddl, incompatible ddl)
CLASSES = [
    ("insert", "dml"), ("update", "dml"), ("delete", "dml"),
    ("create database", "ddl"), ("create schema", "ddl"), ("alter schema", "ddl"), ("create table", "ddl"),
    ("create index", "ddl"), ("create view", "ddl"), ("drop view", "ddl"), ("alter table", "ddl"),
    ("add table partition", "ddl"),
    ("drop database", "incompatible"), ("drop schema", "incompatible"), ("drop table", "incompatible"),
    ("truncate table", "incompatible"), ("rename table", "incompatible"), ("drop index", "incompatible"),
    ("drop table partition", "incompatible"), ("rebase auto id", "incompatible"),
    ("truncate table partition", "incompatible"),
]


@pytest.mark.parametrize("event,cls", CLASSES)
def test_event_classes(event, cls):
    f = BinlogFilter([FilterRule("dml", "", ["all dml"], [], "Error"), FilterRule("ddl", "", ["all ddl"], [], "Error"),
                      FilterRule("inc", "", ["incompatible ddl changes"], [], "Error")])
    got = {s for s in ("dml", "ddl", "inc") if f.action(s, "t", event) == "error"}
    assert got == {"dml": {"dml"}, "ddl": {"ddl"}, "incompatible": {"ddl", "inc"}}[cls]


def test_schema_level_rule_is_asked_first():
    """DM's Match lists schema-level rules first: its Error decides before a table-level Ignore."""
    f = BinlogFilter([FilterRule("s*", "t*", ["truncate table"], [], "Ignore"),
                      FilterRule("s*", "", ["truncate table"], [], "Error")])
    assert f.action("s1", "t1", "truncate table") == "error"


def test_empty_event_name_is_accepted():
    f = BinlogFilter([FilterRule("s", "t", ["", "insert"], [], "Ignore")])
    assert f.action("s", "t", "insert") == "ignore" and f.action("s", "t", "delete") == "do"


TASK = """
name: t
task-mode: incremental
target-database: {host: h, port: 4000, user: root, password: ""}
mysql-instances:
  - source-id: s1
    meta: {binlog-name: mysql-bin.000001, binlog-pos: 4}
    filter-rules: [bad, good]
filters:
  bad: {schema-pattern: "s", events: [truncate, insert], action: Ignore}
  good: {schema-pattern: "s", table-pattern: "t", events: ["", delete], action: Ignore}
"""


def test_task_file_leaves_an_unknown_event_rule_out_with_a_warning():
    task = parse_task(TASK)
    assert [w.key for w in task.warnings] == ["filters.bad.events[0]"]
    f = task.rules_for("s1").binlog_filter
    assert f.action("s", "x", "insert") == "do" and f.action("s", "t", "delete") == "ignore"


def test_source_filters_with_an_unknown_event_are_left_out():
    task = parse_task(TASK)
    rules = task.with_source_filters("s1", [{"schema-pattern": "s", "table-pattern": "u", "events": ["truncate"],
                                             "action": "Ignore"},
                                            {"schema-pattern": "s", "table-pattern": "v", "events": ["insert"],
                                             "action": "Ignore"}])
    assert rules.binlog_filter.action("s", "u", "truncate table") == "do"
    assert rules.binlog_filter.action("s", "v", "insert") == "ignore"


def test_sql_pattern_go_refuses():
    from dm_core.rules.patterns import RuleError

    with pytest.raises(RuleError, match="lookahead"):
        BinlogFilter([FilterRule("s", "", [], ["^DROP(?!x)"], "Ignore")])
