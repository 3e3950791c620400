"""The binlog-filter event type of a DDL as DM's syncer judges it, incompatible changes told apart.

DM's syncer does not stop at ``alter table`` (``dm/syncer/ddl.go: AstToDDLEvent``): the first
clause of an ALTER TABLE that is one of these decides the statement's event type:

* MODIFY / CHANGE of a column: compared with the column before it (``modify_event``, TiDB's
  ``needChangeColumnData`` then DM's checks, in this order): ``value range decrease`` (a
  narrower integer, a shorter string or time fraction, ENUM/SET values taken away or
  reordered, signedness of a non-integer changed), ``precision decrease`` (any change of a
  DECIMAL, signedness of an integer, the length of a BINARY), ``modify column`` (CHAR <->
  VARCHAR, a shorter string of another string type, any other change of type), then
  ``remove auto increment``, ``drop primary key`` / ``drop unique key`` (the column was in one
  and the new definition does not say so), ``modify default value``, ``modify charset``,
  ``modify collation``, ``modify columns order`` (FIRST / AFTER), ``rename column``; none of
  these: ``alter table``. A column the table does not have: ``alter table``;
* RENAME COLUMN, RENAME INDEX|KEY, RENAME TO: ``rename column``, ``rename index``, ``rename
  table``; DROP COLUMN, DROP INDEX|KEY, DROP PRIMARY KEY: ``drop column``, ``drop index``,
  ``drop primary key``; ALTER COLUMN ... SET|DROP DEFAULT: ``modify default value``; ADD of any
  constraint or index (INDEX, KEY, UNIQUE, PRIMARY KEY, FOREIGN KEY, CHECK): ``modify
  constraint``; the table options CHARACTER SET / CONVERT TO, COLLATE, ENGINE: ``modify
  charset``, ``modify collation``, ``modify storage engine``;
* DROP / TRUNCATE / REORGANIZE / REBUILD / COALESCE / EXCHANGE PARTITION: ``drop table
  partition``, ``truncate table partition``, ``reorganize table partition``, ``rebuild table
  partition``, ``coalesce table partition``, ``exchange table partition``;
* other clauses (ADD COLUMN, ADD PARTITION, PARTITION BY, COMMENT, ...) are passed over; a
  statement of none of the above is ``alter table``. Statements other than ALTER TABLE keep
  their plain event type (``dm_core.ddl.kind``).

"Before" is the table as DM's schema tracker has it, which DM updates with every DDL it
reads, also the ones it skips (``dmctl binlog skip``) or a filter ignores: here the target
table downstream with the changes of such DDLs laid over it (``Overlay``: a skipped
``MODIFY c DECIMAL(7,1)`` makes the next ``MODIFY c DECIMAL(7,2)`` a precision decrease
again, as in DM).

    >>> t = TableDef({"c": col("c", "mediumint(7)"), "d": col("d", "decimal(7,2)"),
    ...               "id": col("id", "int(11)", auto_increment=True)}, {"primary": ("primary", ("id",))})
    >>> [alter_event(s, t) for s in ("ALTER TABLE t MODIFY c smallint(6)", "ALTER TABLE t MODIFY d decimal(7,1)",
    ...  "ALTER TABLE t MODIFY c varchar(10)", "ALTER TABLE t CHANGE c c2 mediumint(7)", "ALTER TABLE t CHANGE id id int(11)",
    ...  "ALTER TABLE t ADD INDEX i (c)", "ALTER TABLE t ADD COLUMN e int", "ALTER TABLE t ENGINE = MyISAM",
    ...  "ALTER TABLE t REORGANIZE PARTITION p0 INTO (PARTITION n0 VALUES LESS THAN (5))")]
    ['value range decrease', 'precision decrease', 'modify column', 'rename column', 'remove auto increment', 'modify constraint', 'alter table', 'modify storage engine', 'reorganize table partition']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from dm_core.ddl.kind import ddl_event_type, strip_comments

ALTER_TABLE = "alter table"

# TiDB's type of each MySQL type name: types that share a value here are "the same type"
_TYPE_CODE = {
    "tinyint": "tiny", "bool": "tiny", "boolean": "tiny", "smallint": "short", "mediumint": "int24",
    "middleint": "int24", "int": "long", "integer": "long", "bigint": "longlong",
    "decimal": "decimal", "dec": "decimal", "numeric": "decimal", "fixed": "decimal",
    "float": "float", "double": "double", "real": "double", "double precision": "double",
    "bit": "bit", "date": "date", "datetime": "datetime", "timestamp": "timestamp", "time": "time", "year": "year",
    "char": "string", "binary": "string", "nchar": "string", "national char": "string",
    "varchar": "varchar", "varbinary": "varchar", "nvarchar": "varchar", "national varchar": "varchar",
    "tinytext": "tinyblob", "tinyblob": "tinyblob", "text": "blob", "blob": "blob",
    "mediumtext": "mediumblob", "mediumblob": "mediumblob", "longtext": "longblob", "longblob": "longblob",
    "long": "mediumblob", "long varchar": "mediumblob", "enum": "enum", "set": "set", "json": "json",
}
_INTS = ("tiny", "short", "int24", "long", "longlong")
_DEFAULT_INT_FLEN = {"tiny": 4, "short": 6, "int24": 9, "long": 11, "longlong": 20}   # mysql.GetDefaultFieldLength
_STRINGS = ("string", "varchar", "tinyblob", "blob", "mediumblob", "longblob")
_BLOB_FLEN = {"tinyblob": 255, "blob": 65535, "mediumblob": 16777215, "longblob": 4294967295}
_BINARY_NAMES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_TIMES = ("datetime", "timestamp", "time")
_TYPE = re.compile(r"^\s*([a-z]+(?: precision| varchar| char)?)\s*(?:\((.*)\))?\s*((?:\s*(?:unsigned|signed|zerofill))*)\s*$",
                   re.I | re.S)


@dataclass(frozen=True)
class ColumnDef:
    """What DM's classification reads of a column (TiDB's FieldType and flags)."""

    name: str
    code: str                          # TiDB's type (_TYPE_CODE)
    flen: int | None = None            # length / precision, None when not given
    decimal: int | None = None         # scale / fraction digits
    unsigned: bool = False
    binary: bool = False               # BINARY / VARBINARY / BLOBs: binary strings
    elems: tuple[str, ...] = ()        # ENUM / SET values
    charset: str | None = None         # string columns only
    collation: str | None = None
    default: str | None = None         # canonical (schema.canonical_default), None = none / NULL
    auto_increment: bool = False

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict) -> "ColumnDef":
        return cls(**{**d, "elems": tuple(d.get("elems") or ())})


@dataclass(frozen=True)
class TableDef:
    """A table as the classification needs it: columns by lower-cased name, indexes by
    lower-cased name (``primary`` for the primary key) as (kind, columns), default charset."""

    columns: dict[str, ColumnDef] = field(default_factory=dict)
    indexes: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    charset: str | None = None
    collation: str | None = None

    def in_primary(self, name: str) -> bool:
        return any(k == "primary" and name.lower() in [c.lower() for c in cols] for k, cols in self.indexes.values())

    def unique_alone(self, name: str) -> bool:
        """TiDB's UniqueKeyFlag: the column is the only column of a unique index."""
        return any(k == "unique" and [c.lower() for c in cols] == [name.lower()] for k, cols in self.indexes.values())


def parse_type(text: str) -> dict:
    """The type fields of a column type as SQL or information_schema.COLUMNS.COLUMN_TYPE writes it.

    >>> parse_type("decimal(7,2) unsigned") == {"code": "decimal", "flen": 7, "decimal": 2, "unsigned": True,
    ...                                           "binary": False, "elems": ()}
    True
    >>> parse_type("enum('a','b')")["elems"], parse_type("tinytext")["flen"], parse_type("datetime(3)")["decimal"]
    (('a', 'b'), 255, 3)
    """
    from dm_core.shardddl.schema import _split_values

    m = _TYPE.match(text) if "'" not in text else None
    if m is None:   # ENUM / SET with quoted values
        head, _, rest = text.partition("(")
        name = " ".join(head.lower().split())
        vals = tuple(v[1:-1].replace("''", "'") for v in _split_values(rest.rsplit(")", 1)[0]))
        return {"code": _TYPE_CODE.get(name, name), "flen": None, "decimal": None, "unsigned": False,
                "binary": False, "elems": vals}
    name = " ".join(m.group(1).lower().split())
    params = [p.strip() for p in m.group(2).split(",")] if m.group(2) else []
    code = _TYPE_CODE.get(name, name)
    flen = int(params[0]) if params and params[0].isdigit() else None
    dec = int(params[1]) if len(params) > 1 and params[1].isdigit() else None
    if code == "float" and flen is not None and dec is None and flen > 24:
        code = "double"            # FLOAT(p), p > 24, is a DOUBLE
    if code in _TIMES:
        flen, dec = (None, None) if flen is None else (19 + (flen + 1 if flen else 0), flen)
    elif code in _BLOB_FLEN and flen is None:
        flen = _BLOB_FLEN[code]
    elif code == "string" and flen is None:
        flen = 1
    elif code == "decimal" and flen is not None and dec is None:
        dec = 0
    return {"code": code, "flen": flen, "decimal": dec, "unsigned": "unsigned" in (m.group(3) or "").lower(),
            "binary": name in _BINARY_NAMES, "elems": ()}


def col(name: str, type_: str, **kw) -> ColumnDef:
    """A column from its type text (tests, docstrings)."""
    return ColumnDef(name, **{**parse_type(type_), **kw})


# ---- reading the downstream -------------------------------------------------------------------
def read_table(conn, schema: str, table: str) -> TableDef | None:
    """The downstream table ``schema.table`` from information_schema, None when it is missing."""
    from dm_core.db import as_str as _as_str
    from dm_core.shardddl.schema import canonical_default

    def as_str(v):
        return None if v is None else _as_str(v)

    with conn.cursor() as cur:
        cur.execute("SELECT c.COLLATION_NAME, c.CHARACTER_SET_NAME FROM information_schema.TABLES t "
                    "LEFT JOIN information_schema.COLLATIONS c ON c.COLLATION_NAME = t.TABLE_COLLATION "
                    "WHERE t.TABLE_SCHEMA = %s AND t.TABLE_NAME = %s", (schema, table))
        row = cur.fetchone()
        if row is None:
            return None
        coll, cs = (as_str(x) for x in row)
        cur.execute("SELECT COLUMN_NAME, COLUMN_TYPE, CHARACTER_SET_NAME, COLLATION_NAME, COLUMN_DEFAULT, EXTRA "
                    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                    "ORDER BY ORDINAL_POSITION", (schema, table))
        cols = {}
        for name, ctype, ccs, ccoll, default, extra in cur.fetchall():
            name, ctype = as_str(name), as_str(ctype)
            t = parse_type(ctype)
            d = as_str(default)
            cols[name.lower()] = ColumnDef(name, **t, charset=as_str(ccs), collation=as_str(ccoll),
                                           default=canonical_default(d, ctype) if d is not None else None,
                                           auto_increment="auto_increment" in (as_str(extra) or "").lower())
        cur.execute("SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY INDEX_NAME, SEQ_IN_INDEX", (schema, table))
        idx: dict[str, tuple[str, list[str]]] = {}
        for name, non_unique, cname in cur.fetchall():
            name = as_str(name)
            kind = "primary" if name == "PRIMARY" else "index" if int(non_unique) else "unique"
            idx.setdefault(name.lower(), (kind, []))[1].append(as_str(cname))
    return TableDef(cols, {k: (kind, tuple(cs_)) for k, (kind, cs_) in idx.items()}, cs, coll)


def server_names(conn):
    """(charset_of(collation), default_collation(charset)) as the server ``conn`` names them."""
    from dm_core.db import as_str

    memo: dict[tuple[str, str], str | None] = {}

    def ask(sql: str, key: str, value: str) -> str | None:
        if (key, value) not in memo:
            with conn.cursor() as cur:
                cur.execute(sql, (value,))
                row = cur.fetchone()
            memo[(key, value)] = as_str(row[0]).lower() if row and row[0] is not None else None
        return memo[(key, value)]

    return (lambda coll: ask("SELECT CHARACTER_SET_NAME FROM information_schema.COLLATIONS WHERE COLLATION_NAME = %s",
                             "cs", coll),
            lambda cs: ask("SELECT DEFAULT_COLLATE_NAME FROM information_schema.CHARACTER_SETS "
                           "WHERE CHARACTER_SET_NAME = %s", "coll", cs))


# ---- the spec's column ---------------------------------------------------------------------------
@dataclass(frozen=True)
class NewColumn:
    column: ColumnDef
    primary: bool = False
    unique: bool = False
    positioned: bool = False


def new_column(cd, table: TableDef | None, charset_of=None, default_collation=None) -> NewColumn:
    """A sqlglot ColumnDef (of MODIFY / CHANGE / ADD) as DM's tracker would hold it: a string
    column without CHARACTER SET / COLLATE takes the table's (MySQL's rule); ``charset_of(collation)``
    and ``default_collation(charset)`` ask the server what it calls them."""
    from sqlglot import exp

    from dm_core.shardddl.schema import canonical_default

    kind = cd.args.get("kind")
    t = parse_type(kind.sql(dialect="mysql") if kind is not None else "int")
    cs = coll = default = None
    auto = primary = unique = binary_attr = False
    for c in cd.args.get("constraints") or []:
        k = c.args.get("kind") if isinstance(c, exp.ColumnConstraint) else c
        if isinstance(k, exp.CharacterSetColumnConstraint):
            cs = k.this.name.lower()
        elif isinstance(k, exp.CollateColumnConstraint):
            coll = k.this.name.lower()
        elif isinstance(k, exp.DefaultColumnConstraint):
            default = canonical_default(k.this.sql(dialect="mysql"), kind.sql(dialect="mysql") if kind else "")
        elif isinstance(k, exp.AutoIncrementColumnConstraint):
            auto = True
        elif isinstance(k, exp.PrimaryKeyColumnConstraint):
            primary = True
        elif isinstance(k, exp.UniqueColumnConstraint):
            unique = True
        elif isinstance(k, exp.BinaryColumnConstraint):
            binary_attr = True
    if t["code"] in _STRINGS + ("enum", "set") and not t["binary"]:
        if cs is None and coll is None and table is not None:
            cs, coll = table.charset, table.collation
        elif coll is not None and cs is None:
            cs = charset_of(coll) if charset_of else None
        elif cs is not None and coll is None:
            coll = default_collation(cs) if default_collation else None
        if binary_attr and cs and not coll:
            coll = f"{cs}_bin"
    else:
        cs = coll = None
    return NewColumn(ColumnDef(cd.name, **t, charset=cs, collation=coll, default=default, auto_increment=auto),
                     primary, unique, cd.args.get("position") is not None)


# ---- DM's rules ------------------------------------------------------------------------------------
def _elems_changed(old: tuple, new: tuple) -> bool:
    """TiDB's IsElemsChangedToModifyColumn: values taken away or reordered."""
    return len(new) < len(old) or any(o != n for o, n in zip(old, new))


def _change_data(old: ColumnDef, new: ColumnDef) -> str:
    """TiDB's needChangeColumnData as DM's syncer reads it (ddl.go)."""
    toggled = old.unsigned != new.unsigned

    def truncation():
        return (new.flen is not None and new.flen > 0 and (
            new.flen < (old.flen if old.flen is not None else 1 << 62)
            or (new.decimal if new.decimal is not None else 0) < (old.decimal if old.decimal is not None else 0))) \
            or toggled

    def int_truncation():
        return _DEFAULT_INT_FLEN[new.code] < _DEFAULT_INT_FLEN[old.code] or toggled

    if {old.code, new.code} == {"json", "longblob"} and not (old.binary or new.binary):
        return ALTER_TABLE         # MariaDB's JSON is a LONGTEXT (information_schema says longtext)
    if old.code == new.code:
        if old.code == "decimal":
            if ((old.flen or 10), (old.decimal or 0)) != ((new.flen or 10), (new.decimal or 0)) or toggled:
                return "precision decrease"
            return ALTER_TABLE
        if old.code in ("enum", "set"):
            return "value range decrease" if _elems_changed(old.elems, new.elems) else ALTER_TABLE
        if old.code in _INTS:
            return "precision decrease" if toggled else ALTER_TABLE
        if old.code == "string":
            if old.binary and new.flen != old.flen:
                return "precision decrease"
            return ALTER_TABLE
        return "value range decrease" if truncation() else ALTER_TABLE
    if {old.code, new.code} == {"string", "varchar"}:
        return "modify column"
    if old.code in _STRINGS and new.code in _STRINGS:
        return "modify column" if truncation() else ALTER_TABLE
    if old.code in _INTS and new.code in _INTS:
        return "value range decrease" if int_truncation() else ALTER_TABLE
    return "modify column"


def modify_event(old: ColumnDef | None, new: NewColumn, table: TableDef) -> str:
    """DM's handleModifyColumn: the event of a MODIFY / CHANGE from ``old`` to ``new``."""
    if old is None:
        return ALTER_TABLE
    n = new.column
    et = _change_data(old, n)
    if et != ALTER_TABLE:
        return et
    if old.auto_increment and not n.auto_increment:
        return "remove auto increment"
    if table.in_primary(old.name) and not new.primary:
        return "drop primary key"
    if table.unique_alone(old.name) and not new.unique:
        return "drop unique key"
    if old.default != n.default:
        return "modify default value"
    if (old.charset or None) != (n.charset or None):
        return "modify charset"
    if (old.collation or None) != (n.collation or None):
        return "modify collation"
    if new.positioned:
        return "modify columns order"
    if old.name.lower() != n.name.lower():
        return "rename column"
    return ALTER_TABLE


_OPTION_EVENTS = (("CharacterSetProperty", "modify charset"), ("CollateProperty", "modify collation"),
                  ("EngineProperty", "modify storage engine"))
_CONVERT = re.compile(r"\bCONVERT\s+TO\s+(?:CHARACTER\s+SET|CHARSET)\b", re.I)
_TEXT_OPTIONS = (
    (re.compile(r"(?:^|,)\s*(?:DEFAULT\s+)?(?:CHARACTER\s+SET|CHARSET)\s*=?\s*\w", re.I), "modify charset"),
    (re.compile(r"(?:^|,)\s*(?:DEFAULT\s+)?COLLATE\s*=?\s*\w", re.I), "modify collation"),
    (re.compile(r"(?:^|,)\s*ENGINE\s*=?\s*\w", re.I), "modify storage engine"),
)
_ALTER_HEAD = re.compile(r"^ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:`[^`]*`|[^\s`.]+)(?:\s*\.\s*(?:`[^`]*`|[^\s`.]+))?\s+",
                         re.I)


def alter_event(sql: str, table: TableDef | None, *, charset_of=None, default_collation=None) -> str:
    """DM's event type of one ALTER TABLE statement (default-mode text: ``ddl.text.default_reading``),
    ``table`` the table before it (None: not known, a MODIFY/CHANGE is then ``alter table``)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    text = strip_comments(sql)
    plain = ddl_event_type(text)
    if plain.endswith("table partition"):    # partition maintenance: sqlglot has no node for it
        return ALTER_TABLE if plain in ("add table partition", "split table partition") else plain
    try:
        stmt = sqlglot.parse_one(text, read="mysql")
    except SqlglotError:
        stmt = None
    if not isinstance(stmt, exp.Alter):
        if _CONVERT.search(text):
            return "modify charset"
        m = _ALTER_HEAD.match(text)
        for rx, et in _TEXT_OPTIONS:
            if m and rx.search(text[m.end():]):
                return et
        return ALTER_TABLE
    table = table or TableDef()
    for a in stmt.args.get("actions") or []:
        if isinstance(a, exp.ModifyColumn):
            old_name = a.args.get("rename_from")
            old_name = old_name.name if old_name is not None else a.this.name
            new = new_column(a.this, table, charset_of, default_collation)
            return modify_event(table.columns.get(old_name.lower()), new, table)
        if isinstance(a, exp.RenameColumn):
            return "rename column"
        if isinstance(a, exp.RenameIndex):
            return "rename index"
        if isinstance(a, exp.AlterRename):
            return "rename table"
        if isinstance(a, exp.Drop):
            k = str(a.args.get("kind") or "").upper()
            if k == "COLUMN":
                return "drop column"
            if k in ("INDEX", "KEY"):
                return "drop index"
            continue
        if isinstance(a, exp.DropPrimaryKey):
            return "drop primary key"
        if isinstance(a, exp.AlterColumn):
            return "modify default value"
        if isinstance(a, exp.AddConstraint):
            return "modify constraint"
    for o in stmt.args.get("options") or []:
        for name, et in _OPTION_EVENTS:
            if type(o).__name__ == name:
                return et
    return ALTER_TABLE


# ---- what a DDL that does not run downstream does to the tracked table -------------------------------
ABSENT = None


@dataclass
class Overlay:
    """The changes of DDLs the downstream did not get (skipped, ignored by a filter) on one
    upstream table: column and index definitions by lower-cased name (None: gone), and the
    table's default charset/collation when an ignored ALTER changed them. ``apply`` lays them
    over the downstream table; a DDL that runs downstream hands the names it touches back to
    the downstream (``executed``)."""

    columns: dict[str, dict | None] = field(default_factory=dict)
    indexes: dict[str, list | None] = field(default_factory=dict)
    table: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"columns": self.columns, "indexes": self.indexes, "table": self.table}

    @classmethod
    def from_dict(cls, d: dict | None) -> "Overlay":
        d = d or {}
        return cls(dict(d.get("columns") or {}), dict(d.get("indexes") or {}), dict(d.get("table") or {}))

    def __bool__(self) -> bool:
        return bool(self.columns or self.indexes or self.table)

    def apply(self, base: TableDef | None) -> TableDef:
        t = base or TableDef()
        cols = dict(t.columns)
        for k, v in self.columns.items():
            if v is None:
                cols.pop(k, None)
            else:
                cols[k] = ColumnDef.from_dict(v)
        idx = dict(t.indexes)
        for k, v in self.indexes.items():
            if v is None:
                idx.pop(k, None)
            else:
                idx[k] = (v[0], tuple(v[1]))
        return replace(t, columns=cols, indexes=idx, charset=self.table.get("charset", t.charset),
                       collation=self.table.get("collation", t.collation))

    def skipped(self, sql: str, before: TableDef, *, charset_of=None, default_collation=None) -> None:
        """Lay the changes of ALTER TABLE ``sql`` (not run downstream) over the table, whose
        state before it is ``before`` (this overlay already applied)."""
        import sqlglot
        from sqlglot import exp
        from sqlglot.errors import SqlglotError

        try:
            stmt = sqlglot.parse_one(strip_comments(sql), read="mysql")
        except SqlglotError:
            return
        if isinstance(stmt, exp.Create) and str(stmt.args.get("kind") or "").upper() == "INDEX":
            idx = stmt.this
            cols = [c.this.name if isinstance(c, exp.Ordered) else c.name
                    for c in (idx.args.get("params").args.get("columns") or [])] if idx.args.get("params") else []
            self.indexes[idx.name.lower()] = ["unique" if stmt.args.get("unique") else "index", cols]
            return
        if isinstance(stmt, exp.Drop) and str(stmt.args.get("kind") or "").upper() == "INDEX":
            self.indexes[stmt.args["tables"][0].name.lower()] = ABSENT
            return
        if not isinstance(stmt, exp.Alter):
            return
        cur = before
        for a in stmt.args.get("actions") or []:
            if isinstance(a, exp.ModifyColumn):
                old = a.args.get("rename_from")
                old = (old.name if old is not None else a.this.name).lower()
                new = new_column(a.this, cur, charset_of, default_collation)
                if old != new.column.name.lower():
                    self.columns[old] = ABSENT
                self.columns[new.column.name.lower()] = new.column.to_dict()
                if new.primary:
                    self.indexes["primary"] = ["primary", [new.column.name]]
                if new.unique:
                    self.indexes[new.column.name.lower()] = ["unique", [new.column.name]]
            elif isinstance(a, exp.ColumnDef):
                new = new_column(a, cur, charset_of, default_collation)
                self.columns[new.column.name.lower()] = new.column.to_dict()
            elif isinstance(a, exp.RenameColumn):
                old = cur.columns.get(a.this.name.lower())
                self.columns[a.this.name.lower()] = ABSENT
                if old is not None:
                    to = a.args["to"].name
                    self.columns[to.lower()] = replace(old, name=to).to_dict()
            elif isinstance(a, exp.Drop):
                k = str(a.args.get("kind") or "").upper()
                name = a.args["tables"][0].name.lower() if a.args.get("tables") else ""
                if k == "COLUMN":
                    self.columns[name] = ABSENT
                elif k in ("INDEX", "KEY"):
                    self.indexes[name] = ABSENT
            elif isinstance(a, exp.DropPrimaryKey):
                self.indexes["primary"] = ABSENT
            elif isinstance(a, exp.AlterColumn):
                c = cur.columns.get(a.this.name.lower())
                if c is not None:
                    d = a.args.get("default")
                    from dm_core.shardddl.schema import canonical_default
                    self.columns[c.name.lower()] = replace(
                        c, default=canonical_default(d.sql(dialect="mysql")) if d is not None else None).to_dict()
            elif isinstance(a, exp.RenameIndex):
                old = cur.indexes.get(a.this.name.lower())
                self.indexes[a.this.name.lower()] = ABSENT
                if old is not None:
                    self.indexes[a.args["to"].name.lower()] = [old[0], list(old[1])]
            elif isinstance(a, exp.AddConstraint):
                from dm_core.shardddl.ddl_norm import _index_of
                for c in a.expressions:
                    name = None
                    if isinstance(c, exp.Constraint) and c.expressions:   # ADD CONSTRAINT name <key>
                        name, c = c.this.name, c.expressions[0]
                    i = _index_of(c)
                    if i is not None:
                        self.indexes["primary" if i.kind == "primary" else (name or i.name).lower()] = [
                            i.kind if i.kind in ("primary", "unique") else "index", list(i.columns)]
        for o in stmt.args.get("options") or []:
            n = type(o).__name__
            if n == "CharacterSetProperty":
                self.table["charset"] = o.this.name.lower()
                if default_collation:
                    self.table["collation"] = default_collation(self.table["charset"])
            elif n == "CollateProperty":
                self.table["collation"] = o.this.name.lower()

    def executed(self, sql: str) -> None:
        """A DDL ran downstream: the columns and indexes it names are the downstream's again."""
        if not self:
            return
        words = {w.strip("`").lower() for w in re.findall(r"`(?:[^`]|``)*`|[\w$]+", strip_comments(sql))}
        for k in [k for k in self.columns if k in words]:
            del self.columns[k]
        for k in [k for k in self.indexes if k in words or (k == "primary" and "primary" in words)]:
            del self.indexes[k]
