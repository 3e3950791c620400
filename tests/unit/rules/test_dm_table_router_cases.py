"""tidb's pkg/util/table-router (router_test.go) and regexpr-router (regexpr_router_test.go), their
data as our own table-driven test. DM routes through the regexpr-router: wildcards as the
table-rule-selector reads them, ``~`` regular expressions, table-level rules before schema-level
ones, two rules at one level an error.
"""

import pytest

from dm_core.errors import ShardflowError
from dm_core.rules.patterns import RuleError
from dm_core.rules.router import RouteRule, TableRouter

TRIE_RULES = [
    RouteRule("Test_1_*", "abc*", "t1", "abc"),
    RouteRule("test_1_*", "test*", "t2", "test"),
    RouteRule("test_1_*", "", "test", ""),
    RouteRule("test_2_*", "abc*", "t1", "abc"),
    RouteRule("test_2_*", "test*", "t2", "test"),
]

# case_sensitive, schema, table, target schema, target table
TRIE_CASES = [
    (False, "test_1_a", "abc1", "t1", "abc"),
    (False, "test_2_a", "abc2", "t1", "abc"),
    (False, "test_1_a", "test1", "t2", "test"),
    (False, "test_2_a", "test2", "t2", "test"),
    (False, "test_1_a", "xyz", "test", "xyz"),
    (False, "test_3_a", "", "test_3_a", ""),
    (True, "test_1_a", "abc1", "test", "abc1"),        # `Test_1_*` is not `test_1_a` when case counts
    (True, "test_2_a", "abc2", "t1", "abc"),
    (True, "test_1_a", "test1", "t2", "test"),
    (True, "test_2_a", "test2", "t2", "test"),
    (True, "test_1_a", "xyz", "test", "xyz"),
]


@pytest.mark.parametrize("cs,schema,table,to_schema,to_table", TRIE_CASES)
def test_route(cs, schema, table, to_schema, to_table):
    assert TableRouter(TRIE_RULES, cs).route(schema, table) == (to_schema, to_table)


def test_same_rule_twice_is_refused():
    for rule in TRIE_RULES:
        with pytest.raises(RuleError, match="same schema-pattern"):
            TableRouter(TRIE_RULES + [rule])


def test_updated_and_removed_rules():
    """DM's UpdateRule / RemoveRule, as a router built again from the changed rules."""
    updated = [RouteRule("Test_1_*", "abc*", "t1", "xxx")] + TRIE_RULES[1:]
    assert TableRouter(updated).route("test_1_a", "abc1") == ("t1", "xxx")
    assert TableRouter(TRIE_RULES[1:]).route("test_1_a", "abc1") == ("test", "abc1")


@pytest.mark.parametrize("extra,schema,table", [
    (RouteRule("test_*", "", "error"), "test_1_a", ""),                 # two schema-level rules
    (RouteRule("test_1_*", "tes*", "error", "error"), "test_1_a", "test"),   # two table-level rules
])
def test_two_rules_at_one_level_is_an_error(extra, schema, table):
    with pytest.raises(ShardflowError, match="matches 2"):
        TableRouter(TRIE_RULES[1:] + [extra]).route(schema, table)


def test_rule_without_target_schema_is_refused():
    with pytest.raises(RuleError) as e:
        TableRouter([RouteRule("test*", "abc*")])
    assert e.value.key == "target-schema"


EXTRACT_RULES = [
    RouteRule("schema*", "t*", "test", "t",
              extract_table={"table-regexp": "table_(.*)", "target-column": "table_name"},
              extract_schema={"schema-regexp": "schema_(.*)", "target-column": "schema_name"},
              extract_source={"source-regexp": "source_(.*)_(.*)", "target-column": "source_name"}),
]


@pytest.mark.parametrize("schema_rule", ["schema*", "~s?chema.*"])     # table-router, regexpr-router
def test_extend_columns(schema_rule):
    rules = EXTRACT_RULES + [RouteRule(schema_rule, "", "test", "t2",
                                       extract_schema={"schema-regexp": "(.*)", "target-column": "schema_name"},
                                       extract_source={"source-regexp": "(.*)", "target-column": "source_name"})]
    r = TableRouter(rules)
    # table level first
    assert list(r.extract_values("schema_s1", "table_t1", "source_s1_s1").items()) == [
        ("table_name", "t1"), ("schema_name", "s1"), ("source_name", "s1s1")]
    # only the schema-level rule
    assert list(r.extract_values("schema_s2", "a_table_t2", "source_s2").items()) == [
        ("schema_name", "schema_s2"), ("source_name", "source_s2")]


# regexpr-router: TestSchemaRoute, TestTableRoute, TestRegExprRoute (case-sensitive routers)
REGEX_CASES = [
    ([RouteRule("test1", "", "dtest1"), RouteRule("gtest*", "", "dtest")],
     [("test1", "table1", "dtest1", "table1"), ("gtesttest", "atable", "dtest", "atable"),
      ("ptest", "atableg", "ptest", "atableg")]),
    ([RouteRule("test1", "table1", "dtest1", "dtable1"), RouteRule("test*", "table2", "dtest2", "dtable2"),
      RouteRule("test3", "table*", "dtest3", "dtable3")],
     [("test1", "table1", "dtest1", "dtable1"), ("test2", "table2", "dtest2", "dtable2"),
      ("test3", "table3", "dtest3", "dtable3")]),
    ([RouteRule("~test.[0-9]+", "", "dtest1"),
      RouteRule("~test2?[animal|human]", "~tbl.*[cat|dog]+", "dtest2", "dtable2"),
      RouteRule("~test3_(schema)?.*", "test3_*", "dtest3", "dtable3"),
      RouteRule("test4s_*", "~testtable_[donot_delete]?", "dtest4", "dtable4")],
     [("tests100", "table1", "dtest1", "table1"), ("test2animal", "tbl_animal_dogcat", "dtest2", "dtable2"),
      ("test3_schema_meta", "test3_tail", "dtest3", "dtable3"),
      ("test4s_2022", "testtable_donot_delete", "dtest4", "dtable4"), ("mytst5566", "gtable", "mytst5566", "gtable")]),
]


@pytest.mark.parametrize("rules,cases", REGEX_CASES)
def test_regexpr_route(rules, cases):
    r = TableRouter(rules, case_sensitive=True)
    for schema, table, to_schema, to_table in cases:
        assert r.route(schema, table) == (to_schema, to_table)


@pytest.mark.parametrize("schema,table", [("test2a", "tbl2"), ("mytest_meta_schema", "")])
def test_regexpr_duplicate_match(schema, table):
    r = TableRouter([RouteRule("~test[0-9]+.*", "~.*", "dtest1"), RouteRule("~test2?[a|b]", "~tbl2", "dtest2", "dtable2"),
                     RouteRule("mytest*", "", "mytest"), RouteRule("~mytest(_meta)?_schema", "", "test")],
                    case_sensitive=True)
    with pytest.raises(ShardflowError, match="matches 2"):
        r.route(schema, table)


def test_star_in_the_middle_is_refused():
    """The selector DM routes wildcards through refuses a `*` that is not last."""
    with pytest.raises(RuleError) as e:
        TableRouter([RouteRule("a*b", "", "t")])
    assert e.value.key == "schema-pattern" and "last character" in e.value.reason


def test_go_refuses_what_python_would_take():
    with pytest.raises(RuleError, match="lookahead"):
        TableRouter([RouteRule("~^t(?=1)", "", "t")])
    with pytest.raises(RuleError, match="backreference"):
        TableRouter([RouteRule("s", "t", "d", extract_table={"table-regexp": r"(t)\1", "target-column": "c"})])
