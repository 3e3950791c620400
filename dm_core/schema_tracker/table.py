"""One tracked table: what decoding a row by column position needs, and the check that it fits.

    >>> t = TrackedTable((TrackedColumn("id", "INT UNSIGNED"), TrackedColumn("e", "ENUM('a', 'it''s')", "utf8mb4")),
    ...                  "utf8mb4")
    >>> t.columns[0].unsigned, t.columns[1].values
    (True, ('a', "it's"))
    >>> TrackedTable.from_dict(t.to_dict()) == t
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.binlog import events as ev
from dm_core.shardddl.schema import _split_values, canonical_type

# a type's base name → the binlog column types a TABLE_MAP may give it (old and new formats)
_BINLOG_TYPES = {
    "TINYINT": {ev.T_TINY}, "SMALLINT": {ev.T_SHORT}, "MEDIUMINT": {ev.T_INT24}, "INT": {ev.T_LONG},
    "BIGINT": {ev.T_LONGLONG}, "DECIMAL": {ev.T_NEWDECIMAL, ev.T_DECIMAL}, "FLOAT": {ev.T_FLOAT},
    "DOUBLE": {ev.T_DOUBLE}, "BIT": {ev.T_BIT}, "YEAR": {ev.T_YEAR}, "DATE": {ev.T_DATE, ev.T_NEWDATE},
    "DATETIME": {ev.T_DATETIME, ev.T_DATETIME2}, "TIMESTAMP": {ev.T_TIMESTAMP, ev.T_TIMESTAMP2},
    "TIME": {ev.T_TIME, ev.T_TIME2}, "CHAR": {ev.T_STRING}, "BINARY": {ev.T_STRING},
    "VARCHAR": {ev.T_VARCHAR, ev.T_VAR_STRING}, "VARBINARY": {ev.T_VARCHAR, ev.T_VAR_STRING},
    "ENUM": {ev.T_ENUM}, "SET": {ev.T_SET}, "JSON": {ev.T_JSON, ev.T_BLOB},
    **{n: {ev.T_BLOB, ev.T_TINY_BLOB, ev.T_MEDIUM_BLOB, ev.T_LONG_BLOB}
       for n in ("TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB")},
    **{n: {ev.T_GEOMETRY} for n in ("GEOMETRY", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT",
                                    "MULTILINESTRING", "MULTIPOLYGON", "GEOMETRYCOLLECTION")},
}
_STRINGS = {"CHAR", "VARCHAR", "BINARY", "VARBINARY", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "TINYBLOB",
            "BLOB", "MEDIUMBLOB", "LONGBLOB", "ENUM", "SET", "JSON"}
_BYTES = {"BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"}


def base_type(type_: str) -> str:
    """``DECIMAL(10, 2) UNSIGNED`` → ``DECIMAL``."""
    return type_.split("(", 1)[0].split(" ", 1)[0].upper()


def string_charset(type_: str, charset: str | None, default: str | None) -> str | None:
    """The charset a column of ``type_`` decodes with: ``binary`` for byte strings, the
    column's own or the table's ``default`` for text, None for what is not a string."""
    b = base_type(type_)
    if b in _BYTES:
        return "binary"
    if b == "JSON":
        return "utf8mb4"
    if b in _STRINGS:
        return charset or default
    return None


@dataclass(frozen=True)
class TrackedColumn:
    name: str
    type: str                     # canonical_type(): ``INT UNSIGNED``, ``ENUM('a', 'b')``
    charset: str | None = None    # string columns: their charset (``binary`` for byte strings)
    generated: bool = False
    invisible: bool = False

    @property
    def unsigned(self) -> bool:
        return self.type.upper().endswith(" UNSIGNED")

    @property
    def values(self) -> tuple[str, ...] | None:
        """ENUM / SET members."""
        if base_type(self.type) not in ("ENUM", "SET"):
            return None
        body = self.type[self.type.index("(") + 1:self.type.rindex(")")]
        return tuple(v[1:-1].replace("''", "'") for v in _split_values(body))

    def describe(self) -> str:
        return f"`{self.name}` {self.type}" + (f" CHARSET {self.charset}" if self.charset else "")


@dataclass(frozen=True)
class TrackedTable:
    columns: tuple[TrackedColumn, ...]
    charset: str | None = None    # the table's default charset: what a new text column gets
    origin: str = field(default="", compare=False)   # where it came from, for the operator

    def column(self, name: str) -> int | None:
        k = name.lower()
        return next((i for i, c in enumerate(self.columns) if c.name.lower() == k), None)

    def describe(self) -> str:
        return ", ".join(c.describe() for c in self.columns)

    def misfit(self, td: ev.TableDef) -> str | None:
        """Why this table cannot decode rows of the TABLE_MAP ``td`` (None: it fits): another
        column count, or a position whose binlog type the tracked type cannot have."""
        if len(td.columns) != len(self.columns):
            return (f"the binlog's TABLE_MAP has {len(td.columns)} columns, the tracked table "
                    f"{len(self.columns)} ({', '.join(c.name for c in self.columns)})")
        for c, b in zip(self.columns, td.columns):
            want = _BINLOG_TYPES.get(base_type(c.type))
            if want is not None and b.type not in want:
                return (f"column #{b.index + 1} `{c.name}` is {c.type} in the tracked table, binlog type {b.type} "
                        "in the TABLE_MAP")
        return None

    def to_dict(self) -> dict:
        return {"charset": self.charset, "origin": self.origin,
                "columns": [{"name": c.name, "type": c.type, "charset": c.charset,
                             **({"generated": True} if c.generated else {}),
                             **({"invisible": True} if c.invisible else {})} for c in self.columns]}

    @classmethod
    def from_dict(cls, d: dict) -> "TrackedTable":
        return cls(tuple(TrackedColumn(c["name"], c["type"], c.get("charset"), c.get("generated", False),
                                       c.get("invisible", False)) for c in d["columns"]),
                   d.get("charset"), d.get("origin", ""))


def read_upstream(conn, schema: str, table: str, origin: str = "read from the upstream") -> TrackedTable | None:
    """``schema.table`` as the upstream's information_schema shows it now (None: no such table)."""
    return read_upstream_many(conn, [(schema, table)], origin).get((schema, table))


def read_upstream_many(conn, tables: list[tuple[str, str]], origin: str = "read from the upstream"
                       ) -> dict[tuple[str, str], TrackedTable]:
    """Several tables as they are now: per schema, the named tables, or the whole schema when
    many of its tables are wanted (a full phase's seed of thousands: one query, not thousands)."""
    from dm_core.db import as_str

    want = set(tables)
    cols: dict[tuple[str, str], list] = {}
    defaults: dict[tuple[str, str], str | None] = {}
    for schema in sorted({s for s, _ in want}):
        names = sorted(t for s, t in want if s == schema)
        only, args = ("", (schema,)) if len(names) > 50 else \
            (f" AND TABLE_NAME IN ({', '.join(['%s'] * len(names))})", (schema, *names))
        with conn.cursor() as cur:
            cur.execute("SELECT t.TABLE_NAME, c.CHARACTER_SET_NAME FROM information_schema.TABLES t "
                        "LEFT JOIN information_schema.COLLATIONS c ON c.COLLATION_NAME = t.TABLE_COLLATION "
                        "WHERE t.TABLE_SCHEMA = %s" + only.replace("TABLE_NAME", "t.TABLE_NAME"), args)
            for name, cs in cur.fetchall():
                defaults[(schema, as_str(name))] = as_str(cs) if cs is not None else None
            cur.execute("SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, CHARACTER_SET_NAME, EXTRA "
                        "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s" + only +
                        " ORDER BY TABLE_NAME, ORDINAL_POSITION", args)
            rows = cur.fetchall()
        for tname, name, ctype, cs, extra in rows:
            key = (schema, as_str(tname))
            if key not in want:
                continue
            t = canonical_type(as_str(ctype))
            extra = (as_str(extra) or "").upper()
            cols.setdefault(key, []).append(TrackedColumn(as_str(name), t, string_charset(
                t, as_str(cs) if cs is not None else None, None), "GENERATED" in extra, "INVISIBLE" in extra))
    return {k: TrackedTable(tuple(c), defaults.get(k), origin) for k, c in cols.items()}


def logs_column_names(conn) -> bool:
    """Whether the upstream's row events name their columns (binlog_row_metadata=FULL);
    MySQL 5.6/5.7 and MariaDB before 10.5 have no such variable and never do."""
    from dm_core.db import as_str

    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.binlog_row_metadata")
            row = cur.fetchone()
    except Exception:
        return False
    return bool(row) and (as_str(row[0]) or "").upper() == "FULL"
