"""Whether an ALTER would change a downstream table, found by running it on an empty copy.

Why: a replayed DDL (the full phase's catch-up, a crash around a DDL) must run when the
downstream is still before it and must not when it is already after it. Comparing the
statement's changes with information_schema (replay.pending_parts) misses what that view
does not say -- a column's character set, collation, comment, position or visibility -- and
judges each clause against the table before the statement, so it would count a ``MODIFY s ...
CHARACTER SET latin1`` as done, and run only the DROP of ``DROP INDEX i, ADD INDEX i (a, b)``.
The server itself knows: the statement runs on a copy of the downstream table's structure
(``CREATE TABLE ... LIKE``, empty, so no row is touched and no rebuild costs time), and if
the copy's definition comes out as the table's, the table is a fixed point of the statement:
in effect already. Running a statement that changes nothing again would be harmless too, but
not always cheap (a MODIFY rebuilds the table) and not always harmless (``DROP COLUMN a, ADD
COLUMN a`` over a table already past it empties the column the load filled).

The copy is a plain table ``_sf_probe_<connection id>`` in the target's schema (a temporary
table cannot be partitioned on MariaDB, nor altered on TiDB), dropped at once; a leftover of a
killed process is dropped by a dry run in that schema ten minutes later (the prefix is what
finds leftovers in downstreams, so it stays as it is). Foreign keys are not
copied by ``LIKE`` and are left out of the comparison, so a statement naming another table (a
foreign key's parent, a rename, an exchange) is not tried: the caller decides by the
statement's parts alone (replay.pending_parts).
"""

from __future__ import annotations

import re

from dm_core.db import as_str, qt

SAME, CHANGES = "same", "changes"


def _definition(conn, schema: str, table: str) -> str:
    """The table's SHOW CREATE TABLE without what a copy may differ in by name alone: its own
    name, the AUTO_INCREMENT counter, foreign keys (``LIKE`` does not copy them)."""
    from dm_core.full.target_schema import show_create

    text = as_str(show_create(conn, schema, table))
    text = re.sub(r"^CREATE TABLE `(?:[^`]|``)+`", "CREATE TABLE", text)
    text = re.sub(r" AUTO_INCREMENT=\d+", "", text)
    lines = [ln.rstrip(",") for ln in text.splitlines() if not ln.lstrip().startswith("CONSTRAINT")
             or "FOREIGN KEY" not in ln]
    return "\n".join(lines)


def _drop_leftovers(cur, schema: str) -> None:
    """Drop copies older than a dry run ever lives (a process killed mid-run): by age, not
    by the connection, which another user's or another TiDB instance's PROCESSLIST hides."""
    cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                "AND CREATE_TIME < NOW() - INTERVAL 10 MINUTE", (schema,))
    for (name,) in cur.fetchall():
        name = as_str(name)
        if name.startswith("_sf_probe_") and name[len("_sf_probe_"):].isdigit():
            cur.execute(f"DROP TABLE IF EXISTS {qt(schema, name)}")


def outcome(conn, sql: str, schema: str, table: str) -> tuple[str, Exception | None]:
    """Run ``sql`` (an ALTER TABLE / CREATE INDEX / DROP INDEX naming ``schema.table`` first)
    on an empty copy of the downstream table: (SAME, None) when the copy ends as the table
    is, (CHANGES, None) when it differs, (None, error) when the server refused it on the copy
    (the caller decides what that error means), (None, None) when it cannot be tried."""
    from dm_core.ddl.text import table_spans

    spans = table_spans(sql, schema)
    if not spans or spans[0].role != "table" or len(spans) > 1:
        # a rename or an exchange changes more than this table's definition; a foreign key is
        # not copied by LIKE and is left out of the comparison, so the copy cannot tell
        return None, None
    with conn.cursor() as cur:
        cur.execute("SELECT CONNECTION_ID()")
        copy = f"_sf_probe_{cur.fetchone()[0]}"
        _drop_leftovers(cur, schema)
        main = spans[0]
        on_copy = sql[:main.start] + qt(schema, copy) + sql[main.end:]
        cur.execute(f"DROP TABLE IF EXISTS {qt(schema, copy)}")
        try:
            try:
                cur.execute(f"CREATE TABLE {qt(schema, copy)} LIKE {qt(schema, table)}")
            except Exception:  # noqa: BLE001 - no copy (a privilege, a server without LIKE): not tried
                return None, None
            try:
                cur.execute(on_copy)
            except Exception as e:  # noqa: BLE001 - the caller reads the server's error number
                return None, e
            same = _definition(conn, schema, copy) == _definition(conn, schema, table)
            return (SAME if same else CHANGES), None
        finally:
            cur.execute(f"DROP TABLE IF EXISTS {qt(schema, copy)}")
