"""Packet framing of the dump stream: events split anywhere by the socket, events over
16 MB, EOF, server errors, sequence errors, a connection that drops."""

import io
import struct

import pytest

from dm_core.binlog.dump import MAX_PACKET, BinlogDump
from dm_core.db import Endpoint
from dm_core.errors import ErrorCode, ShardflowError

EP = Endpoint("127.0.0.1", 1, "u", "p", name="fake")


class Trickle(io.RawIOBase):
    """A socket that hands out at most ``step`` bytes per read."""

    def __init__(self, data: bytes, step: int):
        self.data, self.pos, self.step = data, 0, step

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), self.step, len(self.data) - self.pos)
        b[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


def packets(payloads: list[bytes], first_seq: int = 1) -> bytes:
    out, seq = b"", first_seq
    for p in payloads:
        while True:  # MySQL splits payloads >= 16 MB into full packets plus a (maybe empty) last one
            part, p = p[:MAX_PACKET], p[MAX_PACKET:]
            out += struct.pack("<I", len(part))[:3] + bytes([seq & 0xFF]) + part
            seq += 1
            if len(part) < MAX_PACKET:
                break
    return out


def dump_over(data: bytes, step: int = 1 << 20) -> BinlogDump:
    d = BinlogDump.__new__(BinlogDump)
    d.ep, d.file, d.pos = EP, "mysql-bin.000001", 4

    class Conn:
        _rfile = io.BufferedReader(Trickle(data, step))

        def _force_close(self):
            pass
    d.conn = Conn()
    return d


def event(n: int, fill: int = 0) -> bytes:
    return bytes([n % 256]) * 19 + bytes([fill]) * n


EOF_PACKET = b"\xfe\x00\x00\x02\x00"


@pytest.mark.parametrize("step", [1, 3, 7, 4096, 1 << 20])
def test_events_come_out_whole_whatever_the_socket_hands_over(step):
    evs = [event(n) for n in (0, 1, 250, 5000, 70000)]
    d = dump_over(packets([b"\x00" + e for e in evs] + [EOF_PACKET]), step)
    assert [bytes(buf[s:e]) for buf, s, e in d.events()] == evs


def test_an_event_over_16_mb_spans_packets():
    big = event(MAX_PACKET + 10, fill=7)
    exact = event(MAX_PACKET - 1 - 19)  # payload exactly 0xFFFFFF: an empty packet follows
    d = dump_over(packets([b"\x00" + big, b"\x00" + exact, b"\x00" + event(3), EOF_PACKET]))
    got = [bytes(buf[s:e]) for buf, s, e in d.events()]
    assert [len(g) for g in got] == [len(big), len(exact), 22] and got[0] == big and got[1] == exact


def test_server_errors_are_raised_with_a_code():
    err = b"\xff" + struct.pack("<H", 1236) + b"#HY000Could not find first log file name in binary log index file"
    with pytest.raises(ShardflowError) as exc:
        list(dump_over(packets([b"\x00" + event(1), err])).events())
    assert exc.value.code is ErrorCode.BINLOG_POSITION_LOST and "first log file" in str(exc.value)
    err = b"\xff" + struct.pack("<H", 1045) + b"#28000Access denied"
    with pytest.raises(ShardflowError) as exc:
        list(dump_over(packets([err])).events())
    assert exc.value.code is ErrorCode.UPSTREAM_UNREACHABLE and not exc.value.code.terminal


def test_a_dropped_connection_or_bad_sequence_is_an_error_not_a_reconnect():
    data = packets([b"\x00" + event(100)])
    with pytest.raises(ShardflowError, match="closed the connection"):
        list(dump_over(data[:-10]).events())
    with pytest.raises(ShardflowError, match="sequence"):
        list(dump_over(packets([b"\x00" + event(1)], first_seq=5)).events())
