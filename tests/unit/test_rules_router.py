"""Table routing, table-driven: (schema, table) -> (target schema, target table)."""

import pytest

from dm_core.errors import ShardflowError
from dm_core.rules.patterns import RuleError
from dm_core.rules.router import RouteRule, TableRouter

# The seed docs' shard merge: schema_*.table_* of two instances into schema.table.
RULES = [
    RouteRule("schema_*", "table_*", "schema", "table"),
    RouteRule("schema_*", target_schema="schema"),
    RouteRule("logs_*", "*", "logs"),                  # table level with an empty target table
    RouteRule("~^Mixed_[0-9]+$", "t", "mixed", "t_all"),
]

CASES = [
    ("schema_1", "table_1", ("schema", "table")),
    ("schema_2", "table_22", ("schema", "table")),
    ("SCHEMA_1", "TABLE_1", ("schema", "table")),       # case-insensitive match
    ("schema_1", "other", ("schema", "other")),         # schema-level rule keeps the table name
    ("schema_1", "", ("schema", "")),                   # schema-only question (CREATE DATABASE)
    ("logs_2024", "events", ("logs", "events")),
    ("logs_2024", "", ("logs_2024", "")),               # only table-level rules: schema unchanged
    ("mixed_7", "t", ("mixed", "t_all")),
    ("mixed_x", "t", ("mixed_x", "t")),
    ("unrelated", "t", ("unrelated", "t")),
]


@pytest.mark.parametrize("schema,table,expected", CASES)
def test_route(schema, table, expected):
    assert TableRouter(RULES).route(schema, table) == expected


def test_case_sensitive_routing():
    r = TableRouter([RouteRule("Shard_*", "T", "s", "t")], case_sensitive=True)
    assert r.route("Shard_1", "T") == ("s", "t")
    assert r.route("shard_1", "T") == ("shard_1", "T")


def test_two_matching_rules_at_one_level_is_an_error():
    r = TableRouter([RouteRule("s_*", "t_*", "a", "x"), RouteRule("s_1", "t_?", "b", "y")])
    with pytest.raises(ShardflowError, match="matches 2 table-level route rules"):
        r.route("s_1", "t_1")
    assert r.route("s_2", "t_1") == ("a", "x")


def test_two_schema_rules_is_an_error_even_for_a_schema_question():
    r = TableRouter([RouteRule("s_*", target_schema="a"), RouteRule("s?1", target_schema="b")])
    with pytest.raises(ShardflowError, match="schema-level"):
        r.route("s_1", "")


def test_extract_values_and_columns():
    rule = RouteRule("test_*", "t_*", "test", "t",
                     extract_table={"table-regexp": "t_(.*)", "target-column": "c_table"},
                     extract_schema={"schema-regexp": "test_(.*)", "target-column": "c_schema"},
                     extract_source={"source-regexp": "(.*)-(\\d+)", "target-column": "c_source"})
    r = TableRouter([rule])
    assert r.extract_values("test_01", "t_02", "mysql-replica-01") == {
        "c_table": "02", "c_schema": "01", "c_source": "mysql-replica01"}   # submatches concatenated
    assert r.extract_columns("test_01", "t_02") == ["c_table", "c_schema", "c_source"]
    assert r.extract_values("other", "t_02", "src") == {}
    assert r.extract_columns("other", "t_02") == []


def test_extract_without_a_match_gives_empty_string():
    r = TableRouter([RouteRule("s_*", "*", "s", "t", extract_table={"table-regexp": "^x_(\\d+)", "target-column": "c"})])
    assert r.extract_values("s_1", "y_5", "src") == {"c": ""}


@pytest.mark.parametrize("rule,key", [
    (RouteRule("s_*", "t"), "target-schema"),
    (RouteRule("", "t", "s"), "schema-pattern"),
    (RouteRule("s[", "t", "s"), "schema-pattern"),
    (RouteRule("s", "t", "s", extract_table={"table-regexp": "(", "target-column": "c"}), "extract-table.table-regexp"),
    (RouteRule("s", "t", "s", extract_schema={"schema-regexp": "x"}), "extract-schema"),
    (RouteRule("s", "t", "s", extract_source={"source-regex": "x", "target-column": "c"}), "extract-source.source-regex"),
])
def test_invalid_rules(rule, key):
    with pytest.raises(RuleError) as e:
        TableRouter([rule])
    assert e.value.key == key


def test_same_patterns_twice_is_rejected():
    with pytest.raises(RuleError, match="same schema-pattern"):
        TableRouter([RouteRule("s_*", "t", "a"), RouteRule("s_*", "t", "b")])
