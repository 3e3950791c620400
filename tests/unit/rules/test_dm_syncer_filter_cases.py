"""tiflow dm/syncer (filter_test.go): how the syncer asks the block-allow list, then the binlog
filter, whether to skip a statement or a row event, as our own table-driven test.

A statement is skipped when a table it names is not moved (system schema or block-allow list)
or the filter says Ignore for the event of its kind (``ddl_event_type``) and its text.
"""

import pytest

from dm_core.rules.binlog_filter import BinlogFilter, FilterRule
from dm_core.rules.block_allow import BAListRule, BlockAllowList, TableRef


def skipped(ba: BlockAllowList, f: BinlogFilter, tables, event: str, sql: str | None) -> bool:
    return any(not ba.allow_table(s, t) or f.action(s, t, event, sql) == "ignore" for s, t in tables)


# statement, tables it names, skipped?
QUERY_CASES = [
    ("create table mysql.test (id int)", [("mysql", "test")], True),            # system schema
    ("drop table foo.test", [("foo", "test")], False),
    ("create table foo.test (id int)", [("foo", "test")], True),                 # the filter
    ("rename table s1.test to s1.test1", [("s1", "test"), ("s1", "test1")], True),     # block-allow list
    ("rename table s1.test1 to s1.test", [("s1", "test1"), ("s1", "test")], True),
    ("rename table s1.test1 to s1.test2", [("s1", "test1"), ("s1", "test2")], False),
]


@pytest.mark.parametrize("sql,tables,skip", QUERY_CASES)
def test_skip_query_event(sql, tables, skip):
    ba = BlockAllowList(BAListRule(ignore_tables=[TableRef("s1", "test")]))
    f = BinlogFilter([FilterRule("foo*", "", ["create table"], ["^create\\s+table"], "Ignore")])
    assert skipped(ba, f, tables, BinlogFilter.ddl_event_type(sql), sql) is skip


@pytest.mark.parametrize("event,skip", [("insert", True), ("update", False), ("delete", False)])
def test_skip_rows_event(event, skip):
    """An empty sql-pattern is kept (it matches every statement), and rows carry no statement."""
    f = BinlogFilter([FilterRule("foo*", "", ["insert"], [""], "Ignore")])
    assert skipped(BlockAllowList(None), f, [("foo", "test")], event, None) is skip


# statement, table, event, skipped?
BY_FILTER_CASES = [
    ("drop table tx.test", ("tx", "test"), "drop table", True),
    ("create table foo.test (id int)", ("foo", "test"), "create table", False),
    ("create table foo.bar (id int)", ("foo", "bar"), "create table", True),     # the table-level rule
]


@pytest.mark.parametrize("sql,table,event,skip", BY_FILTER_CASES)
def test_skip_by_filter(sql, table, event, skip):
    f = BinlogFilter([FilterRule("*", "", ["drop table"], ["^drop\\s+table"], "Ignore"),
                      FilterRule("foo*", "", ["create table"], ["^create\\s+table"], "Do"),
                      FilterRule("foo*", "bar*", ["create table"], ["^create\\s+table"], "Ignore")])
    assert (f.action(*table, event, sql) == "ignore") is skip
