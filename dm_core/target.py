"""What the downstream says about its tables: columns and the key used in WHERE clauses.

Keys come from the downstream table, as DM does: the primary key, else the first unique
key whose columns are all NOT NULL, else every column (then statements touch one row with
LIMIT 1, because duplicates are possible).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from dm_core.errors import ErrorCode


@dataclass(frozen=True)
class TargetTable:
    schema: str
    table: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    key_is_unique: bool  # False when the key is "all columns"
    only_unique_key: bool = False  # no other unique index: rows with distinct keys never interact

    @cached_property
    def ident(self) -> tuple[str, str]:
        """(schema, table) lower-cased: how conflict keys name the table (job.RowJob.keys)."""
        return (self.schema.lower(), self.table.lower())


class TargetCatalog:
    """Caches downstream table shapes for one connection's lifetime."""

    def __init__(self, conn):
        self._conn = conn
        self._cache: dict[tuple[str, str], TargetTable] = {}

    def forget(self, schema: str, table: str) -> None:
        self._cache.pop((schema.lower(), table.lower()), None)

    def get(self, schema: str, table: str) -> TargetTable:
        k = (schema.lower(), table.lower())
        if k not in self._cache:
            self._cache[k] = self._load(schema, table)
        return self._cache[k]

    def _load(self, schema: str, table: str) -> TargetTable:
        with self._conn.cursor() as cur:
            cur.execute(
                "SELECT column_name, is_nullable FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                (schema, table),
            )
            cols = cur.fetchall()
            if not cols:
                raise ErrorCode.DML_EXEC_FAILED.error(
                    f"downstream table `{schema}`.`{table}` does not exist",
                    workaround="run the full phase (it creates target tables) or create the table downstream, then resume",
                )
            nullable = {c[0]: c[1] == "YES" for c in cols}
            cur.execute(
                "SELECT index_name, column_name, non_unique FROM information_schema.statistics "
                "WHERE table_schema = %s AND table_name = %s ORDER BY index_name = 'PRIMARY' DESC, index_name, seq_in_index",
                (schema, table),
            )
            indexes: dict[str, list[str]] = {}
            unique: dict[str, bool] = {}
            for name, col, non_unique in cur.fetchall():
                indexes.setdefault(name, []).append(col)
                unique[name] = not int(non_unique)
        names = tuple(c[0] for c in cols)
        only = sum(1 for u in unique.values() if u) == 1
        if "PRIMARY" in indexes:
            return TargetTable(schema, table, names, tuple(indexes["PRIMARY"]), True, only)
        for name, icols in indexes.items():
            if unique[name] and not any(nullable[c] for c in icols):
                return TargetTable(schema, table, names, tuple(icols), True, only)
        return TargetTable(schema, table, names, names, False)
