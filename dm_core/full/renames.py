"""Renames during the full load: a table read under a name whose rows a RENAME moved away.

Why: the lock-free load reads each table by name at some moment after the low watermark L,
and the sync's catch-up replays from L. That converges as long as a name carries the same
rows (the same table) from L until its last chunk is read: a change replayed under that
name then lands on the rows the load read under it. A RENAME breaks it when it moves a
loaded table's rows to another name before the load has finished reading it:

* ``RENAME TABLE log TO log_1127, log_new TO log`` (a daily rotation) while ``log`` loads:
  its later chunks read ``log_new``'s rows into ``log``'s target, and the replay then renames
  that mixture to ``log_1127``: the old table's unread rows are lost, the new one's mixed in;
* ``RENAME TABLE a TO b`` while ``a`` loads: its unread chunks find no table and land
  nothing, ``b`` was never planned: those rows are lost;
* ``ALTER TABLE a EXCHANGE PARTITION p WITH TABLE b``: rows move between two loaded tables.

A rename whose *new* name the load planned is harmless (the load read the renamed table
under its new name; the replay's rename finds it done, ddl/replay.py), and so is one after
the last read of the table it moves (the replay moves the loaded rows with it).

What is checked (``harmful``): each such statement between L and the end of the binlog now
(``scan``: query events only, headers skipped otherwise; ``moved`` says which tables a
statement moves rows out of) against the chunks the load recorded: a table whose rows the
statement moved away is harmed when one of its chunks was recorded at or after the
statement's position (each chunk records the upstream's binlog end once it is committed:
its read ended before that; a chunk without one counts as after). reread.py reads harmed
tables again, or the full phase does not hand over to the sync (FULL_LOAD_RENAMED, naming
each statement, its position and the tables, with what to do).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dm_core.binlog.queries import QueryScan
from dm_core.ddl.kind import ddl_event_type, strip_comments
from dm_core.ddl.text import table_spans
from dm_core.position import Position

_RENAMING = ("rename table", "alter table", "exchange table partition")
_MAYBE = re.compile(r"\b(?:RENAME|EXCHANGE|CONVERT)\b", re.I)   # cheap: most query events are BEGIN / COMMIT


@dataclass(frozen=True)
class Moved:
    """A statement at ``pos`` (where its event starts; ``end``: where the next begins) that
    moved the rows of ``away`` (upstream ``(schema, table)`` pairs) to other names; ``names``:
    every table it names."""
    pos: Position
    statement: str
    away: tuple[tuple[str, str], ...]
    end: Position | None = None
    names: tuple[tuple[str, str], ...] = ()


_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)(?:\s*\.\s*(?:`(?:[^`]|``)+`|[\w$]+))?"
# MariaDB forms the table-name reader does not know, rewritten to ones it does
_NORMAL = [
    (re.compile(r"^(RENAME\s+TABLES?)\s+IF\s+EXISTS\b", re.I), r"\1"),
    (re.compile(r"^(ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE)\s+IF\s+EXISTS\b", re.I), r"\1"),
    (re.compile(r"\s+(?:WAIT\s+\d+|NOWAIT)(?=\s+(?:TO|RENAME|ADD|DROP|CHANGE|MODIFY|ALTER)\b|\s*,|\s*$)", re.I), ""),
]
_CONVERT_OUT = re.compile(rf"\bCONVERT\s+PARTITION\s+\S+\s+TO\s+TABLE\s+({_NAME})", re.I)
_CONVERT_IN = re.compile(rf"\bCONVERT\s+TABLE\s+({_NAME})\s+TO\s+PARTITION\b", re.I)


def _span_of(name: str, default_schema: str | None) -> tuple[str, str]:
    parts = [p.strip().strip("`").replace("``", "`") for p in re.split(r"\.(?=(?:[^`]*`[^`]*`)*[^`]*$)", name)]
    return (parts[0], parts[1]) if len(parts) == 2 else (default_schema or "", parts[0])


def moved(sql: str, default_schema: str | None) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    r"""(tables whose rows ``sql`` moves to another name, every table it names): the old side of
    each RENAME TABLE pair, the table an ``ALTER TABLE ... RENAME`` renames, both tables of an
    EXCHANGE PARTITION, the table a partition is converted out of (``CONVERT PARTITION ... TO
    TABLE``) and the one converted into a partition (``CONVERT TABLE ... TO PARTITION``); no
    tables for any other statement.

    >>> moved("/* tool */ RENAME TABLE log TO log_1127, log_new TO log", "app")[0]
    [('app', 'log'), ('app', 'log_new')]
    >>> moved("RENAME TABLE IF EXISTS a WAIT 3 TO b, c NOWAIT TO d", "app")[0]
    [('app', 'a'), ('app', 'c')]
    >>> moved("ALTER TABLE x.a ADD COLUMN c int, RENAME TO x.z", "app")
    ([('x', 'a')], [('x', 'a'), ('x', 'z')])
    >>> moved("ALTER\nTABLE IF EXISTS a RENAME TO b", "app")[0]
    [('app', 'a')]
    >>> moved("ALTER TABLE a EXCHANGE PARTITION p0 WITH TABLE b", "app")[0]
    [('app', 'a'), ('app', 'b')]
    >>> moved("ALTER TABLE t CONVERT PARTITION p0 TO TABLE `d`.`x`", "app")
    ([('app', 't')], [('app', 't'), ('d', 'x')])
    >>> moved("ALTER TABLE t CONVERT TABLE x TO PARTITION p1 VALUES LESS THAN (10)", "app")
    ([('app', 'x')], [('app', 't'), ('app', 'x')])
    >>> [moved(q, "app")[0] for q in ("ALTER TABLE a RENAME COLUMN x TO y", "ALTER TABLE a RENAME INDEX i TO j",
    ...     "ALTER TABLE o ADD FOREIGN KEY (c) REFERENCES cust (id)", "INSERT INTO a VALUES (1)")]
    [[], [], [], []]
    """
    text = strip_comments(sql)
    for rx, to in _NORMAL:
        text = rx.sub(to, text)
    kind = ddl_event_type(text)
    if kind not in _RENAMING:
        return [], []
    spans = table_spans(text, default_schema)
    names = [(sp.schema, sp.table) for sp in spans if sp.table]
    if kind == "rename table":
        return [(sp.schema, sp.table) for sp in spans if sp.role == "old"], names
    if kind == "exchange table partition":
        return names[:2], names[:2]
    table = [(sp.schema, sp.table) for sp in spans if sp.role == "table"][:1]
    if any(sp.role == "new" for sp in spans):
        return table, names
    m = _CONVERT_OUT.search(text)
    if m and table:
        return table, table + [_span_of(m.group(1), default_schema)]
    m = _CONVERT_IN.search(text)
    if m and table:
        x = _span_of(m.group(1), default_schema)
        return [x], table + [x]
    return [], []


def scan(ep, low: Position, *, server_id: int, selected, ignore=None) -> tuple[list[Moved], Position]:
    """Every statement from ``low`` to the binlog's end now that moved the rows of a table
    ``selected(schema, table)`` accepts (the task's block-allow list), and where the scan
    ended; ``ignore(names)``: leave out statements naming these tables (an online DDL tool's
    cut-over, which the sync turns into the real table's ALTER)."""
    scan_ = QueryScan(ep, low, server_id=server_id)
    out: list[Moved] = []
    for q in scan_:
        if not _MAYBE.search(q.text):
            continue
        try:
            away, names = moved(q.text, q.schema)
        except Exception:   # noqa: BLE001 - a statement no parser reads moves nothing we can name
            away, names = [], []
        away = [t for t in away if selected(*t)]
        if away and not (ignore is not None and ignore(names)):
            out.append(Moved(q.start, q.text, tuple(away), q.end, tuple(t for t in names if selected(*t))))
    return out, scan_.last


def component(moved: list[Moved], start) -> set[tuple[str, str]]:
    """The names ``start`` is tied to through ``moved``: every name of every statement that
    names one of them, again and again (a table read again must be read with every table a
    rename swapped rows with, and those with theirs).

    >>> m = [Moved(Position("b.1", 4), "", (("d", "a"),), None, (("d", "a"), ("d", "b"))),
    ...      Moved(Position("b.1", 9), "", (("d", "b"),), None, (("d", "b"), ("d", "c"))),
    ...      Moved(Position("b.1", 12), "", (("d", "x"),), None, (("d", "x"), ("d", "y")))]
    >>> sorted(component(m, {("d", "c")}))
    [('d', 'a'), ('d', 'b'), ('d', 'c')]
    """
    out = set(start)
    grew = True
    while grew:
        grew = False
        for mv in moved:
            ns = set(mv.names) | set(mv.away)
            if ns & out and not ns <= out:
                out |= ns
                grew = True
    return out


def harmful(moved: list[Moved], read_by: dict[tuple[str, str], list],
            reread_at: dict | None = None) -> list[tuple[Moved, list[tuple[str, str]]]]:
    """Each statement of ``moved`` with the loaded tables it harmed: ``read_by``: (schema,
    table) -> the position each of its recorded chunks was committed by (None: unknown);
    ``reread_at``: (schema, table) -> the snapshot a table was read again at (reread.py): a
    statement ending at or before it harmed nothing there.

    >>> m = [Moved(Position("b.1", 500), "RENAME TABLE a TO b", (("d", "a"),))]
    >>> harmful(m, {("d", "a"): [Position("b.1", 400)]})
    []
    >>> [t for _, t in harmful(m, {("d", "a"): [Position("b.1", 400), Position("b.1", 900)]})]
    [[('d', 'a')]]
    >>> [t for _, t in harmful(m, {("d", "a"): [None]})], harmful(m, {("d", "x"): [Position("b.1", 900)]})
    ([[('d', 'a')]], [])
    >>> r = [Moved(Position("b.1", 500), "RENAME TABLE a TO b", (("d", "a"),), Position("b.1", 560), (("d", "a"), ("d", "b")))]
    >>> harmful(r, {}, {("d", "a"): Position("b.1", 560), ("d", "b"): Position("b.1", 700)})
    []
    >>> [t for _, t in harmful(r, {}, {("d", "a"): Position("b.1", 900)})]   # b was not read again after it
    [[('d', 'a'), ('d', 'b')]]
    """
    out = []
    reread_at = reread_at or {}
    for mv in moved:
        # a statement over tables read again: harmless when all of them were read after it
        # (the sync skips it) or none was (their load's chunks say); else it would move a table
        # standing at its position into one the sync replays it onto, or the other way round
        after = [t for t in mv.names if t in reread_at and mv.end is not None and reread_at[t].key() >= mv.end.key()]
        if after and len(after) < len(set(mv.names)):
            out.append((mv, sorted(set(mv.names))))
            continue
        hit = [t for t in mv.away if t not in after
               and not (t in reread_at and reread_at[t].key() <= mv.pos.key())   # read again before it
               and any(p is None or p.key() >= mv.pos.key() for p in read_by.get(t, ()))]
        if hit:
            out.append((mv, hit))
    return out


def refusal(task_name: str, source_id: str, hits) -> str:
    """What the log and query-status say for ``harmful``'s findings on one source."""
    lines = [f"source {source_id} of task {task_name}: the full load read tables whose rows a statement moved to "
             "another name while they were being read, so the load cannot hand them to the sync without losing "
             "or mixing rows:"]
    for mv, tables in hits:
        names = ", ".join(f"`{s}`.`{t}`" for s, t in tables)
        lines.append(f"  at {mv.pos.file}:{mv.pos.pos}: {mv.statement.strip()[:500]} (read after it: {names})")
    return "\n".join(lines)


def ddl_between(ep, start: Position, end: Position, names: set, *, server_id: int) -> list[str]:
    """The statements (outside transactions) between ``start`` and ``end`` that name one of
    ``names``: what may have changed those tables' definitions in that stretch."""
    out: list[str] = []
    for q in QueryScan(ep, start, server_id=server_id):
        if q.start.key() >= end.key():
            break
        if q.text.strip().upper() in ("BEGIN", "COMMIT"):
            continue
        try:
            spans = table_spans(strip_comments(q.text), q.schema)
        except Exception:   # noqa: BLE001 - unreadable: it may touch them
            spans = None
        if spans is None or any((sp.schema, sp.table) in names for sp in spans):
            out.append(q.text)
    return out
