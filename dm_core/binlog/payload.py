"""TRANSACTION_PAYLOAD (MySQL 8.0.20+, ``binlog_transaction_compression=ON``): one whole
transaction's events, compressed, in one event.

Layout (libbinlogevents codecs/binary.cpp, Transaction_payload::decode; MySQL's manual,
"Binary Log Transaction Compression"): right after the 19-byte common header (the FDE
declares a post-header length for the type, which the server's own decoder does not use),
a header of fields, each a type, a length and a value, all three length-encoded integers:

    1 = payload size, 2 = compression type (0 = ZSTD, 255 = none), 3 = uncompressed size,
    0 = end of the header (a type alone); a field of another type is skipped by its length

then the payload. Decompressed, it is the transaction's events one after another (BEGIN,
TABLE_MAPs, row events, XID), each with its own 19-byte header and *no* checksum, and with
log_pos 0: the payload event's own log_pos is the position after the whole transaction.
The transaction's GTID event is not in the payload: it comes before it, uncompressed.

``events`` hands them back shaped as stream events, so that the reader's loop takes them as
if the server had sent them: a checksum is appended to each when the stream has checksums
(the loop strips one, and checks it when asked). They are decompressed as the loop asks for
them, one event ahead, not whole: a large transaction (the loop hands its rows on in pieces)
never sits in memory uncompressed; the one event ahead lets the sizes be checked before the
transaction's last event (its XID) goes through.
"""

from __future__ import annotations

import zlib
from typing import Iterator

from dm_core.binlog import events as ev
from dm_core.errors import ErrorCode

ZSTD, NONE = 0, 255
_END, _PAYLOAD_SIZE, _COMPRESSION, _UNCOMPRESSED_SIZE = 0, 1, 2, 3
_HL = ev.HEADER_LEN


def events(buf, s: int, end: int, cks: int, where: str) -> Iterator[tuple[bytes, int, int]]:
    """The events inside the TRANSACTION_PAYLOAD at ``buf[s:end]`` (``end``: before its own
    checksum), each as ``(buffer, start, end)`` with ``cks`` checksum bytes included.
    ``where``: the event's place, for errors. The header is read now, the events lazily."""
    try:
        kind, raw, p = _header(buf, s + _HL, end)
    except ev.BinlogFormatError as exc:
        raise _unreadable(where, exc) from None
    return _events(buf, p, end, kind, raw, cks, where)


def _events(buf, p: int, end: int, kind: int, raw: int | None, cks: int, where: str):
    read = _reader(buf, p, end, kind)
    total, ahead = 0, None
    try:
        while True:
            head = read(_HL)
            if not head:
                break
            size = int.from_bytes(head[9:13], "little") if len(head) == _HL else 0
            rest = read(size - _HL) if size >= _HL else b""
            if size < _HL or len(rest) != size - _HL:
                raise ev.BinlogFormatError(f"an event of {size} bytes at offset {total} is cut short or malformed")
            one = head + rest
            total += size
            if ahead is not None:
                yield ahead
            # the loop takes 4 bytes off every event's end: give each its CRC32, as the server would
            ahead = (one + zlib.crc32(one).to_bytes(4, "little") if cks else one), 0, size + cks
        if raw is not None and total != raw:
            raise ev.BinlogFormatError(f"{total} bytes decompressed, the header says {raw}")
    except ev.BinlogFormatError as exc:
        raise _unreadable(where, exc) from None
    except Exception as exc:   # zstd's own errors
        raise _unreadable(where, f"zstd: {exc}") from None
    if ahead is not None:
        yield ahead


def _unreadable(where: str, why):
    return ErrorCode.BINLOG_UNREADABLE.error(
        f"cannot read the compressed transaction {where}: {why}",
        workaround="`SET GLOBAL binlog_transaction_compression = OFF` upstream keeps the transactions to come "
                   "uncompressed. For this one: `dmctl binlog skip TASK -s SOURCE` if losing it is acceptable, "
                   "or run the full phase again / start from a newer `meta` position.")


def _header(buf, p: int, end: int) -> tuple[int, int | None, int]:
    """(compression type, uncompressed size or None, where the payload starts)."""
    size, kind, raw = None, NONE, None   # no type field: none, as the server's decoder takes it
    while True:
        if p >= end:
            raise ev.BinlogFormatError("the header has no end mark")
        field, p = ev.lenenc(buf, p)
        if field == _END:
            break
        length, p = ev.lenenc(buf, p)
        if field in (_PAYLOAD_SIZE, _COMPRESSION, _UNCOMPRESSED_SIZE):
            value = ev.lenenc(buf, p)[0]
            if field == _PAYLOAD_SIZE:
                size = value
            elif field == _COMPRESSION:
                kind = value
            else:
                raw = value
        p += length
    if size is None or p + size != end:
        raise ev.BinlogFormatError(f"payload size {size}, but {end - p} bytes follow the header")
    if kind not in (ZSTD, NONE):
        raise ev.BinlogFormatError(f"compression type {kind} (shardflow reads ZSTD and none)")
    return kind, raw, p


def _reader(buf, p: int, end: int, kind: int):
    """read(n) -> up to n bytes of the uncompressed payload (fewer only at its end)."""
    if kind == NONE:
        at = p

        def read(n: int) -> bytes:
            nonlocal at
            q, at = at, min(at + n, end)
            return bytes(buf[q:at])
        return read
    import zstandard

    # read_across_frames: one frame per transaction today; a stream of several is one payload too
    more = zstandard.ZstdDecompressor().stream_reader(memoryview(buf)[p:end], read_across_frames=True).read

    def read_zstd(n: int) -> bytes:
        got = more(n)
        while 0 < len(got) < n:   # a short read before the end (a frame boundary): read on
            step = more(n - len(got))
            if not step:
                break
            got += step
        return got
    return read_zstd
