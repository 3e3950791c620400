"""Where an upstream's binlog stood at a given time: what `dmctl start-task --start-time` starts from.

Design (DM's binlog position finder, remote flavour):

- ``parse_start_time`` takes DM's three spellings, ``2021-10-21 00:01:00``,
  ``2021-10-21T00:01:00`` and ``2021-10-21T00:01:00+08:00``. Without an offset the time is the
  upstream's wall clock (its global ``time_zone``), as DM reads it; ``instant`` turns it into
  unix seconds on the upstream itself, so named zones and their daylight saving apply.
- ``position_at_time`` answers with the start of the first transaction (or DDL) whose first
  event is stamped at or after that instant. Binlog event timestamps are whole seconds of the
  upstream's clock, so the answer is exact to the second, as DM's. The file is found by a binary
  search over the first event of each file (one short dump per probe), then that file is read
  forward, headers only: nothing is decoded, so a 1 GB file costs seconds, not minutes.
- Three outcomes, as DM's PosType: in range; before the oldest binlog the server keeps (the
  start is its oldest transaction, and what was purged before it is gone: the caller warns);
  after the newest event (no position matches yet: the caller pauses with START_TIME_TOO_LATE
  and keeps the time, so `resume-task` tries again once the upstream has written past it).

A transaction begins at its GTID event (MariaDB, and MySQL's GTID / anonymous GTID); in a binlog
without them, at a ``BEGIN`` query, and a query outside a transaction is a DDL of its own.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from dm_core.binlog import events as ev
from dm_core.binlog.dump import BinlogDump
from dm_core.db import Endpoint, connect, master_position
from dm_core.errors import ErrorCode
from dm_core.position import Position

_FORMAT = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(Z|[+-]\d{2}:\d{2})?$")
HINT = "'2021-10-21 00:01:00' (the upstream's time zone), '2021-10-21T00:01:00' or '2021-10-21T00:01:00+08:00'"

_MYSQL_GTID = frozenset((ev.GTID, 34))   # GTID_LOG_EVENT, ANONYMOUS_GTID_LOG_EVENT
_BEGINS = frozenset((ev.MARIADB_GTID,)) | _MYSQL_GTID


@dataclass(frozen=True)
class StartTime:
    text: str                            # as the user wrote it (what query-status and the log show)
    local: datetime.datetime             # naive wall-clock time
    offset: datetime.timedelta | None    # None: the upstream's zone


def parse_start_time(text: str) -> StartTime:
    """``--start-time``'s value, or CONFIG_INVALID naming it and the spellings it takes."""
    m = _FORMAT.match(text.strip()) if isinstance(text, str) else None
    try:
        if m is None:
            raise ValueError("not in one of the spellings")
        local = datetime.datetime.fromisoformat(f"{m[1]} {m[2]}")
    except ValueError:
        raise ErrorCode.CONFIG_INVALID.error(
            f"--start-time {text!r} is not a time: give it as {HINT}",
            workaround="Write the time as shown (seconds included), then run start-task again.") from None
    offset = None
    if m[3]:
        offset = datetime.timedelta(0) if m[3] == "Z" else _offset(m[3])
    return StartTime(text.strip(), local, offset)


def _offset(zone: str) -> datetime.timedelta:
    """``+HH:MM`` / ``-HH:MM`` as a timedelta."""
    return (1 if zone[0] == "+" else -1) * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))


def instant(conn, st: StartTime) -> int:
    """Unix seconds of ``st``; a time without an offset is read in the upstream's global zone
    (``conn``: a connection to it). A named zone the server cannot convert (no zone tables)
    counts as its offset now."""
    if st.offset is not None:
        return int((st.local - st.offset).replace(tzinfo=datetime.timezone.utc).timestamp())
    with conn.cursor() as cur:
        cur.execute("SELECT TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', "
                    "CONVERT_TZ(%s, @@global.time_zone, '+00:00'))", (st.local.isoformat(" "),))
        (got,) = cur.fetchone()
    if got is None:
        from dm_core.ddl.upstream_session import upstream_time_zone

        st = StartTime(st.text, st.local, _offset(upstream_time_zone(conn)))
        return instant(conn, st)
    return int(got)


@dataclass(frozen=True)
class Found:
    position: Position | None   # None when ``kind`` is "after_last"
    kind: str                   # in_range | before_first | after_last
    oldest: str                 # the oldest binlog file the server keeps
    newest: Position            # the server's position when the search began


def position_at_time(ep: Endpoint, when: int, *, server_id: int) -> Found:
    """Where the first transaction stamped at or after ``when`` (unix seconds) begins on ``ep``."""
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            files = [str(r[0]) for r in cur.fetchall()]
        f, p = master_position(conn)[:2]
        newest = Position(f, int(p))
    finally:
        conn.close()
    if not files:
        raise ErrorCode.BINLOG_POSITION_LOST.error(f"{ep} lists no binary logs (is log_bin on?)")
    # the last file whose first event is stamped before `when`: the transaction is in it or later
    lo, hi, target = 0, len(files) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if _first_stamp(ep, files[mid], server_id) < when:
            target, lo = mid, mid + 1
        else:
            hi = mid - 1
    kind = "before_first" if target is None else "in_range"
    found = _scan(ep, files[target or 0], when, newest, server_id)
    if found is None:
        return Found(None, "after_last", files[0], newest)
    return Found(found, kind, files[0], newest)


def _first_stamp(ep: Endpoint, file: str, server_id: int) -> int:
    """The timestamp of ``file``'s first real event (its FORMAT_DESCRIPTION: when the file began)."""
    dump = BinlogDump(ep, file, 4, server_id=server_id, heartbeat=None, non_block=True)
    try:
        for buf, s, _e in dump.events():
            ts, typ, _sid, _size, logpos, _flags = ev.HEADER.unpack_from(buf, s)
            if typ == ev.ROTATE and not logpos:   # the server's artificial ROTATE names the file
                continue
            return ts
    finally:
        dump.close()
    return 0


def _scan(ep: Endpoint, file: str, when: int, newest: Position, server_id: int) -> Position | None:
    """Read from ``file`` on, headers only, to the first transaction stamped at or after
    ``when``; None when the binlog ends (as of ``newest``) before one."""
    dump = BinlogDump(ep, file, 4, server_id=server_id, heartbeat=None, non_block=True)
    cks = 4 if dump.checksum else 0
    pos, gtids, in_txn = 4, False, False
    query_phl = 13
    try:
        for buf, s, e in dump.events():
            ts, typ, _sid, _size, logpos, _flags = ev.HEADER.unpack_from(buf, s)
            if typ == ev.ROTATE:   # the server's artificial one names our file, a real one the next
                nxt = ev.parse_rotate(buf, s, e - cks)[1]
                if nxt != file:
                    file, pos = nxt, 4
                continue
            if typ == ev.FORMAT_DESCRIPTION:
                fde = ev.parse_format_description(buf, s, e, dump.checksum)
                cks = 4 if fde.checksum else 0
                query_phl = fde.post_header(ev.QUERY, query_phl)
            begins = False
            if typ in _BEGINS:
                gtids = begins = True
            elif typ == ev.QUERY and not gtids:
                text = ev.parse_query(buf, s, e - cks, query_phl)[1].strip().upper()
                if text == "BEGIN" or text.startswith("XA START"):
                    begins = in_txn = True
                elif text == "COMMIT" or (in_txn and text.startswith("XA COMMIT")):  # ONE PHASE
                    in_txn = False
                elif not in_txn:
                    begins = True   # a DDL: a transaction of its own
            elif typ == ev.XID or typ == ev.XA_PREPARE:
                in_txn = False
            if begins and ts >= when:
                return Position(file, pos)
            if logpos:
                pos = logpos
            if not in_txn and Position(file, pos).key() >= newest.key():
                return None   # at what the server had written when the search began: nothing matched
    finally:
        dump.close()
    return None
