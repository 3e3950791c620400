"""DM's wildcards and its table-rule-selector (tidb-tools ``pkg/table-rule-selector``), byte for byte.

The one place that decides what a DM wildcard means. Names and patterns are read as UTF-8
bytes, as DM reads Go strings:

* ``*`` is any run of bytes, also none, and may only be the last character (``do*c`` is
  refused, as DM refuses it);
* ``?`` is exactly one byte: ``t?`` does not match ``té`` (``é`` is two bytes in UTF-8);
* ``[...]`` is one byte of a set: ``[abc]``, ``[a-c]``, ``[!a-c]`` (none of them); ``[!]`` is
  the character ``!``, ``[]`` matches nothing, ``[a-]`` is ``a`` or ``-``, ``[z-a]`` nothing;
  a ``[`` with no ``]`` after it is refused here (DM reads it as the character ``[``; write
  ``[[]``, the set of ``[``, for that);
* every other byte stands for itself, ``\\`` included: there are no escapes.

``TrieSelector`` keeps rules under (schema pattern, table pattern) and answers in DM's order:
every schema-level rule before any table-level one; within a level, at each byte of the
name ``*`` comes first, then ``?``, then the sets in the order first written, then the byte
itself, and a pattern that ends where the name ends comes before that pattern with ``*``.
The binlog filter takes the first Ignore or Error, so this order decides between the two.

    >>> s = TrieSelector()
    >>> for sp, tp in [("ab*", ""), ("a?c", ""), ("abc", ""), ("abc", "t*"), ("*", "")]:
    ...     _ = s.insert(sp, tp, f"{sp}/{tp}")
    >>> s.match("abc", "t1")
    (['*/', 'a?c/', 'ab*/', 'abc/'], ['abc/t*'])
    >>> wildcard_tokens("do*c")
    Traceback (most recent call last):
    ...
    ValueError: `*` may only be the last character of a pattern (DM's wildcards): 'do*c'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Generic, TypeVar

R = TypeVar("R")

STAR, ANY = "*", "?"
_STAR, _ANY, _OPEN, _CLOSE, _NOT, _DASH = 0x2A, 0x3F, 0x5B, 0x5D, 0x21, 0x2D


@dataclass(frozen=True)
class ByteSet:
    """``[...]``: ``negated`` and inclusive byte ``spans``."""

    negated: bool
    spans: tuple[tuple[int, int], ...]

    def has(self, b: int) -> bool:
        return any(lo <= b <= hi for lo, hi in self.spans) != self.negated

    def _within(self, other: "ByteSet") -> bool:
        return all(any(lo2 <= lo and hi <= hi2 for lo2, hi2 in other.spans) for lo, hi in self.spans)

    def same(self, other: "ByteSet") -> bool:
        """DM's notion of one set: equal negation, and each span inside one of the other's."""
        return self.negated == other.negated and self._within(other) and other._within(self)


def go_lower(text: str) -> str:
    """Go's ``strings.ToLower``: one character for one (Python's ``'İ'.lower()`` gives two)."""
    return "".join(ch.lower()[0] for ch in text)


def _byte_set(seg: bytes) -> ByteSet:
    """``seg`` is ``[`` ... ``]``, the ``]`` being the first after the ``[``."""
    end, start, negated = len(seg) - 1, 1, False
    if seg[1] == _NOT:
        start, negated = 2, True
    spans, j = [], start
    while j < end:
        if seg[j + 1] == _DASH and j + 2 < end:
            spans.append((seg[j], seg[j + 2]))
            j += 3
        else:
            spans.append((seg[j], seg[j]))
            j += 1
    if negated and not spans:       # `[!]` is the character `!`
        return ByteSet(False, ((_NOT, _NOT),))
    return ByteSet(negated, tuple(spans))


def wildcard_tokens(pattern: str) -> list:
    """A pattern as tokens: STAR, ANY, a ByteSet, or a literal byte (int); ValueError when DM
    would not take it (or, for an unclosed ``[``, when we do not)."""
    raw, out, i = pattern.encode("utf-8"), [], 0
    while i < len(raw):
        if out and out[-1] is STAR:
            raise ValueError(f"`*` may only be the last character of a pattern (DM's wildcards): {pattern!r}")
        b = raw[i]
        if b == _STAR:
            out.append(STAR)
        elif b == _ANY:
            out.append(ANY)
        elif b == _OPEN:
            end = raw.find(b"]", i + 1)
            if end < 0:
                raise ValueError(f"`[` without a closing `]` in {pattern!r}: write `[[]` for the character `[`")
            out.append(_byte_set(raw[i:end + 1]))
            i = end
        else:
            out.append(b)
        i += 1
    return out


class _Item:
    __slots__ = ("child", "rules", "tables")

    def __init__(self):
        self.child = _Node()
        self.rules: list = []
        self.tables: _Node | None = None     # the table-level trie under a schema pattern


class _Node:
    __slots__ = ("bytes", "star", "any", "sets")

    def __init__(self):
        self.bytes: dict[int, _Item] = {}
        self.star: _Item | None = None
        self.any: _Item | None = None
        self.sets: list[tuple[ByteSet, _Item]] = []

    def step(self, tok) -> _Item:
        """The item of ``tok`` under this node, made when new."""
        if tok is STAR:
            self.star = self.star or _Item()
            return self.star
        if tok is ANY:
            self.any = self.any or _Item()
            return self.any
        if isinstance(tok, ByteSet):
            for s, item in self.sets:
                if s.same(tok):
                    return item
            self.sets.append((tok, _Item()))
            return self.sets[-1][1]
        return self.bytes.setdefault(tok, _Item())


def _place(root: _Node, pattern: str) -> _Item:
    node, item = root, None
    for tok in wildcard_tokens(pattern):
        item = node.step(tok)
        node = item.child
    return item


def _walk(node: _Node, name: bytes, found: list[_Item]) -> None:
    """DM's matchNode: the items whose pattern matches ``name``, in DM's order."""
    item = None
    last = len(name) - 1
    for i, b in enumerate(name):
        if node.star:
            found.append(node.star)
        if node.any:
            if i == last:
                found.append(node.any)
            _walk(node.any.child, name[i + 1:], found)
        for s, it in node.sets:
            if s.has(b):
                if i == last:
                    found.append(it)
                _walk(it.child, name[i + 1:], found)
        item = node.bytes.get(b)
        if item is None:
            return
        node = item.child
    if item is not None:
        found.append(item)
    if node.star:
        found.append(node.star)


class TrieSelector(Generic[R]):
    """Rules under (schema pattern, table pattern); an empty table pattern is schema level.
    Patterns and names are taken as given: the caller folds case."""

    def __init__(self):
        self._root = _Node()
        self.has_rules = False

    def insert(self, schema: str, table: str, rule: R) -> bool:
        """Add ``rule``; False (nothing added) when a rule sits under the same patterns already.
        ValueError for a pattern DM refuses."""
        if not schema:
            raise ValueError("the schema pattern must not be empty")
        item = _place(self._root, schema)
        if table:
            item.tables = item.tables or _Node()
            item = _place(item.tables, table)
        if item.rules:
            return False
        item.rules.append(rule)
        self.has_rules = True
        return True

    def match(self, schema: str, table: str) -> tuple[list[R], list[R]]:
        """(schema-level rules, table-level rules) matching ``schema``.``table``, in DM's order."""
        items: list[_Item] = []
        _walk(self._root, schema.encode("utf-8"), items)
        schemas = [r for it in items for r in it.rules]
        tables: list[R] = []
        name = table.encode("utf-8")
        for it in items:
            if it.tables is not None:
                found: list[_Item] = []
                _walk(it.tables, name, found)
                tables += [r for f in found for r in f.rules]
        return schemas, tables


def wildcard_bytes_regex(pattern: str) -> bytes:
    """The anchored bytes regular expression of one DM wildcard (same meaning as the trie's).

    >>> wildcard_bytes_regex("t[!0-9]?*")
    b'(?s:t[^\\\\x30-\\\\x39].(?:.*))\\\\Z'
    """
    out = []
    for tok in wildcard_tokens(pattern):
        if tok is STAR:
            out.append(b"(?:.*)")
        elif tok is ANY:
            out.append(b".")
        elif isinstance(tok, ByteSet):
            spans = b"".join(b"\\x%02x-\\x%02x" % (lo, hi) for lo, hi in tok.spans if lo <= hi)
            out.append((b"[^" + spans + b"]" if spans else b".") if tok.negated else
                       (b"[" + spans + b"]" if spans else b"(?!)"))
        else:
            out.append(re.escape(bytes([tok])))
    return b"(?s:" + b"".join(out) + b")\\Z"
