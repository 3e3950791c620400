"""Comparing the two sides: bucket checksums first, rows of differing buckets by key second.

1. Every record (rows.py) goes to bucket ``hash(key) % B``; per bucket each side keeps the
   row count and the 64-bit sum of digests. Equal (count, sum) in every bucket means equal
   tables (a multiset of rows has one sum; a collision needs 2^-64 luck).
2. Only the records of buckets that differ are kept and matched by key: a key only upstream
   is a *missing* row, only downstream an *extra* one, on both sides with other values a
   *changed* one. Keyless tables use every column as the key, so their rows are matched by
   multiplicity.
3. A difference a task filter explains (filters.py) is counted as filtered, not reported.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from dm_core.validate.rows import MAY_BE_EXTRA, MAY_BE_MISSING, MAY_BE_STALE, Record, add


class Tally:
    """Per-bucket row count and digest sum of one side."""

    __slots__ = ("rows", "buckets")

    def __init__(self):
        self.rows = 0
        self.buckets: dict[int, list[int]] = {}

    def add(self, r: Record) -> None:
        self.rows += 1
        b = self.buckets.get(r.bucket)
        if b is None:
            self.buckets[r.bucket] = [1, r.digest]
        else:
            b[0] += 1
            b[1] = add(b[1], r.digest)

    def merge(self, bucket: int, rows: int, total: int) -> None:
        """Add a partial (rows, digest sum) of a bucket computed elsewhere (a Spark partition)."""
        self.rows += rows
        b = self.buckets.setdefault(bucket, [0, 0])
        b[0] += rows
        b[1] = add(b[1], total)

    @property
    def checksum(self) -> str:
        s = 0
        for _, t in self.buckets.values():
            s = add(s, t)
        return f"{s:016x}"


def differing_buckets(up: Tally, down: Tally) -> set[int]:
    return {b for b in set(up.buckets) | set(down.buckets) if up.buckets.get(b) != down.buckets.get(b)}


@dataclass
class Diff:
    kind: str                    # missing | extra | changed
    key: tuple                   # normalized key
    up: Record | None
    down: Record | None

    @property
    def explained(self) -> bool:
        """A task filter may have caused it (filters.py)."""
        if self.kind == "missing":
            return bool(self.up.flags & MAY_BE_MISSING)
        if self.kind == "extra":
            return bool(self.down.flags & MAY_BE_EXTRA)
        return bool((self.up.flags | self.down.flags) & MAY_BE_STALE)


def key_diff(up: list[Record], down: list[Record]) -> list[Diff]:
    """The differing rows among records of the same buckets, matched by key, in key order."""
    by_key: dict[tuple, tuple[list, list]] = defaultdict(lambda: ([], []))
    for r in up:
        by_key[r.key][0].append(r)
    for r in down:
        by_key[r.key][1].append(r)
    out = []
    for key in sorted(by_key, key=lambda k: tuple((v is None, v or "") for v in k)):
        ups, downs = by_key[key]
        same = Counter(r.digest for r in ups) & Counter(r.digest for r in downs)
        rest_up, rest_down = _without(ups, same), _without(downs, same)
        for u, d in zip(rest_up, rest_down):
            out.append(Diff("changed", key, u, d))
        for u in rest_up[len(rest_down):]:
            out.append(Diff("missing", key, u, None))
        for d in rest_down[len(rest_up):]:
            out.append(Diff("extra", key, None, d))
    return out


def _without(records: list[Record], common: Counter) -> list[Record]:
    left = Counter(common)
    out = []
    for r in records:
        if left[r.digest] > 0:
            left[r.digest] -= 1
        else:
            out.append(r)
    return out


def split_explained(diffs: list[Diff]) -> tuple[list[Diff], int]:
    """(differences to report, how many a filter explains)."""
    keep = [d for d in diffs if not d.explained]
    return keep, len(diffs) - len(keep)
