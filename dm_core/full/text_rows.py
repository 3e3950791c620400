"""A chunk read as LOAD DATA text, produced by the upstream server itself.

Why: the full load's rows only travel (upstream → target), and every client-side step
costs CPU the servers need: reading them through Spark's JDBC source into JVM rows and on to
Arrow took more CPU than the downstream's own insert (measured at 10M rows, 2 cores: 63
CPU-seconds in Spark's JVM and Python against 45 in the downstream server). Here the
upstream's SELECT returns one ready line per row -- the row's values, routed and
column-mapped, escaped for LOAD DATA (load_data.py's format: tab-separated, ``\\``
escapes, ``\\N`` for NULL) -- which a Spark executor reads with mysqlclient and pipes into
``LOAD DATA LOCAL INFILE`` downstream without looking at a value.

Per column (the chunk's columns, extract.chunk_shape): numbers and decimals as the server
prints them (exact: what mydumper dumps); temporal types as text at time_zone '+00:00' (zero
dates included); BIT as its unsigned value (load_data.statement assigns it through a
variable); text (CHAR/VARCHAR/TEXT, ENUM, SET, JSON) converted to utf8mb4 and escaped; bytes
(BINARY/VARBINARY/BLOB) escaped as bytes. Column mapping as DM applies it: ``partition id``
``source | or_value`` (a value out of range gives NULL here: :func:`partition_id_violation`
checks the table first, so the load fails with DM's message instead), ``add prefix`` /
``add suffix``; extract columns as constants.

Backslash never appears in a string literal (a server with NO_BACKSLASH_ESCAPES would read
it differently): the separators and escapes are hex literals (``_utf8mb4 X'5C'``), which
the server folds once per statement -- ``CHAR(92)`` was evaluated for every row and value,
40% of the query's cost. Constants from the task file (prefixes, extracted values) go in as
the upstream connection's own literals.

Tables with a column this cannot express exactly as text (FLOAT/DOUBLE, spatial types)
return None and take the Spark JDBC path.
"""

from __future__ import annotations

from dm_core.db import qi, qt


def _hex(text: str) -> str:
    """A utf8mb4 constant written in hex (no backslash or quote to escape).

    >>> _hex("\\\\N")
    "_utf8mb4 X'5C4E'"
    """
    return f"_utf8mb4 X'{text.encode().hex().upper()}'"


_NULL = _hex("\\N")
_TAB = _hex("\t")
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
_BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
# FLOAT/DOUBLE are left out on purpose: the server prints them with fewer digits than they
# hold (a FLOAT with 6), so their tables take the Spark JDBC path, which carries the bits.
_PLAIN = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric", "year", "date",
          "datetime", "timestamp", "time"}


def _escape(expr: str) -> str:
    """``\\`` → ``\\\\``, tab → ``\\t``, newline → ``\\n`` (backslash first)."""
    for raw, escaped in (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n")):
        expr = f"REPLACE({expr}, {_hex(raw)}, {_hex(escaped)})"
    return expr


def _column(name: str, data_type: str) -> str | None:
    c = qi(name)
    if data_type in _PLAIN:
        return c
    if data_type == "bit":
        return f"CAST({c} AS UNSIGNED)"
    if data_type in _TEXT:
        return _escape(f"CONVERT({c} USING utf8mb4)")
    if data_type in _BYTES:
        return _escape(f"CAST({c} AS BINARY)")
    return None


def text_escape(value: str) -> str:
    """A constant as LOAD DATA text (before it becomes an SQL literal).

    >>> text_escape("a\\tb\\\\")
    'a\\\\tb\\\\\\\\'
    """
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def line_query(st, transforms, literal, where: str, dump_where: str = "") -> str | None:
    """``SELECT <one line per row> FROM st WHERE where [AND dump_where]``, or None when a
    column cannot be sent as text. ``st``: the chunk's table (columns and data types now,
    ``extract``); ``transforms``: the column mapping's transforms of the table;
    ``literal(value) -> str``: the upstream connection's literal quoting.

    >>> class St: schema, table, columns, column_types, extract = "s", "t", ["id", "v"], ["int", "varchar"], {}
    >>> q = line_query(St(), [], repr, "`id` < 10")
    >>> q.startswith("SELECT CAST(CONCAT_WS(_utf8mb4 X'09', IFNULL(`id`, ")
    True
    >>> q.endswith("FROM `s`.`t` WHERE `id` < 10")
    True
    >>> St.column_nullable = [False, True]
    >>> line_query(St(), [], repr, "1").startswith("SELECT CAST(CONCAT_WS(_utf8mb4 X'09', `id`, IFNULL(")
    True
    """
    types = dict(zip(st.columns, st.column_types or []))
    # NOT NULL columns skip IFNULL: one function call less per value on the upstream
    nullable = dict(zip(st.columns, getattr(st, "column_nullable", None) or [True] * len(st.columns)))
    exprs = {}
    for c in st.columns:
        e = _column(c, types.get(c, ""))
        if e is None:
            return None
        exprs[c] = e
    for t in transforms:    # each mapping kind says how it reads in SQL (dm_core/rules/column_mapping.py)
        e = t.mysql_sql(qi(t.reads), literal)
        exprs[t.column] = _escape(e) if t.yields_text else e
        nullable[t.column] = True   # a mapping may give NULL
    fields = [f"IFNULL({exprs[c]}, {_NULL})" if nullable.get(c, True) else exprs[c] for c in st.columns]
    fields += [literal(text_escape(str(v))) if v is not None else _NULL for v in st.extract.values()]
    cond = f"({where}) AND ({dump_where})" if dump_where.strip() else where
    return (f"SELECT CAST(CONCAT_WS({_TAB}, {', '.join(fields)}) AS BINARY) "
            f"FROM {qt(st.schema, st.table)} WHERE {cond}")


def partition_id_violation(conn, st, transforms) -> str | None:
    """DM's error for the first value a ``partition id`` mapping cannot take, else None (the
    line query writes NULL for it; checked once per table before its chunks load)."""
    from dm_core.rules.column_mapping import PartitionId

    for t in transforms:
        if not isinstance(t, PartitionId):
            continue
        limit = 1 << int(t.id_bits)
        src = qi(t.source_column)
        with conn.cursor() as cur:
            cur.execute(f"SELECT {src} FROM {qt(st.schema, st.table)} WHERE {src} < 0 OR {src} >= %s LIMIT 1",
                        (limit,))
            if cur.fetchone() is not None:
                return f"partition id: {st.schema}.{st.table}.{t.column} value out of range [0, {limit})"
    return None


def columns_of(st) -> list[str]:
    """The target columns a line carries, in order (the chunk's columns, then extract columns)."""
    return [*st.columns, *st.extract]
