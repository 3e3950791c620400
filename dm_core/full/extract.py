"""The upstream SELECT of one chunk, written so Spark's JDBC reader cannot garble values.

Spark's JDBC source maps some MariaDB/MySQL types lossily (seen with Spark 4.2 and
Connector/J 2.7): TIME becomes a timestamp since 1970 (``100:00:00`` → 1970-01-05 04:00,
``-00:00:01`` → 1970-01-01 00:00:01), YEAR a DATE, BIT(8) a string of bit digits, SET/ENUM a
blank-padded CHAR, a DECIMAL wider than Spark's 38 digits a rounded or refused Decimal(38, s),
and a FLOAT the 6 digits the server prints of it. Those columns are cast on the server to a
type that survives the trip (text for TIME/SET/ENUM/YEAR/DECIMAL, an unsigned integer for BIT,
DOUBLE for FLOAT); the target column converts it back. YEAR goes as its 4-digit text: LOAD
DATA reads a bare ``0`` into a YEAR column as 2000. Text in a charset other than utf8's goes as
its bytes where the target column has the same charset (``column_raw``): the driver would turn
a character Unicode lacks into '?'; where it must be converted, :func:`conversion_loss` refuses
a chunk with such a character before it is read.

The chunk predicate goes inside the subquery, on the raw columns, so the server's range
access on the key still applies; Spark reads the derived table as one partition. A task's
``mydumpers.where`` joins it there (DM applies it to the dump of every table).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dm_core.db import as_str, qi, qt
from dm_core.target import is_generated

# Temporal values travel as text: the JDBC driver turns a zero or invalid date (0000-00-00 ...,
# legal in MySQL and common in legacy schemas) into NULL, which a NOT NULL target rejects and
# a nullable one silently changes. The text is exact (all fractional digits); TIMESTAMPs read
# and written at time_zone '+00:00' keep their instant.
_AS_TEXT = {"time", "set", "enum", "date", "datetime", "timestamp", "year", "decimal", "numeric"}
_AS_UNSIGNED = {"bit"}


def select_expr(column: str, data_type: str, raw: bool = False) -> str:
    """
    >>> select_expr("t", "time"), select_expr("s", "varchar", raw=True)
    ('CAST(`t` AS CHAR) AS `t`', 'CAST(`s` AS BINARY) AS `s`')
    >>> select_expr("id", "int")
    '`id`'
    """
    if raw:
        return f"CAST({qi(column)} AS BINARY) AS {qi(column)}"
    if data_type in _AS_TEXT:
        return f"CAST({qi(column)} AS CHAR) AS {qi(column)}"
    if data_type in _AS_UNSIGNED:
        return f"CAST({qi(column)} AS UNSIGNED) AS {qi(column)}"
    if data_type == "float":
        return f"CAST({qi(column)} AS DOUBLE) AS {qi(column)}"
    return qi(column)


def chunk_query(st, where: str, dump_where: str = "") -> str:
    """A derived table for Spark's ``dbtable``: the chunk's rows of ``st``, safely typed.

    ``dump_where``: the instance's ``mydumpers.where`` (DM: a condition every dumped row meets),
    SQL from the task file, ANDed to the chunk's key range.

    >>> class St: schema, table, columns, column_types = "s", "t", ["id"], ["int"]
    >>> chunk_query(St(), "`id` < 10", "deleted = 0")
    '(SELECT `id` FROM `s`.`t` WHERE (`id` < 10) AND (deleted = 0)) AS sf_chunk'
    """
    types = st.column_types or [""] * len(st.columns)
    raw = getattr(st, "column_raw", None) or [False] * len(st.columns)
    cols = ", ".join(select_expr(c, t, r) for c, t, r in zip(st.columns, types, raw))
    if dump_where.strip():
        where = f"({where}) AND ({dump_where})"
    return f"(SELECT {cols} FROM {qt(st.schema, st.table)} WHERE {where}) AS sf_chunk"


def conversion_loss(conn, st, where: str, dump_where: str = "") -> str | None:
    """The first value of the chunk that the JDBC path would change: text in a charset other
    than utf8's, converted to utf8mb4 for its target (not ``column_raw``), with a character
    utf8mb4 lacks (the server puts '?'). None when there is none. Names table, column, key and
    value: the chunk is refused before it is read."""
    from dm_core.full.text_rows import _TEXT

    raw = getattr(st, "column_raw", None) or [False] * len(st.columns)
    cols = [(c, cs) for c, t, cs, r in zip(st.columns, st.column_types or [], st.column_charsets or [], raw)
            if t in _TEXT and cs and cs.lower() not in _UTF8 and not r]
    if dump_where.strip():
        where = f"({where}) AND ({dump_where})"
    key = st.key or st.columns[:1]
    for c, cs in cols:
        if not cs.replace("_", "").isalnum():
            continue
        q = qi(c)
        with conn.cursor() as cur:
            cur.execute(f"SELECT {', '.join(qi(k) for k in key)}, HEX({q}) FROM {qt(st.schema, st.table)} WHERE ({where}) "
                        f"AND CAST(CONVERT(CONVERT({q} USING utf8mb4) USING {cs}) AS BINARY) <> CAST({q} AS BINARY) "
                        "LIMIT 1")
            row = cur.fetchone()
        if row is not None:
            return (f"`{st.schema}`.`{st.table}`.`{c}` ({cs}) of the row with {', '.join(key)} = "
                    f"{', '.join(str(v) for v in row[:-1])} holds 0x{row[-1]}, which has characters utf8mb4 lacks: "
                    f"its target column's character set differs, so it would arrive changed; give the target column "
                    f"the character set {cs}")
    return None


# ---- the chunk's columns while DDL runs upstream -------------------------------------------
@dataclass(frozen=True)
class ChunkShape:
    """What one chunk reads, decided just before it is read.

    ``table``: ``st`` with the columns both the upstream table and the target have now (in
    upstream order; generated columns left out: the target computes them), None when the
    upstream table is gone (a DROP TABLE during the load: the chunk lands nothing, the
    replayed DROP removes the target). ``drifted``: the upstream definition is no longer
    the target's -- a DDL ran upstream after the target was created -- so values the
    target cannot hold yet are written leniently (see phase.py for why that converges).
    ``same_bytes``: every value the text path sends (text_rows.py) is already in the character
    set of its target column, so LOAD DATA may read the lines as ``binary`` and skip its
    per-character decoding (5% of the downstream's instructions per row, callgrind).
    """

    table: object
    drifted: bool
    signature: tuple = ()
    same_bytes: bool = False


_UTF8 = {"utf8mb4", "utf8mb3", "utf8", "ascii"}
_UTF8MB3 = {"utf8mb3", "utf8", "ascii"}


def _raw(up: tuple, down: tuple | None) -> bool:
    """Whether a text column in a charset other than utf8's can go as stored: its target column
    has the same charset, so no conversion is needed, and none can replace a character the
    other charset lacks with '?' (GBK's user-defined area has no Unicode at all).

    >>> _raw(("s", "varchar", "", "", "", "gbk"), ("s", "varchar", "", "", "", "gbk"))
    True
    >>> _raw(("s", "varchar", "", "", "", "gbk"), ("s", "varchar", "", "", "", "utf8mb4"))
    False
    """
    from dm_core.full.text_rows import _TEXT

    cs = (up[5] or "").lower()
    return up[1].lower() in _TEXT and bool(cs) and cs not in _UTF8 and down is not None \
        and (down[5] or "").lower() == cs


def _same_bytes(carried: list[tuple], down: dict, extract: set, raw: list[bool] | None = None) -> bool:
    """Whether the text path's bytes of every carried column (upstream ``_columns`` rows) and
    extract column fit their target column's character set as they are: text arrives as
    utf8mb4 (the line query converts other charsets) or as stored (``raw``), numbers and dates
    as ASCII, BINARY/BLOB as raw bytes (fine only into a column without a character set).

    >>> up = [("id", "int", "int", "NO", "", None), ("s", "varchar", "varchar(9)", "YES", "", "latin1")]
    >>> _same_bytes(up, {"id": up[0], "s": up[1][:5] + ("utf8mb4",)}, set())
    True
    >>> _same_bytes(up, {"id": up[0], "s": up[1]}, set())   # a latin1 target takes converted text
    False
    >>> _same_bytes(up, {"id": up[0], "s": up[1]}, set(), [False, True])   # ... or latin1 as stored
    True
    """
    from dm_core.full.text_rows import _BYTES, _TEXT

    for i, c in enumerate(carried):
        if raw and raw[i]:
            continue
        d = (down[c[0].lower()][5] or "").lower()
        u = (c[5] or "").lower()
        if not d:
            continue
        text, binary = c[1].lower() in _TEXT, c[1].lower() in _BYTES
        if binary or not (d == "utf8mb4" or (d in _UTF8MB3 and (not text or u in _UTF8MB3))):
            return False
    return all((down[k][5] or "").lower() in ("", "utf8mb4") for k in extract if k in down)


def _columns(conn, schema: str, table: str) -> list[tuple[str, str, str, str, str, str]]:
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, EXTRA, CHARACTER_SET_NAME "
                    "FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (schema, table))
        return [tuple(None if v is None else as_str(v) for v in r) for r in cur.fetchall()]


def columns_of_tables(conn, tables) -> dict[tuple[str, str], list[tuple]]:
    """(schema, table) -> its columns as ``_columns`` gives them, for many tables in one query
    per 200 databases (the small tables' pass reads hundreds of shapes at once). The query
    names the tables too: a batch of 256 out of a database of 5,000 read every table's columns
    (30,000 rows a batch, 2.5 of its 3.4 s)."""
    schemas = sorted({s for s, _ in tables})
    want = set(tables)
    out: dict[tuple[str, str], list[tuple]] = {t: [] for t in want}
    for i in range(0, len(schemas), 200):
        part = schemas[i:i + 200]
        in_part = set(part)
        names = sorted({t for s, t in want if s in in_part})
        with conn.cursor() as cur:
            cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, EXTRA, "
                        "CHARACTER_SET_NAME FROM information_schema.COLUMNS "
                        f"WHERE TABLE_SCHEMA IN ({', '.join(['%s'] * len(part))}) "
                        f"AND TABLE_NAME IN ({', '.join(['%s'] * len(names))}) "
                        "ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION", [*part, *names])
            for r in cur.fetchall():
                r = tuple(None if v is None else as_str(v) for v in r)
                if (r[0], r[1]) in want:
                    out[r[0], r[1]].append(r[2:])
    return out


def partition_id_columns(task, st) -> set[str]:
    """The columns of ``st`` (a SourceTable) the task's column mapping gives a partition id."""
    plan = task.rules_for(st.source_id).column_mapper.plan(st.schema, st.table, st.columns)
    if plan is None:
        return set()
    from dm_core.rules.column_mapping import PartitionId

    return {t.column for t in plan.transforms if isinstance(t, PartitionId)}


def chunk_shape(up_conn, down_conn, st, widened=frozenset(), *, known=None, user_made: bool = False) -> ChunkShape:
    """The chunk's columns now (see ``ChunkShape``); ``widened``: partition-id columns,
    whose target type differs from the upstream's on purpose. ``known``: ``(upstream columns,
    target columns)`` already read (:func:`columns_of_tables`) instead of asking now.
    ``user_made``: the user made the target before the full phase (user_targets.py), so a
    difference is by design, not drift: its chunks stay strict."""
    up, down_cols = known if known is not None else (
        _columns(up_conn, st.schema, st.table), _columns(down_conn, st.target_schema, st.target_table))
    if not up:
        return ChunkShape(None, True)
    down = {c[0].lower(): c for c in down_cols}
    extract = {c.lower() for c in st.extract}
    widened = {c.lower() for c in widened}
    stored = [c for c in up if not is_generated(c[4])]
    cols = [c for c in stored if c[0].lower() in down]
    drifted = len(cols) != len(stored) or any(
        k not in extract and not is_generated(c[4]) and k not in {u[0].lower() for u in up}
        for k, c in down.items())
    drifted = drifted or any((c[2].lower(), c[3]) != (down[c[0].lower()][2].lower(), down[c[0].lower()][3])
                             for c in cols if c[0].lower() not in widened)
    drifted = drifted and not user_made
    # text as stored where the target has its charset, if then every value's bytes fit as they
    # are (LOAD reads the line as binary); else all text goes as utf8mb4, converted downstream
    raw = [_raw(c, down.get(c[0].lower())) for c in cols]
    same = _same_bytes(cols, down, extract, raw)
    table = replace(st, columns=[c[0] for c in cols], column_types=[c[1].lower() for c in cols],
                    column_nullable=[c[3].upper() != "NO" for c in cols], column_charsets=[c[5] for c in cols],
                    column_raw=raw if same else [False] * len(cols))
    return ChunkShape(table, drifted, tuple(up), same)


LENIENT_SQL_MODE = "REPLACE(REPLACE(@@SESSION.sql_mode, 'STRICT_TRANS_TABLES', ''), 'STRICT_ALL_TABLES', '')"


def lenient(conn) -> None:
    """Let ``conn`` write values its target cannot hold yet (truncated / clamped / implicit
    defaults with a warning instead of an error): only for chunks of a drifted table."""
    with conn.cursor() as cur:
        cur.execute(f"SET SESSION sql_mode = {LENIENT_SQL_MODE}")
