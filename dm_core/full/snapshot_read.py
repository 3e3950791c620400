"""A whole-table chunk read at a known binlog position: where the sync's catch-up of a table
without a unique key takes over from the full load exactly.

Why: the full phase reads without a global lock and the sync replays the binlog from the low
watermark in safe mode, which makes a replay harmless by the row's key. A keyless target has
no key: whether a replayed change is already in what the load read cannot be told from the
row, and identical rows cannot be told apart (a DELETE of one of two copies made before the
read took the other copy again; an INSERT of a second copy after it was folded into the
first). A table without a usable key is always one chunk (chunking.py), so one position per
table says it all: the binlog position the read's snapshot stands at.

How: MariaDB's ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` opens an InnoDB read view and
the status variables ``binlog_snapshot_file`` / ``binlog_snapshot_position`` give the binlog
position consistent with it (the transactions committed into the view are exactly those
before it in the binlog: what mysqldump --single-transaction --master-data uses on MariaDB
without a global read lock). The chunk's SELECT runs in that transaction, the chunk's marker
records the position in the same downstream transaction as its rows (chunk_writer.py), and
the sync's keyless ledger (dm_core/sync/keyless_ledger.py, "handoff") drops the table's
changes before it and writes those after it exactly.

Where no position comes back -- MySQL (no such variables), a server without a binlog, an
engine without snapshots (MyISAM, Aria: ``transactional``), an XA transaction prepared before
the snapshot and not committed in it (``_xa_across``: the sync applies XA rows where they are
in the binlog, at the PREPARE) -- nothing is recorded and the table's catch-up takes safe
mode's inexact path for keyless rows (keyless_ledger's ``LEGACY`` verdict), with the limits above.
"""

from __future__ import annotations

import logging

from dm_core.classify import errno_of
from dm_core.db import as_str, binlog_status_sql

log = logging.getLogger("shardflow.full")

WHOLE_TABLE = "1=1"   # the predicate of a one-chunk plan (chunking.py)
_XA_SCAN = 5_000      # binlog events read after the position for an XA COMMIT (more: no position)


def wanted(st, where: str) -> bool:
    """Whether a chunk of ``st`` (a SourceTable) with predicate ``where`` records its position:
    the whole-table chunk of a table without a key whose engine keeps snapshots."""
    return where == WHOLE_TABLE and not st.key and transactional(getattr(st, "engine", ""))


def transactional(engine: str | None) -> bool:
    """Engines whose reads see a consistent snapshot (InnoDB; XtraDB reports InnoDB).

    >>> [transactional(e) for e in ("InnoDB", "innodb", "MyISAM", "Aria", "", None)]
    [True, True, False, False, False, False]
    """
    return (engine or "").lower() == "innodb"


def begin(conn) -> dict:
    """Open a consistent-snapshot transaction on ``conn`` (an upstream connection about to read
    the chunk) and return ``{"file": ..., "pos": ...}`` of its binlog position, or ``{}`` when
    the server gives none. The caller commits after the last row (:func:`end`)."""
    cur = conn.cursor()
    try:
        # a read view per statement (READ COMMITTED) would be later than the position read here
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute("SHOW SESSION STATUS WHERE Variable_name IN ('binlog_snapshot_file', 'binlog_snapshot_position')")
        got = {as_str(k).lower(): as_str(v) for k, v in cur.fetchall()}
        f, p = got.get("binlog_snapshot_file"), got.get("binlog_snapshot_position")
        if not f or not p or not str(p).isdigit():
            return {}
        if _xa_across(cur, f, int(p)):
            return {}
    except Exception as e:  # noqa: BLE001 - a position is only an improvement: read without one
        if errno_of(e) in (1227, 1044, 1142):   # no privilege for XA RECOVER / binlog events
            log.warning("no binlog position for a keyless table's read (%s): its catch-up runs in safe mode", e)
            return {}
        raise
    finally:
        cur.close()
    return {"file": f, "pos": int(p)}


def _xa_across(cur, file: str, pos: int) -> bool:
    """Whether an XA transaction may straddle the snapshot: prepared before it (its rows in the
    binlog before the position, where the sync applies them) but committed after it (so not in
    the snapshot). Those still prepared are in ``XA RECOVER``; those that committed between the
    snapshot and that query wrote their ``XA COMMIT`` between the position and the binlog's end
    now. Either way the read records no position (legacy safe mode for the table)."""
    cur.execute("XA RECOVER")
    if cur.fetchall():
        return True
    cur.execute(binlog_status_sql(cur.connection))   # MySQL 8.4 has no SHOW MASTER STATUS
    now = cur.fetchone()
    if now is None or as_str(now[0]) != file:
        return True   # the binlog rotated meanwhile: not worth reading across files
    if int(now[1]) <= pos:
        return False
    cur.execute("SHOW BINLOG EVENTS IN %s FROM %s LIMIT %s", (file, pos, _XA_SCAN))
    events = cur.fetchall()
    if len(events) >= _XA_SCAN:
        return True
    return any(as_str(e[5]).lstrip().upper().startswith("XA COMMIT") for e in events)


def end(conn) -> None:
    """End the read's transaction (the connection may read the next table)."""
    cur = conn.cursor()
    try:
        cur.execute("COMMIT")
    finally:
        cur.close()
