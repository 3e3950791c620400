"""MariaDB system-versioned tables (``WITH SYSTEM VERSIONING``): their current rows migrate,
their history does not.

What the binlog holds for such a table (measured on MariaDB 10.11, ROW format): every row image
carries the period columns -- the invisible ``row_start`` / ``row_end`` of a table declared only
``WITH SYSTEM VERSIONING``, or the table's own ``GENERATED ALWAYS AS ROW START / ROW END``
columns -- and the current row is the one whose row end is the maximum. An INSERT writes a
current row; an UPDATE is an update of the current row plus an INSERT of the history row (row
end = the change's time); a DELETE is an UPDATE that moves the current row into history;
``DELETE HISTORY`` deletes history rows.

Before, the syncer paused on every such row ("carry column(s) `row_start`, `row_end` that the
downstream table does not have"); written as they are, the history rows would have landed as
current rows (a REPLACE in safe mode overwrote the current row with its past). A downstream
has no way to take history from the binlog (TiDB has no system versioning; a MariaDB target
keeps its own if it is versioned), so the rows are mapped to the current table:

- INSERT of a current row → INSERT; of a history row → nothing;
- UPDATE current → current → UPDATE; current → history (the upstream's DELETE) → DELETE of the
  row; a change of a history row → nothing;
- DELETE of a current row → DELETE; of a history row (DELETE HISTORY) → nothing;

and the period columns are left out of the row images (the downstream computes them if it is
versioned; a target without them never had them). Which columns are the period is asked of the
upstream (``period_columns``), once per table and again after a DDL.
"""

from __future__ import annotations

import datetime

# the row end of a current row: TIMESTAMP(6) before MariaDB 11.5 (2038), after it (2106), and a
# transaction-precise BIGINT UNSIGNED period
_MAX_TIMES = (datetime.datetime(2038, 1, 19, 3, 14, 7, 999999), datetime.datetime(2106, 2, 7, 6, 28, 15, 999999))
_MAX_ID = (1 << 64) - 1


def is_current(row_end) -> bool:
    """Whether a row end value marks the current row.

    >>> is_current(datetime.datetime(2038, 1, 19, 3, 14, 7, 999999)), is_current(18446744073709551615)
    (True, True)
    >>> is_current(datetime.datetime(2026, 11, 28, 2, 3, 35, 181386)), is_current(1506)
    (False, False)
    """
    if isinstance(row_end, datetime.datetime):
        return row_end.replace(tzinfo=None) in _MAX_TIMES
    return row_end == _MAX_ID


def period_columns(conn, schema: str, table: str) -> tuple[str, str] | None:
    """(row start, row end) column names of a system-versioned upstream table, else None."""
    with conn.cursor() as cur:
        cur.execute("SELECT table_type FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                    (schema, table))
        got = cur.fetchone()
        if not got or str(got[0]).upper() != "SYSTEM VERSIONED":
            return None
        cur.execute("SELECT column_name, generation_expression FROM information_schema.columns "
                    "WHERE table_schema = %s AND table_name = %s AND generation_expression IN ('ROW START', 'ROW END')",
                    (schema, table))
        named = {str(expr).upper(): name for name, expr in cur.fetchall()}
    return named.get("ROW START", "row_start"), named.get("ROW END", "row_end")


def current_change(op: str, before: dict | None, after: dict | None, period: tuple[str, str]):
    """The change to the current table, as (op, before, after) without the period columns, or
    None when it only concerns history (see the module docstring).

    >>> end, now = datetime.datetime(2038, 1, 19, 3, 14, 7, 999999), datetime.datetime(2026, 1, 1)
    >>> P = ("row_start", "row_end")
    >>> current_change("update", {"id": 1, "row_start": now, "row_end": end},
    ...                {"id": 1, "row_start": now, "row_end": now}, P)
    ('delete', {'id': 1}, None)
    >>> current_change("insert", None, {"id": 1, "row_start": now, "row_end": now}, P) is None
    True
    """
    start, end = period
    if op == "insert":
        if not is_current(after.get(end)):
            return None
    elif op == "delete":
        if not is_current(before.get(end)):
            return None
    else:
        if not is_current(before.get(end)):
            return None
        if not is_current(after.get(end)):
            op, after = "delete", None
    strip = (lambda row: None if row is None else {k: v for k, v in row.items() if k != start and k != end})
    return op, strip(before), strip(after)
