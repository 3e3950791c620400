"""The row image each server checksums: one target row as SQL, written so that equal rows give
equal bytes on every side and rows that differ in anything that matters give different bytes.

Per target table (plan.py) there is one image per reader: the downstream table, and each
upstream shard with its transformation expressed in the shard's own SQL -- the column mapping
through each transform's ``mysql_sql`` (dm_core/rules/column_mapping.py, the definition the
full load's text path uses), extract columns and the downstream default of a column the shard
lacks as constants. A server computes ``CRC32(image)`` per row and ``COUNT(*)`` / ``SUM`` of
them per key chunk (checksum.py). What the bytes of one image are:

``CONCAT_WS(X'2C' COLLATE 'binary', <null bitmap>, <lengths>, <field>, ...)``

* the separator is a binary string with an explicit collation: the image is bytes, whatever
  the columns' collations (no "illegal mix of collations", no comparison by collation: ``'a'``
  and ``'A'`` or ``'a'`` and ``'a '`` in a ``_ci`` column are different bytes);
* ``<null bitmap>``: ``CONCAT(ISNULL(f1), ISNULL(f2), ...)`` over every column that may be NULL
  on some side (CONCAT_WS skips NULLs: NULL and '' would otherwise look alike; a fixed number
  of digits, so it reads back one way);
* ``<lengths>``: ``LENGTH(f)`` of every text-like field but the last one: a separator inside
  a string cannot shift a boundary (numbers, decimals and temporal values hold no comma, so
  with the lengths the fields read back one way only);
* each field is the column rendered exactly: DECIMAL as its text (exact digits; a side with a
  smaller scale cast to the largest scale of any side, so ``1.5`` and ``1.50`` of DECIMAL(10,1)
  and DECIMAL(10,2) match), FLOAT widened to DOUBLE (printed as FLOAT it keeps 6 digits; the
  DOUBLE text is the shortest that reads back to the same bits), temporal values at the
  session's time_zone '+00:00' with the largest fractional precision of any side, BIT as its
  unsigned value, text in another charset than utf8's converted to utf8mb4 (bytes otherwise as
  stored), JSON canonicalised on MariaDB by ``JSON_NORMALIZE`` (keys sorted, numbers in one
  exact form; MySQL and TiDB print their binary JSON canonically already).

A column the image cannot render exactly (spatial types) or a column transform with no SQL
definition makes :func:`images` raise :class:`Unexpressible`: that table's rows are read and
compared in Python instead (readrows.py) and its result says why.

The task's binlog and expression filters are not part of the image: what they kept out of the
downstream depends on history (a row the full load copied is downstream even when later
inserts of its table are ignored), so no rewrite of the upstream rows can say which rows the
downstream must hold. The rows they may explain make their chunks differ; the drill-down
reads those rows and the filters' own engines (the syncer's, dm_core/rules/) decide, per row,
whether a filter explains the difference (filters.py): it is counted as filtered, not reported.

Rendering differences between two kinds of server (a JSON document printed by MariaDB and by
TiDB) only make chunks look different: the drill-down then compares the rows themselves
(rows.py), so they cost time, never a wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.db import as_str, is_mariadb, qi, qt
from dm_core.validate.rows import select_list

SEP = "X'2C' COLLATE 'binary'"
INT_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
BYTE_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
SPATIAL = {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
           "geometrycollection"}
_UTF8 = {"utf8mb4", "utf8mb3", "utf8", "ascii"}
_DATETIME = {"datetime", "timestamp"}


class Unexpressible(Exception):
    """The table's rows cannot be hashed exactly in SQL: read them instead (the message says why)."""


@dataclass(frozen=True)
class ColumnInfo:
    """One column of one side, from information_schema."""

    name: str
    data_type: str
    nullable: bool = True
    charset: str | None = None
    collation: str | None = None
    scale: int | None = None        # NUMERIC_SCALE of DECIMAL
    fsp: int | None = None          # DATETIME_PRECISION of temporal types
    json: bool = False              # JSON (MySQL's type, or MariaDB's alias: LONGTEXT CHECK (json_valid(..)))


def column_infos(conn, schema: str, table: str) -> dict[str, ColumnInfo]:
    """The columns of one table by name (as information_schema spells them)."""
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, DATA_TYPE, IS_NULLABLE, CHARACTER_SET_NAME, COLLATION_NAME, NUMERIC_SCALE, "
                    "DATETIME_PRECISION FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                    "ORDER BY ORDINAL_POSITION", (schema, table))
        rows = [tuple(as_str(v) if isinstance(v, (bytes, bytearray)) else v for v in r) for r in cur.fetchall()]
        json_cols: set[str] = set()
        if is_mariadb(conn):
            cur.execute("SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
                        "WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s", (schema, table))
            for name, clause in cur.fetchall():
                name, clause = as_str(name), as_str(clause)
                if clause.replace(" ", "").lower() == f"json_valid({qi(name)})".lower():
                    json_cols.add(name)
    out = {}
    for name, dt, nullable, cs, coll, scale, fsp in rows:
        dt = str(dt).lower()
        out[name] = ColumnInfo(name, dt, nullable == "YES", cs, coll, None if scale is None else int(scale),
                               None if fsp is None else int(fsp), dt == "json" or name in json_cols)
    return out


@dataclass(frozen=True)
class Source:
    """Where one reader's value of one target column comes from.

    ``kind``: ``column`` (the reader's own column ``sql`` = quoted name, ``info`` its type),
    ``mapped`` (``sql`` = a column transform's expression; ``text`` whether it yields text),
    ``const`` (``sql`` = a literal or NULL: an extract column, a default)."""

    kind: str
    sql: str
    info: ColumnInfo | None = None
    text: bool = False
    nullable: bool = True           # mapped / const: may be NULL (a column says so in ``info``)


@dataclass
class Image:
    """One reader's SQL: ``row`` is hashed per row, ``key`` buckets rows by key (drill.py);
    ``fields`` the rendered compared columns, ``select`` the SELECT list of a row fetch (the
    reader's raw columns, read exactly: rows.select_list)."""

    schema: str
    table: str
    row: str
    key: str
    fields: list[str] = field(default_factory=list)
    select: str = ""

    def sum_sql(self, where: str) -> str:
        return (f"SELECT COUNT(*), COALESCE(SUM(CRC32({self.row})), 0) FROM {qt(self.schema, self.table)} "
                f"WHERE {where}")


def hex_literal(value) -> str:
    """A constant from the task file or a catalog as a utf8mb4 literal no sql_mode reads
    differently (no quotes, no backslashes).

    >>> hex_literal("a'b")
    "_utf8mb4 X'612762'"
    >>> hex_literal(None), hex_literal("")
    ('NULL', "_utf8mb4 ''")
    """
    if value is None:
        return "NULL"
    data = str(value).encode("utf-8")
    return f"_utf8mb4 X'{data.hex()}'" if data else "_utf8mb4 ''"


@dataclass(frozen=True)
class Common:
    """What all sides of one target column agree to render it as."""

    scale: int | None = None        # DECIMAL scale every side shows (the largest)
    fsp: int | None = None          # fractional digits of temporal values (the largest)
    json: bool = False
    nullable: bool = False
    text: bool = False              # may hold a separator: its length goes into the image


def common(sources: list[Source]) -> Common:
    infos = [s.info for s in sources if s.info is not None]
    decimals = [i.scale or 0 for i in infos if i.data_type in ("decimal", "numeric")]
    fsps = [i.fsp or 0 for i in infos if i.data_type in _DATETIME | {"time"}]
    nullable = any(i.nullable for i in infos) or any(s.kind != "column" and s.nullable for s in sources)
    text = any(i.data_type in TEXT_TYPES | BYTE_TYPES or i.json for i in infos) or \
        any(s.kind == "const" or (s.kind == "mapped" and s.text) for s in sources)
    return Common(max(decimals) if decimals else None, max(fsps) if fsps else None, any(i.json for i in infos),
                  nullable, text)


def render(src: Source, c: Common, mariadb: bool) -> str:
    """One reader's field of one column (module docstring).

    >>> i = ColumnInfo("f", "float")
    >>> render(Source("column", "`f`", i), common([Source("column", "`f`", i)]), True)
    'CAST(`f` AS DOUBLE)'
    >>> d1, d2 = ColumnInfo("a", "decimal", scale=1), ColumnInfo("a", "decimal", scale=2)
    >>> both = common([Source("column", "`a`", d1), Source("column", "`a`", d2)])
    >>> render(Source("column", "`a`", d1), both, True), render(Source("column", "`a`", d2), both, True)
    ('CAST(`a` AS DECIMAL(65, 2))', '`a`')
    """
    if src.kind != "column":
        return src.sql
    i, col = src.info, src.sql
    t = i.data_type
    if t in SPATIAL:
        raise Unexpressible(f"column {i.name} is {t.upper()}, which has no exact text")
    if t == "float":
        return f"CAST({col} AS DOUBLE)"
    if c.scale and (t in INT_TYPES or (t in ("decimal", "numeric") and (i.scale or 0) < c.scale)):
        return f"CAST({col} AS DECIMAL(65, {int(c.scale)}))"
    if t == "bit":
        return f"CAST({col} AS UNSIGNED)"
    if c.fsp and t in _DATETIME and (i.fsp or 0) < c.fsp:
        return f"CAST({col} AS DATETIME({int(c.fsp)}))"
    if c.fsp and t == "time" and (i.fsp or 0) < c.fsp:
        return f"CAST({col} AS TIME({int(c.fsp)}))"
    if c.json and mariadb and t in TEXT_TYPES:
        return f"JSON_NORMALIZE({col})"
    if t in TEXT_TYPES and (i.charset or "utf8mb4").lower() not in _UTF8:
        return f"CONVERT({col} USING utf8mb4)"
    return col


def row_sql(fields: list[str], commons: list[Common]) -> str:
    """The image of one row from its fields (module docstring).

    >>> row_sql(["`id`", "`a`", "`b`"], [Common(), Common(nullable=True, text=True), Common(text=True)])
    "CONCAT_WS(X'2C' COLLATE 'binary', ISNULL(`a`), LENGTH(`a`), `id`, `a`, `b`)"
    """
    bits = [f"ISNULL({f})" for f, c in zip(fields, commons) if c.nullable]
    texts = [f for f, c in zip(fields, commons) if c.text]
    head = ([f"CONCAT({', '.join(bits)})" if len(bits) > 1 else bits[0]] if bits else []) + \
        [f"LENGTH({f})" for f in texts[:-1]]
    return f"CONCAT_WS({SEP}, {', '.join(head + list(fields))})"


def shard_sources(plan, shard, infos: dict[str, ColumnInfo]) -> list[Source]:
    """How shard ``shard`` (a plan.ShardPlan) supplies each target column of ``plan``."""
    st = shard.table
    shaper = shard.maker.shaper
    mapping = shaper.mapping
    writes = {t.column: t for t in (mapping.transforms if mapping is not None else [])}
    out = []
    for c in plan.columns:
        t = writes.get(c)
        if t is not None:
            fn = getattr(t, "mysql_sql", None)
            if fn is None:
                raise Unexpressible(f"the column mapping of {st.schema}.{st.table}.{c} has no SQL form")
            read = infos.get(t.reads)
            # a mapping of a NOT NULL column gives NULL only for a value it refuses (the sync pauses on it)
            out.append(Source("mapped", fn(qi(t.reads), hex_literal), text=bool(getattr(t, "yields_text", False)),
                              nullable=read is None or read.nullable))
        elif c in st.columns:
            info = infos.get(c)
            if info is None:
                raise Unexpressible(f"column {c} of {st.schema}.{st.table} changed while it was planned")
            out.append(Source("column", qi(c), info))
        elif c in st.extract:
            out.append(Source("const", hex_literal(st.extract[c]), nullable=st.extract[c] is None))
        else:
            out.append(Source("const", hex_literal(shaper.defaults.get(c)), nullable=shaper.defaults.get(c) is None))
    return out


def down_sources(plan, infos: dict[str, ColumnInfo]) -> list[Source]:
    out = []
    for c in plan.columns:
        info = infos.get(c)
        if info is None:
            raise Unexpressible(f"column {c} of the downstream {plan.name} changed while it was planned")
        out.append(Source("column", qi(c), info))
    return out


@dataclass
class TableImages:
    """The images of every reader of one target table."""

    down: Image
    shards: dict[str, Image]          # origin → image


def images(plan, down_infos: dict, shard_infos: dict[str, dict], flavours: dict[str, bool]) -> TableImages:
    """The images of ``plan`` (a TablePlan with a downstream table). ``shard_infos``: origin →
    the shard's column infos; ``flavours``: origin ('' for the downstream) → MariaDB or not.
    Raises Unexpressible."""
    idx = [plan.columns.index(c) for c in plan.columns] if plan.mode == "full" else \
        [plan.columns.index(c) for c in plan.key]
    readers = {"": down_sources(plan, down_infos)}
    for s in plan.shards:
        readers[s.origin] = shard_sources(plan, s, shard_infos[s.origin])
    commons = [common([srcs[i] for srcs in readers.values()]) for i in range(len(plan.columns))]
    key_idx = [plan.columns.index(c) for c in plan.key]
    out = {}
    for origin, srcs in readers.items():
        rendered = [render(s, c, flavours[origin]) for s, c in zip(srcs, commons)]
        fields = [rendered[i] for i in idx]
        row = row_sql(fields, [commons[i] for i in idx])
        key = f"CONCAT_WS({SEP}, {', '.join(rendered[i] for i in key_idx)})"
        if origin:
            st = plan.shard(origin).table
            types = {c: i.data_type for c, i in shard_infos[origin].items()}
            out[origin] = Image(st.schema, st.table, row, key, fields, select_list(st.columns, types))
        else:
            types = {c: i.data_type for c, i in down_infos.items()}
            down = Image(plan.schema, plan.table, row, key, fields, select_list(plan.columns, types))
    return TableImages(down, out)
