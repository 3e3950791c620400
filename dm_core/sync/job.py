"""The unit of work of the DML path: one row change of one downstream table.

Every stage after the row path (route, filter, column mapping) passes ``RowJob``s along:
``compactor.compact`` merges them, ``causality.Causality`` assigns them to workers,
``merger.merge`` turns one worker's jobs into statements. A job carries *mapped* rows
(target column names, values as decoded from the binlog), so every stage reasons about the
downstream table only.

Two notions of "which row" are used, on purpose:

* ``key_before()`` / ``key_after()`` are the exact values of the target key (primary key,
  else a NOT NULL unique key, else every column; see ``dm_core.target``). The compactor
  groups by these: merging two changes is only right when they touch the same row under
  *any* collation, so it never treats ``'a'`` and ``'A'`` as one row.
* ``keys()`` are conflict keys for causality. They fold strings the way case- and
  accent-insensitive, PAD SPACE collations compare them (``'A '``, ``'a'`` and ``'á'`` fold
  alike), so two changes that *might* be the same row downstream always share a key. A fold
  that is too coarse only costs concurrency; one that is too fine would let two workers
  race on one row. Known gap: collations with other equivalences (``utf8mb4_general_ci``
  also has ``'ß' = 's'``) are not modelled.

As DM's causality does, ``keys()`` also holds the values of every other unique index of the
downstream table (``TargetTable.unique_indexes``, NULL-able ones included, a NULL value
skipped: it conflicts with nothing), so two changes that meet on a second unique key (an
UPDATE moving b=3 away, then an INSERT of b=3 under another key) stay on one worker, in
order. (The compactor still merges by ``key`` only: it never merges changes of two keys.)
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

from dm_core.position import Position
from dm_core.sync.dml import to_db_value
from dm_core.target import TargetTable

OPS = ("insert", "update", "delete")

_UNSET = object()


@dataclass(slots=True)
class RowJob:
    # What happened to the row: "insert" (after only), "update" (before and after),
    # "delete" (before only).
    op: str
    # The downstream table the change goes to (after routing); its ``key`` decides WHERE
    # clauses, compaction identity and conflict keys.
    target: TargetTable
    # Row image before the change, keyed by target column name; None for inserts.
    before: dict | None
    # Row image after the change, keyed by target column name; None for deletes.
    after: dict | None
    # Safe mode: write so that replaying the change is harmless (INSERT → REPLACE,
    # UPDATE → DELETE old key + REPLACE new row). Set for changes up to the safe-mode exit
    # point, and by the compactor when a merge needs it (DELETE + INSERT).
    safe: bool
    # End of the upstream transaction the change belongs to: the resume point once this
    # job (and everything before it) is durable downstream. None in tests.
    pos: Position | None = None
    # A row of a target without a unique key: (binlog file number, offset of its transaction's
    # start, upstream "schema.table", ordinal among that table's rows in the transaction), what
    # the keyless ledger (keyless_ledger.py) records and asks on replay. None for other rows.
    origin: tuple | None = None
    # Caches for the key helpers; not part of the job's identity.
    _kb: object = field(default=_UNSET, init=False, repr=False, compare=False)
    _ka: object = field(default=_UNSET, init=False, repr=False, compare=False)
    _keys: object = field(default=_UNSET, init=False, repr=False, compare=False)

    def key_before(self) -> tuple | None:
        """The target key's values in the before image (None for inserts)."""
        if self._kb is _UNSET:
            self._kb = None if self.before is None else _key(self.target, self.before)
        return self._kb

    def key_after(self) -> tuple | None:
        """The target key's values in the after image (None for deletes)."""
        if self._ka is _UNSET:
            self._ka = None if self.after is None else _key(self.target, self.after)
        return self._ka

    def key(self) -> tuple:
        """The row this job addresses: the before key, or the after key of an insert."""
        k = self.key_before()
        return k if k is not None else self.key_after()

    def key_changed(self) -> bool:
        """True for an update that moves the row to another key (exact comparison)."""
        return self.op == "update" and self.key_before() != self.key_after()

    def unique_key_changed(self) -> bool:
        """True for an update that changes its key or the values of another unique index (DM's
        IsPrimaryOrUniqueKeyUpdated): what a safe-mode DELETE + REPLACE cannot do faithfully
        with foreign key checks on."""
        if self.op != "update":
            return False
        if self.key_changed():
            return True
        return any(tuple(to_db_value(self.before.get(c)) for c in cols) != tuple(to_db_value(self.after.get(c)) for c in cols)
                   for cols in self.target.unique_indexes)

    def keys(self) -> tuple:
        """Conflict keys for causality, distinct, before-image key first.

        Each is ``(schema, table, folded key values)`` with names lower-cased and strings
        folded (see the module docstring), so equal keys mean "may be the same row".
        """
        if self._keys is _UNSET:
            t = self.target
            ident = t.ident
            kb, ka = self.key_before(), self.key_after()
            out = () if kb is None else (ident + (tuple(map(fold, kb)),),)
            if ka is not None:
                ck = ident + (tuple(map(fold, ka)),)
                if not out or out[0] != ck:
                    out += (ck,)
            if len(t.unique_indexes) > 1 or (t.unique_indexes and t.unique_indexes[0] != t.key):
                for row in (self.before, self.after):  # other unique indexes: (schema, table, columns, values)
                    if row is None:
                        continue
                    for cols in t.unique_indexes:
                        if cols == t.key:
                            continue
                        vals = tuple(to_db_value(row.get(c)) for c in cols)
                        if any(v is None for v in vals):
                            continue
                        uk = ident + (cols, tuple(map(fold, vals)))
                        if uk not in out:
                            out += (uk,)
            for cols, parent in self.target.parents:   # the parent rows it refers to (foreign key checks on)
                for row in (self.before, self.after):
                    if row is not None and all(row.get(c) is not None for c in cols):
                        pk = parent + (tuple(fold(to_db_value(row[c])) for c in cols),)
                        if pk not in out:
                            out += (pk,)
            self._keys = out
        return self._keys


def _key(t: TargetTable, row: dict) -> tuple:
    k = t.key
    if len(k) == 1:  # the common case, without a generator per call
        return (to_db_value(row.get(k[0])),)
    return tuple(to_db_value(row.get(c)) for c in k)


def fold(v):
    """A value as a case/accent-insensitive PAD SPACE collation would compare it.

    >>> fold("Ára  "), fold(b"A"), fold(3)
    ('ara', b'A', 3)
    """
    if type(v) is not str:
        return v if not isinstance(v, str) else fold(str(v))
    if v.isascii():
        return v.lower().rstrip(" ")
    s = "".join(ch for ch in unicodedata.normalize("NFKD", v) if not unicodedata.combining(ch))
    return s.casefold().rstrip(" ")
