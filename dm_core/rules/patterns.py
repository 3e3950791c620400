"""DM's schema/table name patterns, compiled once, shared by every rule engine.

Two spellings, as in DM's task files:

* a wildcard: ``*`` (any run of characters, also none), ``?`` (exactly one character),
  ``[abc]`` / ``[a-z]`` / ``[!0-9]`` (one character of a set), ``\\x`` (a literal x).
  The whole name must match. DM's table-rule-selector (routes, filters, column mappings)
  only allows ``*`` as the last character; we accept it anywhere, a superset.
* ``~`` followed by a Go (RE2) regular expression, as in block-allow-list. Like DM (Go's
  ``MatchString``) it is *not* anchored: ``~test`` matches ``mytest_1``; write ``~^test_\\d+$``.

Names compare case-insensitively unless the task sets ``case-sensitive: true``; DM lower-cases
both sides, which ``re.IGNORECASE`` does for us without touching a regular expression's escapes.

    >>> Pattern("schema_*").match("SCHEMA_01")
    True
    >>> Pattern("t_?").match("t_10")
    False
    >>> Pattern("test[12]").match("test2"), Pattern("test[!12]").match("test2")
    (True, False)
    >>> Pattern("~^shard_[0-9]+$").match("shard_7"), Pattern("~shard").match("my_shard_x")
    (True, True)
    >>> Pattern("Abc", case_sensitive=True).match("abc")
    False
"""

from __future__ import annotations

import re
from typing import Generic, Sequence, TypeVar

from dm_core.errors import ErrorCode, Terminal

R = TypeVar("R")


class RuleError(Terminal):
    """A rule that cannot be compiled; ``key`` is the rule's YAML key at fault, ``fix`` what to do."""

    code = ErrorCode.CONFIG_INVALID

    def __init__(self, key: str, reason: str, fix: str = ""):
        self.key = key
        self.reason = reason
        self.fix = fix
        super().__init__(f"{key}: {reason}" if key else reason)


# Go RE2 spells a few things differently from Python's re.
_POSIX = {"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "ascii": "\\x00-\\x7f", "blank": " \\t",
          "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~",
          "punct": "!-/:-@\\[-`{-~", "space": " \\t\\n\\r\\f\\v", "upper": "A-Z", "word": "\\w",
          "xdigit": "0-9A-Fa-f"}


def go_regex(text: str) -> str:
    """Translate the RE2 spellings Python lacks: ``\\z``, ``[[:alpha:]]`` classes.

    >>> go_regex(r"^a[[:digit:]]+\\z")
    '^a[0-9]+\\\\Z'
    """
    text = re.sub(r"\[:(\w+):\]", lambda m: _POSIX.get(m.group(1), m.group(0)), text)
    return re.sub(r"(?<!\\)((?:\\\\)*)\\z", r"\1\\Z", text)


def wildcard_regex(text: str) -> str:
    """The anchored Python regular expression of a DM wildcard."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "\\" and i + 1 < len(text):
            i += 1
            out.append(re.escape(text[i]))
        elif c == "[":
            neg = text[i + 1:i + 2] in ("!", "^")
            start = i + 1 + neg
            end = text.find("]", start + 1)       # a ']' right after '[' is a literal
            if end < 0:
                raise ValueError(f"unterminated '[' in wildcard {text!r}")
            body = "".join("\\" + ch if ch in "\\]^[" else ch for ch in text[start:end])
            out.append("[" + ("^" if neg else "") + body + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out) + r"\Z"


class Pattern:
    """One compiled name pattern."""

    __slots__ = ("text", "is_regex", "_re")

    def __init__(self, text: str, case_sensitive: bool = False):
        self.text = text
        self.is_regex = text.startswith("~")
        flags = re.DOTALL | (0 if case_sensitive else re.IGNORECASE)
        try:
            self._re = re.compile(go_regex(text[1:]) if self.is_regex else wildcard_regex(text), flags)
        except re.error as e:
            raise ValueError(f"invalid {'regular expression' if self.is_regex else 'wildcard'} {text!r}: {e}") from None

    def match(self, name: str) -> bool:
        return (self._re.search(name) if self.is_regex else self._re.match(name)) is not None

    def __repr__(self) -> str:
        return f"Pattern({self.text!r})"


def compile_pattern(text: str, key: str, case_sensitive: bool = False) -> Pattern:
    """``Pattern(text)``, failing as a RuleError on ``key``."""
    try:
        return Pattern(text, case_sensitive)
    except ValueError as e:
        raise RuleError(key, str(e), "use the wildcards *, ? and [...], or ~ followed by a regular expression") from None


class Selector(Generic[R]):
    """The rules whose (schema-pattern, table-pattern) match a table: DM's table-rule-selector.

    A rule with an empty table pattern is schema level (it applies to every table of the
    schema); the others are table level. ``match`` returns both lists, table level first
    in meaning: the engines give table-level rules priority. Two rules with the same two
    patterns are rejected, as DM's selector does. Answers are cached per (schema, table).

    >>> s = Selector([("s_*", "", "schema rule"), ("s_*", "t_*", "table rule")])
    >>> s.match("s_1", "t_2"), s.match("s_1", "x")
    ((['table rule'], ['schema rule']), ([], ['schema rule']))
    """

    def __init__(self, rules: Sequence[tuple[str, str, R]], case_sensitive: bool = False):
        self._rules: list[tuple[Pattern, Pattern | None, R]] = []
        seen: dict[tuple[str, str], int] = {}
        for i, (sp, tp, rule) in enumerate(rules):
            if not sp:
                raise RuleError("schema-pattern", "must not be empty")
            k = (sp, tp or "") if case_sensitive else (sp.lower(), (tp or "").lower())
            if k in seen:
                raise RuleError("", f"two rules have the same schema-pattern {sp!r} and table-pattern {tp or ''!r}")
            seen[k] = i
            self._rules.append((compile_pattern(sp, "schema-pattern", case_sensitive),
                                compile_pattern(tp, "table-pattern", case_sensitive) if tp else None, rule))
        self._cache: dict[tuple[str, str], tuple[list[R], list[R]]] = {}

    def match(self, schema: str, table: str) -> tuple[list[R], list[R]]:
        """(table-level rules, schema-level rules) matching ``schema``.``table``, in rule order."""
        got = self._cache.get((schema, table))
        if got is None:
            tables: list[R] = []
            schemas: list[R] = []
            for sp, tp, rule in self._rules:
                if not sp.match(schema):
                    continue
                if tp is None:
                    schemas.append(rule)
                elif tp.match(table):
                    tables.append(rule)
            got = self._cache[(schema, table)] = (tables, schemas)
        return got

    def __bool__(self) -> bool:
        return bool(self._rules)
