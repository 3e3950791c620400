"""Which tables a stretch of binlog created whole: every row they hold now was written after it
began, so a sync replaying that stretch brings them all.

Why: a start whose task file lets in a table the full phase never copied refuses it when it
holds rows (dm_core/left_out.py): rows written before the sync's checkpoint would be missing.
A table created after the checkpoint (while the task was stopped, say) misses nothing: its
CREATE TABLE and every row are still ahead in the binlog. Telling the two apart by the
table's ``CREATE_TIME`` is not safe (a rebuilding ALTER moves it forward); its CREATE TABLE
in the binlog is.

A name counts as created when a ``CREATE TABLE`` of it (``CREATE OR REPLACE`` too; ``... IF
NOT EXISTS`` does not count, as it may have found the table there) comes after ``start``
and no later statement moves another table's rows under that name (``RENAME TABLE``,
``ALTER TABLE ... RENAME TO``, ``EXCHANGE PARTITION``). A scan past its time budget says
nothing (None): the caller keeps refusing.
"""

from __future__ import annotations

import re
import time

from dm_core.binlog.queries import QueryScan
from dm_core.ddl.kind import ddl_event_type, strip_comments
from dm_core.ddl.text import table_spans
from dm_core.position import Position

_MAYBE = re.compile(r"\b(CREATE|RENAME|ALTER)\b", re.I)
_IF_NOT_EXISTS = re.compile(r"\bIF\s+NOT\s+EXISTS\b", re.I)


def effect(text: str, schema: str | None) -> tuple[set, set] | None:
    """(names a statement creates whole, names it moves other rows under), or None when no
    parser reads it.

    >>> effect("CREATE TABLE t (id int)", "d"), effect("create or replace table a.t (id int)", "d")
    (({('d', 't')}, set()), ({('a', 't')}, set()))
    >>> effect("CREATE TABLE IF NOT EXISTS t (id int)", "d"), effect("create table t like u", "d")
    ((set(), set()), ({('d', 't')}, set()))
    >>> effect("RENAME TABLE t TO old, u TO t", "d")[1] == {("d", "old"), ("d", "t")}
    True
    >>> effect("ALTER TABLE u RENAME TO t", "d"), effect("ALTER TABLE t ADD COLUMN c int", "d")
    ((set(), {('d', 't')}), (set(), set()))
    >>> effect("ALTER TABLE u EXCHANGE PARTITION p WITH TABLE t", "d")[1] == {("d", "u"), ("d", "t")}
    True
    """
    text = strip_comments(text)
    try:
        kind, spans = ddl_event_type(text), table_spans(text, schema)
    except Exception:  # noqa: BLE001 - see the docstring
        return None
    if kind == "create table":
        made = set() if _IF_NOT_EXISTS.search(text) else {(sp.schema, sp.table) for sp in spans if sp.role == "table"}
        return made, set()
    moved_in = {(sp.schema, sp.table) for sp in spans if sp.role == "new"}
    if kind == "exchange table partition":
        moved_in |= {(sp.schema, sp.table) for sp in spans}
    return set(), moved_in


def created_since(ep, start: Position, names: set[tuple[str, str]], *, server_id: int,
                  budget_seconds: float = 15.0) -> set[tuple[str, str]] | None:
    """Those of ``names`` (schema, table) that the binlog from ``start`` to its end now created
    whole (module docstring), or None when the scan ran out of ``budget_seconds``."""
    created: set[tuple[str, str]] = set()
    scan = QueryScan(ep, start, server_id=server_id, deadline=time.monotonic() + budget_seconds)
    for q in scan:
        if not _MAYBE.search(q.text):
            continue
        got = effect(q.text, q.schema)
        if got is None:   # it may have moved rows under any name it mentions
            created = {(sc, t) for sc, t in created if t not in q.text}
            continue
        created = (created | (got[0] & names)) - got[1]
    return None if scan.timed_out else created
