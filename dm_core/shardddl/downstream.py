"""What a downstream table looks like (information_schema, as a ``schema.TableSchema``), and
whether one change of a DDL is in effect there.

Three callers read the downstream this way: the lock owner deciding after a crash whether
its statement took effect (``executor``), the safe-mode replay running only the changes
not yet in effect (``dm_core.ddl.replay``), and an optimistic lock's starting schema
(``shard_sync``). It is its own module so that those callers do not import each other.
"""

from __future__ import annotations

from dm_core.db import as_str
from dm_core.shardddl.schema import Column, Index, TableSchema, canonical_default, canonical_type


def read_table_schema(conn, schema: str, table: str) -> TableSchema | None:
    """The downstream table's columns and indexes (None when the table does not exist)."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        mariadb = "mariadb" in str(cur.fetchone()[0]).lower()
        cur.execute("SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, EXTRA "
                    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                    "ORDER BY ORDINAL_POSITION", (schema, table))
        rows = cur.fetchall()
        if not rows:
            return None
        cols = []
        for name, ctype, nullable, default, extra in rows:
            t = canonical_type(as_str(ctype))
            cols.append(Column(as_str(name), t, as_str(nullable).upper() == "YES",
                               canonical_default(as_str(default) if default is not None else None, t,
                                                 quoted_strings=mariadb),
                               " ".join(as_str(extra or "").upper().replace("DEFAULT_GENERATED", "").split())))
        cur.execute("SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME, INDEX_TYPE FROM information_schema.STATISTICS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY INDEX_NAME, SEQ_IN_INDEX", (schema, table))
        idx: dict[str, list] = {}
        for name, non_unique, col, itype in cur.fetchall():
            name = as_str(name)
            kind = ("primary" if name.upper() == "PRIMARY" else "unique" if int(non_unique) == 0 else
                    "fulltext" if as_str(itype).upper() == "FULLTEXT" else "spatial" if as_str(itype).upper() == "SPATIAL"
                    else "index")
            idx.setdefault(name, [kind, []])[1].append(as_str(col))
    return TableSchema(tuple(cols), tuple(Index(n, k, tuple(c)) for n, (k, c) in idx.items()))


def change_applied(ch, cur: TableSchema | None) -> bool | None:
    """Whether one change is in effect in the downstream table ``cur``; None: cannot tell."""
    if cur is None:
        return None
    if ch.op == "add_column":
        return cur.column(ch.column.name) is not None
    if ch.op == "drop_column":
        return cur.column(ch.name) is None
    if ch.op in ("rename_column", "rename_index") or (ch.op == "modify_column" and ch.new_name):
        new = ch.new_name or ch.column.name
        get = cur.index if ch.op == "rename_index" else cur.column
        if get(new) is not None and get(ch.name) is None:
            return True
        if get(ch.name) is not None and get(new) is None:
            return False
        return None
    if ch.op == "modify_column":
        c = cur.column(ch.name)
        return c is not None and c.same_definition(ch.column)
    if ch.op == "add_index":
        if ch.index.implicit:   # no name of its own: in effect when an index of that definition is there
            return any(i.same_definition(ch.index) for i in cur.indexes)
        return cur.index(ch.index.name) is not None
    if ch.op == "drop_index":
        return cur.index(ch.name) is None
    return None
