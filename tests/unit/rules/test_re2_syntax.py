"""Go's regular expression syntax (RE2) as DM compiles it: what Go refuses is refused, what Go
spells differently is translated, what Go accepts and shardflow cannot read says so."""

import re

import pytest

from dm_core.rules.re2 import Re2Error, lowered_changes, to_python

# Go pattern, what Go says about it
REFUSED = [
    (r"^t(?=1)", "lookahead"), (r"^t(?!1)", "lookahead"), (r"(?<=a)b", "lookbehind"), (r"(?<!a)b", "lookbehind"),
    (r"(a)\1", "backreference"), (r"(?P<x>a)(?P=x)", "backreference"), (r"\8", "backreference"),
    (r"(?>a)", "atomic group"), (r"a*+", "nested repetition"), (r"a++", "nested repetition"),
    (r"a?+", "nested repetition"), (r"a**", "nested repetition"), (r"a{2}{3}", "nested repetition"),
    (r"a\Z", "\\Z"), (r"\G", "\\G"), (r"(?#note)", "comment"), (r"(?(1)a|b)", "conditional"),
    (r"x{1001}", "repeat count"), (r"x{3,2}", "repeat count"), (r"*a", "missing argument"),
    (r"(a", "missing closing"), (r"a)", "unexpected"), (r"[a", "missing closing"), ("a\\", "trailing backslash"),
    (r"(?x)a", "group"), (r"(?i-)a", "group"), (r"\xZZ", "hexadecimal"), (r"[[:nope:]]", "character class"),
]


@pytest.mark.parametrize("pattern,why", REFUSED)
def test_refused(pattern, why):
    with pytest.raises(Re2Error, match=re.escape(why)) as e:
        to_python(pattern)
    assert e.value.unsupported is False


@pytest.mark.parametrize("pattern", [r"\p{Han}", r"\pL", r"(?U)a+", r"a(?i)b", r"[[:^alpha:]]"])
def test_valid_in_go_but_not_read_here(pattern):
    with pytest.raises(Re2Error) as e:
        to_python(pattern)
    assert e.value.unsupported is True


# Go pattern, name, matches (Go's answer)
MEANING = [
    (r"^a\z", "a", True),
    (r"^a$", "a\n", False),             # `$` is the end of the text in Go
    (r"^\d+$", "١٢", False),            # \d is ASCII in Go
    (r"^\w+$", "表", False),
    (r"\bx\b", "é x", True),
    (r"^\Qa.b\E$", "a.b", True),
    (r"^\Qa.b\E$", "axb", False),
    (r"^\101$", "A", True),             # octal
    (r"^\x{263a}$", "☺", True),
    (r"^[[:upper:]][[:digit:]]$", "A1", True),
    (r"^a{,2}$", "a{,2}", True),        # not a repetition in Go
    (r"^(?P<n>a)(?<m>b)$", "ab", True),
    (r"^[]a]+$", "]a", True),
    (r"(?i)^abc$", "ABC", True),
    (r"^(?s:.)$", "\n", True),
]


@pytest.mark.parametrize("pattern,name,matches", MEANING)
def test_meaning(pattern, name, matches):
    assert (re.search(to_python(pattern), name) is not None) is matches


def test_lowered_changes_names_each_escape_once():
    assert lowered_changes(r"\D\D\W\d\\D") == ["\\D becomes \\d", "\\W becomes \\w"]
    assert lowered_changes(r"^[a-z]+\d$") == []
