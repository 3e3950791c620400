"""One COM_BINLOG_DUMP stream over a pymysql connection, framed by hand.

Protocol (MySQL/MariaDB replication, file/pos flavour; the GTID starts at the end):

1. Open an ordinary connection and tell the server what this "replica" understands:
   ``SET @master_binlog_checksum = @@global.binlog_checksum`` (we accept CRC32 events;
   without it a CRC32 server refuses to dump), ``SET @mariadb_slave_capability = 4``
   (MariaDB only: it then sends its GTID events as they are, which mark transaction starts,
   instead of rewriting them into dummies), and ``SET @master_heartbeat_period``
   (nanoseconds) so an idle server still sends a HEARTBEAT every period (type 27: MySQL
   8.0.26+ sends its HEARTBEAT_V2 only to a replica that asks for it with a dump flag).
2. Send COM_BINLOG_DUMP: 0x12, position u32, flags u16 (0 = blocking), server_id u32, file
   name. The server_id must be unique among the server's replicas: a second dump with the
   same id makes the server kill the first.
3. Read packets: ``0x00`` + one binlog event; ``0xFE`` (short) = end of stream;
   ``0xFF`` = error (1236: the position is not in the server's binlogs). An event larger than
   16 MB spans several packets (every packet but the last is exactly 0xFFFFFF bytes).

pymysql's ``_read_packet`` costs a few microseconds per packet (several small reads, a
packet object); a window of single-row transactions is four events per row, so packets
are framed here from large ``read1`` chunks of the connection's buffered socket, and each
event is handed on as ``(chunk, start, end)`` offsets into the chunk: no copy.

Starting from a GTID state instead (``gtid=``, binlog/gtid.py finds a position that way):
MariaDB takes it as ``@slave_connect_state`` and an ordinary COM_BINLOG_DUMP with an empty
file name; MySQL takes COM_BINLOG_DUMP_GTID: 0x1e, flags u16 (BINLOG_THROUGH_GTID = 4,
non-blocking = 1), server_id u32, file name length u32 + name (empty: the server finds the
first file not all in the set), position u64 (4), then the GTID set's length u32 and its
binary form (binlog/mysql_gtid.py). The server skips every transaction in the set.

MySQL 8.0.26+ renamed the ``@master_*`` variables to ``@source_*`` and reads either; both are
set on MySQL, so no version is guessed.

Nothing here reconnects: any failure is raised to the caller, which retries the whole
window from its last safe position.
"""

from __future__ import annotations

import struct
from typing import Iterator

from dm_core.binlog import mysql_gtid
from dm_core.db import Endpoint, connect
from dm_core.errors import ErrorCode, ShardflowError

COM_BINLOG_DUMP = 0x12
COM_BINLOG_DUMP_GTID = 0x1E
BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_THROUGH_GTID = 0x04
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
MAX_PACKET = 0xFFFFFF
CHUNK = 1 << 18

_U32 = struct.Struct("<I").unpack_from
_CHARSETS: dict[tuple[str, int], dict[int, str]] = {}  # per server: collation id → charset


class BinlogDump:
    """A blocking binlog stream from ``(file, pos)``; iterate ``events()``, then ``close()``."""

    def __init__(self, ep: Endpoint, file: str, pos: int, *, server_id: int,
                 heartbeat: float | None = 1.0, read_timeout: int = 60, gtid: str | None = None,
                 non_block: bool = False):
        """:param heartbeat: seconds between server heartbeats when idle (None: none).
        :param read_timeout: seconds without any byte from the server before giving up;
            keep it well above ``heartbeat``.
        :param gtid: start after this GTID state instead of at (file, pos), which the server
            then ignores: MariaDB's ``@slave_connect_state``, or MySQL's GTID set
            (COM_BINLOG_DUMP_GTID; the server needs gtid_mode ON).
        :param non_block: end the stream at the end of the last binlog instead of waiting.
        """
        self.ep = ep
        self.file = file
        self.pos = pos
        self.dumping = False
        self.conn = connect(ep, read_timeout=read_timeout)
        try:
            self.server_version = self.conn.get_server_info()
            self.mariadb = "MariaDB" in self.server_version
            with self.conn.cursor() as cur:
                cur.execute("SELECT @@global.binlog_checksum")
                self.checksum = (cur.fetchone()[0] or "NONE").upper() != "NONE"
                if self.mariadb:
                    cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
                    cur.execute("SET @mariadb_slave_capability = 4")
                else:
                    cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum, "
                                "@source_binlog_checksum = @@global.binlog_checksum")
                payload = None
                if gtid is not None:
                    if self.mariadb:
                        cur.execute("SET @slave_connect_state = %s", (gtid,))
                        cur.execute("SET @slave_gtid_strict_mode = 0")
                        cur.execute("SET @slave_gtid_ignore_duplicates = 0")
                    else:
                        payload = dump_gtid_request(gtid, server_id, non_block)
                    file, pos = "", 4
                if heartbeat:
                    nanos = int(heartbeat * 1e9)
                    if self.mariadb:
                        cur.execute("SET @master_heartbeat_period = %s", (nanos,))
                    else:
                        cur.execute("SET @master_heartbeat_period = %s, @source_heartbeat_period = %s", (nanos, nanos))
                key = (ep.host, int(ep.port))
                if key not in _CHARSETS:
                    _CHARSETS[key] = _server_charsets(cur)
                self.charsets = _CHARSETS[key]
            if payload is None:
                payload = struct.pack("<BIHI", COM_BINLOG_DUMP, pos, BINLOG_DUMP_NON_BLOCK if non_block else 0,
                                      server_id) + file.encode()
            self.conn._sock.settimeout(read_timeout)
            self.conn._write_bytes(struct.pack("<I", len(payload))[:3] + b"\x00" + payload)
            self.dumping = True
        except ShardflowError:
            self.close()
            raise
        except Exception as e:
            self.close()
            raise ErrorCode.UPSTREAM_UNREACHABLE.error(f"cannot start a binlog dump from {ep} at ({file}, {pos}): {e}") from e

    def close(self) -> None:
        """Drop the stream, and end the server's dump thread for it.

        A dumping server ignores COM_QUIT, and its dump thread, waiting for new events,
        notices the closed socket only at its next write (a heartbeat). Until then a new
        dump with the same server id first kills it and waits: 100 ms at the start of every
        window. So the thread is killed here, from a short-lived connection of the same
        user (no privilege needed for one's own threads).
        """
        conn, self.conn = getattr(self, "conn", None), None
        if conn is None:
            return
        thread = conn.thread_id() if getattr(self, "dumping", False) else None
        try:
            conn._force_close()  # COM_QUIT would go unread; just drop the socket
        except Exception:
            pass
        if thread:
            try:
                killer = connect(self.ep, read_timeout=5, connect_timeout=2)
                try:
                    with killer.cursor() as cur:
                        cur.execute("KILL CONNECTION %s", (int(thread),))
                finally:
                    killer.close()
            except Exception:  # gone already, or the server is down: the thread ends on its own
                pass

    def events(self) -> Iterator[tuple[bytes, int, int]]:
        """Each event as ``(buf, start, end)``: ``buf[start:end]`` is the event, header first,
        checksum included. Ends when the server ends the stream (EOF packet)."""
        read1 = self.conn._rfile.read1
        u32 = _U32
        buf = b""
        pos = 0
        seq = 1
        try:
            while True:
                have = len(buf) - pos
                if have < 4:
                    buf, pos = _fill(read1, buf, pos, 4)
                    have = len(buf)
                h = u32(buf, pos)[0]  # payload length (3 bytes), sequence number (1 byte)
                n = h & MAX_PACKET
                if h >> 24 != seq:
                    raise ErrorCode.UPSTREAM_UNREACHABLE.error(
                        f"binlog dump from {self.ep}: packet sequence {h >> 24}, expected {seq}")
                seq = (seq + 1) & 0xFF
                if have < 4 + n:
                    buf, pos = _fill(read1, buf, pos, 4 + n)
                s = pos + 4
                pos = s + n
                if n == MAX_PACKET:  # one event over several packets: gather them
                    parts = [buf[s:pos]]
                    while True:
                        if len(buf) - pos < 4:
                            buf, pos = _fill(read1, buf, pos, 4)
                        m = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
                        if buf[pos + 3] != seq:
                            raise ErrorCode.UPSTREAM_UNREACHABLE.error(
                                f"binlog dump from {self.ep}: packet sequence {buf[pos + 3]}, expected {seq}")
                        seq = (seq + 1) & 0xFF
                        if len(buf) - pos < 4 + m:
                            buf, pos = _fill(read1, buf, pos, 4 + m)
                        parts.append(buf[pos + 4:pos + 4 + m])
                        pos += 4 + m
                        if m < MAX_PACKET:
                            break
                    big = b"".join(parts)
                    if big[0] == 0:
                        yield big, 1, len(big)
                        continue
                    self._not_an_event(big, 0, len(big))
                    return
                if buf[s] == 0:
                    yield buf, s + 1, pos
                    continue
                self._not_an_event(buf, s, pos)
                return
        except ShardflowError:
            raise
        except (OSError, EOFError) as e:
            raise ErrorCode.UPSTREAM_UNREACHABLE.error(f"binlog dump from {self.ep} broke: {e!r}") from e

    def _not_an_event(self, buf: bytes, s: int, e: int) -> None:
        """EOF ends the stream quietly; an error packet is raised; anything else too."""
        kind = buf[s]
        if kind == 0xFE and e - s < 9:
            return
        if kind == 0xFF:
            errno = buf[s + 1] | buf[s + 2] << 8
            msg = buf[s + 3:e]
            if msg[:1] == b"#":
                msg = msg[6:]
            text = msg.decode("utf-8", "replace")
            where = f"binlog dump from {self.ep} at ({self.file}, {self.pos})"
            if errno == ER_MASTER_FATAL_ERROR_READING_BINLOG:
                raise ErrorCode.BINLOG_POSITION_LOST.error(f"{where}: server error {errno}: {text}")
            raise ErrorCode.UPSTREAM_UNREACHABLE.error(f"{where}: server error {errno}: {text}")
        raise ErrorCode.UPSTREAM_UNREACHABLE.error(
            f"binlog dump from {self.ep}: unexpected packet type {kind:#x}")


def dump_gtid_request(gtid: str, server_id: int, non_block: bool) -> bytes:
    """MySQL's COM_BINLOG_DUMP_GTID asking for everything not in the GTID set ``gtid``."""
    data = mysql_gtid.encode(gtid)
    flags = BINLOG_THROUGH_GTID | (BINLOG_DUMP_NON_BLOCK if non_block else 0)
    return struct.pack("<BHIIQI", COM_BINLOG_DUMP_GTID, flags, server_id, 0, 4, len(data)) + data


def _server_charsets(cur) -> dict[int, str]:
    """Collation id → charset name, as this server numbers them (MariaDB >= 10.10 keeps the
    ids of charset-specific UCA-14 collations in COLLATION_CHARACTER_SET_APPLICABILITY)."""
    cur.execute("SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
    out = {int(i): name for i, name in cur.fetchall()}
    try:
        cur.execute("SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY")
        out.update({int(i): name for i, name in cur.fetchall() if i is not None})
    except Exception:  # MySQL, older MariaDB: no ID column there
        pass
    return out


def _fill(read1, buf: bytes, pos: int, need: int) -> tuple[bytes, int]:
    """Return a buffer holding at least ``need`` bytes from ``pos`` on (which becomes 0).

    Reads whatever the socket has, in chunks, and joins once, so a large event costs one
    copy rather than one per chunk.
    """
    parts = [buf[pos:]]
    have = len(parts[0])
    while have < need:
        chunk = read1(max(CHUNK, need - have))
        if not chunk:
            raise EOFError("the server closed the connection")
        parts.append(chunk)
        have += len(chunk)
    return b"".join(parts), 0
