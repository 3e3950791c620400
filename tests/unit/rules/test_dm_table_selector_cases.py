"""tidb-tools pkg/table-rule-selector (selector_test.go), its data as our own table-driven test:
the trie's patterns, what each (schema, table) matches, the patterns it refuses.

DM's test sorts the matched rules before comparing; ``ORDERED`` adds the order DM's trie gives
(read off its matchNode), which the binlog filter depends on.
"""

import pytest

from dm_core.rules.patterns import Selector
from dm_core.rules.trie import TrieSelector

# schema pattern -> its table patterns ("" is the schema-level rule)
TABLES = {
    "t*": ["test*"],
    "schema*": ["", "test*", "abc*", "xyz"],
    "?bc": ["t1_abc", "t1_ab?", "abc*"],
    "a?c": ["t2_abc", "t2_ab*", "a?b"],
    "ab?": ["t3_ab?", "t3_ab*", "ab?"],
    "ab*": ["t4_abc", "t4_abc*", "ab*"],
    "abc": ["abc"],
    "abd": ["abc"],
    "ik[hjkl]": ["ik[!zxc]"],
    "ik[f-h]": ["ik[!a-ce-g]"],
    "i[x-z][1-3]": ["i?[x-z]", "ix*"],
    "[!]": ["[a-]", "[a-c-f]"],         # `!` alone; `a` or `-`; a to c, `-` or `f`
    "[!a-c!f-g]": ["*"],                # none of a-c, `!`, f-g
    "[]*": ["*"],                       # `[]` matches nothing
}

# schema, table, the (schema pattern, table pattern) pairs it matches
MATCHES = [
    ("dbc", "t1_abc", [("?bc", "t1_ab?"), ("?bc", "t1_abc")]),
    ("adc", "t2_abc", [("a?c", "t2_ab*"), ("a?c", "t2_abc")]),
    ("abd", "t3_abc", [("ab?", "t3_ab*"), ("ab?", "t3_ab?")]),
    ("abc", "t4_abc", [("ab*", "t4_abc"), ("ab*", "t4_abc*")]),
    ("abc", "abc", [("?bc", "abc*"), ("ab*", "ab*"), ("ab?", "ab?"), ("abc", "abc")]),
    ("schema1", "xxx", [("schema*", "")]),
    ("schema1", "", [("schema*", "")]),
    ("schema1", "test1", [("schema*", ""), ("schema*", "test*")]),
    ("t1", "test1", [("t*", "test*")]),
    ("schema1", "abc1", [("schema*", ""), ("schema*", "abc*")]),
    ("ikj", "ikb", [("ik[hjkl]", "ik[!zxc]")]),
    ("ikh", "iky", [("ik[hjkl]", "ik[!zxc]"), ("ik[f-h]", "ik[!a-ce-g]")]),
    ("iz3", "ixz", [("i[x-z][1-3]", "i?[x-z]"), ("i[x-z][1-3]", "ix*")]),
    ("!", "-", [("[!]", "[a-]"), ("[!]", "[a-c-f]")]),
    ("!", "c", [("[!]", "[a-c-f]")]),
    ("d", "zxcv", [("[!a-c!f-g]", "*")]),
    # DM's "not matched" cases
    ("t1", "", []),
    ("t1", "abc", []),
    ("xxx", "abc", []),
]

# our own: DM's order for the cases above where more than one rule matches
ORDERED = [
    ("abc", "abc", [("?bc", "abc*"), ("ab*", "ab*"), ("ab?", "ab?"), ("abc", "abc")]),
    ("dbc", "t1_abc", [("?bc", "t1_ab?"), ("?bc", "t1_abc")]),
    ("abc", "t4_abc", [("ab*", "t4_abc"), ("ab*", "t4_abc*")]),
    ("schema1", "test1", [("schema*", ""), ("schema*", "test*")]),     # schema level first
]


def _selector() -> TrieSelector:
    s = TrieSelector()
    for schema, tables in TABLES.items():
        for table in tables:
            assert s.insert(schema, table, (schema, table))
    return s


@pytest.mark.parametrize("schema,table,expected", MATCHES)
def test_match(schema, table, expected):
    got = _selector().match(schema, table)
    assert sorted(got[0] + got[1]) == sorted(expected)


@pytest.mark.parametrize("schema,table,expected", ORDERED)
def test_match_order(schema, table, expected):
    schemas, tables = _selector().match(schema, table)
    assert schemas + tables == expected


@pytest.mark.parametrize("schema,table", [(s, t) for s, ts in TABLES.items() for t in ts])
def test_same_patterns_twice_is_refused(schema, table):
    s = _selector()
    assert s.insert(schema, table, "again") is False
    with pytest.raises(Exception, match="same schema-pattern"):
        Selector([(schema, table, 1), (schema, table, 2)])


@pytest.mark.parametrize("schema,table", [("ab**", ""), ("abcd", "ab**")])
def test_star_must_be_last(schema, table):
    with pytest.raises(ValueError, match="last character"):
        TrieSelector().insert(schema, table, "error")


def test_equal_sets_are_one_pattern():
    """DM compares sets by their spans, so `[ab]` and `[ba]` are one pattern."""
    s = TrieSelector()
    assert s.insert("x[ab]", "", 1)
    assert s.insert("x[ba]", "", 2) is False


def test_empty_schema_pattern_is_refused():
    with pytest.raises(ValueError):
        TrieSelector().insert("", "t", "rule")


@pytest.mark.parametrize("pattern,name,matches", [
    ("t?", "té", False),            # `?` is one byte; é is two
    ("t??", "té", True),
    ("[!]", "!", True),
    ("[]", "]", False),
    ("a\\b", "a\\b", True),         # no escapes: a backslash is a character
    ("[z-a]", "m", False),          # an upside-down span matches nothing
])
def test_byte_semantics(pattern, name, matches):
    s = TrieSelector()
    s.insert(pattern, "", "r")
    assert (s.match(name, "")[0] == ["r"]) is matches
