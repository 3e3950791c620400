"""MariaDB GTID positions: from a GTID state to a binlog file/position on this server.

Why: checkpoints hold both (file, pos) and the GTID state after the last applied
transaction. File names are per server, GTIDs are not: when a source's binlog file is
purged, or the source fails over to another server of the same replication topology,
`enable-gtid: true` lets the syncer find where to resume by asking the server itself.

How: a non-blocking COM_BINLOG_DUMP with ``@slave_connect_state`` = the GTID state makes the
server skip everything already applied; its stream starts with a (fake) ROTATE naming the
file, a FORMAT_DESCRIPTION and a GTID_LIST, then the first transaction still to apply. That
transaction's first event starts at ``log_pos - event_size``: the position to resume from.
No event after the state: the server's current end of binlog.
"""

from __future__ import annotations

from dm_core.binlog import events as ev
from dm_core.binlog.dump import BinlogDump
from dm_core.db import Endpoint, connect, master_position
from dm_core.position import Position

_PREAMBLE = {ev.ROTATE, ev.FORMAT_DESCRIPTION, ev.MARIADB_GTID_LIST, ev.MARIADB_BINLOG_CHECKPOINT, ev.HEARTBEAT}


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
    file = ""
    try:
        for buf, s, e in dump.events():
            _ts, typ, _sid, size, logpos, _flags = ev.HEADER.unpack_from(buf, s)
            if typ == ev.ROTATE:
                file = ev.parse_rotate(buf, s, e - (4 if dump.checksum else 0))[1]
                continue
            if typ in _PREAMBLE or not logpos:
                continue
            return Position(file, logpos - size, gtid)
    finally:
        dump.close()
    conn = connect(ep)
    try:
        f, p = master_position(conn)[:2]
    finally:
        conn.close()
    return Position(f, int(p), gtid)


def binlog_files(ep: Endpoint) -> set[str]:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            return {str(r[0]) for r in cur.fetchall()}
    finally:
        conn.close()
