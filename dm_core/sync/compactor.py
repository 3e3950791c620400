"""Compactor (``syncers.compact``): several changes of one row inside a batch become one.

Rules, for two jobs on the same table and the same key, the earlier one first (DM's table;
"X" marks sequences a consistent upstream cannot produce, where the later job simply wins):

    INSERT + UPDATE → INSERT of the new row         DELETE + INSERT → INSERT in safe mode
    UPDATE + UPDATE → UPDATE first before → last after                   (REPLACE: the
    INSERT + DELETE → DELETE                          docs call it "UPDATE", which is what
    UPDATE + DELETE → DELETE of the original row      REPLACE does to an existing row)
    DELETE + DELETE, INSERT + INSERT, UPDATE + INSERT, DELETE + UPDATE → X (later job)

INSERT + DELETE stays a DELETE rather than vanishing: the row may exist downstream already
(a safe-mode replay, or a DELETE + INSERT folded into that INSERT), and deleting a missing
row is harmless.

Steps:
1. An UPDATE that changes the key is split into DELETE (old row) + INSERT (new row), both
   with the update's ``safe`` and ``pos``; from here on every job addresses one key.
2. Jobs of tables without a unique key (``key_is_unique`` False, the key is "all columns")
   and jobs with a NULL in their key pass through untouched, in place: identical rows
   cannot be told apart, so there is nothing safe to merge.
3. A job whose key is already in the buffer merges with that job; the result takes the
   place of the *later* job (DM), the earlier slot is emptied. So the output holds at most
   one job per key, and every job lands at or after its own input position relative to
   jobs of other keys: never before a change it followed on the same key.
4. ``safe`` of a merged job is the OR of its parts (plus True for DELETE + INSERT): once any
   part may be a replay, the merged write must be idempotent. DM gets the same effect by
   forcing the first job's safe mode onto the whole buffer.

Semantics the caller relies on:
* Output changes of one key are the final effect of that key's input changes; changes of
  different keys may come out in another order than they went in (step 3). That is only
  sound while rows are identified by the target key alone: see ``job.py`` about secondary
  unique keys downstream.
* Merging crosses transaction boundaries, so the downstream never sees some of the
  intermediate states. Checkpoint only at the end of a compacted batch (the ``pos`` of a
  merged job is its last part's). Every merged job writes the key's final state, so a
  safe-mode replay of the batch from any earlier checkpoint converges.
* Keys are compared exactly (``RowJob.key()``), so ``'a'`` and ``'A'`` never merge. When
  two exact keys of one batch *fold* alike (``RowJob.keys()``: they may be one row under a
  case-insensitive collation), the buffer is cut there: everything before the cut is
  emitted before anything after it. Inside one segment, "same exact key" and "same folded
  key" then agree, which makes the result right under either collation.
"""

from __future__ import annotations

from dm_core.sync.job import RowJob


def compact(jobs: list[RowJob]) -> list[RowJob]:
    """Merge changes of the same row; see the module docstring for rules and order."""
    out: list[RowJob] = []
    seg = _Segment()
    for job in jobs:
        for part in _split(job):
            if not seg.add(part):
                out.extend(seg.drain())
                seg = _Segment()
                seg.add(part)
    out.extend(seg.drain())
    return out


def _split(job: RowJob) -> tuple[RowJob, ...]:
    if not _compactable(job) or not job.key_changed():
        return (job,)
    return (RowJob("delete", job.target, job.before, None, job.safe, job.pos),
            RowJob("insert", job.target, None, job.after, job.safe, job.pos))


def _compactable(job: RowJob) -> bool:
    if not job.target.key_is_unique:
        return False
    return not any(v is None for k in (job.key_before(), job.key_after()) if k is not None for v in k)


class _Segment:
    """A run of jobs in which no two different exact keys fold alike."""

    __slots__ = ("buffer", "slot", "folded")

    def __init__(self):
        self.buffer: list[RowJob | None] = []
        self.slot: dict[tuple, int] = {}      # exact (schema, table, key) → index in buffer
        self.folded: dict[tuple, tuple] = {}  # folded conflict key → exact identity

    def add(self, job: RowJob) -> bool:
        """Buffer or merge ``job``; False (nothing changed) if it must start a new segment."""
        if not _compactable(job):
            self.buffer.append(job)
            return True
        ident = (job.target.schema, job.target.table, job.key())
        ck = job.keys()[0]
        seen = self.folded.get(ck)
        if seen is not None and seen != ident:
            return False
        self.folded[ck] = ident
        prev_at = self.slot.get(ident)
        if prev_at is not None:
            job = _merge(self.buffer[prev_at], job)
            self.buffer[prev_at] = None
        self.slot[ident] = len(self.buffer)
        self.buffer.append(job)
        return True

    def drain(self) -> list[RowJob]:
        return [j for j in self.buffer if j is not None]


def _merge(prev: RowJob, cur: RowJob) -> RowJob:
    """The one job equivalent to ``prev`` then ``cur`` on the same key (see the table)."""
    safe = prev.safe or cur.safe
    t, pos = cur.target, cur.pos
    if cur.op == "update":
        if prev.op == "insert":
            return RowJob("insert", t, None, cur.after, safe, pos)
        if prev.op == "update":
            return RowJob("update", t, prev.before, cur.after, safe, pos)
        return RowJob("update", t, cur.before, cur.after, safe, pos)  # DELETE + UPDATE: X
    if cur.op == "insert":
        if prev.op == "delete":
            return RowJob("insert", t, None, cur.after, True, pos)
        return RowJob("insert", t, None, cur.after, safe, pos)  # INSERT/UPDATE + INSERT: X
    # delete: the original row of an UPDATE, else the DELETE's own image
    before = prev.before if prev.op == "update" else cur.before
    return RowJob("delete", t, before, None, safe, pos)
