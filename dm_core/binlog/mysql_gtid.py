"""MySQL GTID sets: the text a checkpoint holds, the binary form the server speaks, and the
running set of the binlog reader.

Why a module of its own: a MySQL source's GTID state is not one GTID per domain (MariaDB's
``0-1-5``) but a *set*: every transaction the server ever executed, as intervals of
transaction numbers per server UUID. It is what ``Executed_Gtid_Set`` (SHOW BINARY LOG
STATUS / SHOW MASTER STATUS) and ``@@gtid_executed`` print, what a replica sends in
COM_BINLOG_DUMP_GTID to say "skip all these", and what every PREVIOUS_GTIDS event holds.

Text (the server's own format): ``uuid:1-5:7-9,uuid2:1-3``; UUIDs in lower case and in
order, intervals inclusive and merged, a lone number for a one-transaction interval. The
server separates UUIDs with ",\\n"; a checkpoint keeps them on one line.

Binary (Gtid_set::encode, the PREVIOUS_GTIDS body and COM_BINLOG_DUMP_GTID's data): n_sids
u64, then per UUID its 16 bytes, n_intervals u64 and each interval as [start, end) u64
pairs, all little-endian. MySQL 8.3+ marks a set holding *tagged* GTIDs (``uuid:tag:1-5``)
with a format byte in n_sids' top byte; those are refused here (see ``TAGGED``), not misread.
"""

from __future__ import annotations

import re
import struct

from dm_core.errors import ErrorCode

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_INTERVAL = re.compile(r"^(\d+)(?:-(\d+))?$")
_U64 = struct.Struct("<Q")

TAGGED = ("tagged GTIDs (MySQL 8.3+, `SET gtid_next = 'AUTOMATIC:<tag>'`)",
          "Stop assigning tagged GTIDs upstream and run the full phase again, or start the task again "
          "from a `meta` position past the tagged transactions.")


def uuid_text(raw: bytes) -> str:
    """16 bytes as the server prints a UUID.

    >>> uuid_text(bytes(range(16)))
    '00010203-0405-0607-0809-0a0b0c0d0e0f'
    """
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse(text: str | None) -> dict[str, list[list[int]]]:
    """GTID set text → {uuid: [[start, end], ...]} (inclusive, sorted, merged). Whitespace and
    the server's line breaks are allowed; an empty text is the empty set.

    >>> parse("B1000000-0000-0000-0000-000000000000:7-9:1-5:6, a1000000-0000-0000-0000-000000000000:3")
    {'a1000000-0000-0000-0000-000000000000': [[3, 3]], 'b1000000-0000-0000-0000-000000000000': [[1, 9]]}
    """
    out: dict[str, list[list[int]]] = {}
    for part in (text or "").split(","):
        part = "".join(part.split()).lower()
        if not part:
            continue
        uuid, *ranges = part.split(":")
        if not _UUID.match(uuid) or not ranges:
            raise _bad(text, f"{part!r} is not uuid:interval[:interval...]")
        ivs = out.setdefault(uuid, [])
        for r in ranges:
            m = _INTERVAL.match(r)
            if m is None:
                if re.match(r"^[a-z_][a-z0-9_]{0,31}$", r):
                    raise ErrorCode.CONFIG_INVALID.error(
                        f"GTID set {text!r} holds {TAGGED[0]}, which shardflow cannot read", workaround=TAGGED[1])
                raise _bad(text, f"{r!r} is not an interval")
            lo, hi = int(m[1]), int(m[2] or m[1])
            if not 1 <= lo <= hi:
                raise _bad(text, f"interval {r!r} is empty or starts below 1")
            ivs.append([lo, hi])
    return {u: _merge(ivs) for u, ivs in sorted(out.items())}


def _bad(text, why: str):
    return ErrorCode.CONFIG_INVALID.error(
        f"{text!r} is not a MySQL GTID set ({why})",
        workaround="Give the GTID set as the server prints it (SHOW BINARY LOG STATUS's Executed_Gtid_Set, or "
                   "@@GLOBAL.gtid_executed), e.g. 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5.")


def _merge(ivs: list[list[int]]) -> list[list[int]]:
    ivs.sort()
    out: list[list[int]] = []
    for lo, hi in ivs:
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out


def _segment(uuid: str, ivs: list[list[int]]) -> str:
    return uuid + "".join(f":{lo}" if lo == hi else f":{lo}-{hi}" for lo, hi in ivs)


def format_set(sets: dict[str, list[list[int]]]) -> str:
    """The canonical text of a parsed set (sorted UUIDs, one line)."""
    return ",".join(_segment(u, sets[u]) for u in sorted(sets) if sets[u])


def subtract(wanted: str | None, have: str | None) -> str:
    """The GTIDs of set ``wanted`` that set ``have`` lacks, as set text ('' when none).

    >>> a = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    >>> subtract(f"{a}:1-62:70", f"{a}:1-52:60-61")
    '3e11fa47-71ca-11e1-9e33-c80aa9429562:53-59:62:70'
    >>> subtract(f"{a}:1-5", f"{a}:1-9")
    ''
    """
    got = parse(have)
    out: dict[str, list[list[int]]] = {}
    for uuid, ivs in parse(wanted).items():
        for lo, hi in ivs:
            for hlo, hhi in got.get(uuid, []):
                if hhi < lo or hlo > hi:
                    continue
                if hlo > lo:
                    out.setdefault(uuid, []).append([lo, hlo - 1])
                lo = hhi + 1
                if lo > hi:
                    break
            if lo <= hi:
                out.setdefault(uuid, []).append([lo, hi])
    return format_set(out)


def normalize(text: str | None) -> str | None:
    """A GTID set text as a checkpoint keeps it (None stays None: unknown is not empty).

    >>> normalize("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5,\\n3e11fa47-71ca-11e1-9e33-c80aa9429562:6")
    '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-6'
    """
    return None if text is None else format_set(parse(text))


def encode(text: str | None) -> bytes:
    """The binary form of a GTID set (COM_BINLOG_DUMP_GTID's data)."""
    sets = parse(text)
    out = [_U64.pack(len(sets))]
    for uuid, ivs in sets.items():
        out.append(bytes.fromhex(uuid.replace("-", "")) + _U64.pack(len(ivs)))
        out += [struct.pack("<QQ", lo, hi + 1) for lo, hi in ivs]
    return b"".join(out)


def decode(buf, p: int = 0) -> tuple[str, int]:
    """The binary GTID set at ``buf[p:]`` (a PREVIOUS_GTIDS body) → (text, offset after it)."""
    n = _U64.unpack_from(buf, p)[0]
    if n >> 56:   # the format byte of MySQL 8.3+: tagged GTIDs follow, in another layout
        raise ErrorCode.BINLOG_UNREADABLE.error(f"a binlog GTID set holds {TAGGED[0]}, which shardflow cannot read",
                                                workaround=TAGGED[1])
    p += 8
    sets: dict[str, list[list[int]]] = {}
    for _ in range(n):
        uuid = uuid_text(bytes(buf[p:p + 16]))
        k = _U64.unpack_from(buf, p + 16)[0]
        p += 24
        ivs = sets.setdefault(uuid, [])
        for _ in range(k):
            lo, end = struct.unpack_from("<QQ", buf, p)
            ivs.append([lo, end - 1])
            p += 16
    return format_set({u: _merge(v) for u, v in sets.items()}), p


class GtidSetState:
    """The reader's running GTID set, one transaction at a time.

    Called once per transaction in the reader's loop: the next transaction of the UUID that
    moved last (the common case) is a string compare and two f-strings, with the text around
    that UUID's last interval kept from the previous call; anything else (another UUID, a
    gap, a state this object did not produce: the window's start, a PREVIOUS_GTIDS seed)
    goes through the parsed set. ``add(state, gtid)`` has the signature of MariaDB's
    ``_advance``. An unknown state (None) stays unknown: one GTID alone is not the set of the
    transactions before it.

    >>> s = GtidSetState()
    >>> t = s.add("a1000000-0000-0000-0000-000000000000:1-5", "a1000000-0000-0000-0000-000000000000:6")
    >>> t
    'a1000000-0000-0000-0000-000000000000:1-6'
    >>> t = s.add(t, "0b000000-0000-0000-0000-000000000000:3")
    >>> s.add(t, "0b000000-0000-0000-0000-000000000000:4")
    '0b000000-0000-0000-0000-000000000000:3-4,a1000000-0000-0000-0000-000000000000:1-6'
    >>> s.add(None, "a1000000-0000-0000-0000-000000000000:7") is None
    True
    """

    __slots__ = ("text", "sets", "expect", "uuid", "last", "pre", "post")

    def __init__(self):
        self.text: str | None = None
        self.sets: dict[str, list[list[int]]] = {}
        self.expect: str | None = None    # the GTID that only grows the last interval of ``uuid``
        self.uuid = ""
        self.last: list[int] = [0, 0]     # that interval (shared with ``sets``)
        self.pre = self.post = ""         # the text before its end number, and after it

    def add(self, state: str | None, gtid: str) -> str | None:
        if gtid == self.expect and state is self.text:
            last = self.last
            end = last[1] = last[1] + 1
            self.expect = f"{self.uuid}:{end + 1}"
            self.text = text = f"{self.pre}{end}{self.post}"
            return text
        if state is None:
            return None
        if state is not self.text:
            self.sets = parse(state)
        uuid, _, n = gtid.rpartition(":")
        sets = self.sets
        ivs = sets.get(uuid) or []
        ivs.append([int(n), int(n)])
        ivs = sets[uuid] = _merge(ivs)
        order = sorted(sets)
        at = order.index(uuid)
        before = ",".join([_segment(u, sets[u]) for u in order[:at]])
        after = ",".join([_segment(u, sets[u]) for u in order[at + 1:]])
        last = ivs[-1]
        self.uuid, self.last, self.expect = uuid, last, f"{uuid}:{last[1] + 1}"
        self.pre = (before + "," if before else "") + _segment(uuid, ivs[:-1]) + f":{last[0]}-"
        self.post = "," + after if after else ""
        self.text = text = format_set(sets)
        return text
