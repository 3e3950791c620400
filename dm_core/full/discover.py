"""Which upstream tables a task moves, where each goes, and which key identifies a row.

Splitting a table into chunks lives in chunking.py (``chunk_table`` stays importable here).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core import faults
from dm_core.full.chunking import Chunk, plan_chunks

chunk_table = plan_chunks  # the name callers used before chunking.py
__all__ = ["SourceTable", "discover", "Chunk", "chunk_table", "SYSTEM_SCHEMAS"]


SYSTEM_SCHEMAS = {"mysql", "information_schema", "performance_schema", "sys"}


@dataclass
class SourceTable:
    source_id: str
    schema: str
    table: str
    target_schema: str
    target_table: str
    columns: list[str]
    key: list[str]                    # PK, else not-null UK, else []
    key_types: list[str]              # information_schema DATA_TYPE of each key column
    rows_estimate: int = 0
    extract: dict[str, str] = field(default_factory=dict)
    column_types: list[str] = field(default_factory=list)  # DATA_TYPE of each column (extract.py casts some)
    column_nullable: list[bool] = field(default_factory=list)  # each column may be NULL (empty: unknown, assume so)
    column_charsets: list = field(default_factory=list)  # CHARACTER_SET_NAME of each column (None: not text)
    # each column's text goes as stored, no conversion (its target column has the same charset):
    # extract.chunk_shape decides, text_rows.line_query reads it
    column_raw: list = field(default_factory=list)
    avg_row_bytes: int = 0            # information_schema AVG_ROW_LENGTH (0: unknown); sizes chunks
    engine: str = ""                  # information_schema ENGINE ('' unknown); snapshot_read.py asks it

    @property
    def name(self) -> str:
        return f"{self.source_id}:{self.schema}.{self.table}"


def allowed_databases(conn, rules) -> list[tuple[str, str]]:
    """(upstream database, its routed target) of every database the block-allow list moves as
    a whole (``selects_schema``), tables or not."""
    with conn.cursor() as cur:
        cur.execute("SELECT schema_name FROM information_schema.schemata ORDER BY schema_name")
        names = [r[0] for r in cur.fetchall()]
    return [(s, rules.router.route(s, "")[0]) for s in names
            if s.lower() not in SYSTEM_SCHEMAS and rules.block_allow.selects_schema(s)]


def discover(conn, source_id: str, rules, *, within: tuple[str, str] | None = None) -> list[SourceTable]:
    """Allowed base tables of one source with their routes, keys and size estimates.
    ``within``: only this (schema, table), when the caller needs one table.

    Why the schema list first: information_schema.tables opens every table it lists to read
    its row estimate, so listing a server of 10,000 tables took 1-2 s; the schemas the rules
    can never allow a table of are left out of the query, and their tables are not opened."""
    faults.hit("upstream.list_tables")
    with conn.cursor() as cur:
        if within is not None:
            where, args = "table_schema = %s AND table_name = %s", within
        else:
            cur.execute("SELECT schema_name FROM information_schema.schemata")
            wanted = [r[0] for r in cur.fetchall() if r[0].lower() not in SYSTEM_SCHEMAS
                      and rules.block_allow.may_allow_tables_of(r[0])]
            if not wanted:
                return []
            where, args = "table_schema IN %s", (wanted,)
        cur.execute(
            "SELECT table_schema, table_name, COALESCE(table_rows, 0), COALESCE(avg_row_length, 0), "
            f"COALESCE(engine, '') FROM information_schema.tables WHERE table_type = 'BASE TABLE' AND {where} "
            "ORDER BY table_schema, table_name", args
        )
        tables = [(s, t, int(n), int(a), e) for s, t, n, a, e in cur.fetchall()
                  if s.lower() not in SYSTEM_SCHEMAS and rules.block_allow.allow_table(s, t)]
        if not tables:
            return []
        # only the allowed tables' schemas: information_schema then opens no other schema's tables
        if within is None:
            where, args = "table_schema IN %s", (sorted({s for s, *_ in tables}),)
        cur.execute(
            "SELECT table_schema, table_name, column_name, data_type, is_nullable FROM information_schema.columns "
            f"WHERE {where} ORDER BY table_schema, table_name, ordinal_position", args
        )
        cols: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}
        for s, t, c, dt, nullable in cur.fetchall():
            cols.setdefault((s, t), []).append((c, dt.lower(), nullable == "YES"))
        cur.execute(
            "SELECT table_schema, table_name, index_name, column_name, non_unique FROM information_schema.statistics "
            f"WHERE {where} ORDER BY table_schema, table_name, index_name = 'PRIMARY' DESC, index_name, "
            "seq_in_index", args
        )
        idx: dict[tuple[str, str], dict[str, tuple[bool, list[str]]]] = {}
        for s, t, i, c, nu in cur.fetchall():
            idx.setdefault((s, t), {}).setdefault(i, (not int(nu), []))[1].append(c)
    out = []
    for s, t, n, avg, engine in tables:
        ccols = cols.get((s, t), [])
        types = {c: dt for c, dt, _ in ccols}
        nullable = {c: nl for c, _, nl in ccols}
        key: list[str] = []
        indexes = idx.get((s, t), {})
        if "PRIMARY" in indexes:
            key = indexes["PRIMARY"][1]
        else:
            for uniq, icols in indexes.values():
                if uniq and not any(nullable[c] for c in icols):
                    key = icols
                    break
        ts, tt = rules.router.route(s, t)
        out.append(SourceTable(source_id, s, t, ts, tt, [c for c, _, _ in ccols], key,
                               [types[c] for c in key], n, rules.router.extract_values(s, t, source_id),
                               [dt for _, dt, _ in ccols], avg_row_bytes=avg, engine=engine))
    return out
