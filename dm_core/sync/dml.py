"""DML build: row changes (already routed and mapped) → parameterised SQL statements.

Safe mode makes replay idempotent, as DM does: INSERT → REPLACE, UPDATE → DELETE (old key)
+ REPLACE (new row). Outside safe mode, INSERT / UPDATE … WHERE key / DELETE … WHERE key.
Values are always parameters; identifiers are always quoted.
"""

from __future__ import annotations

import datetime
import decimal
from dataclasses import dataclass

from dm_core.db import qi as _qi
from dm_core.jsondoc import json_text


def qi(name: str) -> str:
    # pymysql substitutes %s on the client: a literal % in an identifier must be doubled
    return _qi(name).replace("%", "%%")


def qt(schema: str, table: str) -> str:
    return f"{qi(schema)}.{qi(table)}"
from dm_core.target import TargetTable


@dataclass(slots=True)
class Stmt:
    sql: str            # identical text for statements that may be batched together
    params: tuple       # values as decoded, or as to_db_value made them: literal.Renderer takes both
    # A multi-row statement's parts (head, one row's placeholders, tail): ``sql`` is head +
    # the rows joined by ", " + tail, and the applier may send its rows as several such
    # statements in order (the same effect), to stay under the server's max_allowed_packet.
    shape: tuple[str, str, str] | None = None


def to_db_value(v):
    """mysql-replication's Python values → what pymysql sends back faithfully."""
    if type(v) in _PASS:
        return v
    if isinstance(v, (dict, list)):  # a MySQL JSON document (a bare scalar one is JsonText, a str)
        return json_text(v)
    if isinstance(v, set):
        return ",".join(sorted(v))
    if v is None or isinstance(v, (int, str, float, bytes, decimal.Decimal, datetime.date, datetime.timedelta)):
        return v
    return str(v)


_PASS = frozenset({int, str, float, bytes, decimal.Decimal, datetime.date, datetime.datetime,
                   datetime.timedelta, bool, type(None)})


class DMLBuilder:
    """Builds statements for one target table; templates are built once per table."""

    def __init__(self, tt: TargetTable):
        self.tt = tt
        name = qt(tt.schema, tt.table)
        cols = tt.columns
        collist = ", ".join(qi(c) for c in cols)
        ph = ", ".join(["%s"] * len(cols))
        eq = " = " if tt.key_is_unique else " <=> "
        where = " AND ".join(f"{qi(k)}{eq}%s" for k in tt.key)
        limit = "" if tt.key_is_unique else " LIMIT 1"
        sets = ", ".join(f"{qi(c)} = %s" for c in cols)
        self.insert_sql = f"INSERT INTO {name} ({collist}) VALUES ({ph})"
        self.replace_sql = f"REPLACE INTO {name} ({collist}) VALUES ({ph})"
        # one-row statements the applier may send as one multi-row statement (Stmt.shape)
        self._insert_shape = (f"INSERT INTO {name} ({collist}) VALUES ", f"({ph})", "")
        self._replace_shape = (f"REPLACE INTO {name} ({collist}) VALUES ", f"({ph})", "")
        self.delete_sql = f"DELETE FROM {name} WHERE {where}{limit}"
        self.update_sql = f"UPDATE {name} SET {sets} WHERE {where}{limit}"

    def _row(self, row: dict) -> tuple:
        return tuple(to_db_value(row.get(c)) for c in self.tt.columns)

    def _key(self, row: dict) -> tuple:
        return tuple(to_db_value(row.get(c)) for c in self.tt.key)

    def build(self, op: str, before: dict | None, after: dict | None, safe: bool) -> list[Stmt]:
        if op == "insert":
            return self._safe_insert(after) if safe else [Stmt(self.insert_sql, self._row(after), self._insert_shape)]
        if op == "delete":
            return [Stmt(self.delete_sql, self._key(before))]
        if safe:
            return [Stmt(self.delete_sql, self._key(before))] + self._safe_insert(after)
        return [Stmt(self.update_sql, self._row(after) + self._key(before))]

    def _safe_insert(self, row: dict) -> list[Stmt]:
        if self.tt.key_is_unique:
            return [Stmt(self.replace_sql, self._row(row), self._replace_shape)]
        # No unique key: REPLACE would just insert again on replay. Remove one identical
        # row first, so replaying an insert leaves exactly one copy.
        return [Stmt(self.delete_sql, self._key(row)), Stmt(self.insert_sql, self._row(row), self._insert_shape)]
