"""Block & allow lists, table-driven (schema, table -> moved?) as DM's filter tests are."""

import pytest

from dm_core.rules.block_allow import BAListRule, BlockAllowList, TableRef
from dm_core.rules.patterns import RuleError

# DM's documentation example (block & allow table lists, "usage example").
DOC_RULE = BAListRule(
    do_dbs=["forum_backup_2018", "forum"],
    ignore_dbs=["~^forum_backup_"],
    do_tables=[TableRef("logs", r"~_\d{4}_\d{2}_\d{2}$"), TableRef("~^forum.*", "messages")],
    ignore_tables=[TableRef("~.*", "^messages.*")],
)

DOC_CASES = [
    ("logs", "messages_2016", False),           # logs is not in do-dbs
    ("logs", "messages_2018", False),
    ("forum_backup_2016", "messages", False),   # not in do-dbs; ignore-dbs is not consulted
    ("forum_backup_2017", "messages", False),
    ("forum", "users", False),                  # do-tables set, users matches none of them
    ("forum", "messages", True),
    ("forum_backup_2018", "messages", True),
]


@pytest.mark.parametrize("schema,table,moved", DOC_CASES)
def test_dm_documentation_example(schema, table, moved):
    assert BlockAllowList(DOC_RULE).allow_table(schema, table) is moved


# rule, schema, table, moved
CASES = [
    (None, "app", "t", True),
    (None, "mysql", "user", False),
    (None, "INFORMATION_SCHEMA", "tables", False),
    (None, "performance_schema", "x", False),
    (None, "sys", "x", False),
    (None, "dm_meta", "x", False),
    # schema level
    (BAListRule(do_dbs=["shop_*"]), "shop_1", "t", True),
    (BAListRule(do_dbs=["shop_*"]), "crm", "t", False),
    (BAListRule(ignore_dbs=["tmp*"]), "tmp_x", "t", False),
    (BAListRule(ignore_dbs=["tmp*"]), "app", "t", True),
    (BAListRule(do_dbs=["a"], ignore_dbs=["a"]), "a", "t", True),          # do-dbs set: ignore-dbs unused
    # table level
    (BAListRule(do_tables=[TableRef("a", "t1")]), "a", "t1", True),
    (BAListRule(do_tables=[TableRef("a", "t1")]), "a", "t2", False),
    (BAListRule(do_tables=[TableRef("a", "t1")]), "b", "t1", False),
    (BAListRule(ignore_tables=[TableRef("a", "log*")]), "a", "log_1", False),
    (BAListRule(ignore_tables=[TableRef("a", "log*")]), "a", "orders", True),
    (BAListRule(do_tables=[TableRef("a", "*")], ignore_tables=[TableRef("a", "t1")]), "a", "t1", True),  # do-tables first
    (BAListRule(do_tables=[TableRef("a", "t1")], ignore_tables=[TableRef("a", "t9")]), "a", "t2", False),
    # both levels
    (BAListRule(do_dbs=["a"], do_tables=[TableRef("b", "t")]), "b", "t", False),
    (BAListRule(ignore_dbs=["b"], do_tables=[TableRef("b", "t")]), "b", "t", False),
    # case
    (BAListRule(do_dbs=["Shop"]), "shop", "t", True),
    (BAListRule(do_tables=[TableRef("A", "T[12]")]), "a", "t2", True),
    # system schemas win over any rule
    (BAListRule(do_dbs=["mysql"]), "mysql", "user", False),
]


@pytest.mark.parametrize("rule,schema,table,moved", CASES)
def test_allow_table(rule, schema, table, moved):
    assert BlockAllowList(rule).allow_table(schema, table) is moved


def test_allow_schema_only_checks_the_schema_level():
    bal = BlockAllowList(BAListRule(do_dbs=["a*"], do_tables=[TableRef("a1", "t")]))
    assert bal.allow_schema("a2") is True           # no table to check
    assert bal.allow_schema("b") is False
    assert bal.allow_schema("mysql") is False
    assert BlockAllowList(BAListRule(do_tables=[TableRef("x", "t")])).allow_schema("anything") is True


def test_case_sensitive():
    bal = BlockAllowList(BAListRule(do_dbs=["Shop"]), case_sensitive=True)
    assert bal.allow_table("Shop", "t") is True
    assert bal.allow_table("shop", "t") is False


def test_custom_meta_schema_is_a_system_schema():
    bal = BlockAllowList(None, meta_schema="My_Meta")
    assert bal.allow_table("my_meta", "t") is False
    assert bal.allow_table("dm_meta", "t") is True


@pytest.mark.parametrize("rule,key", [
    (BAListRule(do_dbs=["ok", "t[1"]), "do-dbs[1]"),
    (BAListRule(do_tables=[TableRef("a", "")]), "do-tables[0]"),
    (BAListRule(ignore_tables=[TableRef("a", "~(")]), "ignore-tables[0].tbl-name"),
])
def test_bad_rules_name_the_key(rule, key):
    with pytest.raises(RuleError) as e:
        BlockAllowList(rule)
    assert e.value.key == key
