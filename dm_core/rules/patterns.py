"""DM's schema/table name patterns, compiled once, shared by every rule engine.

Two spellings, as in DM's task files:

* a wildcard (``trie.py`` decides what one means, byte for byte as DM): ``*`` (any run, only
  as the last character), ``?`` (one byte), ``[abc]`` / ``[a-z]`` / ``[!0-9]`` (one byte of a
  set), every other character itself (no escapes). The whole name must match.
* ``~`` followed by a Go (RE2) regular expression (``re2.py``), as in block-allow-list and
  routes. Like DM (Go's ``MatchString``) it is *not* anchored: ``~test`` matches ``mytest_1``;
  write ``~^test_\\d+$``. DM's binlog filter and column mapping read ``~`` as a character;
  shardflow reads it as a regular expression there too, and check-task warns about it.

Names compare case-insensitively unless the task sets ``case-sensitive: true``. DM lower-cases
both sides; for a regular expression that also lower-cases its escapes (``\\D`` becomes
``\\d``), which shardflow does not do: ``re.IGNORECASE`` instead, and check-task warns where
the two differ (``re2.lowered_changes``).

    >>> Pattern("schema_*").match("SCHEMA_01")
    True
    >>> Pattern("t_?").match("t_10"), Pattern("t?").match("té")
    (False, False)
    >>> Pattern("test[12]").match("test2"), Pattern("test[!12]").match("test2"), Pattern("[!]").match("!")
    (True, False, True)
    >>> Pattern("~^shard_[0-9]+$").match("shard_7"), Pattern("~shard").match("my_shard_x")
    (True, True)
    >>> Pattern("Abc", case_sensitive=True).match("abc")
    False
"""

from __future__ import annotations

import re
from typing import Generic, Sequence, TypeVar

from dm_core.errors import ErrorCode, Terminal
from dm_core.rules.re2 import Re2Error, compile_go
from dm_core.rules.trie import TrieSelector, go_lower, wildcard_bytes_regex

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


class Pattern:
    """One compiled name pattern: a DM wildcard, or ``~`` and a Go regular expression."""

    __slots__ = ("text", "is_regex", "_re", "_fold")

    def __init__(self, text: str, case_sensitive: bool = False):
        self.text = text
        self.is_regex = text.startswith("~")
        self._fold = not case_sensitive
        try:
            if self.is_regex:
                self._re = _go_pattern(text[1:], case_sensitive)
            else:
                self._re = re.compile(wildcard_bytes_regex(text if case_sensitive else go_lower(text)))
        except Re2Error as e:
            raise ValueError(f"invalid regular expression {text!r}: {e}") from None
        except (ValueError, re.error) as e:
            raise ValueError(f"invalid wildcard {text!r}: {e}") from None

    def match(self, name: str) -> bool:
        if self.is_regex:
            return self._re.search(name) is not None
        return self._re.match((go_lower(name) if self._fold else name).encode("utf-8")) is not None

    def __repr__(self) -> str:
        return f"Pattern({self.text!r})"


def _go_pattern(body: str, case_sensitive: bool) -> re.Pattern:
    """A ``~`` pattern as DM compiles it: with ``case-sensitive: false`` DM lower-cases the whole
    text first, so that is what must be valid Go (``\\Z`` passes as ``\\z``, ``\\Q`` fails as ``\\q``)."""
    if case_sensitive:
        return compile_go(body)
    lowered = go_lower(body)
    compile_go(lowered)
    try:
        return compile_go(body, re.IGNORECASE)
    except Re2Error:            # valid only once lower-cased, as DM reads it
        return compile_go(lowered, re.IGNORECASE)


def compile_pattern(text: str, key: str, case_sensitive: bool = False) -> Pattern:
    """``Pattern(text)``, failing as a RuleError on ``key``."""
    try:
        return Pattern(text, case_sensitive)
    except ValueError as e:
        fix = ("rewrite it in Go's syntax (RE2: no lookaround, backreferences, atomic groups or possessive "
               "quantifiers)" if text.startswith("~") else
               "use the wildcards * (last character only), ? and [...], or ~ followed by a regular expression")
        raise RuleError(key, str(e), fix) from None


class Selector(Generic[R]):
    """The rules whose (schema-pattern, table-pattern) match a table: DM's table-rule-selector.

    A rule with an empty table pattern is schema level (it applies to every table of the
    schema); the others are table level. ``match`` returns both lists in DM's order
    (``trie.py``); rules with a ``~`` pattern (a shardflow extension outside routes) follow
    the wildcard ones of their level, in file order. Two rules under the same two patterns
    are rejected, as DM's selector does. Answers are cached per (schema, table).

    >>> s = Selector([("s_*", "", "schema rule"), ("s_*", "t_*", "table rule")])
    >>> s.match("s_1", "t_2"), s.match("s_1", "x")
    ((['table rule'], ['schema rule']), ([], ['schema rule']))
    """

    def __init__(self, rules: Sequence[tuple[str, str, R]], case_sensitive: bool = False):
        self._cs = case_sensitive
        self._trie: TrieSelector[R] = TrieSelector()
        self._regex: list[tuple[Pattern, Pattern | None, R]] = []
        seen: set[tuple[str, str]] = set()
        for sp, tp, rule in rules:
            tp = tp or ""
            if not sp:
                raise RuleError("schema-pattern", "must not be empty")
            if sp.startswith("~") or tp.startswith("~"):
                k = (sp, tp) if case_sensitive else (go_lower(sp), go_lower(tp))
                fresh = k not in seen
                seen.add(k)
                self._regex.append((compile_pattern(sp, "schema-pattern", case_sensitive),
                                    compile_pattern(tp, "table-pattern", case_sensitive) if tp else None, rule))
            else:
                for key, text in (("schema-pattern", sp), ("table-pattern", tp)):
                    compile_pattern(text, key, case_sensitive) if text else None
                fresh = self._trie.insert(self._fold(sp), self._fold(tp), rule)
            if not fresh:
                raise RuleError("", f"two rules have the same schema-pattern {sp!r} and table-pattern {tp!r}")
        self._cache: dict[tuple[str, str], tuple[list[R], list[R]]] = {}

    def _fold(self, text: str) -> str:
        return text if self._cs else go_lower(text)

    def match(self, schema: str, table: str) -> tuple[list[R], list[R]]:
        """(table-level rules, schema-level rules) matching ``schema``.``table``, each in DM's order."""
        got = self._cache.get((schema, table))
        if got is None:
            schemas, tables = self._trie.match(self._fold(schema), self._fold(table))
            for sp, tp, rule in self._regex:
                if not sp.match(schema):
                    continue
                if tp is None:
                    schemas.append(rule)
                elif tp.match(table):
                    tables.append(rule)
            got = self._cache[(schema, table)] = (tables, schemas)
        return got

    def __bool__(self) -> bool:
        return bool(self._regex) or self._trie.has_rules
