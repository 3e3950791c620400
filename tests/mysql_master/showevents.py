"""SHOW BINLOG EVENTS over the master's binlog files: one row per event, with MySQL's
Event_type names and Info texts (``BEGIN``, ``COMMIT /* xid=N */``,
``SET @@SESSION.GTID_NEXT= '...'``, ``table_id: N (db.t)``, ``table_id: N flags: STMT_END_F``,
``Server ver: ..., Binlog ver: 4``, ``next.000002;pos=4``)."""

from __future__ import annotations

import struct
import uuid

from tests.mysql_master import events as ev
from tests.mysql_master.gtidset import GtidSet

NAMES = {ev.QUERY: "Query", ev.ROTATE: "Rotate", ev.FORMAT_DESCRIPTION: "Format_desc", ev.XID: "Xid",
         ev.TABLE_MAP: "Table_map", ev.WRITE_ROWS: "Write_rows", ev.UPDATE_ROWS: "Update_rows",
         ev.DELETE_ROWS: "Delete_rows", ev.GTID: "Gtid", ev.ANONYMOUS_GTID: "Anonymous_Gtid",
         ev.PREVIOUS_GTIDS: "Previous_gtids", ev.TRANSACTION_PAYLOAD: "Transaction_payload"}


def rows(file: str, data: bytes, start: int, checksum: bool):
    """(Log_name, Pos, Event_type, Server_id, End_log_pos, Info) of each event from ``start``."""
    cks = 4 if checksum else 0
    for s, e, typ in ev.iter_events(data, start):
        sid, logpos = struct.unpack_from("<I", data, s + 5)[0], struct.unpack_from("<I", data, s + 13)[0]
        yield (file, s, NAMES.get(typ, f"Unknown({typ})"), sid, logpos, info(data, s, e - cks, typ))


def info(data: bytes, s: int, e: int, typ: int) -> str:
    b = s + ev.HEADER_LEN
    if typ == ev.QUERY:
        dblen, svlen = data[b + 8], struct.unpack_from("<H", data, b + 11)[0]
        q = b + 13 + svlen
        db = data[q:q + dblen].decode()
        text = data[q + dblen + 1:e].decode("utf-8", "replace")
        return text if text == "BEGIN" or not db else f"use `{db}`; {text}"
    if typ == ev.XID:
        return f"COMMIT /* xid={struct.unpack_from('<Q', data, b)[0]} */"
    if typ in (ev.GTID, ev.ANONYMOUS_GTID):
        if typ == ev.ANONYMOUS_GTID:
            return "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'"
        sid = uuid.UUID(bytes=bytes(data[b + 1:b + 17]))
        return f"SET @@SESSION.GTID_NEXT= '{sid}:{struct.unpack_from('<q', data, b + 17)[0]}'"
    if typ == ev.FORMAT_DESCRIPTION:
        version = data[b + 2:b + 52].split(b"\x00", 1)[0].decode()
        return f"Server ver: {version}, Binlog ver: {struct.unpack_from('<H', data, b)[0]}"
    if typ == ev.PREVIOUS_GTIDS:
        return str(GtidSet.decode(data[b:e])[0])
    if typ == ev.ROTATE:
        return f"{data[b + 8:e].decode()};pos={struct.unpack_from('<Q', data, b)[0]}"
    if typ == ev.TABLE_MAP:
        tid = int.from_bytes(data[b:b + 6], "little")
        q = b + 8
        db = data[q + 1:q + 1 + data[q]].decode()
        q += data[q] + 2
        return f"table_id: {tid} ({db}.{data[q + 1:q + 1 + data[q]].decode()})"
    if typ in (ev.WRITE_ROWS, ev.UPDATE_ROWS, ev.DELETE_ROWS):
        tid = int.from_bytes(data[b:b + 6], "little")
        flags = struct.unpack_from("<H", data, b + 6)[0]
        return f"table_id: {tid}" + (" flags: STMT_END_F" if flags & 1 else "")
    if typ == ev.TRANSACTION_PAYLOAD:
        fields, _ = ev.payload_fields(data, b)
        kind = "ZSTD" if fields.get(2, 0) == 0 else "NONE"
        return f"compression='{kind}', decompressed_size={fields.get(3, fields.get(1, 0))} bytes"
    return ""
