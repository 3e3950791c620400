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
engine without snapshots (MyISAM, Aria: ``transactional``) -- nothing is recorded and the
table's catch-up stays in legacy safe mode, as before.
"""

from __future__ import annotations

WHOLE_TABLE = "1=1"   # the predicate of a one-chunk plan (chunking.py)


def wanted(st, where: str) -> bool:
    """Whether a chunk of ``st`` (a SourceTable) with predicate ``where`` records its position:
    a whole-table chunk of a table whose engine keeps snapshots."""
    return where == WHOLE_TABLE and transactional(getattr(st, "engine", ""))


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
        got = {(k.decode() if isinstance(k, bytes) else k).lower(): (v.decode() if isinstance(v, bytes) else v)
               for k, v in cur.fetchall()}
    finally:
        cur.close()
    f, p = got.get("binlog_snapshot_file"), got.get("binlog_snapshot_position")
    if not f or not p or not str(p).isdigit():
        return {}
    return {"file": f, "pos": int(p)}


def end(conn) -> None:
    """End the read's transaction (the connection may read the next table)."""
    cur = conn.cursor()
    try:
        cur.execute("COMMIT")
    finally:
        cur.close()
