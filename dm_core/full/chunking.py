"""Split one upstream table into chunks: WHERE predicates that together select every row once.

Why: a chunk is the unit of progress (read, landed in the target in one transaction and
recorded as one piece), so a rerun loads only the chunks not yet recorded; Spark reads each
chunk as one JDBC query (extract.py), several at a time. The plan is computed once per table
and persisted (plan_store.py): chunk ids stay the same across reruns even when rows moved.

Three key shapes:

1. **One integer key column**: equal-width ranges between MIN and MAX (two cheap queries;
   bounds are integers formatted with ``int()``). Skewed ids give uneven chunks, never wrong ones.
2. **Any other key** (composite, string, decimal, temporal; a PK or a NOT NULL unique key):
   boundaries sampled by walking the key in order, ``SELECT key ... WHERE key >= prev ORDER BY
   key LIMIT 1 OFFSET n`` (each step reads n index entries, the whole walk one pass over the
   key). Chunk i is ``key >= b[i-1] AND key < b[i]``: a row-value comparison ``(a, b) >= (x, y)``
   written out as ``a > x OR (a = x AND b >= y)``, because MariaDB's range optimizer only
   uses the first column of a row constructor (checked with EXPLAIN on 10.11) and TiDB
   handles both. Keys with ENUM/SET/BIT columns (ORDER BY and ``<`` disagree) or TIME (pymysql
   formats negative intervals wrongly) fall back to 3.
3. **No usable key**: one chunk, ``1=1``. It is still exact on rerun: every chunk, keyless
   or not, lands in the target in one transaction together with its marker (chunk_writer.py).

Correctness does not depend on the sampled values: chunk i's lower bound is the complement
of chunk i-1's upper bound (``ge`` vs ``lt`` on the same literals, trichotomy for NOT NULL
keys), the first chunk is unbounded below and the last unbounded above, so every row -- also
rows inserted after planning -- matches exactly one chunk. Sampling only decides the sizes.

Boundary values reach SQL text (the chunk's query is a string handed to Spark's JDBC reader): integers via ``int()``,
everything else via pymysql's ``Connection.literal`` on the upstream connection that read
them -- the server's own quoting rules (it switches to quote doubling when the server runs
with NO_BACKSLASH_ESCAPES; Spark's JDBC session uses the same server default sql_mode) and
hex literals ``X'..'`` for bytes. The sampling session uses time_zone '+00:00' like the JDBC
reader, so TIMESTAMP bounds mean the same instant in both.
"""

from __future__ import annotations

from dataclasses import dataclass

from dm_core.db import qi, qt

INT_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
_UNSAMPLEABLE = {"enum", "set", "bit", "time", "geometry", "json"}  # see below


@dataclass(frozen=True)
class Chunk:
    chunk_id: int
    where: str          # a predicate on the upstream table, '1=1' for the whole table


def ge(cols: list[str], lits: list[str]) -> str:
    """Row-value ``(cols) >= (lits)`` written out for the range optimizer.

    >>> ge(["a", "b"], ["1", "'x'"])
    "(`a` > 1 OR (`a` = 1 AND `b` >= 'x'))"
    """
    return _cmp(cols, lits, ">", ">=")


def lt(cols: list[str], lits: list[str]) -> str:
    """Row-value ``(cols) < (lits)``, the exact complement of :func:`ge` for NOT NULL columns.

    >>> lt(["a"], ["5"])
    '(`a` < 5)'
    """
    return _cmp(cols, lits, "<", "<")


def _cmp(cols: list[str], lits: list[str], strict: str, last: str) -> str:
    terms = []
    for i in range(len(cols)):
        eqs = [f"{qi(c)} = {v}" for c, v in zip(cols[:i], lits[:i])]
        op = last if i == len(cols) - 1 else strict
        terms.append(" AND ".join(eqs + [f"{qi(cols[i])} {op} {lits[i]}"]))
    return "(" + " OR ".join(f"({t})" if " AND " in t else t for t in terms) + ")"


def between(cols: list[str], lower: list[str] | None, upper: list[str] | None) -> str:
    """Chunk predicate for ``lower <= key < upper`` (either side may be open).

    >>> between(["id"], None, ["10"])
    '(`id` < 10)'
    >>> between(["id"], ["10"], ["20"])
    '(`id` >= 10) AND (`id` < 20)'
    """
    parts = ([ge(cols, lower)] if lower else []) + ([lt(cols, upper)] if upper else [])
    return " AND ".join(parts) or "1=1"


# Bounds of a chunk sized by bytes: a tiny average row must not make one chunk of a huge
# table (a kill would redo all of it), a huge one must not make a chunk per row.
MIN_CHUNK_ROWS, MAX_CHUNK_ROWS = 10_000, 5_000_000


def chunk_rows(st, rows: int, chunk_filesize_mb: int, override: int | None = None,
               fallback: int | None = None) -> int:
    """Rows per chunk of table ``st``: ``override`` (--chunk-rows), else the instance's
    mydumper ``rows``, else ``fallback`` ($SHARDFLOW_CHUNK_ROWS), else about ``chunk-filesize``
    MB by the table's average row length (DM's defaults: rows 0, chunk-filesize 64; 0 or an
    unknown row length: 200,000 rows). Why bytes: each chunk is one Spark job and one
    downstream transaction; 200,000-row chunks of 100-byte rows made the 10M-row bench spend
    12 of its 72 CPU-seconds on per-chunk work (jobs, connections, plans), and 64 MB stays
    under TiDB's default 100 MB transaction limit.

    >>> class St: avg_row_bytes = 100
    >>> chunk_rows(St(), 0, 64), chunk_rows(St(), 5000, 64), chunk_rows(St(), 5000, 64, 777)
    (671088, 5000, 777)
    >>> St.avg_row_bytes = 0   # unknown (an empty table)
    >>> chunk_rows(St(), 0, 64), chunk_rows(St(), 0, 64, fallback=3000)
    (200000, 3000)
    """
    if override:
        return override
    if rows:
        return rows
    if fallback:
        return fallback
    avg = getattr(st, "avg_row_bytes", 0)
    if avg <= 0 or chunk_filesize_mb <= 0:
        return 200_000
    return max(MIN_CHUNK_ROWS, min(MAX_CHUNK_ROWS, chunk_filesize_mb * 2**20 // avg))


def plan_chunks(conn, st, target_rows: int = 200_000) -> list[Chunk]:
    """The chunks of table ``st`` (a discover.SourceTable) of about ``target_rows`` rows."""
    if target_rows < 1:
        raise ValueError(f"{st.name}: chunk size must be positive, got {target_rows}")
    if not st.key or any(t in _UNSAMPLEABLE for t in st.key_types):
        return [Chunk(0, "1=1")]
    if _by_integer_range(st):
        return _integer_ranges(conn, st, target_rows)
    return _sampled(conn, st, target_rows)


def _by_integer_range(st) -> bool:
    """Whether ``st`` is cut by its one integer key's MIN/MAX (else sampled, or one chunk)."""
    return len(st.key) == 1 and st.key_types[0] in INT_TYPES


def plan_chunks_many(conn, tables: list, per_query: int = 64) -> list[list[Chunk]]:
    """``plan_chunks`` of each (st, target_rows) of ``tables``, in order. The tables with one
    integer key are measured ``per_query`` at a time, in one ``UNION ALL`` query: the small
    tables' pass plans thousands of tables, and one round trip each (with its Python) was
    most of that planning (5,000 tables: 4.3 s of 6.7)."""
    out: list = [None] * len(tables)
    ranged = []
    for i, (st, target_rows) in enumerate(tables):
        if target_rows >= 1 and st.key and _by_integer_range(st):
            ranged.append(i)
        else:
            out[i] = plan_chunks(conn, st, target_rows)
    with conn.cursor() as cur:
        for at in range(0, len(ranged), per_query):
            part = ranged[at:at + per_query]
            cur.execute(" UNION ALL ".join(_measure(i, tables[i][0]) for i in part))
            for i, lo, hi, n in cur.fetchall():
                st, target_rows = tables[int(i)]
                out[int(i)] = _ranges(st, lo, hi, n, target_rows)
    missing = [tables[i][0].name for i, got in enumerate(out) if got is None]
    if missing:   # cannot happen (one row per SELECT); never plan a table as empty by mistake
        raise RuntimeError(f"no MIN/MAX/COUNT came back for {', '.join(missing[:5])}")
    return out


def _measure(i: int, st) -> str:
    k = qi(st.key[0])
    return f"SELECT {int(i)}, MIN({k}), MAX({k}), COUNT(*) FROM {qt(st.schema, st.table)}"


def _integer_ranges(conn, st, target_rows: int) -> list[Chunk]:
    with conn.cursor() as cur:
        cur.execute(_measure(0, st))
        _, lo, hi, n = cur.fetchone()
    return _ranges(st, lo, hi, n, target_rows)


def _ranges(st, lo, hi, n, target_rows: int) -> list[Chunk]:
    """Chunks of about ``target_rows`` rows between the key's ``lo`` and ``hi`` (``n`` rows)."""
    if lo is None or n <= target_rows:
        return [Chunk(0, "1=1")]
    lo, hi = int(lo), int(hi)
    parts = max(1, -(-int(n) // target_rows))
    step = max(1, -(-(hi - lo + 1) // parts))
    splits = [[str(int(lo + step * i))] for i in range(1, parts) if lo + step * i <= hi]
    return _from_bounds(st.key, splits)


def _sampled(conn, st, target_rows: int) -> list[Chunk]:
    cols = ", ".join(qi(c) for c in st.key)
    base = f"SELECT {cols} FROM {qt(st.schema, st.table)}"
    bounds: list[list[str]] = []
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        prev: list[str] | None = None
        while True:
            where = f" WHERE {ge(st.key, prev)}" if prev else ""
            cur.execute(f"{base}{where} ORDER BY {cols} LIMIT 1 OFFSET {int(target_rows)}")
            row = cur.fetchone()
            if row is None:
                break
            lits = [literal(conn, v) for v in row]
            if lits == prev:  # cannot happen for a unique key; never loop on a surprise
                break
            bounds.append(lits)
            prev = lits
    return _from_bounds(st.key, bounds)


def literal(conn, v) -> str:
    """One sampled key value as SQL text: int() for integers, a hex literal for bytes (exact
    for BINARY/VARBINARY keys, immune to the connection charset), else the server's quoting."""
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, (bytes, bytearray)):
        return "X'" + bytes(v).hex() + "'"
    return conn.literal(v)


def _from_bounds(key: list[str], bounds: list[list[str]]) -> list[Chunk]:
    edges: list[list[str] | None] = [None, *bounds, None]
    return [Chunk(i, between(key, lo, hi)) for i, (lo, hi) in enumerate(zip(edges, edges[1:]))]
