"""A chunk read as LOAD DATA text, produced by the upstream server itself.

Why: the full load's rows only travel (upstream → target), and every client-side step
costs CPU the servers need: reading them through Spark's JDBC source into JVM rows and on to
Arrow took more CPU than the downstream's own insert (measured at 10M rows, 2 cores: 63
CPU-seconds in Spark's JVM and Python against 45 in the downstream server). Here the
upstream's SELECT returns one ready line per row -- the row's values, routed and
column-mapped, in LOAD DATA's format (tab-separated, strings enclosed in single quotes,
``\\`` escapes, ``\\N`` or a bare NULL for NULL) -- which a Spark executor reads with
mysqlclient and pipes into ``LOAD DATA LOCAL INFILE`` downstream without looking at a value.

Per column (the chunk's columns, extract.chunk_shape): numbers and decimals as the server
prints them (exact: what mydumper dumps; a DOUBLE in its shortest form that reads back to the
same bits), a FLOAT widened to DOUBLE first (printed as FLOAT it keeps 6 digits; the DOUBLE
reads back into the FLOAT column as the same value); temporal types as text at time_zone '+00:00' (zero
dates included); BIT as its unsigned value (load_data.statement assigns it through a
variable); text (CHAR/VARCHAR/TEXT, ENUM, SET, JSON) and bytes (BINARY/VARBINARY/BLOB)
through ``QUOTE()``, one pass that encloses the value in single quotes and puts a backslash
before each backslash, quote, NUL and Ctrl-Z: exactly what LOAD DATA reads back with
``ENCLOSED BY '\\'' ESCAPED BY '\\\\'`` (a tab or newline inside an enclosed field is data;
``QUOTE(NULL)`` is the bare word NULL, which LOAD DATA reads as NULL once fields may be
enclosed, and a text 'NULL' stays enclosed). Text in a charset other than utf8mb4, utf8mb3
or ascii goes as stored when its target column has the same charset (``column_raw``: the LOAD
reads the line as binary, so a GBK character Unicode lacks arrives too); otherwise it is
converted to utf8mb4 (the LOAD reads utf8mb4), and a character the conversion would replace
with '?' fails the chunk, naming it (:func:`read_lines`), never lands changed. Column mapping as DM applies
it: ``partition id`` ``source | or_value`` (a value out of range gives NULL here:
:func:`partition_id_violation` checks the table first, so the load fails with DM's message
instead), ``add prefix`` / ``add suffix``; extract columns as constants.

The separator is a binary literal with an explicit collation, which outranks every column's
collation, so the line is a binary string whatever its columns: no "illegal mix of
collations", no conversion of utf8 columns, no CAST of the line, and the client receives
bytes (a bare ``X'09'`` ranks below a column: the line would take the column's collation). Costs, counted with callgrind on MariaDB 10.11
(instructions per row of the bench's row: 6 columns, 2 of them strings): ``SELECT *`` 4,600;
this line 8,100; the line before it (three REPLACEs per string, CONVERT on every text column,
the line CAST AS BINARY) 11,900. The downstream's LOAD costs the same for both formats
(28,100 and 28,300).

Backslash never appears in a string literal (a server with NO_BACKSLASH_ESCAPES would read
it differently): the separator and ``\\N`` are hex literals, which the server folds once per
statement. Constants from the task file (prefixes, extracted values) go in as the upstream
connection's own literals.

Tables with a column this cannot express exactly as text (spatial types) return None and take
the Spark JDBC path.
"""

from __future__ import annotations

from dm_core.db import qi, qt
from dm_core.full import compiled_lines, snapshot_read

_NULL = "X'5C4E'"   # \N: NULL for a field LOAD DATA reads unenclosed
_TAB = "X'09' COLLATE 'binary'"  # the line is a binary string whatever its columns (module docstring)
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
_BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_PLAIN = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric", "year", "date",
          "datetime", "timestamp", "time", "double", "real", "double precision"}
_UTF8 = {"utf8mb4", "utf8mb3", "utf8", "ascii"}  # their bytes already read as utf8mb4


def _column(name: str, data_type: str, charset: str | None, raw: bool = False) -> tuple[str, bool] | None:
    """(one column's field, whether it is enclosed), or None when text cannot carry it;
    ``raw``: text goes as stored (see ``column_raw``).

    >>> _column("n", "varchar", "latin1")
    ('QUOTE(CONVERT(`n` USING utf8mb4))', True)
    >>> _column("n", "varchar", "utf8mb4"), _column("b", "blob", None), _column("g", "point", None)
    (('QUOTE(`n`)', True), ('QUOTE(`b`)', True), None)
    >>> _column("f", "float", None), _column("d", "double", None), _column("n", "varchar", "gbk", raw=True)
    (('CAST(`f` AS DOUBLE)', False), ('`d`', False), ('QUOTE(CAST(`n` AS BINARY))', True))
    """
    c = qi(name)
    if data_type in _PLAIN:
        return c, False
    if data_type == "float":
        return f"CAST({c} AS DOUBLE)", False
    if data_type == "bit":
        return f"CAST({c} AS UNSIGNED)", False
    if data_type in _TEXT:
        if raw:   # byte by byte: QUOTE() of a GBK string with a character Unicode lacks is NULL, which
            return f"QUOTE(CAST({c} AS BINARY))", True   # CONCAT_WS would drop, shifting the fields after it
        return (f"QUOTE({c})" if (charset or "").lower() in _UTF8 else f"QUOTE(CONVERT({c} USING utf8mb4))"), True
    if data_type in _BYTES:
        return f"QUOTE({c})", True
    return None


def quoted(value: str) -> str:
    """A constant as an enclosed field, escaped as ``QUOTE()`` escapes (the text that then
    becomes an SQL literal).

    >>> print(quoted("it's a\\\\b"))
    'it\\'s a\\\\b'
    """
    for raw, escaped in (("\\", "\\\\"), ("'", "\\'"), ("\0", "\\0"), ("\x1a", "\\Z")):
        value = value.replace(raw, escaped)
    return f"'{value}'"


def line_query(st, transforms, literal, where: str, dump_where: str = "") -> str | None:
    """``SELECT <one line per row> FROM st WHERE where [AND dump_where]``, or None when a
    column cannot be sent as text. ``st``: the chunk's table (columns, data types,
    nullability and charsets now, ``extract``); ``transforms``: the column mapping's
    transforms of the table; ``literal(value) -> str``: the upstream connection's literal
    quoting. LOAD DATA reads the lines with ``load_data.statement(..., enclosed=True)``.

    >>> class St: schema, table, columns, column_types, extract = "s", "t", ["id", "v"], ["int", "varchar"], {}
    >>> print(line_query(St(), [], repr, "`id` < 10"))
    SELECT CONCAT_WS(X'09' COLLATE 'binary', IFNULL(`id`, X'5C4E'), QUOTE(CONVERT(`v` USING utf8mb4))) FROM `s`.`t` WHERE `id` < 10
    >>> St.column_nullable, St.column_charsets = [False, True], [None, "utf8mb4"]
    >>> print(line_query(St(), [], repr, "1"))
    SELECT CONCAT_WS(X'09' COLLATE 'binary', `id`, QUOTE(`v`)) FROM `s`.`t` WHERE 1
    """
    types = dict(zip(st.columns, st.column_types or []))
    charsets = dict(zip(st.columns, getattr(st, "column_charsets", None) or [None] * len(st.columns)))
    # NOT NULL columns skip IFNULL: one function call less per value on the upstream
    nullable = dict(zip(st.columns, getattr(st, "column_nullable", None) or [True] * len(st.columns)))
    raw = dict(zip(st.columns, getattr(st, "column_raw", None) or [False] * len(st.columns)))
    fields = {}  # column -> (expression, enclosed)
    for c in st.columns:
        f = _column(c, types.get(c, ""), charsets.get(c), raw.get(c, False))
        if f is None:
            return None
        fields[c] = f
    for t in transforms:    # each mapping kind says how it reads in SQL (dm_core/rules/column_mapping.py)
        e = t.mysql_sql(qi(t.reads), literal)
        # a prefix/suffix is a CONCAT of a constant and the column: utf8mb4 whatever the column's
        # charset, or the column's own where its text goes as stored
        text = (f"QUOTE(CAST(CONVERT({e} USING {_charset_name(charsets.get(t.column))}) AS BINARY))"
                if raw.get(t.column) else f"QUOTE(CONVERT({e} USING utf8mb4))")
        fields[t.column] = (text, True) if t.yields_text else (e, False)
        nullable[t.column] = True   # a mapping may give NULL
    out = [e if enclosed or not nullable.get(c, True) else f"IFNULL({e}, {_NULL})"
           for c, (e, enclosed) in ((c, fields[c]) for c in st.columns)]
    out += [literal(quoted(str(v))) if v is not None else _NULL for v in st.extract.values()]
    cond = f"({where}) AND ({dump_where})" if dump_where.strip() else where
    return f"SELECT CONCAT_WS({_TAB}, {', '.join(out)}) FROM {qt(st.schema, st.table)} WHERE {cond}"


def _charset_name(name: str) -> str:
    if not name or not name.replace("_", "").isalnum():
        raise ValueError(f"not a character set name: {name!r}")
    return name


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


def read_lines(conn, query: str, snapshot: dict | None = None):
    """Run the line query on a mysqlclient connection (on an executor) and yield its rows in
    blocks, unbuffered: an executor holds one block, whatever the chunk's size. A block is
    a compiled_lines.LineBlock (1 MB of text) where the compiled read is usable, else a list
    of 10,000 row tuples.
    ``snapshot``: read in a consistent snapshot and fill the dict with its binlog position
    (snapshot_read.py; empty when the server gives none)."""
    import MySQLdb.cursors

    if snapshot is not None:
        snapshot.update(snapshot_read.begin(conn))
    compiled = compiled_lines.blocks(conn, query)
    if compiled is not None:    # the same lines read in C (compiled_lines.py)
        yield from compiled
    else:
        cur = conn.cursor(MySQLdb.cursors.SSCursor)
        cur.execute(query)
        while True:
            rows = cur.fetchmany(10_000)
            if not rows:
                break
            yield rows
        cur.close()
    lost = _lost_characters(conn)
    if lost:   # raised before the chunk's LOAD commits: nothing lands changed
        raise ValueError(f"the upstream cannot convert text of this chunk to utf8mb4 for its target column without "
                         f"changing it ({lost}); give the target column the upstream column's character set")
    if snapshot is not None:
        snapshot_read.end(conn)


def _lost_characters(conn) -> str:
    """The server's first warning that CONVERT put '?' for a character (1977), or ''."""
    if not conn.warning_count():
        return ""
    cur = conn.cursor()
    try:
        cur.execute("SHOW WARNINGS LIMIT 20")
        return next((str(r[2]) for r in cur.fetchall() if int(r[1]) == 1977), "")
    finally:
        cur.close()


def as_text(rows) -> tuple[bytes, int]:
    """A block of line-query rows as LOAD DATA text (every line newline-ended), and its rows:
    the encoder load_data.load_chunk takes. One allocation per block: ``join(...) + b"\\n"``
    copied each ~1 MB block again, and the page faults of that second buffer cost as much
    system time as the join.

    >>> as_text([(b"1\\ta",), (b"2\\tb",)])
    (b'1\\ta\\n2\\tb\\n', 2)
    """
    if isinstance(rows, compiled_lines.LineBlock):
        return rows.text, rows.rows
    out = [r[0] for r in rows]
    out.append(b"")
    return b"\n".join(out), len(rows)


def columns_of(st) -> list[str]:
    """The target columns a line carries, in order (the chunk's columns, then extract columns)."""
    return [*st.columns, *st.extract]
