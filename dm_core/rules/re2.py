"""Go's regular expressions (RE2: what DM compiles with ``regexp.Compile``) read by Python's ``re``.

DM compiles every regular expression of a task file with Go: block-allow-list and route
patterns after ``~``, route extractors, binlog filter ``sql-pattern``, online DDL table rules.
Python's ``re`` accepts more (lookaround, backreferences, atomic groups, possessive
quantifiers) and spells a few things differently, so a pattern is read here the way Go reads
it: ``to_python`` gives the Python spelling of a Go pattern, or raises ``Re2Error`` naming the
first construct Go refuses (``unsupported=False``), or one Go accepts that this translation
does not read (``unsupported=True``: ``\\p{Greek}``, ``(?U)``, flags in mid-pattern).

What changes on the way: ``\\d \\w \\s \\b`` are ASCII-only in Go (``[0-9]``, ...); ``$``
without the ``m`` flag is the end of the text (``\\z``), not "before a final newline";
``\\z``, octal ``\\123``, ``\\x{10FFFF}``, ``\\Q...\\E``, ``[[:alpha:]]`` and ``(?<name>...)``
get Python's spellings; ``{,n}`` is literal text in Go.

    >>> to_python(r"^t_\\d+$")
    '^t_[0-9]+\\\\Z'
    >>> to_python(r"^t[0-9]+((?!_copy).)*$")
    Traceback (most recent call last):
    ...
    dm_core.rules.re2.Re2Error: lookahead `(?!` at offset 9: Go's regular expressions (RE2) have no lookaround
"""

from __future__ import annotations

import re

MAX_REPEAT = 1000           # Go: "invalid repeat count" beyond it

_ASCII = {"d": "0-9", "s": "\\t\\n\\f\\r ", "w": "0-9A-Za-z_"}
_POSIX = {"alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ",
          "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~",
          "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_",
          "xdigit": "0-9A-Fa-f"}
_WORD = "[0-9A-Za-z_]"
_BOUNDARY = f"(?:(?<={_WORD})(?!{_WORD})|(?<!{_WORD})(?={_WORD}))"
_NOT_BOUNDARY = f"(?:(?<={_WORD})(?={_WORD})|(?<!{_WORD})(?!{_WORD}))"
_GROUP_NAME = re.compile(r"[A-Za-z0-9_]+")
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_PERL_GROUPS = (("(?=", "lookahead"), ("(?!", "lookahead"), ("(?<=", "lookbehind"), ("(?<!", "lookbehind"),
                ("(?>", "atomic group"), ("(?#", "comment group"), ("(?(", "conditional group"),
                ("(?P=", "named backreference"), ("(?P>", "recursion"), ("(?R", "recursion"), ("(?|", "branch reset"))
_WHY = {"lookahead": "Go's regular expressions (RE2) have no lookaround",
        "lookbehind": "Go's regular expressions (RE2) have no lookaround",
        "named backreference": "Go's regular expressions (RE2) have no backreferences"}


class Re2Error(ValueError):
    """A pattern Go's regexp refuses (``unsupported`` False) or that this module cannot read."""

    def __init__(self, message: str, unsupported: bool = False):
        super().__init__(message)
        self.unsupported = unsupported


def _refused(what: str, at: int, why: str = "") -> Re2Error:
    return Re2Error(f"{what} at offset {at}: {why or 'not valid in Go regular expressions (RE2)'}")


def _unsupported(what: str, at: int) -> Re2Error:
    return Re2Error(f"{what} at offset {at}: valid in Go (DM accepts it) but shardflow cannot read it; "
                    "rewrite it without that construct", unsupported=True)


class _Reader:
    """One pass over a Go pattern, writing its Python spelling."""

    def __init__(self, text: str):
        self.t, self.i, self.out = text, 0, []
        self.depth = 0
        self.last = "none"            # none | atom | repeat: what a repetition operator would apply to
        self.multiline = bool(re.search(r"\(\?[imsU]*m", text))

    def run(self) -> str:
        t = self.t
        while self.i < len(t):
            c = t[self.i]
            if c == "\\":
                self._escape()
            elif c == "[":
                self._class()
            elif c == "(":
                self._open()
            elif c == ")":
                if self.depth == 0:
                    raise _refused("unexpected `)`", self.i)
                self.depth -= 1
                self._emit(")", "atom", 1)
            elif c in "*+?":
                self._repeat(c, 1)
            elif c == "{":
                m = _REPEAT.match(t, self.i)
                if m:
                    lo, hi = int(m.group(1)), m.group(3)
                    if lo > MAX_REPEAT or (hi and (int(hi) > MAX_REPEAT or int(hi) < lo)):
                        raise _refused(f"repeat count `{m.group(0)}`", self.i, f"Go allows counts up to {MAX_REPEAT}, "
                                       "the second not below the first")
                    self._repeat(m.group(0), len(m.group(0)))
                else:
                    self._emit("\\{", "atom", 1)      # `{,n}` and other forms are plain text in Go
            elif c == "|":
                self._emit("|", "none", 1)
            elif c == "$":
                self._emit("$" if self.multiline else "\\Z", "atom", 1)
            elif c in "^.":
                self._emit(c, "atom", 1)
            else:
                self._emit(c, "atom", 1)
        if self.depth:
            raise _refused("missing closing `)`", len(t))
        return "".join(self.out)

    def _emit(self, text: str, last: str, n: int) -> None:
        self.out.append(text)
        self.last = last
        self.i += n

    def _repeat(self, op: str, n: int) -> None:
        at = self.i
        if self.last == "repeat":
            raise _refused(f"nested repetition operator `{op}`", at,
                           "Go refuses stacked repetition (`a**`) and possessive quantifiers (`a*+`)")
        if self.last == "none":
            raise _refused(f"missing argument to repetition operator `{op}`", at)
        self.i += n
        if self.t[self.i:self.i + 1] == "?":       # non-greedy
            op += "?"
            self.i += 1
        self.out.append(op)
        self.last = "repeat"

    # ---- groups ---------------------------------------------------------------------------
    def _open(self) -> None:
        t, at = self.t, self.i
        if not t.startswith("(?", at):
            self.depth += 1
            return self._emit("(", "none", 1)
        for prefix, what in _PERL_GROUPS:
            if t.startswith(prefix, at):
                raise _refused(f"{what} `{prefix}`", at, _WHY.get(what, ""))
        for prefix in ("(?P<", "(?<"):
            if t.startswith(prefix, at):
                m = _GROUP_NAME.match(t, at + len(prefix))
                if not m or t[m.end():m.end() + 1] != ">":
                    raise _refused("invalid named capture", at)
                self.depth += 1
                return self._emit(f"(?P<{m.group(0)}>", "none", m.end() + 1 - at)
        m = re.compile(r"\(\?([imsU]*)(?:-([imsU]*))?([:)])").match(t, at)
        if not m or (m.group(2) is not None and not m.group(2)) or not (m.group(1) or m.group(2)) and m.group(3) == ")":
            raise _refused(f"group `{t[at:at + 4]}`", at, "Go knows (?:...), (?P<name>...) and the flags i, m, s, U")
        if "U" in m.group(0):
            raise _unsupported("the ungreedy flag `U`", at)
        if m.group(3) == ":":
            self.depth += 1
            return self._emit(m.group(0), "none", len(m.group(0)))
        if at != 0 or m.group(2) is not None:
            raise _unsupported(f"flags `{m.group(0)}` in mid-pattern", at)
        self._emit(m.group(0), "none", len(m.group(0)))

    # ---- escapes --------------------------------------------------------------------------
    def _escape(self) -> None:
        at = self.i
        if at + 1 >= len(self.t):
            raise _refused("trailing backslash", at)
        c = self.t[at + 1]
        if c == "Q":
            end = self.t.find("\\E", at + 2)
            end = len(self.t) if end < 0 else end
            lit = self.t[at + 2:end]
            self.out.append("".join(re.escape(ch) for ch in lit))
            self.last = "atom" if lit else self.last
            self.i = min(len(self.t), end + 2)
            return
        word = {"A": ("\\A", "atom"), "z": ("\\Z", "atom"), "b": (_BOUNDARY, "atom"), "B": (_NOT_BOUNDARY, "atom")}
        if c in word:
            text, last = word[c]
            return self._emit(text, last, 2)
        if c.lower() in _ASCII:
            body = _ASCII[c.lower()]
            return self._emit(f"[{'^' if c.isupper() else ''}{body}]", "atom", 2)
        if c in "pP":
            raise _unsupported(f"Unicode class `\\{c}`", at)
        text, n = self._char_escape(at)
        self._emit(text, "atom", n)

    def _char_escape(self, at: int) -> tuple[str, int]:
        """One escaped character (outside or inside a class): its Python text and length."""
        t = self.t
        c = t[at + 1]
        if c in "01234567":
            m = re.compile(r"[0-7]{1,3}").match(t, at + 1)
            digits = m.group(0)
            if c != "0" and len(digits) == 1:
                raise _refused(f"backreference `\\{c}`", at, "Go's regular expressions (RE2) have no backreferences")
            return _char(int(digits, 8)), 1 + len(digits)
        if c in "89":
            raise _refused(f"backreference `\\{c}`", at, "Go's regular expressions (RE2) have no backreferences")
        if c == "x":
            m = re.compile(r"x(?:\{([0-9A-Fa-f]+)\}|([0-9A-Fa-f]{2}))").match(t, at + 1)
            if not m or int(m.group(1) or m.group(2), 16) > 0x10FFFF:
                raise _refused("hexadecimal escape", at, "write \\xHH or \\x{HHHH}")
            return _char(int(m.group(1) or m.group(2), 16)), 1 + len(m.group(0))
        if c in "aftnrv":
            return "\\" + c, 2
        if c.isascii() and not c.isalnum():
            return re.escape(c), 2
        hint = {"Z": "Go has no \\Z: write \\z (end of text)", "G": "Go has no \\G", "K": "Go has no \\K"}
        raise _refused(f"escape `\\{c}`", at, hint.get(c, "not a Go escape sequence"))

    # ---- character classes ------------------------------------------------------------------
    def _class(self) -> None:
        t, at = self.t, self.i
        i = at + 1
        out = ["["]
        if t[i:i + 1] == "^":
            out.append("^")
            i += 1
        first = True
        while True:
            if i >= len(t):
                raise _refused("missing closing `]`", at)
            c = t[i]
            if c == "]" and not first:
                break
            first = False
            if t.startswith("[:", i):
                end = t.find(":]", i + 2)
                name = t[i + 2:end] if end > 0 else ""
                neg = name.startswith("^")
                if end < 0 or name.lstrip("^") not in _POSIX:
                    if end > 0:
                        raise _refused(f"character class `[:{name}:]`", i)
                elif neg:
                    raise _unsupported(f"negated class `[:{name}:]`", i)
                else:
                    out.append(_POSIX[name])
                    i = end + 2
                    continue
            if c == "\\":
                if i + 1 >= len(t):
                    raise _refused("trailing backslash", i)
                e = t[i + 1]
                if e in _ASCII:
                    out.append(_ASCII[e])
                    i += 2
                    continue
                if e in "DSW":
                    out.append("\\" + e)
                    i += 2
                    continue
                if e in "pP":
                    raise _unsupported(f"Unicode class `\\{e}`", i)
                save, self.i = self.i, i
                try:
                    text, n = self._char_escape(i)
                finally:
                    self.i = save
                out.append(text)
                i += n
                continue
            out.append(re.escape(c) if c in "[]&~|" else c)
            i += 1
        out.append("]")
        self._emit("".join(out), "atom", i + 1 - at)


def _char(code: int) -> str:
    return re.escape(chr(code))


def to_python(text: str) -> str:
    """The Python ``re`` spelling of the Go pattern ``text``; Re2Error when Go refuses it or
    this module cannot read it.

    >>> to_python(r"\\Qa.b\\E[[:digit:]]{2}\\x{41}\\101")
    'a\\\\.b[0-9]{2}AA'
    >>> to_python(r"a{,3}(?<n>b)")
    'a\\\\{,3}(?P<n>b)'
    """
    return _Reader(text).run()


def compile_go(text: str, flags: int = 0) -> re.Pattern:
    """``re.compile`` of a Go pattern; Re2Error (a ValueError) names what Go refuses."""
    py = to_python(text)
    try:
        return re.compile(py, flags)
    except re.error as e:
        raise Re2Error(f"not readable here: {e}", unsupported=True) from None


# escapes whose meaning changes when DM lower-cases a whole pattern (case-sensitive: false)
_LOWERED = {"D": "\\d", "W": "\\w", "S": "\\s", "B": "\\b", "A": "\\a (the BEL character)", "P": "\\p"}


def lowered_changes(text: str) -> list[str]:
    """What DM's lower-casing of ``text`` turns into something else (``\\D`` becomes ``\\d``).

    >>> lowered_changes(r"^\\D+_\\d$")
    ['\\\\D becomes \\\\d']
    """
    out = []
    for m in re.finditer(r"\\(.)", text):
        c = m.group(1)
        if c in _LOWERED and f"\\{c} becomes {_LOWERED[c]}" not in out:
            out.append(f"\\{c} becomes {_LOWERED[c]}")
    return out
