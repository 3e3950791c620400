"""Statements in a ROW-format binlog that are not DDL but still say something about the rows:
row changes logged as statements, and the end of an XA transaction.

Why: a QUERY event other than BEGIN, COMMIT and what belongs to the group (binlog/window.py)
reaches the syncer as a statement, and DM skips every statement that is not DDL. Two kinds
must not be skipped in silence:

- a row change logged as a statement (``INSERT``/``REPLACE``/``UPDATE``/``DELETE``, and
  ``LOAD DATA`` as an event type of its own): a session ran with ``binlog_format`` STATEMENT
  or MIXED, so the rows are not in the binlog. Replaying
  the text downstream would be wrong in general (routing, column mapping, non-deterministic
  functions), so the source pauses when the statement may touch a table the task moves;
- ``XA ROLLBACK``: an XA transaction's rows are logged at its PREPARE and applied there
  (binlog/window.py, which also passes its later XA COMMIT by itself), so a rollback after the
  PREPARE means rows are downstream that the upstream threw away. The source pauses naming
  the transaction (rare: a coordinator gave up on a prepared branch).

Which tables a row-change statement touches is over-approximated from its tokens: every
qualified name ``a.b``, and every other word or name as a table of the session's database.
A false alarm costs a pause with a ``binlog skip`` away; a miss costs rows.

    >>> kind_of("xa rollback 'x'"), kind_of("/* c */ insert into t values (1)")
    ('xa rollback', 'row change')
    >>> kind_of("LOAD DATA INFILE 'f' INTO TABLE t")
    'row change'
    >>> kind_of("XA COMMIT X'7831',X'',1") is None  # the window passes it: its rows came at XA PREPARE
    True
    >>> kind_of("GRANT ALL ON *.* TO u"), kind_of("ALTER TABLE t ADD c INT")
    (None, None)
    >>> names = may_touch("UPDATE d2.t JOIN t2 ON t.id = t2.id SET t.x = 1", "d")
    >>> ("d2", "t") in names, ("d", "t2") in names, ("d", "d2") in names
    (True, True, False)
"""

from __future__ import annotations

from dm_core.ddl.text import Mode, tokenize

_ROW_CHANGE = {"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD"}  # LOAD DATA / LOAD XML


def kind_of(sql: str, mode: Mode = None) -> str | None:
    """``row change``, ``xa rollback``, or None for anything else."""
    toks = tokenize(sql, mode)
    if not toks or toks[0].kind != "word":
        return None
    first = toks[0].text.upper()
    if first in _ROW_CHANGE:
        return "row change"
    if first == "XA" and len(toks) > 1 and toks[1].is_kw("ROLLBACK"):
        return "xa rollback"
    return None


def may_touch(sql: str, schema: str | None, mode: Mode = None) -> set[tuple[str, str]]:
    """Every (schema, table) the statement could name (see the module)."""
    toks = tokenize(sql, mode)
    out: set[tuple[str, str]] = set()
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind in ("word", "ident"):
            dot, nxt = (toks[i + 1], toks[i + 2]) if i + 2 < len(toks) else (None, None)
            if dot is not None and dot.kind == "punct" and dot.text == "." and nxt.kind in ("word", "ident"):
                out.add((t.text, nxt.text))
                i += 3
                continue
            if schema:
                out.add((schema, t.text))
        i += 1
    return out
