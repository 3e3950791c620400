"""Which binlog-filter event type a DDL statement is ("create table", "drop index", ...).

DM derives it from TiDB's parser (``AstToDDLEvent``); we parse with sqlglot's MySQL dialect
and fall back to the statement's leading keywords where sqlglot has no node for the syntax
(partition maintenance, RENAME TABLE, ALTER DATABASE) or cannot parse it. A statement that
is none of DM's event types gives ``""``: the filter then judges it by ``sql-pattern`` only.

    >>> [ddl_event_type(s) for s in ("create table t (a int)", "DROP VIEW v", "truncate t",
    ...                              "/* x */ RENAME TABLE a TO b", "alter table `t` drop partition p1",
    ...                              "CREATE UNIQUE INDEX i ON t (a)", "CREATE TRIGGER x BEFORE INSERT ON t FOR EACH ROW SET @a = 1",
    ...                              "OPTIMIZE TABLE t", "alter table t optimize partition p1")]
    ['create table', 'drop view', 'truncate table', 'rename table', 'drop table partition', 'create index', '', '', '']
"""

from __future__ import annotations

import re

_NAME = r"(?:`[^`]*`|[^\s`.]+)"
_ALTER_TABLE = rf"ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+{_NAME}(?:\s*\.\s*{_NAME})?\s+"
_PARTITION_OPS = {"ADD": "add table partition", "DROP": "drop table partition",
                  "TRUNCATE": "truncate table partition", "REORGANIZE": "reorganize table partition",
                  "EXCHANGE": "exchange table partition", "COALESCE": "coalesce table partition",
                  "REBUILD": "rebuild table partition", "SPLIT": "split table partition"}

# Checked before sqlglot: syntax it has no node for (it would log and return a Command).
_FIRST = [
    # partition maintenance, like OPTIMIZE/ANALYZE/REPAIR/CHECK TABLE, is no schema change: DM skips it
    (re.compile(rf"^{_ALTER_TABLE}(?:ANALYZE|CHECK|OPTIMIZE|REPAIR)\s+PARTITION\b", re.I), ""),
    (re.compile(rf"^{_ALTER_TABLE}({'|'.join(_PARTITION_OPS)})\s+PARTITION\b", re.I), None),
    (re.compile(r"^RENAME\s+TABLES?\b", re.I), "rename table"),
    (re.compile(r"^ALTER\s+(?:DATABASE|SCHEMA)\b", re.I), "alter database"),
    (re.compile(r"^(?:CREATE|DROP|ALTER)\s+(?:OR\s+REPLACE\s+)?(?:DEFINER\s*=\s*\S+\s+)?(?:AGGREGATE\s+)?"
                r"(?:TRIGGER|PROCEDURE|FUNCTION|EVENT|USER|ROLE|SERVER|LOGFILE|TABLESPACE)\b", re.I), ""),
]

# Used when sqlglot cannot parse the statement.
_FALLBACK = [
    (re.compile(r"^CREATE\s+(?:TEMPORARY\s+)?TABLE\b", re.I), "create table"),
    (re.compile(r"^CREATE\s+(?:DATABASE|SCHEMA)\b", re.I), "create database"),
    (re.compile(r"^CREATE\s+(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\b", re.I), "create index"),
    (re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:ALGORITHM\s*=\s*\w+\s+)?(?:DEFINER\s*=\s*\S+\s+)?"
                r"(?:SQL\s+SECURITY\s+\w+\s+)?VIEW\b", re.I), "create view"),
    (re.compile(r"^DROP\s+(?:TEMPORARY\s+)?TABLES?\b", re.I), "drop table"),
    (re.compile(r"^DROP\s+(?:DATABASE|SCHEMA)\b", re.I), "drop database"),
    (re.compile(r"^DROP\s+INDEX\b", re.I), "drop index"),
    (re.compile(r"^DROP\s+VIEW\b", re.I), "drop view"),
    (re.compile(r"^TRUNCATE\b", re.I), "truncate table"),
    (re.compile(rf"^{_ALTER_TABLE}", re.I), "alter table"),
    (re.compile(r"^ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\b", re.I), "alter table"),
]

_CREATE = {"TABLE": "create table", "DATABASE": "create database", "SCHEMA": "create database",
           "INDEX": "create index", "VIEW": "create view"}
_DROP = {"TABLE": "drop table", "DATABASE": "drop database", "SCHEMA": "drop database",
         "INDEX": "drop index", "VIEW": "drop view"}


def strip_comments(sql: str) -> str:
    """One line of SQL without comments or a trailing semicolon; MySQL's executable comments
    (``/*!50100 ... */``) carry SQL, so their body stays.

    Quoted strings and names are kept as written: a comment's spaces and line breaks, or a
    ``#`` inside a DEFAULT, are the column's, not the statement's layout.

    >>> strip_comments("ALTER TABLE t /*!50100 ADD c int */ /* why */;")
    'ALTER TABLE t ADD c int'
    >>> strip_comments("ALTER TABLE d.t\\n  ADD c int COMMENT '1  2\\n#3' -- note")
    "ALTER TABLE d.t ADD c int COMMENT '1  2\\n#3'"
    """
    from dm_core.ddl.text import tokenize

    out, end = [], None
    for tok in tokenize(sql):
        if end is not None and sql[end:tok.start]:
            out.append(" ")    # spaces or comments between two tokens: one space
        out.append(sql[tok.start:tok.end])
        end = tok.end
    return "".join(out).rstrip(";").strip()


def _sqlglot_kind(sql: str) -> str | None:
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        stmts = sqlglot.parse(sql, read="mysql")
    except SqlglotError:
        return None
    if len(stmts) != 1 or stmts[0] is None or isinstance(stmts[0], exp.Command):
        return None
    st = stmts[0]
    kind = str(st.args.get("kind") or "").upper()
    if isinstance(st, exp.Create):
        return _CREATE.get(kind, "")
    if isinstance(st, exp.Drop):
        return _DROP.get(kind, "")
    if isinstance(st, exp.Alter):
        return "alter table" if kind == "TABLE" else ""
    if isinstance(st, exp.TruncateTable):
        return "truncate table"
    return ""


def ddl_event_type(sql: str) -> str:
    """The DM event type of one DDL statement, ``""`` when it has none."""
    text = strip_comments(sql)
    for rx, kind in _FIRST:
        m = rx.match(text)
        if m:
            return _PARTITION_OPS[m.group(1).upper()] if kind is None else kind
    kind = _sqlglot_kind(text)
    if kind is not None:
        return kind
    for rx, kind in _FALLBACK:
        if rx.match(text):
            return kind
    return ""


def foreign_key_clause(sql: str, kind: str, mode: str | None = None) -> str | None:
    """What DM refuses while the downstream session checks foreign keys (its rejectForeignKeyDDL):
    ``"CREATE TABLE with FOREIGN KEY"`` for a CREATE TABLE with a FOREIGN KEY constraint,
    ``"ALTER TABLE ADD FOREIGN KEY"`` for an ALTER TABLE adding one, else None (a column's inline
    REFERENCES creates no constraint; DROP FOREIGN KEY is fine).

    >>> foreign_key_clause("CREATE TABLE c (id INT, p INT, CONSTRAINT f FOREIGN KEY (p) REFERENCES t (id))", "create table")
    'CREATE TABLE with FOREIGN KEY'
    >>> [foreign_key_clause(s, "alter table") for s in ("ALTER TABLE c ADD CONSTRAINT f FOREIGN KEY (p) REFERENCES t (id)",
    ...                                                 "ALTER TABLE c DROP FOREIGN KEY f", "ALTER TABLE c ADD `foreign` INT")]
    ['ALTER TABLE ADD FOREIGN KEY', None, None]
    """
    from dm_core.ddl.text import tokenize

    if kind not in ("create table", "alter table"):
        return None
    toks = tokenize(sql, mode)
    for i in range(1, len(toks)):
        if toks[i].is_kw("KEY") and toks[i - 1].is_kw("FOREIGN"):
            if kind == "create table":
                return "CREATE TABLE with FOREIGN KEY"
            if i < 2 or not toks[i - 2].is_kw("DROP"):
                return "ALTER TABLE ADD FOREIGN KEY"
    return None
