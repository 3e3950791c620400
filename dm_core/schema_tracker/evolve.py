"""One DDL statement applied to the tracked tables it changes.

``evolve(sql, schema, view)`` returns ``{(schema, table): new state}`` where a state is a
``TrackedTable``, ``None`` (the table is gone) or ``STALE`` (it changed in a way this module does
not follow: the tracker reads it from the upstream when it is next needed). ``view`` gives the
states before the statement (``get``), the tables known in a schema (``tables_of``) and a
schema's default charset (``charset_of``, asked only for a CREATE TABLE that names none).
A table the tracker does not know yet (``get`` is None) is left alone by an ALTER: it is read
from the upstream when its rows first come.

    >>> class V:
    ...     t = {("d", "t"): TrackedTable((TrackedColumn("a", "INT"), TrackedColumn("b", "TEXT", "utf8mb4")), "utf8mb4")}
    ...     get = lambda self, s, n: self.t.get((s, n)); tables_of = lambda self, s: [n for d, n in self.t if d == s]
    ...     charset_of = lambda self, s: "utf8mb4"
    >>> out = evolve("alter table t add c int unsigned first, change b bb varchar(3) charset latin1 after c", "d", V())
    >>> out[("d", "t")].describe()
    '`c` INT UNSIGNED, `bb` VARCHAR(3) CHARSET latin1, `a` INT'
    >>> list(evolve("rename table d.t to d.u", None, V()).items())[1][1].columns[0].name
    'a'
"""

from __future__ import annotations

import re

from dm_core.ddl.kind import strip_comments
from dm_core.ddl.parsed import parse_ddl
from dm_core.schema_tracker.table import TrackedColumn, TrackedTable, string_charset
from dm_core.shardddl.schema import canonical_type

STALE = "stale"

_CONVERT_TO = re.compile(r"\bCONVERT\s+TO\s+(?:CHARACTER\s+SET|CHARSET)\s*=?\s*[`'\"]?(\w+)", re.I)
# ALTER TABLE clauses sqlglot does not read that change no column (partitioning, rebuilds, options)
_NO_COLUMN_ALTER = re.compile(
    r"^\s*(?:(?:PARTITION\s+BY|REMOVE\s+PARTITIONING|FORCE|ENGINE|COMMENT|AUTO_INCREMENT|ROW_FORMAT|KEY_BLOCK_SIZE|"
    r"STATS_\w+|ALGORITHM|LOCK|ANALYZE|OPTIMIZE|REBUILD|CHECK|REPAIR|COALESCE|REORGANIZE|EXCHANGE|DISCARD|IMPORT|"
    r"ALTER\s+INDEX|ENABLE\s+KEYS|DISABLE\s+KEYS)\b)(?!.*\b(?:COLUMN|ADD|MODIFY|CHANGE|DROP|CONVERT|RENAME|"
    r"VERSIONING)\b)", re.I | re.S)
# statements that change no column of any table
_NO_COLUMNS = ("truncate table", "create index", "drop index", "create database", "alter database",
               "create view", "drop view", "alter view", "create trigger", "drop trigger")


def evolve(sql: str, schema: str | None, view) -> dict:
    ddl = parse_ddl(sql, schema)
    kind = ddl.kind
    if not kind or kind in _NO_COLUMNS or kind.endswith("table partition"):
        return {}
    tables = ddl.tables
    if kind == "drop database":
        db = tables[0][0] if tables else schema
        return {(db, t): None for t in view.tables_of(db)}
    if kind == "drop table":
        return {t: None for t in tables}
    if kind == "rename table":
        return _rename(tables, view)
    if kind == "create table":
        return _create(sql, schema, tables, view)
    if kind == "alter table":
        return _alter(sql, schema, tables, view)
    # a statement shardflow does not classify: stale if it names a known table
    return {t: STALE for t in tables if view.get(*t) is not None}


def _rename(tables: list, view) -> dict:
    out: dict = {}

    def get(t):
        return out[t] if t in out else view.get(*t)
    for old, new in zip(tables[::2], tables[1::2]):
        was = get(old)
        out[old] = None
        out[new] = was
    return out


def _parse(text: str):
    from dm_core.shardddl.ddl_norm import _expand_add_list, _parse_one
    from dm_core.shardddl.errors import ShardDDLUnsupported

    try:
        return _parse_one(_expand_add_list(text))
    except ShardDDLUnsupported:
        return None


def _column(cd, default_charset: str | None) -> TrackedColumn:
    from sqlglot import exp

    from dm_core.shardddl.ddl_norm import column_from_def

    col, _ = column_from_def(cd)
    charset, generated = None, False
    for c in cd.args.get("constraints") or []:
        k = c.args.get("kind") if isinstance(c, exp.ColumnConstraint) else c
        if isinstance(k, exp.CharacterSetColumnConstraint):
            charset = k.this.name.lower()
        elif isinstance(k, exp.CollateColumnConstraint) and charset is None:
            coll = k.this.name.lower()
            charset = "binary" if coll == "binary" else coll.split("_")[0]
        elif isinstance(k, exp.ComputedColumnConstraint):
            generated = True
    charset = {"utf8": "utf8mb3", "charset": None}.get(charset, charset)
    t = canonical_type(col.type)
    return TrackedColumn(col.name, t, string_charset(t, charset, default_charset), generated,
                         "INVISIBLE" in (col.extra or "").upper())


def _table_charset(options) -> str | None:
    from sqlglot import exp

    for o in options or []:
        if isinstance(o, exp.CharacterSetProperty):
            return {"utf8": "utf8mb3"}.get(o.this.name.lower(), o.this.name.lower())
    for o in options or []:
        if isinstance(o, exp.CollateProperty):
            return o.this.name.lower().split("_")[0]
    return None


def _create(sql: str, schema: str | None, tables: list, view) -> dict:
    from sqlglot import exp

    target = tables[0]
    stmt = _parse(strip_comments(sql))
    if stmt is None or not isinstance(stmt, exp.Create):
        return {target: STALE}
    if stmt.args.get("exists") and view.get(*target) is not None:
        return {}     # CREATE TABLE IF NOT EXISTS of a table that is there: nothing changes
    props = stmt.args.get("properties")
    props = props.expressions if props is not None else []
    like = next((p for p in props if isinstance(p, exp.LikeProperty)), None)
    if like is not None:
        src = view.get(like.this.db or schema or "", like.this.name)
        return {target: src if isinstance(src, TrackedTable) else STALE}
    if stmt.args.get("expression") is not None or not isinstance(stmt.this, exp.Schema):
        return {target: STALE}   # CREATE ... SELECT: its columns come from the query
    charset = _table_charset(props) or view.charset_of(target[0])
    cols = []
    try:
        for e in stmt.this.expressions:
            if isinstance(e, exp.ColumnDef):
                cols.append(_column(e, charset))
    except Exception:   # a type sqlglot reads but canonical_type cannot spell: read it from the upstream
        return {target: STALE}
    return {target: TrackedTable(tuple(cols), charset, "followed from the binlog")}


def _alter(sql: str, schema: str | None, tables: list, view) -> dict:
    from sqlglot import exp

    target = tables[0]
    cur = view.get(*target)
    if cur is None or cur == STALE:
        return {}
    text = strip_comments(sql)
    sp = parse_ddl(text, schema).spans
    if len(sp) == 1 and _NO_COLUMN_ALTER.match(text[sp[0].end:]):
        return {}
    stmt = _parse(text)
    if stmt is None:
        m = _CONVERT_TO.search(text)
        if m and len(tables) == 1:
            cs = {"utf8": "utf8mb3"}.get(m.group(1).lower(), m.group(1).lower())
            cols = tuple(TrackedColumn(c.name, c.type, cs if c.charset not in (None, "binary") else c.charset,
                                       c.generated, c.invisible) for c in cur.columns)
            return {target: TrackedTable(cols, cs, "followed from the binlog")}
        return {target: STALE}
    cols = list(cur.columns)
    charset = _table_charset(stmt.args.get("options")) or cur.charset
    renamed_to = None

    def find(name: str) -> int:
        k = name.lower()
        i = next((i for i, c in enumerate(cols) if c.name.lower() == k), None)
        if i is None:
            raise LookupError(name)
        return i

    def place(col: TrackedColumn, position) -> None:
        if position is None:
            cols.append(col)
        elif str(position.args.get("position")).upper() == "FIRST":
            cols.insert(0, col)
        else:
            cols.insert(find(position.this.name) + 1, col)
    try:
        for a in stmt.args.get("actions") or []:
            if isinstance(a, exp.ColumnDef):
                if a.args.get("exists") and any(c.name.lower() == a.name.lower() for c in cols):
                    continue
                place(_column(a, charset), a.args.get("position"))
            elif isinstance(a, exp.Drop):
                if str(a.args.get("kind") or "").upper() == "COLUMN":
                    name = a.args["tables"][0].name
                    if a.args.get("exists") and not any(c.name.lower() == name.lower() for c in cols):
                        continue
                    del cols[find(name)]
            elif isinstance(a, exp.ModifyColumn):
                old = a.args.get("rename_from")
                i = find(old.name if old is not None else a.this.name)
                new = _column(a.this, charset)
                position = a.this.args.get("position")
                if position is None:
                    cols[i] = new
                else:
                    del cols[i]
                    place(new, position)
            elif isinstance(a, exp.RenameColumn):
                i = find(a.this.name)
                c = cols[i]
                cols[i] = TrackedColumn(a.args["to"].name, c.type, c.charset, c.generated, c.invisible)
            elif isinstance(a, exp.AlterRename):
                renamed_to = (a.this.db or target[0], a.this.name)
            elif isinstance(a, (exp.AlterColumn, exp.AlterIndex, exp.RenameIndex, exp.AddConstraint,
                                exp.DropPrimaryKey)):
                continue   # defaults, indexes, keys: not what a row image holds
            else:
                return {target: STALE}
    except LookupError:
        return {target: STALE}   # the tracked table lacks a column the statement names
    except Exception:
        return {target: STALE}
    new = TrackedTable(tuple(cols), charset, "followed from the binlog")
    if renamed_to is not None:
        return {target: None, renamed_to: new}
    return {target: new}
