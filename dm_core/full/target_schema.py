"""Create target schemas and tables from the upstream definitions, merged per target.

One CREATE TABLE per target table, built from the first member's information_schema
definition (column types, nullability, defaults, keys): extract columns are added and join
the primary key (so rows of different shards with the same id stay apart), and a column
that receives a `partition id` mapping is widened to BIGINT so the instance/schema/table
bits fit.
"""

from __future__ import annotations

from dm_core.db import qi, qt
from dm_core.full.discover import SourceTable


def _column_defs(conn, schema: str, table: str) -> list[tuple[str, str]]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT column_name, column_type, is_nullable, column_default, character_set_name, collation_name, extra "
            "FROM information_schema.columns WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (schema, table),
        )
        out = []
        for name, ctype, nullable, default, charset, collation, extra in cur.fetchall():
            d = ctype
            if collation:
                d += f" COLLATE {collation}"
            d += " NULL" if nullable == "YES" else " NOT NULL"
            # MariaDB reports defaults as SQL expressions already ('abc' quoted, NULL, numbers).
            if default is not None and default.upper() != "NULL":
                d += f" DEFAULT {default}"
            if "auto_increment" in (extra or "").lower():
                d += " AUTO_INCREMENT"
            out.append((name, d))
        return out


def _indexes(conn, schema: str, table: str) -> list[tuple[str, bool, list[str]]]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT index_name, non_unique, column_name FROM information_schema.statistics "
            "WHERE table_schema = %s AND table_name = %s ORDER BY index_name = 'PRIMARY' DESC, index_name, seq_in_index",
            (schema, table),
        )
        d: dict[str, tuple[bool, list[str]]] = {}
        for name, nu, col in cur.fetchall():
            d.setdefault(name, (not int(nu), []))[1].append(col)
    return [(n, u, c) for n, (u, c) in d.items()]


def create_table_sql(up_conn, member: SourceTable, widen: set[str]) -> str:
    cols = _column_defs(up_conn, member.schema, member.table)
    lines = []
    for name, d in cols:
        if name in widen:
            # the id keeps its sign/nullability but needs 64 bits for the partition bits
            rest = d.split(" ", 1)[1] if " " in d else ""
            d = "bigint " + rest.replace("unsigned", "").strip()
        lines.append(f"{qi(name)} {d}")
    extract = list(member.extract)
    for c in extract:
        lines.append(f"{qi(c)} varchar(255) NOT NULL DEFAULT ''")
    for name, unique, icols in _indexes(up_conn, member.schema, member.table):
        keycols = icols + [c for c in extract if c not in icols] if unique else icols
        collist = ", ".join(qi(c) for c in keycols)
        if name == "PRIMARY":
            lines.append(f"PRIMARY KEY ({collist})")
        elif unique:
            lines.append(f"UNIQUE KEY {qi(name)} ({collist})")
        else:
            lines.append(f"KEY {qi(name)} ({collist})")
    body = ",\n  ".join(lines)
    return f"CREATE TABLE IF NOT EXISTS {qt(member.target_schema, member.target_table)} (\n  {body}\n) DEFAULT CHARSET=utf8mb4"


def ensure_targets(down_conn, members: list[tuple[object, SourceTable]], mapped_columns) -> list[str]:
    """Create every missing target schema/table. ``members`` pairs an upstream connection
    with a table; ``mapped_columns(st)`` names columns that get a partition id."""
    done: set[tuple[str, str]] = set()
    created = []
    with down_conn.cursor() as cur:
        for up_conn, st in members:
            tkey = (st.target_schema.lower(), st.target_table.lower())
            if tkey in done:
                continue
            done.add(tkey)
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {qi(st.target_schema)}")
            sql = create_table_sql(up_conn, st, mapped_columns(st))
            cur.execute(sql)
            created.append(f"{st.target_schema}.{st.target_table}")
    return created
