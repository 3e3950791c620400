"""Normalise one upstream DDL of a sharded table so shards' statements can be compared,
and classify it by DM's shard-merge restrictions.

``normalize(sql, default_schema, route)``:

1. statements sqlglot has no node for are refused up front with a clear reason
   (``RENAME TABLE``); others are parsed with sqlglot's MySQL dialect;
2. every table the statement names is collected structurally (the altered table, the
   indexed table, the dropped/truncated tables, a foreign key's or ``LIKE``'s table; index
   and column names are never mistaken for tables) and routed to its target;
3. the statement is rendered canonically: MySQL dialect, keywords upper case, every
   identifier back-quoted, comments dropped, ``ADD x`` → ``ADD COLUMN x`` and the like, so
   ``alter table s_1.t_1 add c int`` from one shard and ``ALTER TABLE `s_2`.`t_2` ADD
   COLUMN `c` INT`` from another give the same text;
4. ``NormalizedDDL.key`` is that text with identifiers lower-cased (MySQL compares column
   and index names case-insensitively): shards' DDLs are equal when their keys are.

Classification (``NormalizedDDL.action``):

* ``coordinate`` — ALTER TABLE, CREATE INDEX, DROP INDEX: goes through a shard DDL lock;
* ``ignore`` — DROP DATABASE, DROP TABLE, TRUNCATE TABLE of sharded tables (DM ignores them:
  one shard going away must not drop or empty the merged table);
* ``create`` — CREATE TABLE / CREATE DATABASE: run downstream as ``IF NOT EXISTS`` (the
  merged table exists once; a new shard joins the sharding group);
* in pessimistic mode, ``RENAME TABLE`` of one shard to a name routed to the same target is
  coordinated too (DM's rule; ``_rename_in_place``);
* anything else raises ``ShardDDLUnsupported`` naming the statement: other RENAME TABLEs (also as
  ``ALTER TABLE ... RENAME TO``), a statement on more than one table, views, statements
  sqlglot cannot parse -- except an ALTER TABLE of one table (CONVERT TO CHARACTER SET,
  partition DDL), which is coordinated by its routed text (``_textual_alter``).

Multi-change ALTERs are not split by default (pessimistic mode compares whole statements,
as every shard runs the same ones); ``split()`` gives one statement per change for
optimistic mode, which must run only the changes that alter the merged schema.

    >>> route = lambda s, t: ("db", "t") if s.startswith("s_") else (s, t)
    >>> n = normalize("alter table t_1 add c int not null default 0, add index i (c)", "s_1", route)
    >>> n.action, n.target, n.tables, n.sql
    ('coordinate', ('db', 't'), (('s_1', 't_1'),), 'ALTER TABLE `db`.`t` ADD COLUMN `c` INT NOT NULL DEFAULT 0, ADD INDEX `i` (`c`)')
    >>> [s.sql for s in n.split()]
    ['ALTER TABLE `db`.`t` ADD COLUMN `c` INT NOT NULL DEFAULT 0', 'ALTER TABLE `db`.`t` ADD INDEX `i` (`c`)']
    >>> normalize("ALTER TABLE `s_2`.`t_9` ADD COLUMN `C` INT NOT NULL DEFAULT 0, ADD INDEX `I` (`C`)", None, route).key == n.key
    True
    >>> normalize("DROP TABLE s_1.t_1", None, route).action
    'ignore'
    >>> normalize("RENAME TABLE s_1.t_1 TO s_1.t_x", None, route, mode="optimistic")
    Traceback (most recent call last):
    ...
    dm_core.shardddl.errors.ShardDDLUnsupported: [code=50006:shard-ddl] `RENAME TABLE` statement not supported in optimistic mode: `RENAME TABLE s_1.t_1 TO s_1.t_x` renames a table of a sharding group
    workaround: Run `dmctl binlog skip TASK` to skip the statement (the merged target keeps its name), then keep the shard's new name routed to the same target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable

from dm_core.ddl.kind import strip_comments
from dm_core.shardddl.errors import ShardDDLUnsupported
from dm_core.shardddl.schema import (Change, Column, Index, TableSchema, canonical_default, canonical_type)

COORDINATE, IGNORE, CREATE = "coordinate", "ignore", "create"

Route = Callable[[str, str], tuple[str, str]]

_RENAME_TABLE = re.compile(r"^RENAME\s+TABLES?\b", re.I)
_TOKENS = re.compile(r"'(?:[^'\\]|\\.|'')*'|`(?:[^`]|``)*`")


def comparison_key(sql: str) -> str:
    """Canonical SQL with back-quoted identifiers lower-cased (string literals untouched).

    >>> comparison_key("ALTER TABLE `db`.`T` ADD COLUMN `C` INT COMMENT 'Keep `Case`'")
    "ALTER TABLE `db`.`t` ADD COLUMN `c` INT COMMENT 'Keep `Case`'"
    """
    return _TOKENS.sub(lambda m: m.group(0).lower() if m.group(0).startswith("`") else m.group(0), sql)


@dataclass(frozen=True)
class NormalizedDDL:
    original: str                              # the statement as read from the binlog
    kind: str                                  # DM event type: "alter table", "create index", "drop table", ...
    action: str                                # coordinate | ignore | create
    tables: tuple[tuple[str, str], ...]        # upstream (schema, table) named; ("db", "") for databases
    target: tuple[str, str]                    # the routed target of tables[0]
    sql: str                                   # canonical routed statement ("" when ignored)
    reason: str = ""                           # why it is ignored
    _n_actions: int = field(default=1, repr=False, compare=False)
    more: tuple["NormalizedDDL", ...] = field(default=(), repr=False)  # statements taken with it (combine)

    @property
    def key(self) -> str:
        return comparison_key(self.sql)

    def split(self) -> list["NormalizedDDL"]:
        """One statement per change of a multi-change ALTER; ``[self]`` otherwise."""
        if self.more:
            return [x for n in (replace(self, more=()), *self.more) for x in n.split()]
        if self.kind != "alter table" or self._n_actions <= 1:
            return [self]
        stmt = _parse_one(self.sql)
        out = []
        for piece in _alter_pieces(stmt):
            out.append(NormalizedDDL(self.original, self.kind, self.action, self.tables, self.target,
                                     piece.sql(dialect="mysql", identify=True)))
        return out

    def changes(self) -> list[Change]:
        """The schema changes of this statement, each with a single-change ``sql``."""
        if self.action != COORDINATE:
            return []
        return [c for n in (replace(self, more=()), *self.more) for c in statement_changes(n.sql)]


def combine(ns: list[NormalizedDDL]) -> NormalizedDDL:
    """Statements an operator gave for one event (``dmctl binlog replace|inject``), as one shard
    DDL: they must all alter the same sharded table.

    >>> route = lambda s, t: ("db", "t")
    >>> n = combine([normalize("alter table s.t1 add c int", None, route), normalize("alter table s.t1 add unique(c)", None, route)])
    >>> [x.sql for x in n.split()]
    ['ALTER TABLE `db`.`t` ADD COLUMN `c` INT', 'ALTER TABLE `db`.`t` ADD UNIQUE (`c`)']
    """
    if len(ns) == 1:
        return ns[0]
    first = ns[0]
    for n in ns:
        if n.action != COORDINATE or n.tables[:1] != first.tables[:1]:
            raise ShardDDLUnsupported(
                f"statements given together for one event of a sharded table must all alter that table "
                f"({first.tables[0][0]}.{first.tables[0][1]}); got: {n.original}")
    return replace(first, more=tuple(ns[1:]))


def normalize(sql: str, default_schema: str | None, route: Route | None = None, *,
              mode: str = "pessimistic") -> NormalizedDDL:
    """Parse, route and classify one DDL statement (see the module docstring); ``mode``
    (the task's shard mode) only words the refusal of RENAME TABLE as DM does."""
    from sqlglot import exp

    route = route or (lambda s, t: (s, t))
    text = strip_comments(sql)
    if _RENAME_TABLE.match(text):
        renamed = _rename_in_place(sql, text, default_schema, route) if mode == "pessimistic" else None
        if renamed is None:
            raise _rename_refused(sql, mode)
        return renamed
    try:
        stmt = _parse_one(_expand_add_list(text), original=sql)
    except ShardDDLUnsupported:
        textual = _textual_alter(sql, text, default_schema, route)
        if textual is None:
            raise
        return textual
    for node in stmt.walk():
        node.comments = None
    kind_arg = str(stmt.args.get("kind") or "").upper()

    if isinstance(stmt, exp.Drop) and kind_arg in ("DATABASE", "SCHEMA"):
        t = stmt.args["tables"][0] if stmt.args.get("tables") else stmt.this
        db = t.name or t.db
        return NormalizedDDL(sql, "drop database", IGNORE, ((db, ""),), route(db, ""), "",
                             "DROP DATABASE of a sharded schema is ignored: the merged target keeps its data")
    if isinstance(stmt, exp.Create) and kind_arg in ("DATABASE", "SCHEMA"):
        db = stmt.this.name if stmt.this is not None else ""
        tdb = route(db, "")[0]
        return NormalizedDDL(sql, "create database", CREATE, ((db, ""),), (tdb, ""),
                             f"CREATE DATABASE IF NOT EXISTS `{tdb.replace('`', '``')}`")

    if isinstance(stmt, exp.Drop) and kind_arg == "TABLE":
        nodes = list(stmt.args.get("tables") or [])
        kind, action, reason = "drop table", IGNORE, "DROP TABLE of a sharded table is ignored (DM's rule)"
    elif isinstance(stmt, exp.TruncateTable):
        nodes = list(stmt.expressions)
        kind, action, reason = "truncate table", IGNORE, "TRUNCATE TABLE of a sharded table is ignored (DM's rule)"
    elif isinstance(stmt, exp.Drop) and kind_arg == "INDEX":
        on = stmt.args.get("cluster")
        nodes = [on.this] if on is not None and isinstance(on.this, exp.Table) else []
        kind, action, reason = "drop index", COORDINATE, ""
    elif isinstance(stmt, exp.Create) and kind_arg == "INDEX":
        t = stmt.this.args.get("table") if stmt.this is not None else None
        nodes = [t] if t is not None else []
        kind, action, reason = "create index", COORDINATE, ""
    elif isinstance(stmt, exp.Create) and kind_arg == "TABLE":
        t = stmt.this.this if isinstance(stmt.this, exp.Schema) else stmt.this
        nodes = [t] + [p.this for p in stmt.find_all(exp.LikeProperty)]
        kind, action, reason = "create table", CREATE, ""
        stmt.set("exists", True)
    elif isinstance(stmt, exp.Alter) and kind_arg == "TABLE":
        actions = stmt.args.get("actions") or []
        if any(isinstance(a, exp.AlterRename) for a in actions):
            raise _rename_refused(sql, mode)
        nodes = [stmt.this] + [r.this.this for r in stmt.find_all(exp.Reference)
                               if isinstance(r.this, exp.Schema) and isinstance(r.this.this, exp.Table)]
        kind, action, reason = "alter table", COORDINATE, ""
        if mode == "pessimistic":
            for a in actions:
                keyed = added_column_keys(a)
                if keyed:
                    raise ShardDDLUnsupported(
                        f"unsupported add column '{a.name}' constraint {keyed[0]} when altering a sharded table: "
                        f"`{sql.strip()}` (each shard numbers its own rows: their values would meet under one "
                        f"key in the merged table)",
                        workaround="Add the column without the key (and without AUTO_INCREMENT) on every shard, "
                                   "or run `dmctl binlog replace TASK \"SQL\"` with such a statement on each "
                                   "source; `dmctl binlog skip TASK` skips it.")
    else:
        raise ShardDDLUnsupported(f"this kind of statement is not supported on sharded tables: `{sql.strip()}`")

    tables: list[tuple[str, str]] = []
    for t in nodes:
        st = (t.db or default_schema or "", t.name)
        if st not in tables:
            tables.append(st)
    if not tables:
        raise ShardDDLUnsupported(f"cannot tell which table this statement changes: `{sql.strip()}`")
    if len(tables) > 1 and action != IGNORE:
        names = ", ".join(f"`{s}`.`{t}`" for s, t in tables)
        raise ShardDDLUnsupported(f"a DDL on a sharded table may name only one table, this one names {names}: "
                                  f"`{sql.strip()}`")
    target = route(*tables[0])
    if action == IGNORE:
        return NormalizedDDL(sql, kind, action, tuple(tables), target, "", reason)
    for t in nodes:
        ts, tt = route(t.db or default_schema or "", t.name)
        t.set("db", exp.to_identifier(ts, quoted=True))
        t.set("this", exp.to_identifier(tt, quoted=True))
        t.set("catalog", None)
    n_actions = len(_alter_pieces(stmt)) if kind == "alter table" else 1
    return NormalizedDDL(sql, kind, action, tuple(tables), target, stmt.sql(dialect="mysql", identify=True),
                         reason, n_actions)


def _textual_alter(sql: str, text: str, default_schema: str | None, route: Route) -> NormalizedDDL | None:
    """An ALTER TABLE of one table that sqlglot cannot parse (CONVERT TO CHARACTER SET,
    partitioning and partition maintenance): routed by editing its text (ddl/text.py),
    compared by that text with whitespace normalised. It is coordinated as one opaque
    change: pessimistic mode runs it once every shard has run the same statement;
    optimistic mode runs partition maintenance (ADD / DROP ... PARTITION: nothing the lock
    tracks changes) downstream as the shard wrote it, and what ``_textual_change`` can tell (a
    character set, index visibility) as it comes, and refuses the rest (a change it cannot
    merge), as DM does.

    >>> n = normalize("ALTER TABLE t_1 CONVERT TO CHARACTER SET utf8mb4", "s_1", lambda s, t: ("db", "t"))
    >>> n.action, n.kind, n.sql
    ('coordinate', 'alter table', 'ALTER TABLE `db`.`t` CONVERT TO CHARACTER SET utf8mb4')
    """
    from dm_core.ddl.parsed import parse_ddl
    from dm_core.ddl.text import tokenize

    ddl = parse_ddl(text, default_schema)
    kind = ddl.kind
    if kind != "alter table" and not kind.endswith("table partition"):
        return None
    if any(t.kind == "punct" and t.text == ";" for t in tokenize(text)):
        return None  # several statements
    spans = ddl.spans
    if len(spans) != 1 or spans[0].role != "table":
        return None
    sp = spans[0]
    ts, tt = route(sp.schema, sp.table)
    routed = "ALTER TABLE `" + ts.replace("`", "``") + "`.`" + tt.replace("`", "``") + "` " + text[sp.end:].strip()
    return NormalizedDDL(sql, kind, COORDINATE, ((sp.schema, sp.table),), (ts, tt), routed)


def _rename_in_place(sql: str, text: str, default_schema: str | None, route: Route) -> NormalizedDDL | None:
    """Pessimistic mode: ``RENAME TABLE old TO new`` of one shard whose new name routes to
    the same target, as DM has it: coordinated like any shard DDL (every shard renames), and
    its routed text renames the target onto itself, which DM runs and whose "table exists"
    error it ignores (ddl/replay.IGNORABLE). ``tables`` is (old, new): the shard keeps its
    place in its sharding group under the new name (source_group.SourceGroup.rename_member).
    Several pairs, or a new name routed elsewhere: None (refused).

    >>> n = normalize("RENAME TABLE s_1.t_1 TO s_1.t_3", None, lambda s, t: ("db", "t"))
    >>> n.kind, n.action, n.tables, n.sql
    ('rename table', 'coordinate', (('s_1', 't_1'), ('s_1', 't_3')), 'RENAME TABLE `db`.`t` TO `db`.`t`')
    """
    from dm_core.ddl.text import table_spans

    spans = table_spans(text, default_schema)
    if len(spans) != 2 or not all(sp.table for sp in spans):
        return None
    old, new = (spans[0].schema, spans[0].table), (spans[1].schema, spans[1].table)
    target, target_new = route(*old), route(*new)
    if tuple(x.lower() for x in target) != tuple(x.lower() for x in target_new):
        return None
    q = "`" + target[0].replace("`", "``") + "`.`" + target[1].replace("`", "``") + "`"
    return NormalizedDDL(sql, "rename table", COORDINATE, (old, new), tuple(target), f"RENAME TABLE {q} TO {q}")


def _rename_refused(sql: str, mode: str) -> ShardDDLUnsupported:
    # DM's words (ErrSyncerUnsupportedStmt): a table of a sharding group cannot change its name
    return ShardDDLUnsupported(f"`RENAME TABLE` statement not supported in {mode or 'pessimistic'} mode: "
                               f"`{sql.strip()}` renames a table of a sharding group",
                               workaround="Run `dmctl binlog skip TASK` to skip the statement (the merged target "
                                          "keeps its name), then keep the shard's new name routed to the same target.")


_ADD_LIST = re.compile(r"^(ALTER\s+TABLE\s+\S+(?:\s*\.\s*\S+)?)\s+ADD\s+(?:COLUMN\s+)?\((.*)\)$", re.I | re.S)


def _expand_add_list(text: str) -> str:
    """MySQL's ``ADD [COLUMN] (c1 def, c2 def)`` (no sqlglot node) → ``ADD COLUMN c1 def, ADD COLUMN c2 def``.

    >>> _expand_add_list("ALTER TABLE t ADD COLUMN (a INT, b DECIMAL(10,2) DEFAULT '1,2')")
    "ALTER TABLE t ADD COLUMN a INT, ADD COLUMN b DECIMAL(10,2) DEFAULT '1,2'"
    """
    m = _ADD_LIST.match(text)
    if not m:
        return text
    parts, cur, depth, q = [], "", 0, None
    for ch in m.group(2):
        if q:
            q = None if ch == q else q
        elif ch in "'\"`":
            q = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        cur += ch
    parts.append(cur.strip())
    if depth != 0 or not all(parts) or any(re.match(r"(INDEX|KEY|PRIMARY|UNIQUE|CONSTRAINT|FULLTEXT)\b", p, re.I)
                                            for p in parts):
        return text
    return m.group(1) + " " + ", ".join(f"ADD COLUMN {p}" for p in parts)


def _parse_one(text: str, original: str | None = None):
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    shown = (original or text).strip()
    try:
        stmts = [s for s in sqlglot.parse(text, read="mysql") if s is not None]
    except SqlglotError as e:
        raise ShardDDLUnsupported(f"cannot parse DDL `{shown}`: {str(e).splitlines()[0]}") from None
    if len(stmts) != 1:
        raise ShardDDLUnsupported(f"expected exactly one statement, got {len(stmts)}: `{shown}`")
    if isinstance(stmts[0], exp.Command):
        raise ShardDDLUnsupported(f"shardflow's SQL parser does not understand this statement: `{shown}`")
    return stmts[0]


def _alter_pieces(stmt) -> list:
    """Single-change copies of an ALTER TABLE (each action, each table option)."""
    actions = list(stmt.args.get("actions") or [])
    options = list(stmt.args.get("options") or [])
    if len(actions) + len(options) <= 1:
        return [stmt]
    out = []
    for a in actions:
        c = stmt.copy()
        c.set("actions", [a.copy()])
        c.set("options", None)
        out.append(c)
    for o in options:
        c = stmt.copy()
        c.set("actions", None)
        c.set("options", [o.copy()])
        out.append(c)
    return out


# ---- schema changes -----------------------------------------------------------------------------
def statement_changes(sql: str) -> list[Change]:
    """The schema changes of a canonical (routed) ALTER TABLE / CREATE INDEX / DROP INDEX.

    >>> [(c.op, c.name) for c in statement_changes("ALTER TABLE `d`.`t` ADD COLUMN `c` INT, DROP COLUMN `x`, "
    ...                                              "CHANGE COLUMN `a` `b` BIGINT, ALTER COLUMN `c` SET DEFAULT 1")]
    [('add_column', 'c'), ('drop_column', 'x'), ('modify_column', 'a'), ('set_default', 'c')]
    """
    from sqlglot import exp

    from dm_core.ddl.kind import ddl_event_type

    if ddl_event_type(sql).endswith("table partition"):
        # ADD / DROP / TRUNCATE ... PARTITION (the text routed by _textual_alter): nothing the
        # lock tracks changes; optimistic mode runs it downstream as written, as DM does
        return [Change("partition", sql=sql)]
    try:
        stmt = _parse_one(sql)
    except ShardDDLUnsupported:
        textual = _textual_change(sql)
        if textual is None:
            raise
        return [textual]
    kind_arg = str(stmt.args.get("kind") or "").upper()
    if isinstance(stmt, exp.Create) and kind_arg == "INDEX":
        idx = stmt.this
        unique = bool(stmt.args.get("unique"))
        cols = [_ident(o.this if isinstance(o, exp.Ordered) else o)
                for o in (idx.args.get("params").args.get("columns") or [])] if idx.args.get("params") else []
        kind = "unique" if unique else (str(stmt.args.get("kind_modifier") or "").lower() or "index")
        return [Change("add_index", idx.name, index=Index(idx.name, kind if kind in ("unique", "fulltext", "spatial")
                                                                 else "index", tuple(cols)), sql=sql)]
    if isinstance(stmt, exp.Drop) and kind_arg == "INDEX":
        name = stmt.args["tables"][0].name
        return [Change("drop_index", name, if_exists=bool(stmt.args.get("exists")), sql=sql)]
    if not isinstance(stmt, exp.Alter):
        return [Change("other", sql=sql)]
    charset = _charset_of(stmt.args.get("options") or [])
    if not stmt.args.get("actions") and charset is not None:
        return [Change("charset", charset, sql=sql)]  # DEFAULT CHARSET with its COLLATE: one statement
    out: list[Change] = []
    for piece in _alter_pieces(stmt):
        piece_sql = piece.sql(dialect="mysql", identify=True)
        acts = piece.args.get("actions") or []
        if not acts:
            cs = _charset_of(piece.args.get("options") or [])
            out.append(Change("charset", cs, sql=piece_sql) if cs is not None else Change("other", sql=piece_sql))
            continue
        out.extend(_action_changes(acts[0], piece_sql))
    return out


def _charset_of(options) -> str | None:
    """The character set table options ``[DEFAULT] CHARACTER SET x [COLLATE y]`` give the table
    (a COLLATE alone: its charset, the name's first part); None when other options are there."""
    from sqlglot import exp

    if not options or not all(isinstance(o, (exp.CharacterSetProperty, exp.CollateProperty)) for o in options):
        return None
    cs = next((o for o in options if isinstance(o, exp.CharacterSetProperty)), None)
    name = cs.this.name if cs is not None else options[0].this.name.split("_")[0]
    return name.lower()


_ROUTED = r"^ALTER\s+TABLE\s+`(?:[^`]|``)*`\.`(?:[^`]|``)*`\s+"
_CONVERT_TO = re.compile(_ROUTED + r"CONVERT\s+TO\s+(?:CHARACTER\s+SET|CHARSET)\s*=?\s*`?(\w+)`?"
                         r"(?:\s+COLLATE\s*=?\s*`?\w+`?)?\s*$", re.I)
_INDEX_VISIBILITY = re.compile(_ROUTED + r"ALTER\s+INDEX\s+(`(?:[^`]|``)*`|\w+)\s+"
                               r"(VISIBLE|INVISIBLE|NOT\s+IGNORED|IGNORED)\s*$", re.I)


def _textual_change(sql: str) -> Change | None:
    """The change of a routed ALTER TABLE sqlglot cannot parse, where shard DDL can tell it:
    ``CONVERT TO CHARACTER SET x`` (every text column and the table's default become x) and
    MySQL's ``ALTER INDEX i VISIBLE | INVISIBLE`` / MariaDB's ``IGNORED | NOT IGNORED``
    (the optimizer's view of an index; columns and keys stay). None for anything else.

    >>> _textual_change("ALTER TABLE `d`.`t` convert to character set utf8mb4 collate utf8mb4_bin").name
    'utf8mb4'
    >>> _textual_change("ALTER TABLE `d`.`t` alter index `a` not ignored").op
    'index_visibility'
    """
    text = strip_comments(sql).strip().rstrip(";").strip()
    m = _CONVERT_TO.match(text)
    if m:
        return Change("charset", m.group(1).lower(), sql=sql)
    m = _INDEX_VISIBILITY.match(text)
    if m:
        name = m.group(1)
        name = name[1:-1].replace("``", "`") if name.startswith("`") else name
        return Change("index_visibility", name, sql=sql)
    return None


def _ident(node) -> str:
    from sqlglot import exp

    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Identifier):
        return node.this
    return node.name if hasattr(node, "name") else str(node)


def added_column_keys(action) -> list[str]:
    """What makes an ADD COLUMN action unsafe on a merged table: an inline PRIMARY KEY or
    UNIQUE KEY, or AUTO_INCREMENT (TiDB refuses them all when altering: "unsupported add
    column 'c' constraint UNIQUE KEY when altering"; DM's optimistic lock says "there will be
    conflicts"). Each shard fills such a column with its own values, which meet downstream.

    >>> import sqlglot
    >>> added_column_keys(sqlglot.parse_one("ALTER TABLE t ADD c INT UNIQUE AUTO_INCREMENT", read="mysql").args["actions"][0])
    ['UNIQUE KEY', 'AUTO_INCREMENT']
    """
    from sqlglot import exp

    if not isinstance(action, exp.ColumnDef):
        return []
    out = []
    for c in action.args.get("constraints") or []:
        k = c.args.get("kind") if isinstance(c, exp.ColumnConstraint) else c
        if isinstance(k, exp.PrimaryKeyColumnConstraint):
            out.append("PRIMARY KEY")
        elif isinstance(k, exp.UniqueColumnConstraint):
            out.append("UNIQUE KEY")
        elif isinstance(k, exp.AutoIncrementColumnConstraint):
            out.append("AUTO_INCREMENT")
    return out


def column_from_def(cd) -> tuple[Column, bool]:
    """(Column, is_inline_primary_key) of a sqlglot ColumnDef."""
    from sqlglot import exp

    type_ = canonical_type(cd.args["kind"]) if cd.args.get("kind") is not None else "INT"
    if any(isinstance(c.args.get("kind"), exp.ZeroFillColumnConstraint) for c in cd.args.get("constraints") or []
           if isinstance(c, exp.ColumnConstraint)):
        type_ = canonical_type(type_ + " ZEROFILL")   # MySQL: ZEROFILL makes the column UNSIGNED
    nullable, default, primary, extra = True, None, False, []
    for c in cd.args.get("constraints") or []:
        k = c.args.get("kind") if isinstance(c, exp.ColumnConstraint) else c
        if isinstance(k, exp.NotNullColumnConstraint):
            nullable = bool(k.args.get("allow_null"))
        elif isinstance(k, exp.DefaultColumnConstraint):
            default = canonical_default(k.this.sql(dialect="mysql"), type_)
        elif isinstance(k, exp.PrimaryKeyColumnConstraint):
            primary, nullable = True, False
        else:
            if isinstance(k, exp.AutoIncrementColumnConstraint):
                nullable = False  # MySQL: an AUTO_INCREMENT column is NOT NULL
            extra.append(k.sql(dialect="mysql"))
    return Column(cd.name, type_, nullable, default, " ".join(extra)), primary


def _action_changes(a, sql: str) -> list[Change]:
    from sqlglot import exp

    if isinstance(a, exp.ColumnDef):
        col, pk = column_from_def(a)
        out = [Change("add_column", col.name, col, if_exists=bool(a.args.get("exists")), sql=sql)]
        if pk:
            out.append(Change("add_index", "PRIMARY", index=Index("PRIMARY", "primary", (col.name,)), sql=sql))
        return out
    if isinstance(a, exp.Drop):
        k = str(a.args.get("kind") or "").upper()
        name = a.args["tables"][0].name if a.args.get("tables") else ""
        if k == "COLUMN":
            return [Change("drop_column", name, if_exists=bool(a.args.get("exists")), sql=sql)]
        if k in ("INDEX", "KEY"):
            return [Change("drop_index", name, if_exists=bool(a.args.get("exists")), sql=sql)]
        return [Change("other", sql=sql)]
    if isinstance(a, exp.DropPrimaryKey):
        return [Change("drop_index", "PRIMARY", sql=sql)]
    if isinstance(a, exp.ModifyColumn):
        col, _ = column_from_def(a.this)
        old = a.args.get("rename_from")
        old_name = old.this if isinstance(old, exp.Identifier) else (old.name if old is not None else col.name)
        return [Change("modify_column", old_name, col,
                       new_name=col.name if old_name.lower() != col.name.lower() else "", sql=sql)]
    if isinstance(a, exp.RenameColumn):
        return [Change("rename_column", _ident(a.this), new_name=_ident(a.args["to"]), sql=sql)]
    if isinstance(a, exp.AlterColumn):
        if a.args.get("drop") and not a.args.get("dtype"):
            return [Change("set_default", _ident(a.this), default=None, sql=sql)]
        if a.args.get("default") is not None:
            return [Change("set_default", _ident(a.this), default=canonical_default(a.args["default"].sql("mysql")),
                           sql=sql)]
        return [Change("other", _ident(a.this), sql=sql)]
    if isinstance(a, exp.AlterIndex):   # MySQL's ALTER INDEX i VISIBLE | INVISIBLE
        return [Change("index_visibility", _ident(a.this), sql=sql)]
    if isinstance(a, exp.RenameIndex):
        return [Change("rename_index", _ident(a.this), new_name=_ident(a.args["to"]), sql=sql)]
    if isinstance(a, exp.AddConstraint):
        out = []
        for c in a.expressions:
            idx = _index_of(c)
            out.append(Change("add_index", idx.name, index=idx, sql=sql) if idx else Change("other", sql=sql))
        return out
    return [Change("other", sql=sql)]


def _index_of(c) -> Index | None:
    from sqlglot import exp

    if isinstance(c, exp.PrimaryKey):
        return Index("PRIMARY", "primary", tuple(_ident(x.this if isinstance(x, exp.Ordered) else x)
                                                 for x in c.expressions))
    if isinstance(c, exp.UniqueColumnConstraint):
        sch = c.this
        cols = tuple(_ident(x) for x in (sch.expressions if sch is not None else []))
        named = sch is not None and sch.this is not None
        return Index(sch.this.this if named else (cols[0] if cols else ""), "unique", cols, implicit=not named)
    if isinstance(c, exp.IndexColumnConstraint):
        cols = tuple(_ident(x.this if isinstance(x, exp.Ordered) else x) for x in c.expressions)
        kind = str(c.args.get("kind") or "").lower()
        kind = "unique" if kind == "unique" else kind if kind in ("fulltext", "spatial") else "index"
        return Index(c.this.this if c.this is not None else (cols[0] if cols else ""), kind, cols,
                     implicit=c.this is None)
    return None


def schema_from_create(sql: str) -> TableSchema:
    """The tracked schema of a CREATE TABLE statement (column definitions and keys).

    >>> s = schema_from_create("CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT, n VARCHAR(8) DEFAULT 'x', "
    ...                        "PRIMARY KEY (id), UNIQUE KEY uk (n))")
    >>> for x in list(s.columns) + list(s.indexes):
    ...     print(x.definition())
    `id` INT NOT NULL AUTO_INCREMENT
    `n` VARCHAR(8) DEFAULT 'x'
    PRIMARY KEY (`id`)
    UNIQUE INDEX `uk` (`n`)
    """
    from sqlglot import exp

    stmt = _parse_one(strip_comments(sql), original=sql)
    if not isinstance(stmt, exp.Create) or not isinstance(stmt.this, exp.Schema):
        raise ShardDDLUnsupported(f"not a CREATE TABLE with column definitions: `{sql.strip()}`")
    cols, idx = [], []
    for e in stmt.this.expressions:
        if isinstance(e, exp.ColumnDef):
            col, pk = column_from_def(e)
            cols.append(col)
            if pk:
                idx.append(Index("PRIMARY", "primary", (col.name,)))
        else:
            i = _index_of(e)
            if i is not None:
                idx.append(i)
    pk = next((i for i in idx if i.kind == "primary"), None)
    if pk is not None:
        keys = {c.lower() for c in pk.columns}
        cols = [Column(c.name, c.type, False, c.default, c.extra) if c.key in keys else c for c in cols]
    return TableSchema(tuple(cols), tuple(idx))
