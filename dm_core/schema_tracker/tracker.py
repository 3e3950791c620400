"""``SchemaTracker``: the tracked tables of one (task, source), versioned by binlog position
(the package docstring says why and how)."""

from __future__ import annotations

import bisect
import logging

from dm_core.errors import ErrorCode
from dm_core.schema_tracker import store as _store
from dm_core.schema_tracker.evolve import STALE, evolve
from dm_core.schema_tracker.table import TrackedTable, read_upstream

log = logging.getLogger("shardflow.sync")

_NONE = object()   # no version at or before the position


def _encode(state) -> dict | None:
    return {"stale": True} if state == STALE else None if state is None else state.to_dict()


def _decode(d):
    return None if d is None else STALE if d.get("stale") else TrackedTable.from_dict(d)


class SchemaTracker:
    """Versions of each upstream table by binlog position (``Position.key()``); ``upstream`` (an
    Endpoint) is where a table is read when it has no usable version."""

    def __init__(self, task: str, source_id: str, store, upstream=None):
        self.task, self.source_id, self.store, self.upstream = task, source_id, store, upstream
        self._versions: dict[tuple[str, str], tuple[list, list]] | None = None  # (keys, states)
        self._schema_charsets: dict[str, str | None] = {}
        self._stamp = None   # the store's stamp when the versions were read (``refresh``)

    def refresh(self) -> None:
        """Before a window: read the versions again if another process (``dmctl binlog-schema``)
        changed them since they were read; one small query."""
        now = _store.stamp(self.store, self.task, self.source_id)
        if now != self._stamp:
            self._versions = None
            self._schema_charsets.clear()
            self._stamp = now

    # ---- versions ----------------------------------------------------------------------------
    def _all(self) -> dict:
        if self._versions is None:
            self._versions = {}
            for s, t, key, _file, d in _store.load(self.store, self.task, self.source_id):
                keys, states = self._versions.setdefault((s, t), ([], []))
                keys.append(key)
                states.append(_decode(d))
        return self._versions

    def at(self, schema: str, table: str, key: tuple, *, before: bool = False):
        """The table at position ``key`` (strictly before it with ``before``): a TrackedTable,
        None (gone), STALE, or ``_NONE`` (never tracked up to there)."""
        got = self._all().get((schema, table))
        if got is None:
            return _NONE
        keys, states = got
        i = (bisect.bisect_left if before else bisect.bisect_right)(keys, key)
        return states[i - 1] if i else _NONE

    def _set(self, changes: dict, key: tuple, file: str) -> None:
        rows = []
        for (s, t), state in changes.items():
            keys, states = self._all().setdefault((s, t), ([], []))
            i = bisect.bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                states[i] = state
            else:
                keys.insert(i, key)
                states.insert(i, state)
            rows.append((s, t, key, file, _encode(state)))
        if rows:
            _store.put(self.store, self.task, self.source_id, rows)
            self._stamp = None   # its own writes change the stamp too: read once more, then settled

    def tables(self, key: tuple | None = None) -> dict[tuple[str, str], object]:
        """Every tracked table's state at ``key`` (the newest without one)."""
        out = {}
        for st, (keys, states) in self._all().items():
            i = len(keys) if key is None else bisect.bisect_right(keys, key)
            if i:
                out[st] = states[i - 1]
        return out

    # ---- the binlog moves it forward ---------------------------------------------------------
    def on_ddl(self, sql: str, schema: str | None, key: tuple, file: str, sql_mode: int | None = None) -> None:
        """The DDL ending at ``key``: the tables it changes get a version there. ``sql_mode``: the
        writing session's bitmap, for how its text reads (double-quoted names, literal backslashes)."""
        reading = reading_modes(sql_mode)
        if reading:
            from dm_core.ddl.text import default_reading

            sql = default_reading(sql, reading)
        view = _View(self, key)
        try:
            changes = evolve(sql, schema, view)
        except Exception as e:   # a statement the tracker cannot read: what it names is read again later
            log.warning("source %s: the schema tracker cannot follow `%s` (%s): the tables it names are read "
                        "from the upstream when their rows next come", self.source_id, sql[:300], e)
            from dm_core.ddl.parsed import parse_ddl
            try:
                changes = {t: STALE for t in parse_ddl(sql, schema).tables if view.get(*t) is not None}
            except Exception:
                changes = {}
        changes = {t: s for t, s in changes.items() if s != view.get(*t)}
        self._set(changes, key, file)

    def for_rows(self, td, key: tuple, file: str) -> TrackedTable | None:
        """The tracked table that decodes rows of the TABLE_MAP ``td`` (no names logged) at
        ``key``: its version there, or the upstream's table read now when it has none (or a
        stale one); refused when it does not fit the TABLE_MAP (SCHEMA_TRACKER_MISMATCH names
        both). A version that does not fit is never swapped for the upstream's table of now by
        itself: where both have the same types, that one may name other columns (a later
        RENAME), and values would land in the wrong columns. None: rows from before the full
        phase read the table (``seed_full_phase``), passed over."""
        state = self.at(td.schema, td.table, key)
        if state is _NONE:
            first = self._all().get((td.schema, td.table))
            if first is not None and isinstance(first[1][0], TrackedTable) and first[1][0].origin == FULL_PHASE_SEED:
                return None   # before the full phase read the table: its chunks hold these rows
        if isinstance(state, TrackedTable):
            why = state.misfit(td)
            if why is None:
                return state
            raise self._mismatch(td, state, why, file, key)
        fresh = self._read(td.schema, td.table)
        if fresh is None:
            raise ErrorCode.SCHEMA_TRACKER_MISMATCH.error(
                f"source {self.source_id}: rows of `{td.schema}`.`{td.table}` at ({file}, {key[1]}) carry no column "
                "names, the schema tracker has no version of the table there and the upstream no longer has it")
        why = fresh.misfit(td)
        if why is not None:
            raise self._mismatch(td, fresh, why, file, key)
        self._set({(td.schema, td.table): fresh}, key, file)
        return fresh

    def check_names(self, td, key: tuple, file: str) -> None:
        """Rows that carry their names: a tracked version of the table must name the same columns."""
        state = self.at(td.schema, td.table, key)
        if not isinstance(state, TrackedTable):
            return
        logged = [c.name.lower() for c in td.columns]
        if logged != [c.name.lower() for c in state.columns]:
            raise self._mismatch(td, state, f"the binlog names the columns {', '.join(c.name for c in td.columns)}",
                                 file, key)

    def _mismatch(self, td, state: TrackedTable, why: str, file: str, key: tuple):
        return ErrorCode.SCHEMA_TRACKER_MISMATCH.error(
            f"source {self.source_id}: the schema tracker's `{td.schema}`.`{td.table}` ({state.origin or 'tracked'}: "
            f"{state.describe()}) does not fit its rows at ({file}, {key[1]}): {why}")

    def _read(self, schema: str, table: str) -> TrackedTable | None:
        if self.upstream is None:
            return None
        from dm_core.db import connect

        conn = connect(self.upstream)
        try:
            return read_upstream(conn, schema, table)
        finally:
            conn.close()

    def schema_charset(self, schema: str) -> str | None:
        if schema not in self._schema_charsets:
            cs = None
            if self.upstream is not None:
                from dm_core.db import as_str, connect

                conn = connect(self.upstream)
                try:
                    with conn.cursor() as cur:
                        cur.execute("SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA "
                                    "WHERE SCHEMA_NAME = %s", (schema,))
                        row = cur.fetchone()
                    cs = as_str(row[0]) if row and row[0] is not None else None
                finally:
                    conn.close()
            self._schema_charsets[schema] = cs
        return self._schema_charsets[schema]

    # ---- an operator's hand (dmctl binlog-schema) --------------------------------------------
    def set_table(self, schema: str, table: str, tracked: TrackedTable, key: tuple, file: str) -> None:
        self._set({(schema, table): tracked}, key, file)

    def forget_table(self, schema: str, table: str) -> int:
        n = _store.delete_table(self.store, self.task, self.source_id, schema, table)
        self._all().pop((schema, table), None)
        return n


# The sql_mode bits that change how a statement's text reads; MySQL and MariaDB number them alike
# (their numberings part only above bit 30). ANSI sets ANSI_QUOTES in the logged bitmap.
_READING_BITS = ((1 << 2, "ANSI_QUOTES"), (1 << 21, "NO_BACKSLASH_ESCAPES"))


def reading_modes(sql_mode: int | None) -> str:
    """The names of the modes in a logged sql_mode bitmap that change how text reads.

    >>> reading_modes(4 | 1 << 21 | 1), reading_modes(None)
    ('ANSI_QUOTES,NO_BACKSLASH_ESCAPES', '')
    """
    return ",".join(n for bit, n in _READING_BITS if (sql_mode or 0) & bit)


class _View:
    """What ``evolve`` reads: the tracker just before one DDL."""

    def __init__(self, tracker: SchemaTracker, key: tuple):
        self.t, self.key = tracker, key

    def get(self, schema: str, table: str):
        s = self.t.at(schema, table, self.key, before=True)
        return None if s is _NONE else s

    def tables_of(self, schema: str) -> list[str]:
        return [t for (s, t), st in self.t.tables((self.key[0], self.key[1] - 1)).items()
                if s == schema and st is not None]

    def charset_of(self, schema: str) -> str | None:
        return self.t.schema_charset(schema)


FULL_PHASE_SEED = "read from the upstream when the full phase began"


def seed_full_phase(store, task: str, source_id: str, conn, tables: list[tuple[str, str]], *, fresh: bool) -> int:
    """The full phase's start (``prepare``): when the source's rows carry no names, each of its
    tables without a version is read now, at the binlog position of now, S. A new snapshot
    (``fresh``: a new low watermark) forgets the source's earlier versions first.

    Why at S and not at the low watermark L: a DDL may run between L and this read, and its
    table's rows in [L, S) would not fit. Those rows need no decoding: every chunk of the load
    is read after ``prepare``, so it holds them already (``for_rows`` passes them over)."""
    from dm_core.db import master_position
    from dm_core.position import Position
    from dm_core.schema_tracker.table import logs_column_names, read_upstream_many

    _store.ensure(store)
    if fresh:
        with store.tx() as cur:
            _store.delete_task(cur, task, source_id)
    if logs_column_names(conn):
        return 0
    have = {(s, t) for s, t, *_ in _store.load(store, task, source_id)}
    todo = [t for t in tables if t not in have]
    if not todo:
        return 0
    file, pos, _ = master_position(conn)     # before the read: a DDL after it is met in the binlog
    key = Position(file, pos).key()
    seeds = read_upstream_many(conn, todo, FULL_PHASE_SEED)
    _store.put(store, task, source_id, [(s, t, key, file, tt.to_dict()) for (s, t), tt in seeds.items()])
    return len(seeds)
