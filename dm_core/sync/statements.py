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

Where a row-change statement writes is over-approximated by database: the session's database
and every qualifier in the text; the source pauses when the task moves any table of one of
them (a view or trigger can write a table the text does not name). A false alarm costs a
pause with a ``binlog skip`` away; a miss costs rows. A trigger writing into another database
than the statement names is not caught.

    >>> kind_of("xa rollback 'x'"), kind_of("/* c */ insert into t values (1)")
    ('xa rollback', 'row change')
    >>> kind_of("LOAD DATA INFILE 'f' INTO TABLE t")
    'row change'
    >>> kind_of("XA COMMIT X'7831',X'',1") is None  # the window passes it: its rows came at XA PREPARE
    True
    >>> kind_of("GRANT ALL ON *.* TO u"), kind_of("ALTER TABLE t ADD c INT")
    (None, None)
    >>> kind_of("WITH c AS (SELECT 1) UPDATE t SET x = 1"), kind_of("SET STATEMENT max_statement_time=1 FOR DELETE FROM t")
    ('row change', 'row change')
    >>> sorted(databases_named("UPDATE d2.t SET x = 1", "d"))
    ['d', 'd2']
    >>> sorted(databases_named("DELETE t1 FROM t1 JOIN t2 ON t1.id = t2.id", "d"))  # a column's table counts too
    ['d', 't1', 't2']
"""

from __future__ import annotations

from dm_core.ddl.text import Mode, tokenize

# First words of statements that may write rows when logged as statements: DML, LOAD DATA/XML,
# and what is logged only for its side effects (WITH ... UPDATE, SELECT f() / DO f() of a
# function that writes); MariaDB's SET STATEMENT ... FOR <statement> is checked separately.
_ROW_CHANGE = {"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD", "WITH", "SELECT", "DO"}


def kind_of(sql: str, mode: Mode = None) -> str | None:
    """``row change``, ``xa rollback``, or None for anything else."""
    toks = tokenize(sql, mode)
    if not toks or toks[0].kind != "word":
        return None
    first = toks[0].text.upper()
    if first in _ROW_CHANGE or (first == "SET" and len(toks) > 1 and toks[1].is_kw("STATEMENT")):
        return "row change"
    if first == "XA" and len(toks) > 1 and toks[1].is_kw("ROLLBACK"):
        return "xa rollback"
    return None


def databases_named(sql: str, schema: str | None, mode: Mode = None) -> set[str]:
    """The databases a row-change statement may write (see the module): every qualifier of a
    name ``a.b``, and the session's database."""
    toks = tokenize(sql, mode)
    out = {schema} if schema else set()
    for i in range(len(toks) - 2):
        a, dot, b = toks[i], toks[i + 1], toks[i + 2]
        if a.kind in ("word", "ident") and dot.kind == "punct" and dot.text == "." and b.kind in ("word", "ident"):
            out.add(a.text)
    return out
