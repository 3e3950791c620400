"""Where a MySQL DDL statement names tables: token spans in its text.

Why not a parser: routing a DDL must change the table names and nothing else. Regenerating
the statement from a parse tree (sqlglot) drops or rewrites what the parser models loosely
(partition clauses, ``CONVERT TO CHARACTER SET``, generated-column expressions, options),
and sqlglot has no node at all for some statements (``RENAME TABLE``). A name, though, sits
in a few fixed places of each statement's grammar. This module tokenizes the text (quotes,
comments and executable comments understood) and finds those places; ``ddl.py`` replaces
each span with the routed, quoted name and leaves every other byte as the upstream ran it.

Roles of a span: ``table`` (the statement's subject; DROP TABLE may have several),
``ref`` (REFERENCES of a foreign key, LIKE of CREATE TABLE ... LIKE, EXCHANGE PARTITION's
WITH TABLE), ``old``/``new`` (RENAME TABLE pairs and ALTER TABLE ... RENAME TO), ``db``
(the database of CREATE/ALTER/DROP DATABASE).

    >>> [(s.role, s.schema, s.table) for s in table_spans("alter table `a`.t1 add foreign key (x) references p (id)", "d")]
    [('table', 'a', 't1'), ('ref', 'a', 'p')]
    >>> [(s.role, s.schema, s.table) for s in table_spans("RENAME TABLE t1 TO d2.t2, t3 TO t4", "d")]
    [('old', 'd', 't1'), ('new', 'd2', 't2'), ('old', 'd', 't3'), ('new', 'd', 't4')]
    >>> [(s.role, s.table) for s in table_spans("ALTER TABLE t DROP INDEX i, RENAME INDEX a TO b", "d")]
    [('table', 't')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Mode = str | None   # a session's sql_mode names ("ANSI_QUOTES,..."); None: MySQL's default reading


def _reads(mode: Mode) -> tuple[bool, bool]:
    """(double quotes name identifiers, backslash escapes in strings) under ``mode``."""
    names = {n.strip().upper() for n in (mode or "").split(",")}
    return bool(names & {"ANSI_QUOTES", "ANSI"}), "NO_BACKSLASH_ESCAPES" not in names


_WORD = re.compile(r"[0-9A-Za-z_$\u0080-\U0010ffff]+")
_EXEC_COMMENT = re.compile(r"/\*[M]?!\d*")


@dataclass(frozen=True)
class Token:
    kind: str    # "word" | "ident" (back-quoted) | "string" | "punct"
    text: str    # the identifier's name (unquoted), the word, the punctuation
    start: int
    end: int     # exclusive

    def is_kw(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words


@dataclass(frozen=True)
class Span:
    role: str
    schema: str          # the default schema filled in when the text names none
    table: str           # "" for a database span
    start: int
    end: int


def tokenize(sql: str, mode: Mode = None) -> list[Token]:
    """Tokens of ``sql`` as a session with sql_mode ``mode`` reads it (ANSI_QUOTES: ``"x"``
    names something; NO_BACKSLASH_ESCAPES: a backslash in a string is itself); comments
    dropped, executable comments' bodies kept as code.

    >>> [t.text for t in tokenize("/*!40101 ALTER */ TABLE `a``b` -- x\\n ADD c INT DEFAULT 'it''s' # y")]
    ['ALTER', 'TABLE', 'a`b', 'ADD', 'c', 'INT', 'DEFAULT', "it's"]
    >>> sql = '"t" DEFAULT ' + "'a" + chr(92) + "'"   # a backslash that ends nothing
    >>> [(t.kind, t.text) for t in tokenize(sql, "ANSI_QUOTES,NO_BACKSLASH_ESCAPES")]
    [('ident', 't'), ('word', 'DEFAULT'), ('string', 'a\\\\')]
    """
    ansi, backslash = _reads(mode)
    out: list[Token] = []
    i, n = 0, len(sql)
    in_exec = 0  # depth of /*! ... */ we are inside
    while i < n:
        ch = sql[i]
        if ch.isspace():
            i += 1
            continue
        if sql.startswith("*/", i) and in_exec:
            in_exec -= 1
            i += 2
            continue
        if sql.startswith("/*", i):
            m = _EXEC_COMMENT.match(sql, i)
            if m:
                in_exec += 1
                i = m.end()
                continue
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if ch == "#" or (sql.startswith("--", i) and (i + 2 >= n or sql[i + 2].isspace())):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if ch == "`" or (ch == '"' and ansi):
            j, buf = i + 1, []
            while j < n:
                if sql[j] == ch:
                    if sql.startswith(ch * 2, j):
                        buf.append(ch)
                        j += 2
                        continue
                    break
                buf.append(sql[j])
                j += 1
            out.append(Token("ident", "".join(buf), i, min(j + 1, n)))
            i = j + 1
            continue
        if ch in "'\"":
            j, buf = i + 1, []
            while j < n:
                c = sql[j]
                if c == "\\" and backslash and j + 1 < n:
                    buf.append(sql[j + 1])
                    j += 2
                    continue
                if c == ch:
                    if sql.startswith(ch * 2, j):
                        buf.append(ch)
                        j += 2
                        continue
                    break
                buf.append(c)
                j += 1
            out.append(Token("string", "".join(buf), i, min(j + 1, n)))
            i = j + 1
            continue
        m = _WORD.match(sql, i)
        if m:
            out.append(Token("word", m.group(0), i, m.end()))
            i = m.end()
            continue
        out.append(Token("punct", ch, i, i + 1))
        i += 1
    return out


class Cursor:
    """Reads tokens left to right: keywords and ``[schema.]name`` (DDL here, the tables a
    statement-logged row change writes in sync/statements.py)."""

    def __init__(self, toks: list[Token]):
        self.toks = toks
        self.i = 0

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def kw(self, *words: str) -> bool:
        """Consume the next token if it is one of ``words``."""
        t = self.peek()
        if t is not None and t.is_kw(*words):
            self.i += 1
            return True
        return False

    def kws(self, *words: str) -> bool:
        """Consume the sequence ``words`` if the next tokens are exactly it."""
        for k, w in enumerate(words):
            t = self.peek(k)
            if t is None or not t.is_kw(w):
                return False
        self.i += len(words)
        return True

    def name(self, role: str, default_schema: str) -> Span | None:
        """Consume ``[schema.]table`` and return its span."""
        t = self.peek()
        if t is None or t.kind not in ("word", "ident"):
            return None
        self.i += 1
        dot, second = self.peek(), self.peek(1)
        if dot is not None and dot.text == "." and dot.kind == "punct" and second is not None \
                and second.kind in ("word", "ident"):
            self.i += 2
            return Span(role, t.text, second.text, t.start, second.end)
        return Span(role, default_schema, t.text, t.start, t.end)


def table_spans(sql: str, default_schema: str | None, mode: Mode = None) -> list[Span]:
    """Every place ``sql`` names a table (or a database), in text order, read under sql_mode
    ``mode`` (see ``tokenize``); [] when the statement is not one whose names this module knows."""
    d = default_schema or ""
    toks = tokenize(sql, mode)
    c = Cursor(toks)
    if c.kw("ALTER"):
        c.kw("ONLINE", "OFFLINE")
        c.kw("IGNORE")
        if c.kw("DATABASE", "SCHEMA"):
            return _database(c)
        if not c.kw("TABLE"):
            return []
        main = c.name("table", d)
        # an unqualified foreign-key parent, exchanged table or new name is in the table's schema
        return [main] + _alter_refs(c, main.schema) if main else []
    if c.kw("CREATE"):
        c.kws("OR", "REPLACE")
        if c.kw("DATABASE", "SCHEMA"):
            c.kws("IF", "NOT", "EXISTS")
            return _database(c)
        c.kw("TEMPORARY")
        if c.kw("TABLE"):
            c.kws("IF", "NOT", "EXISTS")
            main = c.name("table", d)
            if main is None:
                return []
            out = [main]
            t, t1 = c.peek(), c.peek(1)
            if t is not None and t.text == "(" and t1 is not None and t1.is_kw("LIKE"):
                c.i += 1  # CREATE TABLE t (LIKE s)
            if c.kw("LIKE"):
                like = c.name("ref", d)
                if like:
                    out.append(like)
            return out + _refs(c, main.schema)
        c.kw("ONLINE", "OFFLINE")
        c.kw("UNIQUE", "FULLTEXT", "SPATIAL")
        if c.kw("INDEX", "KEY"):
            return _index_on(c, d)
        return []
    if c.kw("DROP"):
        if c.kw("DATABASE", "SCHEMA"):
            c.kws("IF", "EXISTS")
            return _database(c)
        if c.kw("INDEX", "KEY"):
            return _index_on(c, d)
        c.kw("TEMPORARY")
        if not c.kw("TABLE", "TABLES"):
            return []
        c.kws("IF", "EXISTS")
        out = []
        while True:
            s = c.name("table", d)
            if s is None:
                break
            out.append(s)
            t = c.peek()
            if t is None or t.text != ",":
                break
            c.i += 1
        return out
    if c.kw("TRUNCATE"):
        c.kw("TABLE")
        s = c.name("table", d)
        return [s] if s else []
    if c.kw("RENAME"):
        if not c.kw("TABLE", "TABLES"):
            return []
        out = []
        while True:
            old = c.name("old", d)
            if old is None or not c.kw("TO"):
                return []
            new = c.name("new", d)
            if new is None:
                return []
            out += [old, new]
            t = c.peek()
            if t is None or t.text != ",":
                return out
            c.i += 1
    return []


# what follows ALTER DATABASE when it names no database (it alters the session's default one)
_DB_OPTION_WORDS = {"CHARACTER", "CHARSET", "COLLATE", "DEFAULT", "COMMENT", "READ", "ENCRYPTION", "UPGRADE"}


def _database(c: Cursor) -> list[Span]:
    """The database a CREATE/ALTER/DROP DATABASE names; [] when it names none (``ALTER
    DATABASE CHARACTER SET x``: the default database, which the caller does not guess)."""
    t = c.peek()
    if t is None or t.kind not in ("word", "ident") or (t.kind == "word" and t.text.upper() in _DB_OPTION_WORDS):
        return []
    return [Span("db", t.text, "", t.start, t.end)]


def _index_on(c: Cursor, d: str) -> list[Span]:
    """``[IF [NOT] EXISTS] name [USING ...] ON table`` of CREATE/DROP INDEX."""
    depth = 0
    while c.peek() is not None:
        t = c.peek()
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            depth -= 1
        elif depth == 0 and t.is_kw("ON"):
            c.i += 1
            s = c.name("table", d)
            return [s] if s else []
        c.i += 1
    return []


def _refs(c: Cursor, d: str) -> list[Span]:
    """REFERENCES targets in the rest of the statement."""
    out = []
    while c.peek() is not None:
        if c.kw("REFERENCES"):
            s = c.name("ref", d)
            if s:
                out.append(s)
            continue
        c.i += 1
    return out


def _alter_refs(c: Cursor, d: str) -> list[Span]:
    """After ``ALTER TABLE t``: foreign keys' tables, ``RENAME [TO|AS] new``, and
    ``EXCHANGE PARTITION p WITH TABLE other``."""
    out = []
    depth = 0
    while c.peek() is not None:
        t = c.peek()
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            depth -= 1
        elif t.is_kw("REFERENCES"):
            c.i += 1
            s = c.name("ref", d)
            if s:
                out.append(s)
            continue
        elif depth == 0 and t.is_kw("RENAME"):
            nxt = c.peek(1)
            if nxt is not None and not nxt.is_kw("COLUMN", "INDEX", "KEY", "CONSTRAINT"):
                c.i += 1
                c.kw("TO", "AS")
                s = c.name("new", d)
                if s:
                    out.append(s)
                continue
        elif depth == 0 and t.is_kw("WITH") and c.peek(1) is not None and c.peek(1).is_kw("TABLE"):
            c.i += 2
            s = c.name("ref", d)
            if s:
                out.append(s)
            continue
        c.i += 1
    return out


def default_reading(sql: str, mode: Mode) -> str:
    """``sql``, written under sql_mode ``mode``, rewritten to mean the same under MySQL's default
    reading: double-quoted names (ANSI_QUOTES) back-quoted, strings whose backslashes were
    literal (NO_BACKSLASH_ESCAPES) with them escaped. Every other byte stays. For readers that
    know only the default (the shard DDL normaliser's sqlglot).

    >>> print(default_reading('ALTER TABLE "t" ADD "c" int DEFAULT ' + "'a" + chr(92) + "b'", "ANSI_QUOTES,NO_BACKSLASH_ESCAPES"))
    ALTER TABLE `t` ADD `c` int DEFAULT 'a\\\\b'
    >>> default_reading("ALTER TABLE t ADD c int", None)
    'ALTER TABLE t ADD c int'
    """
    ansi, backslash = _reads(mode)
    if not ansi and backslash:
        return sql
    edits = []
    for t in tokenize(sql, mode):
        if t.kind == "ident" and sql[t.start] == '"':
            edits.append((t.start, t.end, "`" + t.text.replace("`", "``") + "`"))
        elif t.kind == "string" and not backslash and "\\" in t.text:
            edits.append((t.start, t.end, "'" + t.text.replace("\\", "\\\\").replace("'", "''") + "'"))
    for start, end, text in reversed(edits):
        sql = sql[:start] + text + sql[end:]
    return sql


def replace_spans(sql: str, spans: list[tuple[Span, str]]) -> str:
    """``sql`` with each span's text replaced (spans do not overlap)."""
    out, at = [], 0
    for s, text in sorted(spans, key=lambda p: p[0].start):
        out.append(sql[at:s.start])
        out.append(text)
        at = s.end
    out.append(sql[at:])
    return "".join(out)
