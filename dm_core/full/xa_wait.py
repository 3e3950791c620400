"""XA transactions prepared on an upstream when the full phase reads its low watermark.

Why: an XA transaction's rows go to the binlog at its XA PREPARE; its XA COMMIT comes later
as a statement. One prepared before the low watermark and still open is in no snapshot (the
chunks read committed rows only) and its rows lie before the position the sync starts from:
when it commits after the start, they are lost without a word. MariaDB (10.5 and later) keeps
a prepared transaction after its client disconnects, so such orphans wait for a coordinator
that may never come.

So the full phase reads the low watermark, then lists the prepared XA transactions
(``XA RECOVER``) and waits until each of those has ended before it records the watermark
and any chunk is read: every transaction prepared before the watermark is then committed
(in the snapshot) or rolled back. One still open after ``XA_WAIT_SECONDS`` fails the full
phase's prepare (XA_PREPARED_AT_START) naming it; nothing is recorded, so the next run reads
a new watermark. A user the server refuses ``XA RECOVER`` gets a warning and no wait; MySQL 8
shows a user without XA_RECOVER_ADMIN only its own transactions, without an error (grant it).
"""

from __future__ import annotations

import logging
import time

from dm_core.errors import ErrorCode

log = logging.getLogger("shardflow.full")

XA_WAIT_SECONDS = 60.0


def prepared_xids(conn) -> set[str] | None:
    """The XIDs the upstream holds prepared, as ``XA RECOVER`` shows them (gtrid and bqual
    printed as the server's data column); None when the user may not list them."""
    try:
        with conn.cursor() as cur:
            cur.execute("XA RECOVER")
            got = cur.fetchall()
    except Exception as e:  # noqa: BLE001 - privileges (1227, 1401): cannot tell
        log.warning("cannot list the upstream's prepared XA transactions (%s): an XA transaction prepared before "
                    "the full phase's start and committed after it would not be migrated", e)
        return None
    out = set()
    for fmt, glen, blen, data in got:
        raw = data if isinstance(data, bytes) else str(data).encode("utf-8", "surrogateescape")
        g, b = raw[:int(glen)], raw[int(glen):int(glen) + int(blen)]
        out.add(f"gtrid={g.decode('utf-8', 'replace')!r} bqual={b.decode('utf-8', 'replace')!r} formatID={fmt}")
    return out


def wait_prepared_xa(conn, source_id: str, *, timeout: float | None = None, poll: float = 0.5,
                     clock=time.monotonic, sleep=time.sleep) -> None:
    """Return once every XA transaction prepared on ``conn``'s server now has ended; raise
    XA_PREPARED_AT_START naming those still prepared after ``timeout`` seconds."""
    first = prepared_xids(conn)
    if not first:
        return
    timeout = XA_WAIT_SECONDS if timeout is None else timeout
    log.info("source %s: waiting up to %.0fs for %d XA transaction(s) prepared at the full phase's start to end: %s",
             source_id, timeout, len(first), ", ".join(sorted(first)))
    deadline = clock() + timeout
    while True:
        now = prepared_xids(conn)
        still = first & now if now is not None else set()
        if not still:
            return
        if clock() >= deadline:
            raise ErrorCode.XA_PREPARED_AT_START.error(
                f"source {source_id}: {len(still)} XA transaction(s) prepared on the upstream when the full phase read "
                f"its starting position are still neither committed nor rolled back after {timeout:.0f}s: "
                f"{', '.join(sorted(still))}")
        sleep(poll)
