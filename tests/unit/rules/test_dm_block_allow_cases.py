"""tidb's pkg/util/filter (filter_test.go, DM's block & allow lists), its data as our own
table-driven test: rules, the tables offered, the tables kept.

DM's ``ApplyOn`` (case-insensitive cases) hands the kept tables back lower-cased; ``Apply`` as
given. Both keep the same tables, which is what is compared here. A table named "" is a
schema-only question (CREATE DATABASE).
"""

import pytest

from dm_core.rules.block_allow import BAListRule, BlockAllowList, TableRef
from dm_core.rules.patterns import RuleError


def T(schema, table):
    return (schema, table)


# rule, case_sensitive, offered, kept
CASES = [
    (BAListRule(), False, [T("foo", "bar"), T("foo", "")], [T("foo", "bar"), T("foo", "")]),
    (BAListRule(ignore_dbs=["foo"], do_dbs=["foo"]), False,
     [T("foo", "bar"), T("foo", ""), T("foo1", "bar"), T("foo1", "")], [T("foo", "bar"), T("foo", "")]),
    (BAListRule(ignore_dbs=["foo1"]), False,
     [T("foo", "bar"), T("foo", ""), T("foo1", "bar"), T("foo1", "")], [T("foo", "bar"), T("foo", "")]),
    (BAListRule(do_tables=[TableRef("foo", "bar1")]), False,
     [T("foo", "bar"), T("foo", "bar1"), T("foo", ""), T("fff", "bar1")], [T("foo", "bar1"), T("foo", "")]),
    (BAListRule(ignore_tables=[TableRef("foo", "bar")]), False,
     [T("foo", "bar"), T("foo", "bar1"), T("foo", ""), T("fff", "bar1")],
     [T("foo", "bar1"), T("foo", ""), T("fff", "bar1")]),
    (BAListRule(do_dbs=["~^foo"], ignore_tables=[TableRef("~^foo", "~^sbtest-\\d")]), False,
     [T("foo", "sbtest"), T("foo1", "sbtest-1"), T("foo2", ""), T("fff", "bar")], [T("foo", "sbtest"), T("foo2", "")]),
    (BAListRule(ignore_dbs=["foo[bar]", "foo?", "special\\"]), False,
     [T("foor", "a"), T("foo[bar]", "b"), T("fo", "c"), T("foo?", "d"), T("special\\", "e")],
     [T("foo[bar]", "b"), T("fo", "c")]),
    (BAListRule(ignore_dbs=["~^FOO"], ignore_tables=[TableRef("~.*", "~FoO$")]), False,
     [T("FOO1", "a"), T("foo2", "b"), T("BoO3", "cFoO"), T("Foo4", "dfoo"), T("5", "5")], [T("5", "5")]),
    (BAListRule(ignore_dbs=["~^FOO"], ignore_tables=[TableRef("~.*", "~FoO$")]), True,
     [T("FOO1", "a"), T("foo2", "b"), T("BoO3", "cFoo"), T("Foo4", "dfoo"), T("5", "5")],
     [T("foo2", "b"), T("BoO3", "cFoo"), T("Foo4", "dfoo"), T("5", "5")]),
    (BAListRule(ignore_tables=[TableRef("a?b?", "~f[0-9]")]), False,
     [T("abbd", "f1"), T("aaaa", "f2"), T("5", "5"), T("abbc", "fa")], [T("aaaa", "f2"), T("5", "5"), T("abbc", "fa")]),
    (BAListRule(ignore_tables=[TableRef("~t[0-8]", "a??")]), False,
     [T("t1", "a01"), T("t9", "a02"), T("5", "5"), T("t9", "a001")], [T("t9", "a02"), T("5", "5"), T("t9", "a001")]),
    (BAListRule(ignore_tables=[TableRef("a*", "A*")]), True,
     [T("aB", "Ab"), T("AaB", "aab"), T("acB", "Afb")], [T("AaB", "aab")]),
    (BAListRule(ignore_tables=[TableRef("a*", "A*")]), False,
     [T("aB", "Ab"), T("AaB", "aab"), T("acB", "Afb")], []),
    # TestCaseSensitiveApply: the same with names in other cases
    (BAListRule(ignore_tables=[TableRef("Foo", "bAr")]), False,
     [T("foo", "bar"), T("foo", "bar1"), T("foo", ""), T("fff", "bar1")],
     [T("foo", "bar1"), T("foo", ""), T("fff", "bar1")]),
    (BAListRule(ignore_dbs=["foo[bar]", "foo?", "special\\"]), False,
     [T("foor", "a"), T("foo[bar]", "b"), T("Fo", "c"), T("foo?", "d"), T("special\\", "e")],
     [T("foo[bar]", "b"), T("Fo", "c")]),
    (BAListRule(ignore_tables=[TableRef("a?b?", "~f[0-9]")]), False,
     [T("abBd", "f1"), T("aAAa", "f2"), T("5", "5"), T("abbc", "FA")], [T("aAAa", "f2"), T("5", "5"), T("abbc", "FA")]),
    (BAListRule(ignore_tables=[TableRef("~t[0-8]", "A??")]), False,
     [T("t1", "a01"), T("t9", "A02"), T("5", "5"), T("T9", "a001")], [T("t9", "A02"), T("5", "5"), T("T9", "a001")]),
    # TestMaxBox: a schema-only question passes the table level
    (BAListRule(do_tables=[TableRef("test1", "t1")], ignore_tables=[TableRef("test1", "t2")]), False,
     [T("test1", "")], [T("test1", "")]),
    # TestCaseSensitive
    (BAListRule(ignore_dbs=["~^FOO"], ignore_tables=[TableRef("~.*", "~FoO$")]), True,
     [T("FOO1", "a"), T("foo2", "b"), T("BoO3", "cFoO"), T("Foo4", "dfoo"), T("5", "5"), T("FOO", "a")],
     [T("foo2", "b"), T("Foo4", "dfoo"), T("5", "5")]),
    (BAListRule(do_dbs=["BAR"]), False, [T("bar", "a"), T("BAR", "a")], [T("bar", "a"), T("BAR", "a")]),
    # TestMatchReturnsBool
    (BAListRule(do_dbs=["sns"]), True, [T("sns", ""), T("other", "")], [T("sns", "")]),
    (None, True, [T("other", "")], [T("other", "")]),
]


@pytest.mark.parametrize("rule,cs,offered,kept", CASES)
def test_filter(rule, cs, offered, kept):
    ba = BlockAllowList(rule, cs)
    assert [t for t in offered if ba.allow_table(*t)] == kept


@pytest.mark.parametrize("pattern", ["~^t[0-9]+((?!_copy).)*$", "~^t[0-9]+sp(?=copy).*"])
def test_go_refuses_lookaround(pattern):
    """TestInvalidRegex: Go's RE2 has no lookaround, so DM refuses these; Python would take them."""
    with pytest.raises(RuleError) as e:
        BlockAllowList(BAListRule(do_dbs=[pattern]), case_sensitive=True)
    assert e.value.key == "do-dbs[0]" and pattern in e.value.reason


@pytest.mark.parametrize("pattern,why", [
    ("~(a)\\1", "backreference"), ("~(?>a)", "atomic group"), ("~a*+", "nested repetition"),
    ("~a\\Z", "\\Z"), ("~(?<=a)b", "lookbehind"), ("~(?P<x>a)(?P=x)", "backreference"),
])
def test_other_syntax_go_refuses(pattern, why):
    with pytest.raises(RuleError, match="ignore-tables\\[0\\].tbl-name") as e:
        BlockAllowList(BAListRule(ignore_tables=[TableRef("db", pattern)]), case_sensitive=True)
    assert why in e.value.reason


def test_z_upper_passes_when_dm_lower_cases_it():
    """With case-sensitive false DM compiles the lower-cased pattern: `\\Z` is read as `\\z`."""
    ba = BlockAllowList(BAListRule(do_dbs=["~^shop\\Z"]))
    assert ba.allow_table("shop", "t") and not ba.allow_table("shops", "t")


@pytest.mark.parametrize("rule", [BAListRule(do_dbs=["a*b"]), BAListRule(ignore_tables=[TableRef("db", "t*x")])])
def test_star_in_the_middle_is_refused(rule):
    with pytest.raises(RuleError, match="last character"):
        BlockAllowList(rule)


@pytest.mark.parametrize("schema,moved", [("mysql", False), ("s1", False), ("s2", True)])
def test_syncer_skip_by_table(schema, moved):
    """dm/syncer filter_test.go TestSkipByTable: system schemas, then the list."""
    assert BlockAllowList(BAListRule(ignore_dbs=["s1"])).allow_table(schema, "test") is moved
