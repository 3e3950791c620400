"""MySQL GTID sets: text (``uuid:1-5:7,uuid2:1-3``) and the binary form of PREVIOUS_GTIDS
events and COM_BINLOG_DUMP_GTID.

Binary form (little-endian): n_sids u64, then per UUID: the 16 UUID bytes, n_intervals u64,
and each interval as start u64, end u64 with ``end`` exclusive.
"""

from __future__ import annotations

import struct
import uuid as _uuid


class GtidSet:
    """uuid (lower-case text) → sorted, merged, inclusive intervals [(start, stop), ...]."""

    def __init__(self, text: str | None = None):
        self.sets: dict[str, list[tuple[int, int]]] = {}
        for part in (text or "").replace("\n", "").split(","):
            part = part.strip()
            if not part:
                continue
            sid, *ranges = part.split(":")
            for r in ranges:
                a, _, b = r.partition("-")
                self.add_range(sid, int(a), int(b or a))

    def add_range(self, sid: str, start: int, stop: int) -> None:
        sid = str(_uuid.UUID(sid))
        ivs = sorted(self.sets.get(sid, []) + [(start, stop)])
        merged: list[tuple[int, int]] = []
        for a, b in ivs:
            if merged and a <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
            else:
                merged.append((a, b))
        self.sets[sid] = merged

    def add(self, sid: str, gno: int) -> None:
        self.add_range(sid, gno, gno)

    def contains(self, sid: str, gno: int) -> bool:
        sid = str(_uuid.UUID(sid))
        return any(a <= gno <= b for a, b in self.sets.get(sid, ()))

    def issubset(self, other: "GtidSet") -> bool:
        return all(all(any(oa <= a and b <= ob for oa, ob in other.sets.get(sid, ())) for a, b in ivs)
                   for sid, ivs in self.sets.items())

    def copy(self) -> "GtidSet":
        out = GtidSet()
        out.sets = {k: list(v) for k, v in self.sets.items()}
        return out

    def __str__(self) -> str:
        return ",\n".join(sid + "".join(f":{a}" if a == b else f":{a}-{b}" for a, b in ivs)
                          for sid, ivs in sorted(self.sets.items()))

    def __eq__(self, other) -> bool:
        return isinstance(other, GtidSet) and self.sets == other.sets

    def __bool__(self) -> bool:
        return bool(self.sets)

    def encode(self) -> bytes:
        out = [struct.pack("<Q", len(self.sets))]
        for sid, ivs in sorted(self.sets.items()):
            out.append(_uuid.UUID(sid).bytes + struct.pack("<Q", len(ivs)))
            out += [struct.pack("<QQ", a, b + 1) for a, b in ivs]
        return b"".join(out)

    @classmethod
    def decode(cls, data: bytes, p: int = 0) -> tuple["GtidSet", int]:
        out = cls()
        (n,) = struct.unpack_from("<Q", data, p)
        p += 8
        for _ in range(n):
            sid = str(_uuid.UUID(bytes=bytes(data[p:p + 16])))
            (k,) = struct.unpack_from("<Q", data, p + 16)
            p += 24
            for _ in range(k):
                a, b = struct.unpack_from("<QQ", data, p)
                p += 16
                if b > a:
                    out.add_range(sid, a, b - 1)
        return out, p
