"""Table schemas as shard DDL sees them: columns, indexes, the changes a DDL makes, the
join of several shards' schemas and the DDL that turns one schema into another.

Pure values, JSON-serialisable (``to_dict``/``from_dict``), no database access.

What is compared:

* a column is its canonical type (``canonical_type``: upper case, integer display widths
  dropped, BOOL = TINYINT), nullability and canonical default (``None`` = no DEFAULT
  clause; ``DEFAULT NULL`` on a nullable column is the same as none). Comments, charset,
  AUTO_INCREMENT and ON UPDATE ride along in ``extra`` and are not compared;
* names of columns and indexes are case-insensitive, as in MySQL;
* an index is its kind (primary, unique, index, fulltext, spatial) and column list.

The join (DM's "most compatible schema", ``join_schemas``) of shard schemas S1..Sn:

1. a column present in every shard gets the join of its definitions: the wider type
   (``join_type``: TINYINT < SMALLINT < MEDIUMINT < INT < BIGINT of one signedness,
   DECIMAL covering both, FLOAT < DOUBLE, CHAR/VARCHAR/BINARY/VARBINARY by length,
   TEXT and BLOB sizes, ENUM/SET whose values extend the other's, time precision),
   nullable if any shard's is; a default joins with no default (DM's schemacmp: no default
   is the lower bound of every default), two different defaults conflict;
2. a column present in some shards only is kept, but it must be nullable or have a
   default (otherwise rows of the shards without it cannot be written);
3. non-unique indexes: union; primary and unique keys: intersection (a unique key
   downstream that some shard does not enforce would reject its rows); an index that shards
   define differently (one name, other columns or kind) is left out until they agree again,
   as DM's schemacmp leaves out an incompatible index: indexes never decide which rows fit;
4. anything else (different types of one family's other branch, a NOT NULL column
   without default missing from a shard) is a ``JoinConflict`` naming the column and the
   shards.

    >>> a = TableSchema((Column("id", "INT", False), Column("c", "INT")))
    >>> b = TableSchema((Column("id", "BIGINT", False),))
    >>> j = join_schemas({"s1": a, "s2": b})
    >>> [(c.name, c.type, c.nullable) for c in j.columns]
    [('id', 'BIGINT', False), ('c', 'INT', True)]
    >>> [c.sql for c in diff_schemas("db", "t", a, j)]
    ['ALTER TABLE `db`.`t` MODIFY COLUMN `id` BIGINT NOT NULL']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation


def qi(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


# ---- types ------------------------------------------------------------------------------
_INTS = ["TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT"]
_TEXTS = ["TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT"]
_BLOBS = ["TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"]
_FLOATS = ["FLOAT", "DOUBLE"]
_LENGTHED = {"CHAR": "char", "VARCHAR": "char", "BINARY": "bin", "VARBINARY": "bin"}
_PRECISION = {"DATETIME", "TIMESTAMP", "TIME"}
_ALIASES = {"INTEGER": "INT", "BOOLEAN": "TINYINT", "BOOL": "TINYINT", "NUMERIC": "DECIMAL", "DEC": "DECIMAL",
            "FIXED": "DECIMAL", "REAL": "DOUBLE", "DOUBLE PRECISION": "DOUBLE", "TIMESTAMPTZ": "TIMESTAMP"}
_TYPE = re.compile(r"^([A-Z][A-Z ]*?)\s*(?:\((.*)\))?((?:\s+(?:UNSIGNED|SIGNED|ZEROFILL))*)$", re.S)


def canonical_type(text) -> str:
    """One spelling per MySQL column type (``text`` is SQL text or a sqlglot DataType).

    >>> [canonical_type(t) for t in ("int(11)", "INT(10) UNSIGNED ZEROFILL", "int(11) zerofill", "bool", "decimal(10,2)",
    ...                               "varchar(64)", "enum('a','b')", "numeric", "timestamp", "char")]
    ['INT', 'INT UNSIGNED', 'INT UNSIGNED', 'TINYINT', 'DECIMAL(10, 2)', 'VARCHAR(64)', "ENUM('a', 'b')", 'DECIMAL(10, 0)', 'TIMESTAMP', 'CHAR(1)']
    """
    if not isinstance(text, str):
        text = text.sql(dialect="mysql")
    t = " ".join(text.strip().split())
    m = _TYPE.match(t.upper()) if "'" not in t else None
    if m is None:  # ENUM / SET with quoted values: keep the values' case
        head, _, rest = t.partition("(")
        body = rest.rsplit(")", 1)[0] if rest else ""
        name = head.strip().upper()
        vals = _split_values(body)
        return f"{name}({', '.join(vals)})"
    name, params, flags = m.group(1).strip(), m.group(2), m.group(3) or ""
    name = _ALIASES.get(name, name)
    unsigned = " UNSIGNED" if "UNSIGNED" in flags or "ZEROFILL" in flags else ""  # MySQL: ZEROFILL implies UNSIGNED
    ps = [p.strip() for p in params.split(",")] if params else []
    if name in _INTS:
        return name + unsigned
    if name == "DECIMAL":
        p = int(ps[0]) if ps else 10
        s = int(ps[1]) if len(ps) > 1 else 0
        return f"DECIMAL({p}, {s}){unsigned}"
    if name in ("CHAR", "BINARY") and not ps:
        return f"{name}(1)"
    if name in _FLOATS and ps:
        return f"{name}({', '.join(ps)}){unsigned}"
    if name in _PRECISION and ps and ps[0] == "0":
        return name
    if name == "YEAR":
        return "YEAR"
    return f"{name}({', '.join(ps)}){unsigned}" if ps else name + unsigned


def _split_values(body: str) -> list[str]:
    """ENUM/SET values as single-quoted SQL literals: ``'a','b'`` → ``["'a'", "'b'"]``."""
    out, cur, q, i = [], None, None, 0
    while i < len(body):
        ch = body[i]
        if q:
            if ch == q and i + 1 < len(body) and body[i + 1] == q:
                cur += q
                i += 1
            elif ch == q:
                out.append("'" + cur.replace("'", "''") + "'")
                q, cur = None, None
            elif ch == "\\" and i + 1 < len(body):
                cur += body[i + 1]
                i += 1
            else:
                cur += ch
        elif ch in "'\"":
            q, cur = ch, ""
        i += 1
    return out


def _parts(t: str) -> tuple[str, list[str], bool]:
    m = _TYPE.match(t) if "'" not in t else None
    if m is None:
        head, _, rest = t.partition("(")
        return head.strip(), _split_values(rest.rsplit(")", 1)[0]), False
    ps = [p.strip() for p in m.group(2).split(",")] if m.group(2) else []
    return m.group(1).strip(), ps, "UNSIGNED" in (m.group(3) or "")


def join_type(a: str, b: str) -> str | None:
    """The narrowest type holding every value of both, ``None`` when there is none we accept.

    >>> join_type("INT", "BIGINT"), join_type("INT", "INT UNSIGNED"), join_type("VARCHAR(10)", "CHAR(20)")
    ('BIGINT', None, 'VARCHAR(20)')
    >>> join_type("DECIMAL(10, 2)", "DECIMAL(12, 0)"), join_type("ENUM('a')", "ENUM('a', 'b')")
    ('DECIMAL(14, 2)', "ENUM('a', 'b')")
    """
    if a == b:
        return a
    (na, pa, ua), (nb, pb, ub) = _parts(a), _parts(b)
    for family in (_INTS, _TEXTS, _BLOBS, _FLOATS):
        if na in family and nb in family:
            if family is _FLOATS and (pa or pb):
                return None
            if ua != ub:
                return None
            return max(a, b, key=lambda t: family.index(_parts(t)[0]))
    if na == nb == "DECIMAL" and ua == ub:
        (p1, s1), (p2, s2) = map(int, pa), map(int, pb)
        s = max(s1, s2)
        p = min(65, max(p1 - s1, p2 - s2) + s)
        return f"DECIMAL({p}, {s})" + (" UNSIGNED" if ua else "")
    if na in _LENGTHED and nb in _LENGTHED and _LENGTHED[na] == _LENGTHED[nb]:
        n = max(int(pa[0]), int(pb[0]))
        name = na if na == nb else ("VARCHAR" if _LENGTHED[na] == "char" else "VARBINARY")
        return f"{name}({n})"
    if na == nb and na in ("ENUM", "SET"):
        if pa == pb[:len(pa)]:
            return b
        if pb == pa[:len(pb)]:
            return a
        return None
    if na == nb and na in _PRECISION:
        return f"{na}({max(int((pa or ['0'])[0]), int((pb or ['0'])[0]))})"
    return None


# ---- defaults ---------------------------------------------------------------------------
_NOW = re.compile(r"^(CURRENT_TIMESTAMP|NOW|LOCALTIME|LOCALTIMESTAMP)\s*(\(\s*(\d*)\s*\))?$", re.I)
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def canonical_default(value: str | None, type_: str = "", *, quoted_strings: bool = True) -> str | None:
    """One spelling of a DEFAULT: a SQL literal, ``CURRENT_TIMESTAMP[(n)]`` or ``None`` (none / NULL).

    ``quoted_strings=False`` reads MySQL's information_schema, which shows string defaults
    unquoted (MariaDB quotes them, and shows NULL as the text ``NULL``).

    >>> canonical_default("0.00", "DECIMAL(10, 2)"), canonical_default("'a''b'"), canonical_default("now()")
    ('0', "'a''b'", 'CURRENT_TIMESTAMP')
    >>> canonical_default("abc", "VARCHAR(3)", quoted_strings=False), canonical_default("NULL")
    ("'abc'", None)
    """
    if value is None:
        return None
    v = value.strip()
    if v.upper() == "NULL":
        return None
    m = _NOW.match(v)
    if m:
        return "CURRENT_TIMESTAMP" + (f"({m.group(3)})" if m.group(3) and m.group(3) != "0" else "")
    numeric = not type_ or _parts(type_)[0] in _NUMERIC
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        inner = v[1:-1].replace(v[0] * 2, v[0]).replace("\\'", "'")
        return (_num(inner) if numeric and type_ else None) or "'" + inner.replace("'", "''") + "'"
    if _NUMBER.match(v):
        return _num(v) if numeric else "'" + v + "'"
    if not quoted_strings:
        return "'" + v.replace("'", "''") + "'"
    return v


_NUMERIC = set(_INTS + _FLOATS + ["DECIMAL", "BIT", "YEAR"])


def _num(v: str) -> str | None:
    """Numeric defaults compare by value (``0.00`` = ``0``)."""
    if not _NUMBER.match(v):
        return None
    try:
        d = Decimal(v)
    except InvalidOperation:
        return None
    s = format(d.normalize(), "f")
    return "0" if s in ("-0", "0") else s


# ---- columns and indexes -------------------------------------------------------------------
_GENERATED = re.compile(r"(?:^|\s)(?:GENERATED\s+ALWAYS\s+)?AS\s*\(", re.I)


def same_generation(a: "Column", b: "Column") -> bool:
    """Both stored, or both generated by one expression (DM's schemacmp compares the generation
    expression as a singleton: shards generating a column two ways conflict). A generated
    column read from the downstream, its expression unknown, matches any generated one."""
    ga, gb = a.generation, b.generation
    if ga == "" or gb == "":
        return ga == gb
    return ga is None or gb is None or ga == gb


@dataclass(frozen=True)
class Column:
    name: str
    type: str                   # canonical_type()
    nullable: bool = True
    default: str | None = None  # canonical_default(); None = no DEFAULT clause (or DEFAULT NULL)
    extra: str = ""             # AUTO_INCREMENT, COMMENT, charset, ON UPDATE ...: carried, not compared

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def auto_increment(self) -> bool:
        return "AUTO_INCREMENT" in self.extra.upper()

    @property
    def generation(self) -> str | None:
        """'' for a stored column; the generation expression of a generated one, comparable
        (no quotes, spaces or case); None for a generated column whose expression is not known
        (as information_schema's EXTRA shows it: ``VIRTUAL GENERATED``).

        >>> Column("c", "INT", extra="GENERATED ALWAYS AS (`id` + 1) VIRTUAL").generation
        '(id+1)'
        >>> Column("c", "INT", extra="VIRTUAL GENERATED").generation is None, Column("c", "INT").generation
        (True, '')
        """
        m = _GENERATED.search(self.extra)
        if m is None:
            return None if "GENERATED" in self.extra.upper() else ""
        depth, start = 0, m.end() - 1
        for i in range(start, len(self.extra)):
            depth += {"(": 1, ")": -1}.get(self.extra[i], 0)
            if depth == 0:
                return "".join(self.extra[start:i + 1].replace("`", "").split()).lower()
        return None

    def same_definition(self, other: "Column") -> bool:
        return (self.type, self.nullable, self.default) == (other.type, other.nullable, other.default) and \
            same_generation(self, other)

    def can_be_absent(self) -> bool:
        """Rows written without this column get a value: NULL, a default or an auto id."""
        return self.nullable or self.default is not None or self.auto_increment

    def definition(self) -> str:
        """The column definition as in ``ADD COLUMN <definition>``.

        >>> Column("c", "INT", False, "0", "COMMENT 'x'").definition()
        "`c` INT NOT NULL DEFAULT 0 COMMENT 'x'"
        """
        out = f"{qi(self.name)} {self.type}" + ("" if self.nullable else " NOT NULL")
        if self.default is not None:
            out += f" DEFAULT {self.default}"
        return out + (f" {self.extra}" if self.extra else "")

    def describe(self) -> str:
        out = self.type + ("" if self.nullable else " NOT NULL")
        out += f" GENERATED ALWAYS AS {self.generation}" if self.generation else ""
        return out + (f" DEFAULT {self.default}" if self.default is not None else "")

    def to_dict(self) -> dict:
        return {"name": self.name, "type": self.type, "nullable": self.nullable, "default": self.default,
                "extra": self.extra}

    @classmethod
    def from_dict(cls, d: dict) -> "Column":
        return cls(d["name"], d["type"], d.get("nullable", True), d.get("default"), d.get("extra", ""))


@dataclass(frozen=True)
class Index:
    name: str                      # "PRIMARY" for the primary key
    kind: str                      # primary | unique | index | fulltext | spatial
    columns: tuple[str, ...]
    # the statement gave no name: ``name`` is the server's default (the first column), which
    # another index may already hold (the server then picks ``<column>_2``)
    implicit: bool = field(default=False, compare=False)

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def unique(self) -> bool:
        return self.kind in ("primary", "unique")

    def same_definition(self, other: "Index") -> bool:
        return self.kind == other.kind and [c.lower() for c in self.columns] == [c.lower() for c in other.columns]

    def definition(self) -> str:
        """As in ``ADD <definition>``.

        >>> Index("uk", "unique", ("a", "b")).definition(), Index("PRIMARY", "primary", ("id",)).definition()
        ('UNIQUE INDEX `uk` (`a`, `b`)', 'PRIMARY KEY (`id`)')
        """
        cols = ", ".join(qi(c) for c in self.columns)
        if self.kind == "primary":
            return f"PRIMARY KEY ({cols})"
        head = {"unique": "UNIQUE INDEX", "index": "INDEX", "fulltext": "FULLTEXT INDEX", "spatial": "SPATIAL INDEX"}
        return f"{head[self.kind]} {qi(self.name)} ({cols})"

    def drop_clause(self) -> str:
        return "DROP PRIMARY KEY" if self.kind == "primary" else f"DROP INDEX {qi(self.name)}"

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "columns": list(self.columns)}

    @classmethod
    def from_dict(cls, d: dict) -> "Index":
        return cls(d["name"], d["kind"], tuple(d["columns"]))


# ---- changes ------------------------------------------------------------------------------
CHANGE_OPS = ("add_column", "drop_column", "modify_column", "rename_column", "set_default",
              "add_index", "drop_index", "rename_index", "charset", "index_visibility", "other", "partition")


@dataclass(frozen=True)
class Change:
    """One schema change of a DDL (one clause of an ALTER, or a CREATE/DROP INDEX).

    ``sql`` is a complete single-change statement on the routed target table.
    """

    op: str                           # one of CHANGE_OPS
    name: str = ""                    # column / index (the old name for modify, rename)
    column: Column | None = None      # the new definition (add_column, modify_column)
    new_name: str = ""                # rename_column / rename_index / modify with CHANGE old new
    index: Index | None = None        # add_index
    default: str | None = None        # set_default (None = DROP DEFAULT)
    if_exists: bool = False           # ADD COLUMN IF NOT EXISTS / DROP ... IF EXISTS
    sql: str = ""

    def describe(self) -> str:
        return self.sql or f"{self.op} {self.name}"

    def to_dict(self) -> dict:
        return {"op": self.op, "name": self.name, "column": self.column.to_dict() if self.column else None,
                "new_name": self.new_name, "index": self.index.to_dict() if self.index else None,
                "default": self.default, "if_exists": self.if_exists, "sql": self.sql}

    @classmethod
    def from_dict(cls, d: dict) -> "Change":
        return cls(d["op"], d.get("name", ""), Column.from_dict(d["column"]) if d.get("column") else None,
                   d.get("new_name", ""), Index.from_dict(d["index"]) if d.get("index") else None,
                   d.get("default"), d.get("if_exists", False), d.get("sql", ""))


class SchemaError(ValueError):
    """A change that cannot apply to the schema it is said to follow (our tracked schema is wrong)."""


# ---- table schema -------------------------------------------------------------------------------
@dataclass(frozen=True)
class TableSchema:
    columns: tuple[Column, ...] = ()
    indexes: tuple[Index, ...] = ()

    def column(self, name: str) -> Column | None:
        k = name.lower()
        return next((c for c in self.columns if c.key == k), None)

    def index(self, name: str) -> Index | None:
        k = name.lower()
        return next((i for i in self.indexes if i.key == k), None)

    def apply(self, changes: list[Change]) -> "TableSchema":
        """The schema after ``changes``; SchemaError when one does not fit.

        >>> s = TableSchema((Column("id", "INT", False),))
        >>> s.apply([Change("add_column", "c", Column("c", "INT"))]).column("C").type
        'INT'
        """
        cols = list(self.columns)
        idx = list(self.indexes)

        def find(name):
            k = name.lower()
            return next((i for i, c in enumerate(cols) if c.key == k), None)

        def find_idx(name):
            k = name.lower()
            return next((i for i, x in enumerate(idx) if x.key == k), None)

        def keyed(c: Column) -> Column:
            """A column of the primary key is NOT NULL whatever its definition says (MySQL)."""
            pk = next((x for x in idx if x.kind == "primary"), None)
            return replace(c, nullable=False) if pk is not None and c.key in [x.lower() for x in pk.columns] else c

        for ch in changes:
            if ch.op == "add_column":
                if find(ch.column.name) is not None:
                    if ch.if_exists:
                        continue
                    raise SchemaError(f"column `{ch.column.name}` already exists")
                cols.append(ch.column)
            elif ch.op == "drop_column":
                i = find(ch.name)
                if i is None:
                    if ch.if_exists:
                        continue
                    raise SchemaError(f"column `{ch.name}` does not exist")
                del cols[i]
                k = ch.name.lower()
                idx = [x if k not in [c.lower() for c in x.columns] else
                       replace(x, columns=tuple(c for c in x.columns if c.lower() != k)) for x in idx]
                idx = [x for x in idx if x.columns]
            elif ch.op in ("modify_column", "rename_column"):
                i = find(ch.name)
                if i is None:
                    raise SchemaError(f"column `{ch.name}` does not exist")
                new = ch.column if ch.op == "modify_column" else replace(cols[i], name=ch.new_name)
                if new.key != cols[i].key and find(new.name) is not None:
                    raise SchemaError(f"column `{new.name}` already exists")
                if new.key != ch.name.lower():
                    idx = [replace(x, columns=tuple(new.name if c.lower() == ch.name.lower() else c for c in x.columns))
                           for x in idx]
                cols[i] = keyed(new)
            elif ch.op == "set_default":
                i = find(ch.name)
                if i is None:
                    raise SchemaError(f"column `{ch.name}` does not exist")
                cols[i] = replace(cols[i], default=ch.default)
            elif ch.op == "add_index":
                if find_idx(ch.index.name) is not None:
                    if ch.if_exists:
                        continue
                    raise SchemaError(f"index `{ch.index.name}` already exists")
                idx.append(ch.index)
                if ch.index.kind == "primary":
                    cols = [replace(c, nullable=False) if c.key in [x.lower() for x in ch.index.columns] else c
                            for c in cols]
            elif ch.op == "drop_index":
                i = find_idx(ch.name)
                if i is None:
                    if ch.if_exists:
                        continue
                    raise SchemaError(f"index `{ch.name}` does not exist")
                del idx[i]
            elif ch.op == "rename_index":
                i = find_idx(ch.name)
                if i is None:
                    raise SchemaError(f"index `{ch.name}` does not exist")
                idx[i] = replace(idx[i], name=ch.new_name)
            # "charset", "index_visibility", "other" (table options) and "partition" (partition
            # maintenance) do not change what is tracked
        return TableSchema(tuple(cols), tuple(idx))

    def to_dict(self) -> dict:
        return {"columns": [c.to_dict() for c in self.columns], "indexes": [i.to_dict() for i in self.indexes]}

    @classmethod
    def from_dict(cls, d: dict | None) -> "TableSchema":
        d = d or {}
        return cls(tuple(Column.from_dict(c) for c in d.get("columns", ())),
                   tuple(Index.from_dict(i) for i in d.get("indexes", ())))


# ---- join ---------------------------------------------------------------------------------------
class JoinConflict(ValueError):
    """Shard schemas that have no common downstream schema; the message names columns and members."""

    def __init__(self, message: str, columns: list[str], members: list[str], missing: bool = False):
        super().__init__(message)
        self.columns = columns
        self.members = members
        self.missing = missing   # a NOT NULL column without default some members lack (they may add it)


def join_column(a: Column, b: Column) -> Column | None:
    """The definition holding both, None when they conflict.

    >>> join_column(Column("c", "INT", False), Column("c", "BIGINT", True)).describe()
    'BIGINT'
    """
    t = join_type(a.type, b.type)
    if t is None or (a.default is not None and b.default is not None and a.default != b.default) or \
            not same_generation(a, b):
        return None
    return replace(a, type=t, nullable=a.nullable or b.nullable,
                   default=a.default if a.default is not None else b.default)


def join_schemas(schemas: dict[str, TableSchema]) -> TableSchema:
    """The most compatible schema of the members' schemas (keyed by a member label for messages)."""
    if not schemas:
        return TableSchema()
    labels = list(schemas)
    order: list[str] = []
    defs: dict[str, list[tuple[str, Column]]] = {}
    for lab in labels:
        for c in schemas[lab].columns:
            if c.key not in defs:
                order.append(c.key)
                defs[c.key] = []
            defs[c.key].append((lab, c))
    cols = []
    for k in order:
        have = defs[k]
        acc = have[0][1]
        for lab, c in have[1:]:
            j = join_column(acc, c)
            if j is None:
                first = next(l for l, x in have if not x.same_definition(c))
                a_def = next(x for l, x in have if l == first)
                raise JoinConflict(
                    f"column `{c.name}` has conflicting definitions: {a_def.describe()} in {first} "
                    f"vs {c.describe()} in {lab}", [c.name], [first, lab])
            acc = j
        missing = [lab for lab in labels if schemas[lab].column(k) is None]
        if missing and not acc.can_be_absent():
            with_it = [lab for lab, _ in have]
            raise JoinConflict(
                f"column `{acc.name}` is NOT NULL without a default in {', '.join(with_it)} but missing in "
                f"{', '.join(missing)}: rows of the shards without it could not be written",
                [acc.name], with_it + missing, missing=True)
        cols.append(acc)
    idx_order: list[str] = []
    idefs: dict[str, list[tuple[str, Index]]] = {}
    for lab in labels:
        for i in schemas[lab].indexes:
            if i.key not in idefs:
                idx_order.append(i.key)
                idefs[i.key] = []
            idefs[i.key].append((lab, i))
    indexes = []
    for k in idx_order:
        have = idefs[k]
        first = have[0][1]
        if any(not i.same_definition(first) for _, i in have[1:]):
            continue  # shards define it differently: no definition is common to all (DM's schemacmp drops it)
        if first.unique and len(have) < len(labels):
            continue  # a unique key is enforced downstream only once every shard has it
        indexes.append(first)
    return TableSchema(tuple(cols), tuple(indexes))


def widen_only(downstream: TableSchema, joined: TableSchema) -> TableSchema:
    """``joined``, except that a column the downstream already holds more widely stays as it is.

    Shards may narrow a column one by one (each such change is a conflict the operator
    accepted); the downstream never narrows by itself, so no stored value is cut.
    """
    cols = []
    for c in joined.columns:
        old = downstream.column(c.name)
        if old is not None and not old.same_definition(c):
            j = join_column(old, c)
            if j is not None and j.same_definition(old):
                c = replace(c, type=old.type, nullable=old.nullable)
        cols.append(c)
    return TableSchema(tuple(cols), joined.indexes)


def diff_schemas(schema: str, table: str, old: TableSchema, new: TableSchema) -> list[Change]:
    """Single-change statements turning ``old`` into ``new`` on ``schema``.``table``.

    Order: drop changed/removed indexes, add columns, modify columns, drop columns, add indexes.
    """
    t = f"ALTER TABLE {qi(schema)}.{qi(table)}"
    out: list[Change] = []
    for i in old.indexes:
        n = new.index(i.name)
        if n is None or not n.same_definition(i):
            out.append(Change("drop_index", i.name, sql=f"{t} {i.drop_clause()}"))
    for c in new.columns:
        if old.column(c.name) is None:
            out.append(Change("add_column", c.name, c, sql=f"{t} ADD COLUMN {c.definition()}"))
    for c in new.columns:
        o = old.column(c.name)
        if o is not None and not o.same_definition(c):
            out.append(Change("modify_column", o.name, c, sql=f"{t} MODIFY COLUMN {c.definition()}"))
    for c in old.columns:
        if new.column(c.name) is None:
            out.append(Change("drop_column", c.name, sql=f"{t} DROP COLUMN {qi(c.name)}"))
    for i in new.indexes:
        o = old.index(i.name)
        if o is None or not o.same_definition(i):
            out.append(Change("add_index", i.name, index=i, sql=f"{t} ADD {i.definition()}"))
    return out


def same_change(a: Change, b: Change) -> bool:
    """Whether two changes have the same effect (used to prefer a shard's own statement text)."""
    if a.op != b.op or a.name.lower() != b.name.lower():
        return False
    if a.op in ("add_column", "modify_column"):
        return a.column is not None and b.column is not None and a.column.same_definition(b.column) \
            and a.column.key == b.column.key
    if a.op == "add_index":
        return a.index is not None and b.index is not None and a.index.same_definition(b.index)
    return True
