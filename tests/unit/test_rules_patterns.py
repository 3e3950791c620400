"""DM name patterns (wildcards, ~regexps) and the shared selector (the modules' doctests run
with `make test`: pytest --doctest-modules dm_core)."""

import pytest

from dm_core.rules.patterns import Pattern, RuleError, Selector, go_regex


# pattern, name, case_sensitive, matches
CASES = [
    ("test_*", "test_1", False, True),
    ("test_*", "test_", False, True),
    ("test_*", "test", False, False),
    ("test_*", "TEST_1", False, True),
    ("test_*", "TEST_1", True, False),
    ("t?", "t1", False, True),
    ("t?", "t", False, False),
    ("t?", "t12", False, False),
    ("test[123]", "test2", False, True),
    ("test[123]", "test4", False, False),
    ("t[1-5]", "t5", False, True),
    ("t[!1-5]", "t5", False, False),
    ("t[!1-5]", "t6", False, True),
    ("a.b", "a.b", False, True),
    ("a.b", "axb", False, False),           # '.' is literal in a wildcard
    (r"a\*", "a*", False, False),           # DM has no escapes: `a\*` is `a`, a backslash, then anything
    (r"a\*", "a\\x", False, True),
    (r"a\*", "ab", False, False),
    ("~^test_[0-9]+$", "test_12", False, True),
    ("~^test_[0-9]+$", "test_1a", False, False),
    ("~test", "my_test_db", False, True),   # DM does not anchor regular expressions
    ("~^TEST", "test_1", False, True),
    ("~^TEST", "test_1", True, False),
    ("~^a[[:digit:]]\\z", "a7", False, True),
    ("~^a[[:digit:]]\\z", "a7x", False, False),
]


@pytest.mark.parametrize("pattern,name,cs,expected", CASES)
def test_pattern(pattern, name, cs, expected):
    assert Pattern(pattern, case_sensitive=cs).match(name) is expected


@pytest.mark.parametrize("bad", ["t[12", "~(unclosed", "~a{2,1}", "a*z"])     # DM: `*` only last
def test_invalid_patterns_raise(bad):
    with pytest.raises(ValueError):
        Pattern(bad)


def test_go_regex_translation():
    assert go_regex(r"x\z") == r"x\Z"
    assert go_regex(r"x\\z") == r"x\\z"      # an escaped backslash then a literal z
    assert go_regex("[[:upper:]]") == "[A-Z]"


def test_selector_levels_and_cache():
    sel = Selector([("s_*", "", "schema"), ("s_*", "t_*", "table"), ("s_1", "t_1", "exact")])
    assert sel.match("s_1", "t_1") == (["table", "exact"], ["schema"])
    assert sel.match("s_2", "x") == ([], ["schema"])
    assert sel.match("x", "t_1") == ([], [])
    assert sel.match("s_1", "t_1") is sel.match("s_1", "t_1")     # cached


def test_selector_rejects_duplicate_patterns_case_insensitively():
    with pytest.raises(RuleError, match="same schema-pattern"):
        Selector([("s_*", "t", 1), ("S_*", "T", 2)])
    Selector([("s_*", "t", 1), ("S_*", "T", 2)], case_sensitive=True)


def test_selector_requires_schema_pattern():
    with pytest.raises(RuleError) as e:
        Selector([("", "t", 1)])
    assert e.value.key == "schema-pattern"
