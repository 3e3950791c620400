"""One row of either side as a validation record: its key, a digest of what is compared, and
whether a task filter can explain its absence or difference.

Both engines use these functions -- ``dmctl validate`` on pymysql rows in process, the scheduled
job on JDBC rows in Spark executors -- so a row means the same thing everywhere:

* an upstream row is first shaped into the target's columns (``Shaper``: column mapping via
  dm_core.rules.column_mapping, extract columns of the route, the downstream default for a
  column the shard lacks), then normalized (``norm``: a string per value, so ``Decimal('1.50')``
  and ``Decimal('1.5')`` or an int and its bigint column compare equal);
* the key is the downstream table's key (PK, else a NOT NULL unique key, else all columns);
  its hash picks the bucket, so a changed row lands in the same bucket on both sides;
* the digest covers the compared columns (``mode: full``: all; ``mode: fast``: the key only,
  DM's "does the row exist" check).

Flags say which filter may legitimately make the downstream differ for this row
(see dm_core/validate/filters.py for where they come from).
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
from dataclasses import dataclass, field
from typing import NamedTuple

# a filter explains ...
MAY_BE_MISSING = 1     # ... this upstream row being absent downstream (its insert was filtered)
MAY_BE_STALE = 2       # ... this row's values differing (an update was filtered)
MAY_BE_EXTRA = 4       # ... this downstream row having no upstream row (a delete was filtered)

_MASK = (1 << 64) - 1


def norm(v):
    """A value as comparable text (None stays None)."""
    if v is None:
        return None
    if isinstance(v, decimal.Decimal):
        return format(v.normalize(), "f") if v == v.to_integral() else str(v.normalize())
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, datetime.datetime):
        return v.replace(tzinfo=None).isoformat(sep=" ")
    if isinstance(v, bool):
        return str(int(v))
    return str(v)


def select_list(columns: list[str], types: dict | None = None) -> str:
    """The SELECT list reading ``columns`` exactly (``types``: column → DATA_TYPE): a FLOAT is
    widened to DOUBLE on the server, which prints FLOAT with 6 digits, so two FLOATs that differ
    past them would read as one value.

    >>> select_list(["id", "f"], {"f": "float"})
    '`id`, CAST(`f` AS DOUBLE)'
    """
    from dm_core.db import qi

    types = types or {}
    return ", ".join(f"CAST({qi(c)} AS DOUBLE)" if types.get(c) == "float" else qi(c) for c in columns)


def types_of(table) -> dict:
    """column → DATA_TYPE of a discover.SourceTable (empty when unknown)."""
    return dict(zip(table.columns, table.column_types or [])) if table is not None else {}


def digest(values: tuple) -> int:
    """64-bit digest of a tuple of normalized values."""
    return int.from_bytes(hashlib.blake2b(repr(values).encode(), digest_size=8).digest(), "big")


def add(a: int, b: int) -> int:
    """Digest sums wrap at 64 bits (the sum of a multiset is order-independent)."""
    return (a + b) & _MASK


class Record(NamedTuple):
    """One row, either side. ``raw_key``: key values as read (SQL parameters for a re-read);
    ``origin``: the upstream shard ``source:schema.table`` ('' downstream); ``src_key``: the
    shard's own values of the key columns before mapping (re-reading it upstream)."""

    bucket: int
    key: tuple
    digest: int
    flags: int
    raw_key: tuple
    origin: str
    src_key: tuple
    row: tuple          # normalized compared values (shown for a difference)


@dataclass
class Shaper:
    """Upstream row of one shard → its row over the target's columns.

    ``columns``: the shard's columns as read; ``target``: the compared target columns in order;
    ``extract``: the route's extract columns (constant per shard); ``defaults``: downstream
    column defaults (text or None) for target columns the shard lacks; ``mapping``: the
    shard's TableMapping or None.
    """

    columns: list[str]
    target: list[str]
    extract: dict[str, str] = field(default_factory=dict)
    defaults: dict = field(default_factory=dict)
    mapping: object = None

    def __post_init__(self):
        at = {c: i for i, c in enumerate(self.columns)}
        ext = list(self.extract)
        self._pick = []
        for c in self.target:
            if c in at:
                self._pick.append((0, at[c]))
            elif c in self.extract:
                self._pick.append((1, ext.index(c)))
            else:
                self._pick.append((2, self.defaults.get(c)))
        self._ext = tuple(self.extract.values())

    def supplied(self) -> list[int]:
        """Positions of the target columns this shard has a value for (its own or an extract
        column); the others take the downstream's default when its rows are written."""
        return [i for i, (kind, _) in enumerate(self._pick) if kind != 2]

    def shape(self, raw: tuple) -> tuple:
        mapped = self.mapping.map_row(list(raw)) if self.mapping is not None else raw
        out = []
        for kind, x in self._pick:
            out.append(mapped[x] if kind == 0 else self._ext[x] if kind == 1 else x)
        return tuple(out)


@dataclass
class RecordMaker:
    """Builds records of one reader (an upstream shard or the downstream table).

    ``key_idx``: positions of the key columns in the target row; ``compare_idx``: positions
    digested (all for full mode, the key for fast); ``src_key_idx``: positions of the key
    columns in the *raw* upstream row (None where the key column is an extract column);
    ``flag_fn``: raw row → flags (filters), or None; ``table_flags``: flags for every row.
    """

    shaper: Shaper | None
    key_idx: list[int]
    compare_idx: list[int]
    buckets: int
    origin: str = ""
    src_key_idx: list = field(default_factory=list)
    flag_fn: object = None
    table_flags: int = 0

    def record(self, raw: tuple) -> Record:
        shaped = self.shaper.shape(raw) if self.shaper is not None else tuple(raw)
        normed = tuple(norm(v) for v in shaped)
        key = tuple(normed[i] for i in self.key_idx)
        row = tuple(normed[i] for i in self.compare_idx)
        flags = self.table_flags | (self.flag_fn(raw) if self.flag_fn is not None else 0)
        src_key = tuple(raw[i] if i is not None else None for i in self.src_key_idx) if self.origin else ()
        return Record(digest(key) % self.buckets, key, digest(row), flags,
                      tuple(shaped[i] for i in self.key_idx), self.origin, src_key, row)
