"""Exact replay for tables without a unique key: a ledger, kept downstream in the same
transaction as the rows, of how far each upstream transaction's rows of such a table got.

Why: safe mode makes a replay harmless by the row's key (REPLACE, DELETE + REPLACE). A
target without a primary or NOT NULL unique key has none; the legacy safe-mode write of
an INSERT ("delete one identical row, insert it") leaves one copy of a distinct row, but
identical rows cannot be told apart: a replayed DELETE of one of two identical rows removes
the copy that must stay, a replayed UPDATE moves a second one. After a crash between a
batch's commit and its checkpoint the syncer replays what it had sent, so such tables ended
a copy too few or too many (tests/integration/test_sync_keyless_replay.py).

Protocol:

* Every row change of a keyless target carries ``RowJob.origin`` = (binlog file number,
  offset of its transaction's start, upstream ``schema.table``, ordinal): the ordinal counts
  the transaction's row changes of that upstream table, filtered or not, across the pieces of
  a large transaction (row_path.py), so it names the same row change in every replay.
* All keyless jobs of a batch go to one worker (causality key ``KEYLESS``), whose downstream
  transaction also upserts one ledger row per (transaction, upstream table): ``applied`` = the
  highest ordinal it wrote + 1. Rows and ledger commit or vanish together. Jobs of one
  (transaction, table) are always applied as a prefix in binlog order (rounds of a batch,
  isolate.py's one-by-one search), so ``applied`` says exactly which are downstream.
* A replayed transaction (a job in safe mode at or past the **horizon**) asks the ledger:
  jobs below ``applied`` are dropped, the rest are written plainly (INSERT, UPDATE/DELETE
  ... LIMIT 1), as the first time.
* The horizon (``keyless_exact_*`` in ``source_state``) is the start of the first
  transaction the syncer wrote outside safe mode; it names the upstream server it belongs to.
  Before it, rows of keyless tables may be downstream from another writer the ledger knows
  nothing of (the full phase's snapshot and its catch-up, what the downstream held before an
  incremental task's first start): there the legacy safe-mode write stays. It is cleared when
  another writer changes tables (a new full phase, a re-sync), when the checkpoint moves back
  (`start-task --start-time`), and when the source reads another server (positions differ).
  With `safe-mode: true` no transaction is written outside safe mode: the legacy write stays.
* The full phase's catch-up (the **handoff**): a keyless table the load read in one chunk at a
  recorded binlog position S (dm_core/full/snapshot_read.py: a consistent snapshot, its
  position in the chunk's marker) is downstream exactly as of S, and every change of it the
  syncer writes from S on goes through the ledger. So its transactions that end at or before
  S committed into what the load read and are dropped, and the others are replayed as past
  the horizon (ledger asked, the rest plainly) -- in the catch-up and in every later replay,
  until the handoff is cleared with the horizon (its flag ``keyless_handoff`` in
  ``source_state`` is set by the full phase's ``finish``). A table whose downstream rows are
  all the sync's is ``CREATED``: one the full load never read that the binlog creates (a
  daily log table made during a long load: ``created``), and a handoff table emptied by a
  TRUNCATE, DROP TABLE or CREATE OR REPLACE that ends before S (``emptied``: the statement
  runs, and its rows after it are not in the snapshot's sense "read"); both are marker rows
  written before. Tables read otherwise (the Spark JDBC path, several chunks, MyISAM, a MySQL
  upstream, an XA transaction prepared across the read: snapshot_read.py) keep legacy safe
  mode before the horizon.
* Tables the full phase read again after a rename moved rows between them during the load
  (dm_core/full/reread.py; keyless or not) stand downstream as of their snapshot's position
  S too: ``reread_gate`` drops their row changes of transactions ending at or before S, and
  ``reread_covers`` the table DDL before S that changes only such tables (their targets were
  made from definitions that had it). Loaded with the handoff, and kept when a re-sync or
  --start-time clears the handoff.
* Ledger rows below the checkpoint are pruned at the end of a window; rows at or past a new
  horizon (left over from before it was cleared) are dropped before it is recorded; a new full
  phase or the task's removal drops the source's rows. A checkpoint moved back by hand past
  pruned rows replays their transactions plainly: don't (`start-task --start-time` is the way).
"""

from __future__ import annotations

import dataclasses
import logging
import re

from dm_core.classify import errno_of
from dm_core.db import ensure_table, qt
from dm_core.full import chunk_writer
from dm_core.position import Position
from dm_core.sync.dml import Stmt

log = logging.getLogger("shardflow.sync")

LEDGER_TABLE = "shardflow_sync_keyless"
KEYLESS = ("\0keyless",)   # the causality key every keyless job shares: one worker per batch
_MISSING = (1146, 1049)   # no such table, no such database: the ledger was never created (or is gone)

# state fields (dm_core/state/schema.py) that hold the horizon
HORIZON_FIELDS = ("keyless_exact_file", "keyless_exact_pos", "keyless_exact_server")
CLEARED = dict.fromkeys((*HORIZON_FIELDS, "keyless_handoff"))

# what a replayed keyless job is (``verdict``)
LEGACY, IN_SNAPSHOT, EXACT = "legacy", "in snapshot", "exact"
CREATED = ("created",)   # a handoff table whose rows downstream are all the sync's (``created``, ``emptied``)
_OR_REPLACE = re.compile(r"\s*(?:/\*.*?\*/\s*)*CREATE\s+OR\s+REPLACE\b", re.I | re.S)


def empties(kind: str, sql: str) -> bool:
    """Whether a DDL leaves its table empty or new (its rows after it are all the sync's).

    >>> [empties(k, s) for k, s in (("truncate table", "TRUNCATE t"), ("drop table", "DROP TABLE t"),
    ...     ("create table", "/* x */ create or replace table t (a int)"), ("create table", "CREATE TABLE t (a int)"),
    ...     ("alter table", "ALTER TABLE t ADD b int"))]
    [True, True, True, False, False]
    """
    return kind in ("truncate table", "drop table") or (kind == "create table" and bool(_OR_REPLACE.match(sql)))


def ensure(conn, meta_schema: str) -> None:
    """The meta schema and the ledger table downstream (idempotent)."""
    ensure_table(conn, meta_schema, LEDGER_TABLE,
                 "(task varchar(128) NOT NULL, source_id varchar(128) NOT NULL, file_seq bigint NOT NULL, "
                 "pos bigint NOT NULL, up_table varchar(400) NOT NULL, applied int NOT NULL, "
                 "PRIMARY KEY (task, source_id, file_seq, pos, up_table)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")


def forget(conn, meta_schema: str, task: str, source_id: str | None = None) -> None:
    """Drop the ledger rows of a task (one source, or all); a missing table is fine."""
    try:
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM {qt(meta_schema, LEDGER_TABLE)} WHERE task = %s AND (%s IS NULL OR source_id = %s)",
                        (task, source_id, source_id))
    except Exception as e:  # noqa: BLE001 - the table was never created: nothing to forget
        if errno_of(e) not in _MISSING:
            raise


def horizon_of(st: dict) -> tuple | None:
    """The horizon's key in a ``source_state`` row, None when unset."""
    return Position(st["keyless_exact_file"], int(st["keyless_exact_pos"])).key() if st.get("keyless_exact_file") else None


def verdict(origin: tuple, horizon: tuple | None, handoff: dict | None, end: tuple | None = None) -> str:
    """What a keyless row change in safe mode is: ``IN_SNAPSHOT`` (the full load read it:
    dropped), ``EXACT`` (the ledger says whether it is downstream) or ``LEGACY`` (safe mode's
    delete-one-then-insert). ``handoff``: {upstream table: key of the position it was read at,
    or ``CREATED``}; ``end``: the key of the transaction's end. A transaction is in a snapshot
    when it committed before it, i.e. ends at or before its position (its start says less: the
    first transaction of a binlog file starts, as the reader sees it, at offset 4).

    >>> h = {"u.k": (5, 300), "u.new": CREATED}
    >>> [verdict((5, 200, "u.k", 0), None, h, (5, end)) for end in (299, 300, 301)]
    ['in snapshot', 'in snapshot', 'exact']
    >>> verdict((6, 4, "u.k", 0), None, {"u.k": (6, 256)}, (6, 900))   # the new file's first, after a rotation
    'exact'
    >>> verdict((5, 300, "u.k", 0, (5, 350)), None, h, (5, 300))   # a piece starting at the position
    'exact'
    >>> verdict((5, 100, "u.new", 0), None, h, (5, 200))
    'exact'
    >>> verdict((5, 200, "u.other", 0), None, h), verdict((5, 200, "u.other", 0), (5, 100), h)
    ('legacy', 'exact')
    """
    start = (origin[0], origin[1])
    if len(origin) > 4:   # a piece of a large transaction (row_path.py): its end is not known yet
        end = origin[4]
    snap = handoff.get(origin[2]) if handoff else None
    if snap is CREATED:
        return EXACT
    if snap is not None:
        return IN_SNAPSHOT if (end or start) <= snap else EXACT
    return EXACT if horizon is not None and start >= horizon else LEGACY


def _end(job) -> tuple | None:
    return job.pos.key() if job.pos is not None else None


def replay_plan(jobs: list, horizon: tuple | None, applied: dict, handoff: dict | None = None) -> list:
    """``jobs`` as a replay writes them: a keyless job in safe mode that is ``EXACT``
    (``verdict``) and whose ordinal is below its transaction's ``applied`` (``(file_seq, pos,
    up_table) -> n``) is downstream already and dropped; the others of such jobs are written
    plainly (not safe); ``IN_SNAPSHOT`` jobs are dropped. Every other job passes as it is.

    >>> from dm_core.sync.job import RowJob
    >>> from dm_core.target import TargetTable
    >>> t = TargetTable("d", "k", ("a",), ("a",), False)
    >>> js = [RowJob("insert", t, None, {"a": 1}, True, origin=(3, 100, "u.k", i)) for i in range(3)]
    >>> [(j.origin[3], j.safe) for j in replay_plan(js, (3, 4), {(3, 100, "u.k"): 2})]
    [(2, False)]
    >>> [(j.origin[3], j.safe) for j in replay_plan(js, (3, 200), {(3, 100, "u.k"): 2})]  # before the horizon
    [(0, True), (1, True), (2, True)]
    """
    if horizon is None and handoff is None:
        return jobs
    out = []
    for j in jobs:
        o = j.origin
        v = LEGACY if o is None or not j.safe else verdict(o, horizon, handoff, _end(j))
        if v == LEGACY:
            out.append(j)
        elif v == EXACT and o[3] >= applied.get(o[:3], 0):
            out.append(dataclasses.replace(j, safe=False))
    return out


class KeylessLedger:
    """One source's ledger: the horizon (reader thread: ``load``, ``begin``) and the ledger
    rows (apply thread: ``decide``, ``marks``, ``persist``, ``prune``, on its own connection)."""

    def __init__(self, task_name: str, source_id: str, meta_schema: str, connect):
        self.task, self.source_id, self.meta_schema = task_name, source_id, meta_schema
        self._connect = connect          # a downstream connection, autocommit (db.connect_native)
        self._conn = None
        self._ensured = False
        self.horizon: tuple | None = None
        self._unsaved: Position | None = None
        self.server: str | None = None
        self.handoff: dict | None = None        # {upstream table: key of the position the load read it at}
        self._handoff_of: tuple | None = None   # (high watermark, handoff on) the positions were read for
        self._marked: set[str] = set()          # upstream tables the full load (or ``created``) marked
        self.reread: dict[str, tuple] = {}      # upstream table read again after renames -> its position's key

    # ---- the horizon (reader thread) ---------------------------------------------------
    def load(self, st: dict, server: str | None, store) -> None:
        """At a window's open: the recorded horizon, cleared when it belongs to another upstream
        server than ``server`` (the old server's ledger rows at or past the next horizon are
        dropped before it is recorded: ``persist``)."""
        self.server, self._unsaved = server, None
        self.horizon = horizon_of(st)
        was = st.get("keyless_exact_server") if self.horizon is not None else None
        if st.get("keyless_handoff") and not was:
            was = st.get("binlog_server")   # the handoff's positions are the checkpoint's server's
        if server and was and was != server:
            store.update_source_state(self.task, self.source_id, **CLEARED)
            log.info("source %s: the keyless tables' ledger belongs to another server (%s); replays of keyless "
                     "tables are written in safe mode until the source writes past safe mode again",
                     self.source_id, was)
            self.horizon = None
            st = {**st, **CLEARED}
        self._load_handoff(st)

    def _load_handoff(self, st: dict) -> None:
        """The handoff's positions, read once per high watermark (on a connection of its own:
        this is the reader thread)."""
        if not st.get("high_file"):
            self.handoff = self._handoff_of = None
            self.reread = {}
            return
        high = Position(st["high_file"], int(st["high_pos"])).key()
        handoff = bool(st.get("keyless_handoff"))
        if self._handoff_of == (high, handoff):
            return
        conn = self._connect()
        try:
            # the tables read again stand at their positions whatever clears the handoff (a re-sync,
            # --start-time): a replay from before them must never write their older rows
            self.reread = {t: Position(*fp).key()
                           for t, fp in chunk_writer.rereads_of(conn, self.meta_schema, self.task, self.source_id).items()}
            got = chunk_writer.snapshots_of(conn, self.meta_schema, self.task, self.source_id) if handoff else None
        finally:
            conn.close()
        if self.reread:
            log.info("source %s: %d table(s) the full phase read again after renames catch up from their own "
                     "positions", self.source_id, len(self.reread))
        if got is None:
            self.handoff, self._handoff_of = None, (high, handoff)
            return
        self.handoff = {t: CREATED if fp[0] == chunk_writer.CREATED_MARK else Position(*fp).key()
                        for t, fp in got.items() if fp is not None}
        self._marked = set(got)
        self._handoff_of = (high, handoff)
        if self.handoff:
            log.info("source %s: %d keyless table(s) read by the full load at a known binlog position catch up "
                     "exactly from it", self.source_id, len(self.handoff))

    def reread_gate(self, end: Position):
        """``skip_table((schema, table))`` for the rows of a transaction ending at ``end``: True
        for a table read again at a position at or after it; None when no table is."""
        if not self.reread:
            return None
        k = end.key()
        return lambda t: (at := self.reread.get(f"{t[0]}.{t[1]}")) is not None and k <= at

    def reread_covers(self, kind: str, tables, end: Position, allowed=None) -> bool:
        """Whether a table DDL ending at ``end`` changes only tables read again at or after it
        (``tables``: upstream, the one it changes first, as route_ddl gives them; ``allowed``:
        the block-allow list's test): their targets were made from definitions that already
        had it (dm_core/full/reread.py makes sure no DDL named them between definition and
        snapshot), so it is in effect."""
        if not self.reread or not tables:
            return False
        changed = tables if kind in ("drop table", "rename table", "exchange table partition") else tables[:1]
        changed = [t for t in changed if allowed is None or allowed(*t)]
        k = end.key()
        return bool(changed) and all((at := self.reread.get(f"{s}.{t}")) is not None and k <= at for s, t in changed)

    def created(self, start: Position, tables) -> None:
        """A CREATE TABLE at ``start`` (reader thread) of upstream tables the full load never
        read: every row of theirs downstream is the sync's from ``start`` on, so they are
        handoff tables from there (recorded downstream first, on a connection of its own).
        Only while the handoff is on and before the horizon: past it every replay is exact."""
        if self.handoff is None or self.horizon is not None:
            return
        self._mark_created([f"{s}.{t}" for s, t in tables if t and f"{s}.{t}" not in self._marked], start)

    def _mark_created(self, names: list[str], at: Position) -> None:
        if not names:
            return
        conn = self._connect()
        try:
            for name in names:
                chunk_writer.record_created(conn, self.meta_schema, self.task, self.source_id, name, at.file, at.pos)
        finally:
            conn.close()
        for name in names:
            self._marked.add(name)
            self.handoff[name] = CREATED

    def emptied(self, end: Position, tables) -> None:
        """A TRUNCATE, DROP TABLE or CREATE OR REPLACE TABLE ending at ``end`` (reader thread,
        before it runs downstream) of handoff tables the load read after it: running it empties
        the loaded rows, so from here every row of theirs downstream is the sync's -- they turn
        ``CREATED`` (recorded downstream first: a replay from past it must not drop their rows
        as in the snapshot)."""
        h = self.handoff
        names = [f"{s}.{t}" for s, t in tables if h and h.get(f"{s}.{t}") not in (None, CREATED)
                 and end.key() <= h[f"{s}.{t}"]]
        self._mark_created(names, end)

    def begin(self, start: Position) -> None:
        """A transaction written outside safe mode: the horizon, if there is none yet."""
        if self.horizon is None and self._unsaved is None:
            self._unsaved = start

    # ---- the apply thread ---------------------------------------------------------------
    def persist(self, store) -> None:
        """Before a batch is sent: a horizon found since is recorded (before anything past it
        could be replayed by it; a crash before this only leaves replays in legacy safe mode)."""
        h = self._unsaved
        if h is not None:
            self._drop_from(h)
            store.update_source_state(self.task, self.source_id, keyless_exact_file=h.file, keyless_exact_pos=h.pos,
                                      keyless_exact_server=self.server)
            self.horizon, self._unsaved = h.key(), None

    def decide(self, jobs: list) -> list:
        """``jobs`` with what the ledger says is downstream already dropped (``replay_plan``);
        the ledger table is created before the first keyless job is sent."""
        if not self._ensured:
            if all(j.origin is None for j in jobs):
                return jobs
            ensure(self._db(), self.meta_schema)
            self._ensured = True
        h, ho = self.horizon, self.handoff
        if h is None and ho is None:
            return jobs
        verdicts = {id(j): verdict(j.origin, h, ho, _end(j)) for j in jobs if j.origin is not None and j.safe}
        if all(v == LEGACY for v in verdicts.values()):
            return jobs
        wanted = {j.origin[:3] for j in jobs if verdicts.get(id(j)) == EXACT}
        out = replay_plan(jobs, h, self._applied(wanted) if wanted else {}, ho)
        dropped = sum(v == IN_SNAPSHOT for v in verdicts.values())
        if dropped:
            log.info("source %s: %d change(s) of keyless tables are in what the full load read already: not written "
                     "again", self.source_id, dropped)
        return out

    def marks(self, jobs: list) -> list[Stmt]:
        """The ledger upsert for the keyless jobs among ``jobs`` (one worker's transaction)."""
        top: dict[tuple, int] = {}
        for j in jobs:
            o = j.origin
            if o is not None and top.get(o[:3], -1) < o[3]:
                top[o[:3]] = o[3]
        if not top:
            return []
        head = (f"INSERT INTO {qt(self.meta_schema, LEDGER_TABLE)} (task, source_id, file_seq, pos, up_table, applied) "
                "VALUES ").replace("%", "%%")
        tail = " ON DUPLICATE KEY UPDATE applied = GREATEST(applied, VALUES(applied))"
        row = "(%s, %s, %s, %s, %s, %s)"
        return [Stmt(head + row + tail, (self.task, self.source_id, seq, pos, table, n + 1), (head, row, tail))
                for (seq, pos, table), n in top.items()]

    def prune(self, checkpoint: Position) -> None:
        """Ledger rows of transactions before ``checkpoint``: never replayed again. (A shard DDL
        lock's rewind reads further back, but only rows of the tables it held, which were never
        written and so have no ledger rows; the horizon stays, so they are written plainly.)"""
        if self._ensured and not self._delete(checkpoint, below=True):
            self._ensured = False   # dropped downstream meanwhile: created again when next needed

    def _drop_from(self, h: Position) -> None:
        """Ledger rows at or past a new horizon can only be left over from before it was cleared
        (another server's positions, a re-sync, a rewind by time): nothing past it is written yet."""
        self._delete(h, below=False)

    def _delete(self, at: Position, *, below: bool) -> bool:
        """The source's ledger rows before ``at`` (``below``), else at or past it; False when
        there is no ledger table."""
        seq, pos = at.key()
        where = "file_seq < %s OR (file_seq = %s AND pos < %s)" if below else \
            "file_seq > %s OR (file_seq = %s AND pos >= %s)"
        try:
            with self._db().cursor() as cur:
                cur.execute(f"DELETE FROM {qt(self.meta_schema, LEDGER_TABLE)} WHERE task = %s AND source_id = %s "
                            f"AND ({where})", (self.task, self.source_id, seq, seq, pos))
            return True
        except Exception as e:  # noqa: BLE001 - no ledger table (yet, or any more)
            if errno_of(e) not in _MISSING:
                raise
            return False

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def _applied(self, wanted: set) -> dict:
        out: dict = {}
        items = sorted(wanted)
        for i in range(0, len(items), 300):
            part = items[i:i + 300]
            cond = " OR ".join(["(file_seq = %s AND pos = %s AND up_table = %s)"] * len(part))
            try:
                with self._db().cursor() as cur:
                    cur.execute(f"SELECT file_seq, pos, up_table, applied FROM {qt(self.meta_schema, LEDGER_TABLE)} "
                                f"WHERE task = %s AND source_id = %s AND ({cond})",
                                (self.task, self.source_id, *[v for k in part for v in k]))
                    for seq, pos, table, n in cur.fetchall():
                        out[(int(seq), int(pos), table if isinstance(table, str) else table.decode())] = int(n)
            except Exception as e:  # noqa: BLE001 - no ledger table: nothing was ever applied with it
                if errno_of(e) not in _MISSING:
                    raise
        if out:
            log.info("source %s: replay: %d of %d keyless (transaction, table) pairs over %d transactions are "
                     "downstream already by the ledger", self.source_id, len(out), len(items), len({k[:2] for k in items}))
        return out

    def _db(self):
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

