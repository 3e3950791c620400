"""The binlog dump: COM_BINLOG_DUMP (file/position) and COM_BINLOG_DUMP_GTID, sent as MySQL's
Binlog_sender does (sql/rpl_binlog_sender.cc):

- for every file, first a fake ROTATE (timestamp 0, log_pos 0, flag LOG_EVENT_ARTIFICIAL_F,
  body: the start position and the file name), then the file's FORMAT_DESCRIPTION without
  its in-use flag — with log_pos and the "created" time zeroed when the replica starts past
  the file's first events — then the events from the position asked; at a file's end the
  next file follows, from position 4;
- every event goes as one packet payload: 0x00 + the event (checksum included);
- at the end of the last file: with BINLOG_DUMP_NON_BLOCK (flag 0x01) an EOF packet ends the
  stream; otherwise the sender waits for new events and, when the replica set
  @master_heartbeat_period (ns), sends a HEARTBEAT (type 27: header with timestamp 0 and the
  current position as log_pos, body the file name) each period it stays idle;
- a position before 4, past the file's end or not at an event boundary, or an unknown file,
  ends the dump with ERR 1236; so does a binlog with checksums when the replica did not say
  (@master_binlog_checksum) that it reads them;
- GTID dump: payload flags u16, server_id u32, file-name length u32 + name, position u64,
  GTID-set length u32 + set (binary). It starts in the last file whose PREVIOUS_GTIDS is
  contained in the replica's set, and skips every transaction (from its GTID event to the next
  one) the set contains; before the next event it does send, and at a file's end, a HEARTBEAT
  tells the replica how far it skipped. Errors 1236 when gtid_mode is OFF, when the master
  purged GTIDs the replica lacks, or when the replica has GTIDs of this server it never wrote.
A replica's newer dump with the same server_id ends its older one, as on MySQL.
"""

from __future__ import annotations

import select
import struct
import time
import uuid
import zlib

from tests.mysql_master import events as ev
from tests.mysql_master import protocol as p
from tests.mysql_master.gtidset import GtidSet
from tests.mysql_master.session import unpack_register

NON_BLOCK = 0x01
THROUGH_GTID = 0x04
LOG_EVENT_BINLOG_IN_USE_F = 0x1
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236


class DumpError(Exception):
    pass


def register_slave(sess, arg: bytes) -> None:
    sid, host, port, master_id = unpack_register(arg)
    replica_uuid = sess.user_vars.get("replica_uuid") or sess.user_vars.get("slave_uuid") or ""
    sess.master.register_replica(sess.conn_id, (sid, host, port, master_id or sess.master.server_id,
                                                str(replica_uuid)))


def serve_dump(sess, arg: bytes) -> None:
    pos, flags, server_id = struct.unpack_from("<IHI", arg, 0)
    name = arg[10:].split(b"\x00", 1)[0].decode()
    _Sender(sess, server_id, flags).run(name, pos, None)


def serve_dump_gtid(sess, arg: bytes) -> None:
    flags, server_id, name_len = struct.unpack_from("<HII", arg, 0)
    q = 10
    name = arg[q:q + name_len].split(b"\x00", 1)[0].decode()
    q += name_len
    (pos,) = struct.unpack_from("<Q", arg, q)
    q += 8
    exclude = GtidSet()
    if flags & THROUGH_GTID:
        (size,) = struct.unpack_from("<I", arg, q)
        exclude, _ = GtidSet.decode(arg[q + 4:q + 4 + size])
    _Sender(sess, server_id, flags).run(name, pos, exclude)


class _Sender:
    def __init__(self, sess, server_id: int, flags: int):
        self.sess = sess
        self.master = sess.master
        self.server_id = server_id
        self.non_block = bool(flags & NON_BLOCK) or server_id == 0
        period = sess.user_var_int("master_heartbeat_period") or sess.user_var_int("source_heartbeat_period")
        self.heartbeat = period / 1e9 if period else None
        alg = sess.user_vars.get("master_binlog_checksum") or sess.user_vars.get("source_binlog_checksum")
        self.replica_crc = str(alg or "").upper() == "CRC32"
        self.replica_said = alg is not None
        self.last_sent = time.monotonic()

    # ---- the stream ----------------------------------------------------------------------------
    def run(self, name: str, pos: int, exclude: GtidSet | None) -> None:
        sess = self.sess
        sess.dumping_server_id = self.server_id
        self.master.dump_started(sess, self.server_id)
        try:
            files, version = self.master.snapshot()
            index, clear_fde = self._start(files, name, pos, exclude)
            if index is None:
                return
            if exclude is None or name:
                start = pos
            else:
                start = 4
            while not sess.killed:
                files, version = self.master.snapshot()
                fname = files[index][0]
                self._send(self._fake_rotate(fname, start))
                data = files[index][1]
                checksum = self._fde_checksum(data)
                if checksum and not self.replica_said:
                    raise DumpError("Slave can not handle replication events with the checksum that master is "
                                    "configured to log")
                self._send(self._fde(data, clear=clear_fde or start > 4))
                clear_fde = False
                p_ = 4 + struct.unpack_from("<I", data, 4 + 9)[0] if start <= 4 else start
                while True:
                    p_ = self._stream(data, p_, checksum, exclude, fname)
                    if index + 1 < len(files):
                        break
                    # the last file: end, or wait for more
                    if self.non_block:
                        sess.io.write(p.eof_packet())
                        return
                    files, data, version = self._wait(version, fname, p_, checksum, index)
                    if files is None:
                        return
                index += 1
                start = 4
        except DumpError as e:
            self._error(str(e))
        except OSError:
            pass
        finally:
            self.master.dump_ended(sess)

    def _start(self, files, name: str, pos: int, exclude: GtidSet | None):
        """(index of the first file, whether its FDE goes out with log_pos cleared); None, and
        an error sent, when the request cannot be served."""
        names = [n for n, _ in files]
        if exclude is not None:
            if not self.master.gtid_mode:
                self._error("Request to dump GTID when @@GLOBAL.GTID_MODE <> ON.")
                return None, False
            if not self.master.gtid_purged.issubset(exclude):
                self._error("Cannot replicate because the master purged required binary logs. Replicate the "
                            "missing transactions from elsewhere, or provision a new slave from backup.")
                return None, False
            own = GtidSet()
            if self.master.server_uuid in exclude.sets:
                own.sets = {self.master.server_uuid: exclude.sets[self.master.server_uuid]}
            if not own.issubset(self.master.gtid_executed):
                self._error("Slave has more GTIDs than the master has, using the master's SERVER_UUID. This may "
                            "indicate that the end of the binary log was truncated or that the last binary log "
                            "file was lost, e.g., after a power or disk failure when sync_binlog != 1.")
                return None, False
            if not name:
                index = 0
                for i, (_, data) in enumerate(files):
                    if _previous_gtids(data).issubset(exclude):
                        index = i
                first = _first_gtid(files[index][1])
                return index, first is not None and exclude.contains(*first)
        if not name:
            name = names[0] if names else ""
        if name not in names:
            self._error("Could not find first log file name in binary log index file")
            return None, False
        if pos < 4:
            self._error("Client requested master to start replication from position < 4")
            return None, False
        data = files[names.index(name)][1]
        if pos > len(data):
            self._error("Client requested master to start replication from position > file size")
            return None, False
        if pos > 4 and pos != len(data) and pos not in {s for s, _, _ in ev.iter_events(data)}:
            self._error(f"bogus data in log event; the first event '{name}' at {pos}, the last event read from "
                        f"'{name}' at 4, the last byte read from '{name}' at {pos}.")
            return None, False
        return names.index(name), False

    def _stream(self, data: bytes, start: int, checksum: bool, exclude: GtidSet | None, fname: str) -> int:
        """Send the events of ``data`` from ``start``; returns where it stopped."""
        skipping, skipped_to = False, 0
        for s, e, typ in ev.iter_events(data, start):
            if self.sess.killed:
                return s
            if exclude is not None:
                if typ in (ev.GTID, ev.ANONYMOUS_GTID):
                    sid = str(uuid.UUID(bytes=bytes(data[s + 20:s + 36])))
                    gno = struct.unpack_from("<q", data, s + 36)[0]
                    skipping = typ == ev.GTID and exclude.contains(sid, gno)
                elif typ == ev.ROTATE:
                    skipping = False
                if skipping:
                    skipped_to = e
                    continue
                if skipped_to:
                    self._send(self._heartbeat(fname, skipped_to, checksum))
                    skipped_to = 0
            self._send(data[s:e])
        if skipped_to:
            self._send(self._heartbeat(fname, skipped_to, checksum))
        end = start
        for _, end, _ in ev.iter_events(data, start):
            pass
        return end

    def _wait(self, version: int, fname: str, pos: int, checksum: bool, index: int):
        """Block until the binlog grows (heartbeats meanwhile); (files, data, version), or Nones
        when the session ends."""
        while not self.sess.killed:
            files, now = self.master.wait_for_change(version, timeout=self._poll())
            if now != version:
                if len(files[index][1]) > pos or index + 1 < len(files):
                    return files, files[index][1], now
                version = now
            if self._client_gone():
                return None, None, None
            if self.heartbeat and time.monotonic() - self.last_sent >= self.heartbeat:
                self._send(self._heartbeat(fname, pos, checksum))
        return None, None, None

    def _poll(self) -> float:
        if not self.heartbeat:
            return 0.2
        return max(0.0, min(0.2, self.heartbeat - (time.monotonic() - self.last_sent)))

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.sess.sock], [], [], 0)
            return bool(readable) and not self.sess.sock.recv(1, 0x2)   # MSG_PEEK: b"" = closed
        except OSError:
            return True

    # ---- packets -------------------------------------------------------------------------------
    def _send(self, event: bytes) -> None:
        self.sess.io.write(b"\x00" + bytes(event))
        self.last_sent = time.monotonic()

    def _error(self, message: str) -> None:
        self.sess.io.write(p.err_packet(ER_MASTER_FATAL_ERROR_READING_BINLOG, message))

    def _fake_rotate(self, fname: str, pos: int) -> bytes:
        return ev.frame(ev.ROTATE, ev.rotate(pos, fname), ts=0, server_id=self.master.server_id, log_pos=0,
                        flags=ev.LOG_EVENT_ARTIFICIAL_F, checksum=self.replica_crc)

    def _heartbeat(self, fname: str, pos: int, checksum: bool) -> bytes:
        return ev.frame(ev.HEARTBEAT, ev.heartbeat(fname), ts=0, server_id=self.master.server_id, log_pos=pos,
                        checksum=checksum)

    @staticmethod
    def _fde_checksum(data: bytes) -> bool:
        size = struct.unpack_from("<I", data, 4 + 9)[0]
        fde = data[4:4 + size]
        return fde[-5] == 1   # the checksum algorithm byte: 1 = CRC32, 0 = off

    @staticmethod
    def _fde(data: bytes, clear: bool) -> bytes:
        size = struct.unpack_from("<I", data, 4 + 9)[0]
        fde = bytearray(data[4:4 + size])
        fde[17] &= ~LOG_EVENT_BINLOG_IN_USE_F & 0xFF
        if clear:
            fde[13:17] = b"\x00\x00\x00\x00"                      # log_pos
            fde[ev.HEADER_LEN + 52:ev.HEADER_LEN + 56] = b"\x00\x00\x00\x00"   # created
        fde[-4:] = zlib.crc32(bytes(fde[:-4])).to_bytes(4, "little")   # always there, even with NONE
        return bytes(fde)


def _previous_gtids(data: bytes) -> GtidSet:
    for s, e, typ in ev.iter_events(data):
        if typ == ev.PREVIOUS_GTIDS:
            return GtidSet.decode(data[s + ev.HEADER_LEN:e])[0]
    return GtidSet()


def _first_gtid(data: bytes):
    for s, _, typ in ev.iter_events(data):
        if typ == ev.GTID:
            return str(uuid.UUID(bytes=bytes(data[s + 20:s + 36]))), struct.unpack_from("<q", data, s + 36)[0]
    return None
