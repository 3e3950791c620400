"""What the downstream says about its tables: columns and the key used in WHERE clauses.

Keys come from the downstream table, as DM does: the primary key, else the first unique
key whose columns are all NOT NULL, else every column (then statements touch one row with
LIMIT 1, because duplicates are possible). As in DM (``redirectIndexKeys``), a key counts
only when the upstream rows carry all its columns: a target the user made with a key of
its own (an AUTO_INCREMENT primary key the upstream does not have) is written by its next
eligible unique key, else by every column the rows carry (``for_columns``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import cached_property

from dm_core.db import as_str
from dm_core.errors import ErrorCode

_GENERATED = re.compile(r"\b(?:VIRTUAL|STORED|PERSISTENT) GENERATED\b", re.I)


def is_generated(extra: str | None) -> bool:
    """Whether information_schema.COLUMNS.EXTRA marks a generated column, which the server
    computes and no statement may write. MySQL 8 marks a column with a default expression
    (``DEFAULT CURRENT_TIMESTAMP``) ``DEFAULT_GENERATED``: that one is written like any other.

    >>> [is_generated(x) for x in ("VIRTUAL GENERATED", "STORED GENERATED", "PERSISTENT GENERATED",
    ...                            "DEFAULT_GENERATED", "DEFAULT_GENERATED on update CURRENT_TIMESTAMP",
    ...                            "auto_increment", "", None)]
    [True, True, True, False, False, False, False, False]
    """
    return bool(extra) and _GENERATED.search(extra) is not None


@dataclass(frozen=True)
class TargetTable:
    schema: str
    table: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    key_is_unique: bool  # False when the key is "all columns"
    only_unique_key: bool = False  # no other unique index: rows with distinct keys never interact
    # Generated columns (VIRTUAL / STORED): left out of ``columns`` and never the key, because
    # the downstream computes them and rejects a value for them (errors 3105 / 1906).
    generated: frozenset = frozenset()
    # every eligible key (unique, NOT NULL, not generated), the primary key first: ``key`` is the
    # first; ``for_columns`` takes the first one rows of a given shape carry
    unique_keys: tuple = ()
    # every unique index (NULL-able ones too; no generated column): causality's conflict keys
    # besides ``key`` (DM: every PK/UK of the downstream table, job.RowJob.keys)
    unique_indexes: tuple = ()
    # foreign keys whose parent is addressed by its key, as (this table's columns in the order of
    # the parent's key, the parent's ident): with foreign key checks on downstream, a row's
    # conflict keys include its parent's (job.RowJob.keys), so the two stay on one worker in order
    parents: tuple[tuple[tuple[str, ...], tuple[str, str]], ...] = ()

    @property
    def rows_apart(self) -> bool:
        """Rows of distinct keys never interact: the key is unique and no other unique index
        exists, so changes of two keys may be merged or reordered (compactor, merger)."""
        return self.key_is_unique and self.only_unique_key

    def for_columns(self, row_columns) -> "TargetTable":
        """This table as rows carrying ``row_columns`` are written: keyed by the first eligible
        key they carry all columns of, else by every column they carry (DM: redirectIndexKeys).

        >>> t = TargetTable("d", "t", ("a", "b", "c"), ("c",), True, unique_keys=(("c",), ("b",)))
        >>> t.for_columns({"a", "b"}).key, t.for_columns({"a"}).key, t.for_columns({"a"}).key_is_unique
        (('b',), ('a',), False)
        """
        carried = tuple(k for k in self.unique_indexes if all(c in row_columns for c in k))
        t = self if carried == self.unique_indexes else dataclasses.replace(self, unique_indexes=carried)
        if not t.key_is_unique or all(c in row_columns for c in t.key):
            return t
        alt = next((k for k in t.unique_keys if all(c in row_columns for c in k)), None)
        if alt is not None:
            return dataclasses.replace(t, key=alt, only_unique_key=False)
        keep = tuple(c for c in t.columns if c in row_columns)
        return dataclasses.replace(t, columns=keep, key=keep, key_is_unique=False, only_unique_key=False)

    @cached_property
    def ident(self) -> tuple[str, str]:
        """(schema, table) lower-cased: how conflict keys name the table (job.RowJob.keys)."""
        return (self.schema.lower(), self.table.lower())


class TargetCatalog:
    """Caches downstream table shapes for one connection's lifetime. ``foreign_keys``: read each
    table's foreign keys too (``TargetTable.parents``; only needed with foreign key checks on)."""

    def __init__(self, conn, *, foreign_keys: bool = False):
        self._conn = conn
        self._cache: dict[tuple[str, str], TargetTable] = {}
        self._foreign_keys = foreign_keys

    def forget(self, schema: str, table: str) -> None:
        self._cache.pop((schema.lower(), table.lower()), None)

    def get(self, schema: str, table: str) -> TargetTable:
        k = (schema.lower(), table.lower())
        if k not in self._cache:
            t = self._load(schema, table)
            self._cache[k] = t
            if self._foreign_keys:
                self._cache[k] = t = dataclasses.replace(t, parents=self._parents(t))
        return self._cache[k]

    def _parents(self, t: TargetTable) -> tuple:
        with self._conn.cursor() as cur:
            cur.execute(
                "SELECT constraint_name, column_name, referenced_table_schema, referenced_table_name, "
                "referenced_column_name FROM information_schema.key_column_usage WHERE table_schema = %s "
                "AND table_name = %s AND referenced_table_name IS NOT NULL ORDER BY constraint_name, ordinal_position",
                (t.schema, t.table))
            rows = [tuple(as_str(x) for x in r) for r in cur.fetchall()]
        fks: dict[str, list] = {}
        for name, col, ps, pt, pc in rows:
            fks.setdefault(name, []).append((col, ps, pt, pc))
        out = []
        for cols in fks.values():
            ps, pt = cols[0][1], cols[0][2]
            parent = t if (ps.lower(), pt.lower()) == t.ident else self.get(ps, pt)
            by_parent = {pc.lower(): c for c, _, _, pc in cols}
            if parent.key_is_unique and sorted(by_parent) == sorted(k.lower() for k in parent.key):
                out.append((tuple(by_parent[k.lower()] for k in parent.key), parent.ident))
        return tuple(out)

    def _load(self, schema: str, table: str) -> TargetTable:
        with self._conn.cursor() as cur:
            cur.execute(
                "SELECT column_name, is_nullable, extra FROM information_schema.columns "
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
            generated = frozenset(c[0] for c in cols if is_generated(as_str(c[2])))
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
        names = tuple(c[0] for c in cols if c[0] not in generated)
        only = sum(1 for u in unique.values() if u) == 1
        uniq = tuple(tuple(icols) for name, icols in indexes.items()  # the primary key first (the ORDER BY above)
                     if unique[name] and not any(c in generated for c in icols))
        keys = tuple(k for k in uniq if not any(nullable[c] for c in k))
        if keys:
            return TargetTable(schema, table, names, keys[0], True, only, generated, keys, uniq)
        return TargetTable(schema, table, names, names, False, generated=generated, unique_indexes=uniq)

