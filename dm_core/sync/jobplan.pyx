# cython: language_level=3, boundscheck=False, wraparound=False
"""A batch's row jobs compacted, spread over the workers, regrouped and merged in C: the compiled
twin of ``compactor.compact``, ``causality.Causality``'s loop in ``workers.WorkerPool.apply``,
``merger.regroup`` and ``merger.merge`` (those modules state the rules; this one follows them,
and calls ``compactor._split`` / ``_merge`` and ``merger._flush`` for the jobs they build).

Why: after the binlog is decoded, these four stages cost 2-3 us a job each in Python, a quarter to
a third of the sync's CPU in the process whose GIL bounds the incremental phase (docs/benchmarks.md,
"incremental"): key tuples built and folded per job, method calls, a sort key per job.

The common case it takes: every job's table keeps rows apart (``TargetTable.rows_apart``: a unique
key and no other unique index), has no foreign-key parents, is keyed by one column, the job is not a
keyless table's (``origin`` None), and every key value is an ``int``. There a row's exact key, its
folded conflict key and its compaction identity are the same int, so no tuple, fold or method call
is needed per job. Each entry point returns None as soon as a job is outside that case, and the
caller runs the Python stage on the whole input instead: the output is always the Python stage's,
job for job and worker for worker (``tests/unit/test_sync_jobplan.py`` holds the two to each other).
"""

from dm_core.sync import compactor as _compactor
from dm_core.sync import merger as _merger

cdef str INSERT = "insert", UPDATE = "update", DELETE = "delete"
cdef str K_INSERT = "insert", K_REPLACE = "replace", K_UPSERT = "upsert", K_DELETE = "delete"
cdef object _NO = object()   # a key outside the case


cdef class _Table:
    """What the stages need of one TargetTable object: its key column, and the identities under
    which compaction ((schema, table), exact) and causality (``ident``, folded) group its keys."""
    cdef readonly object col, name, ident


cdef class _Tables:
    # id(TargetTable) → _Table, or None when the table is outside the case; the jobs hold the tables
    # alive for as long as one call lasts. The last table asked for is answered without the dict:
    # a batch's jobs come in runs of one table.
    cdef dict by_id
    cdef object last_t
    cdef _Table last

    def __cinit__(self):
        self.by_id = {}

    cdef _Table get(self, object t):
        if t is self.last_t:
            return self.last
        self.last = self._get(t)
        self.last_t = t
        return self.last

    cdef _Table _get(self, object t):
        cdef _Table info
        got = self.by_id.get(id(t), _NO)
        if got is not _NO:
            return got
        key = t.key
        ui = t.unique_indexes
        if (not t.key_is_unique or not t.only_unique_key or t.parents or len(key) != 1
                or (ui and (len(ui) != 1 or ui[0] != key))):
            self.by_id[id(t)] = None
            return None
        info = _Table()
        info.col = key[0]
        info.name = (t.schema, t.table)
        info.ident = t.ident
        self.by_id[id(t)] = info
        return info

    cdef tuple keys_of(self, object job):
        """(the job's table, its before key, its after key), or None when it is outside the case."""
        info = self.get(job.target)
        if info is None:
            return None
        ks = _keys(job, info)
        return None if ks is None else (info, ks[0], ks[1])


cdef inline object _kv(object row, object col):
    """The row's key value, or _NO when it is not an int (None for a missing image)."""
    if row is None:
        return None
    v = (<dict>row).get(col) if type(row) is dict else row.get(col)
    if type(v) is not int:
        return _NO
    return v


cdef inline tuple _keys(object job, _Table info):
    """The job's (before key, after key), or None when it is outside the case."""
    if job.origin is not None:
        return None
    b = _kv(job.before, info.col)
    a = _kv(job.after, info.col)
    if b is _NO or a is _NO or (b is None and a is None):
        return None
    return (b, a)


def compact(list jobs):
    """``compactor.compact(jobs)``, or None when a job is outside the common case."""
    cdef _Tables tables = _Tables()
    cdef _Table info
    cdef dict slots_by_name = {}
    cdef dict slots
    cdef list buffer = []
    cdef object kb = None, ka = None
    for job in jobs:
        t = job.target
        got = tables.keys_of(job)
        if got is None:
            return None
        info, kb, ka = got
        slots = slots_by_name.get(info.name)
        if slots is None:
            slots = slots_by_name[info.name] = {}
        if job.op == UPDATE and kb != ka:   # the key moves: DELETE of the old row + INSERT of the new
            gone, made = _compactor._split(job)
            _place(buffer, slots, gone, kb)
            _place(buffer, slots, made, ka)
        else:
            _place(buffer, slots, job, kb if kb is not None else ka)
    return [j for j in buffer if j is not None]


cdef inline void _place(list buffer, dict slots, object part, object key):
    prev_at = slots.get(key)
    if prev_at is not None:
        part = _compactor._merge(buffer[<Py_ssize_t>prev_at], part)   # the rule table, per merge only
        buffer[<Py_ssize_t>prev_at] = None
    slots[key] = len(buffer)
    buffer.append(part)


def spread(list jobs, int n):
    """The causality loop of ``WorkerPool.apply`` for ``n`` > 1 workers: a list of rounds, each a
    list of ``n`` job queues, a round ending where a job's keys sat on two workers (the caller
    runs each round's queues to the end before the next); None when a job is outside the case."""
    cdef _Tables tables = _Tables()
    cdef _Table info
    cdef dict owners = {}    # ident → {key: worker}
    cdef dict own
    cdef list rounds = []
    cdef list queues = [[] for _ in range(n)]
    cdef object kb = None, ka = None, w
    cdef Py_ssize_t owner
    for job in jobs:
        got = tables.keys_of(job)
        if got is None:
            return None
        info, kb, ka = got
        own = owners.get(info.ident)
        if own is None:
            own = owners[info.ident] = {}
        owner = _owner(own, kb, ka)
        if owner == -2:   # a conflict: what is queued runs first, then the job is placed afresh
            rounds.append(queues)
            queues = [[] for _ in range(n)]
            for d in owners.values():
                (<dict>d).clear()
            owner = -1
        if owner == -1:   # Causality.worker_for: a fresh key's worker by its hash
            owner = hash(kb if kb is not None else ka) % n
        if kb is not None:
            own[kb] = owner
        if ka is not None:
            own[ka] = owner
        (<list>queues[owner]).append(job)
    rounds.append(queues)
    return rounds


cdef inline Py_ssize_t _owner(dict own, object kb, object ka):
    """The worker holding the job's known keys, -1 if none is known, -2 if two workers do."""
    cdef Py_ssize_t owner = -1
    if kb is not None:
        w = own.get(kb)
        if w is not None:
            owner = w
    if ka is not None:
        w = own.get(ka)
        if w is not None and <Py_ssize_t>w != owner:
            if owner != -1:
                return -2
            owner = w
    return owner


def regroup(list jobs):
    """``merger.regroup(jobs)``, or None when a job is outside the common case."""
    cdef _Tables tables = _Tables()
    cdef _Table info
    cdef list out = []
    cdef list seg = []
    cdef dict seen = {}      # ident → set of keys in the open segment
    cdef set s
    cdef object kb = None, ka = None
    for job in jobs:
        got = tables.keys_of(job)
        if got is None:
            return None
        info, kb, ka = got
        op = job.op
        if op != INSERT and op != UPDATE and op != DELETE:
            return None
        s = seen.get(info.ident)
        if s is None:
            s = seen[info.ident] = set()
        if (kb is not None and kb in s) or (ka is not None and ka in s):
            _close(seg, out, tables)
            for d in seen.values():
                (<set>d).clear()
        if kb is not None:
            s.add(kb)
        if ka is not None:
            s.add(ka)
        seg.append(job)
    _close(seg, out, tables)
    return out


cdef void _close(list seg, list out, _Tables tables):
    """A segment in the order of ``sorted(seg, key=(op order, schema, table))``, which is stable:
    DELETEs, UPDATEs, INSERTs, each by table name, binlog order within."""
    cdef _Table info
    cdef list by_order
    cdef int i
    if len(seg) < 2:
        out.extend(seg)
        seg.clear()
        return
    by_order = [{}, {}, {}]
    for job in seg:
        op = job.op
        i = 0 if op == DELETE else (1 if op == UPDATE else 2)
        info = tables.get(job.target)
        run = (<dict>by_order[i]).get(info.name)
        if run is None:
            (<dict>by_order[i])[info.name] = [job]
        else:
            (<list>run).append(job)
    for i in range(3):
        d = <dict>by_order[i]
        if len(d) == 1:
            for run in d.values():
                out.extend(<list>run)
        else:
            for name in sorted(d):
                out.extend(<list>d[name])
    seg.clear()


def merge(list jobs, int max_rows=_merger.DEFAULT_MAX_ROWS):
    """``merger.merge(jobs, multiple_rows=True, max_rows=max_rows)``, or None when a job is outside
    the common case."""
    cdef _Tables tables = _Tables()
    cdef _Table info
    cdef list out = []
    cdef list run = []
    cdef object kb = None, ka = None
    run_kind = None
    run_t = None
    flush = _merger._flush
    builder = _merger._builder
    for job in jobs:
        t = job.target
        got = tables.keys_of(job)
        if got is None:
            return None
        info, kb, ka = got
        op = job.op
        if op == INSERT:
            kind = K_REPLACE if job.safe else K_INSERT
        elif op == DELETE:
            kind = K_DELETE
        elif op == UPDATE and not job.safe and kb == ka:
            kind = K_UPSERT
        else:
            kind = None
        if run and (kind is None or kind is not run_kind or (t is not run_t and t != run_t)):
            out.extend(flush(run_kind, run, max_rows))
            run = []
        if kind is None:
            out.extend(builder(t).build(op, job.before, job.after, job.safe))
            continue
        if not run:
            run_t = t
        run.append(job)
        run_kind = kind
    if run:
        out.extend(flush(run_kind, run, max_rows))
    return out
