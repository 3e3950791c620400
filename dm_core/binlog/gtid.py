"""GTID positions (MariaDB and MySQL): from a GTID state to a binlog file/position on this
server, and back.

Why: checkpoints hold both (file, pos) and the GTID state after the last applied
transaction. File names are per server, GTIDs are not: when a source's binlog file is
purged, or the source fails over to another server of the same replication topology,
`enable-gtid: true` lets the syncer find where to resume by asking the server itself.

How (``position_of_gtid``): a non-blocking dump from the GTID state makes the server skip
everything already applied (MariaDB: COM_BINLOG_DUMP with ``@slave_connect_state``; MySQL:
COM_BINLOG_DUMP_GTID with the GTID set, binlog/dump.py). Its stream starts with a (fake)
ROTATE naming the file, a FORMAT_DESCRIPTION and a GTID_LIST (MariaDB) or PREVIOUS_GTIDS
(MySQL, which also sends a HEARTBEAT at the end of every run of skipped transactions), then
the first transaction still to apply. That transaction's first event starts at
``log_pos - event_size``: the position to resume from. No event after the state: the end of
the binlog (MySQL: where the stream ended; MariaDB: the server's position now).

Back (``mysql_gtid_at``, MySQL only; MariaDB has BINLOG_GTID_POS()): the GTID set at a
(file, pos) is the file's PREVIOUS_GTIDS plus the GTID of every transaction in the file
before pos, read from the file's start, headers and GTID events only.
"""

from __future__ import annotations

from dm_core.binlog import events as ev
from dm_core.binlog import mysql_gtid
from dm_core.binlog.dump import BinlogDump
from dm_core.db import Endpoint, connect, master_position
from dm_core.errors import ErrorCode
from dm_core.position import Position

_PREAMBLE = {ev.ROTATE, ev.FORMAT_DESCRIPTION, ev.MARIADB_GTID_LIST, ev.MARIADB_BINLOG_CHECKPOINT, ev.HEARTBEAT,
             ev.PREVIOUS_GTIDS}


def merge_gtid(state: str | None, gtid: str) -> str:
    """A MariaDB GTID state with one more transaction (one GTID per replication domain).

    >>> merge_gtid("0-1-5,1-2-9", "0-3-6")
    '0-3-6,1-2-9'
    >>> merge_gtid(None, "2-1-1")
    '2-1-1'
    """
    by_domain = dict(_split(state))
    by_domain[int(gtid.split("-", 1)[0])] = gtid
    return ",".join(by_domain[d] for d in sorted(by_domain))


def _split(state: str | None):
    for part in (state or "").split(","):
        part = part.strip()
        if part:
            yield int(part.split("-", 1)[0]), part


def position_of_gtid(ep: Endpoint, gtid: str, *, server_id: int) -> Position:
    """Where the first transaction after GTID state ``gtid`` starts on ``ep`` (see above)."""
    dump = BinlogDump(ep, "", 4, server_id=server_id, heartbeat=None, gtid=gtid, non_block=True)
    if not dump.mariadb:
        gtid = mysql_gtid.normalize(gtid)
    file, end = "", 0   # MySQL: where the stream stands (the end of the binlog once it ends)
    try:
        for buf, s, e in dump.events():
            _ts, typ, _sid, size, logpos, _flags = ev.HEADER.unpack_from(buf, s)
            if typ == ev.ROTATE:
                end, file = ev.parse_rotate(buf, s, e - (4 if dump.checksum else 0))
                continue
            if logpos:
                end = logpos
            if typ in _PREAMBLE or not logpos:
                continue
            return Position(file, logpos - size, gtid)
    finally:
        dump.close()
    if not dump.mariadb and file:
        # every transaction there is in the set: the stream's end (a position read after the
        # dump could lie past transactions written meanwhile, which are not in it)
        return Position(file, end, gtid)
    conn = connect(ep)
    try:
        f, p = master_position(conn)[:2]
    finally:
        conn.close()
    return Position(f, int(p), gtid)


def not_logged(ep: Endpoint, wanted: str) -> str | None:
    """What of GTID state ``wanted`` the server at ``ep`` has not written to its binlog, in
    words (None: all of it). ``position_of_gtid`` cannot find a start after a state the server
    has not reached (MariaDB refuses the dump: "not in the master's binlog"), and a replica
    promoted while it still applies its relay log is such a server until it catches up."""
    from dm_core.db import as_str, is_mariadb

    conn = connect(ep)
    try:
        mariadb = is_mariadb(conn)
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.gtid_binlog_pos" if mariadb else "SELECT @@GLOBAL.gtid_executed")
            have = as_str(cur.fetchone()[0] or "")
    finally:
        conn.close()
    return missing(have, wanted, mariadb=mariadb)


def missing(have: str, wanted: str, *, mariadb: bool) -> str | None:
    """``not_logged`` on the server's state ``have``. MariaDB: per domain, the server's sequence
    number must reach the wanted one (whichever server logged it: a domain's numbers only grow);
    MySQL: the set must hold the wanted set.

    >>> missing("0-16-52,7-16-1", "0-15-62,7-16-1", mariadb=True)
    '0-15-62 (its binlog is at 0-16-52 in domain 0)'
    >>> missing("0-16-70", "0-15-62", mariadb=True) is None
    True
    >>> missing("", "1-15-3", mariadb=True)
    '1-15-3 (its binlog has nothing of domain 1)'
    >>> a = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    >>> missing(f"{a}:1-52", f"{a}:1-62", mariadb=False)
    '3e11fa47-71ca-11e1-9e33-c80aa9429562:53-62'
    """
    if not mariadb:
        return mysql_gtid.subtract(wanted, have) or None
    def seq(g: str) -> int:
        return int(g.rsplit("-", 1)[1])

    top: dict[int, str] = {}
    for d, g in _split(have):
        if d not in top or seq(g) > seq(top[d]):
            top[d] = g
    out = []
    for d, g in _split(wanted):
        if d not in top:
            out.append(f"{g} (its binlog has nothing of domain {d})")
        elif seq(top[d]) < seq(g):
            out.append(f"{g} (its binlog is at {top[d]} in domain {d})")
    return ", ".join(out) or None


def binlog_files(ep: Endpoint) -> set[str]:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            return {str(r[0]) for r in cur.fetchall()}
    finally:
        conn.close()


def mariadb_gtid_at(ep: Endpoint, file: str, pos: int, *, server_id: int) -> str | None:
    """MariaDB's BINLOG_GTID_POS(file, pos), read through a dump: the file's GTID_LIST and the
    GTID of every event group that starts before ``pos``. For when BINLOG_GTID_POS says NULL
    of a file the server holds: it reads the file in the asking session, which refuses an
    event larger than that session's max_allowed_packet (a row of a 20 MB BLOB under the 16 MB
    default), while a dump thread reads events of any size. None: no GTID_LIST before ``pos``
    (a binlog without GTIDs)."""
    dump = BinlogDump(ep, file, 4, server_id=server_id, heartbeat=None, non_block=True)
    state = None
    try:
        for buf, s, _e in dump.events():
            _ts, typ, sid, size, logpos, _flags = ev.HEADER.unpack_from(buf, s)
            if typ == ev.ROTATE and not logpos:
                continue   # the server's own ROTATE naming the file
            if typ == ev.ROTATE or (logpos and logpos - size >= pos and typ not in _PREAMBLE):
                break      # at pos (the file's GTID_LIST counts at any pos, as for the server), or the end
            if typ == ev.MARIADB_GTID_LIST:
                b = s + ev.HEADER_LEN
                count = int.from_bytes(buf[b:b + 4], "little") & 0x0FFFFFFF   # the top 4 bits are flags
                state = ""
                for i in range(count):   # domain u32, server u32, seq u64 each
                    o = b + 4 + 16 * i
                    state = merge_gtid(state, f"{int.from_bytes(buf[o:o + 4], 'little')}-"
                                              f"{int.from_bytes(buf[o + 4:o + 8], 'little')}-"
                                              f"{int.from_bytes(buf[o + 8:o + 16], 'little')}")
            elif typ == ev.MARIADB_GTID and state is not None:
                state = merge_gtid(state, ev.parse_mariadb_gtid(buf, s, sid)[0])
    finally:
        dump.close()
    return state


def mysql_gtid_at(ep: Endpoint, file: str, pos: int, *, server_id: int) -> str | None:
    """The GTID set of a MySQL server after everything before (file, pos): the file's
    PREVIOUS_GTIDS and the GTIDs of the transactions that start before ``pos``. None when the
    file has no PREVIOUS_GTIDS (a server that never had GTIDs: binlogs of MySQL 5.6 and
    older). Reads the file from its start up to ``pos``: seconds for a large file, once."""
    dump = BinlogDump(ep, file, 4, server_id=server_id, heartbeat=None, non_block=True)
    state = None
    sets = mysql_gtid.GtidSetState()
    try:
        for buf, s, _e in dump.events():
            _ts, typ, _sid, size, logpos, _flags = ev.HEADER.unpack_from(buf, s)
            if typ == ev.ROTATE and not logpos:
                continue   # the server's own ROTATE naming the file
            if typ == ev.ROTATE or (logpos and logpos - size >= pos):
                break      # at pos, or the file ended before it
            if typ == ev.PREVIOUS_GTIDS:
                state = mysql_gtid.decode(buf, s + ev.HEADER_LEN)[0]
            elif typ == ev.GTID and state is not None:
                b = s + ev.HEADER_LEN
                state = sets.add(state, f"{mysql_gtid.uuid_text(bytes(buf[b + 1:b + 17]))}:"
                                        f"{int.from_bytes(buf[b + 17:b + 25], 'little')}")
            elif typ == ev.GTID_TAGGED:
                raise ErrorCode.BINLOG_UNREADABLE.error(
                    f"{ep}'s binlog {file} holds {mysql_gtid.TAGGED[0]} before position {pos}, which shardflow "
                    "cannot read", workaround=mysql_gtid.TAGGED[1])
    finally:
        dump.close()
    return state
