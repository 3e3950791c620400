"""Compactor (``syncers.compact``): several changes of one row inside a batch become one.

Rules, for two jobs on the same table and the same key, the earlier one first (DM's table;
"X" marks sequences a consistent upstream cannot produce, where the later job simply wins):

    INSERT + UPDATE → INSERT of the new row
    UPDATE + UPDATE → UPDATE from the first before image to the last after image
    INSERT + DELETE → DELETE
    UPDATE + DELETE → DELETE of the original row
    DELETE + INSERT → INSERT in safe mode, i.e. REPLACE (the DM docs say "UPDATE": REPLACE
                      is the update that also works when the row is already gone)
    DELETE + DELETE, INSERT + INSERT, UPDATE + INSERT, DELETE + UPDATE → X (the later job)

INSERT + DELETE stays a DELETE rather than vanishing: the row may exist downstream already
(a safe-mode replay, or a DELETE + INSERT folded into that INSERT), and deleting a missing
row is harmless.

Steps:
1. An UPDATE that changes the key is split into DELETE (old row) + INSERT (new row), both
   with the update's ``safe`` and ``pos``; from here on every job addresses one key.
2. Jobs of tables without a unique key (``key_is_unique`` False, the key is "all columns")
   and jobs with a NULL in their key pass through untouched, in place: identical rows
   cannot be told apart, so there is nothing safe to merge. So do the jobs of a table with
   a unique index besides its key (``only_unique_key`` False): there, rows of two keys
   interact, and step 3's move would reorder them. An UPDATE moving u=5 from row 1 to 6,
   an INSERT of row 2 with u=5, then another UPDATE of row 1 would compact to the INSERT
   first: a duplicate of u=5 downstream (1062), or, in safe mode, a REPLACE that deletes
   row 1.
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
* Keys are compared exactly (``RowJob.key()``), so ``'a'`` and ``'A'`` never merge: under a
  binary collation they are two rows. Under a case-insensitive one they are one row whose
  stored spelling changed, which only a key-changing UPDATE can do; split, it ends one
  spelling's run with a DELETE and starts the next one's. So every spelling but the row's
  last compacts to a DELETE placed before the last spelling's job, and a last spelling with
  an earlier run of its own becomes DELETE + INSERT = REPLACE. The result is right under
  either collation (the property tests in tests/unit/test_sync_merger.py check both).
"""

from __future__ import annotations

from dm_core.sync.job import RowJob


def compact(jobs: list[RowJob]) -> list[RowJob]:
    """Merge changes of the same row; see the module docstring for rules and order.

    >>> from dm_core.target import TargetTable
    >>> t = TargetTable("db", "t", ("id", "v"), ("id",), True, only_unique_key=True)
    >>> jobs = [RowJob("delete", t, {"id": 1, "v": "a"}, None, False),
    ...         RowJob("insert", t, None, {"id": 1, "v": "b"}, False),
    ...         RowJob("update", t, {"id": 1, "v": "b"}, {"id": 2, "v": "b"}, False)]
    >>> [(j.op, j.key(), j.safe) for j in compact(jobs)]
    [('delete', (1,), True), ('insert', (2,), False)]
    """
    buffer: list[RowJob | None] = []
    slot: dict[tuple, int] = {}  # (schema, table, exact key) → index in buffer
    for job in jobs:
        if not _compactable(job):
            buffer.append(job)
            continue
        for part in _split(job):  # the parts of a compactable job are compactable
            ident = (part.target.schema, part.target.table, part.key())
            prev_at = slot.get(ident)
            if prev_at is not None:
                part = _merge(buffer[prev_at], part)
                buffer[prev_at] = None
            slot[ident] = len(buffer)
            buffer.append(part)
    return [j for j in buffer if j is not None]


def _split(job: RowJob) -> tuple[RowJob, ...]:
    if not job.key_changed():
        return (job,)
    return (RowJob("delete", job.target, job.before, None, job.safe, job.pos),
            RowJob("insert", job.target, None, job.after, job.safe, job.pos))


def _compactable(job: RowJob) -> bool:
    if not job.target.rows_apart:
        return False
    kb, ka = job.key_before(), job.key_after()
    return (kb is None or None not in kb) and (ka is None or None not in ka)


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
