"""The full load's write-once path: a chunk's rows streamed into the target with
``LOAD DATA LOCAL INFILE``, the chunk marker in the same transaction.

Why: the staging path (chunk_writer.py) writes every row twice downstream (the staging
table, then ``INSERT ... SELECT``); ``LOAD DATA`` is the cheapest way a MySQL-protocol
server takes rows (one statement, the server parses plain text) and writes each row once.

Protocol for one chunk, on a Spark executor (write.py hands over the chunk's lines, or its
Arrow batches from ``mapInArrow``):

1. open a downstream connection with autocommit off and ``local_infile`` on;
2. a named pipe in a private temporary directory; a thread runs ``LOAD DATA LOCAL INFILE
   <pipe> REPLACE|IGNORE INTO TABLE target`` while this thread encodes each Arrow batch as
   tab-separated text (:func:`encode`, vectorised in Arrow) and writes it into the pipe, so
   reading upstream, encoding and the server's insert overlap;
3. the marker row ``(plan_id, chunk_id, rows)`` (chunk_writer.MARKER_TABLE), then commit.

A few writers per table (``turn``): on MariaDB every row inserted into a table with an
AUTO_INCREMENT column latches the clustered index's root page (the counter is persisted
there), so loads into one such table contend, and a merged shard table has a chunk of every
shard in flight. Measured on a 2-core machine (2026-11-27), 10M rows of 8 shards merged into
one table: one chunk at a time 81-84 s, two at once 71-75 s (the server spending 92 CPU-s
instead of 70: the latch's cost, paid on the other core); two ``LOAD DATA`` streams of 1.25M
rows each took 12.5 s at once against 17.2 s one after the other (10.6 s against 16.8 s
without the attribute). More streams than cores only add spinning. So such a table has a
few turns -- named locks downstream (``GET_LOCK``), so they hold across executors and
machines and end with the connection -- and at most that many chunks load into it at once
(:data:`TABLE_WRITERS` by default). A chunk that finds a turn free takes it and streams as
above (the upstream reads faster than the downstream inserts, so the LOAD never waits for
rows); one that finds every turn taken spools its rows into a local file meanwhile (reading
upstream while other chunks load), waits for a turn, and the server reads the file at full
speed. So a chunk starts loading at once when it can, and no chunk touches the disk while
a turn is idle.

Restart at any point: before 3 commits nothing of the chunk is in the target (InnoDB's
LOAD DATA is transactional; a killed connection rolls it back), after it the marker is
there and the rerun adopts the chunk (loader.py). So keyless tables stay exactly-once.
A server that commits LOAD DATA in pieces of its own (TiDB before 7.x split it into
20k-row transactions) loses that for keyless tables: land.py keeps such
tables on the staging path; keyed tables stay exact through REPLACE (a replayed row is
replaced by itself) and safe-mode replay after the high watermark.

Text format: fields end with a tab, lines with a newline, ``\\`` escapes; NULL is ``\\N``.
Strings and bytes go as their bytes with ``\\``, tab and newline escaped (so a value ``\\N``
stays text), numbers and decimals as Arrow formats them (exact: decimals keep their scale,
floats their shortest round-trip form), booleans as 0/1. The statement reads the text as
``CHARACTER SET utf8mb4`` (Arrow strings are UTF-8): the server converts it to each column's
own character set (a latin1 column gets latin1), and binary columns take the bytes as they
are (checked on MariaDB 10.11 with every byte value, invalid UTF-8 included).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass

from dm_core.db import qi, qt

VERBS = {"REPLACE": "REPLACE", "INSERT IGNORE": "IGNORE", "INSERT": ""}


def encode(batch):
    """One Arrow RecordBatch as LOAD DATA text (a pyarrow Buffer, every row newline-ended).

    >>> import pyarrow as pa
    >>> b = pa.record_batch({"id": [1, None], "s": ["a\\tb\\\\N", None], "ok": [True, False]})
    >>> bytes(encode(b))
    b'1\\ta\\\\tb\\\\\\\\N\\t1\\n\\\\N\\t\\\\N\\t0\\n'
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    binary = pa.binary()
    cols = []
    for col in batch.columns:
        t = col.type
        if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
            col = col.cast(pa.binary())  # a chunk's batch is far below 2 GB
            t = col.type
        if pa.types.is_string(t) or pa.types.is_binary(t):
            col = _escaped(col.cast(binary))
        else:
            if pa.types.is_boolean(t):
                col = col.cast(pa.int8())
            col = col.cast(pa.string()).cast(binary)
        cols.append(pc.fill_null(col, pa.scalar(b"\\N", binary)))
    if not cols or not batch.num_rows:
        return pa.py_buffer(b"")
    rows = pc.binary_join_element_wise(*cols, pa.scalar(b"\t", binary))
    rows = pc.binary_join_element_wise(rows, pa.scalar(b"\n", binary), pa.scalar(b"", binary))
    return _values(rows)


def _escaped(col):
    """``\\``, tab and newline escaped; a column without any of them (the usual case) as is."""
    import numpy as np
    import pyarrow.compute as pc

    data = col.buffers()[2]
    if data is None:
        return col
    raw = np.frombuffer(data, dtype=np.uint8)
    if not ((raw == 92) | (raw == 9) | (raw == 10)).any():
        return col
    for a, b in ((b"\\", b"\\\\"), (b"\t", b"\\t"), (b"\n", b"\\n")):
        col = pc.replace_substring(col, a, b)
    return col


def _values(arr):
    """The concatenated values of a null-free binary array, without copying."""
    import numpy as np

    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset:arr.offset + len(arr) + 1]
    return bufs[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def statement(target_schema: str, target_table: str, columns: list[str], sql_verb: str,
              types: dict[str, str] | None = None, *, enclosed: bool = False, charset: str = "utf8mb4") -> str:
    """The LOAD DATA statement; the pipe's path is its only parameter. ``types``: upstream
    data types by column; a BIT column arrives as its unsigned value (extract.py) and is
    assigned through a variable, since LOAD DATA would store the digits' bytes. ``enclosed``:
    fields may be enclosed in single quotes (the text path's ``QUOTE()`` format, text_rows.py);
    :func:`encode`'s text has no enclosure (its values may begin with a quote). ``charset``:
    how the server reads the text: ``binary`` when every value is already in its column's
    character set (extract.ChunkShape.same_bytes).

    >>> statement("db", "t", ["id", "v"], "REPLACE")[:60]
    'LOAD DATA LOCAL INFILE %s REPLACE INTO TABLE `db`.`t` CHARAC'
    >>> "ENCLOSED BY '''' ESCAPED BY" in statement("db", "t", ["id"], "REPLACE", enclosed=True)
    True
    >>> statement("db", "t", ["id", "b"], "INSERT", {"b": "bit"})[-51:]
    '(`id`, @`sf_1`) SET `b` = CAST(@`sf_1` AS UNSIGNED)'
    """
    word = VERBS[sql_verb]
    types = types or {}
    fields, sets = [], []
    for i, c in enumerate(columns):
        if types.get(c) == "bit":
            var = f"@{qi(f'sf_{i}')}"
            fields.append(var)
            sets.append(f"{qi(c)} = CAST({var} AS UNSIGNED)")
        else:
            fields.append(qi(c))
    return (f"LOAD DATA LOCAL INFILE %s {word + ' ' if word else ''}INTO TABLE {qt(target_schema, target_table)} "
            f"CHARACTER SET {qi(charset)} FIELDS TERMINATED BY '\\t' " + ("ENCLOSED BY '''' " if enclosed else "")
            + "ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' "
            f"({', '.join(fields)})" + (f" SET {', '.join(sets)}" if sets else ""))


@dataclass
class LoadStats:
    """Where one chunk's time went, seen from the executor's Python (the bench sums these).

    ``read``: waiting for the next rows -- the upstream server producing and sending them
    (text path), or the JVM reading them over JDBC, applying column mapping and converting to
    Arrow (Arrow path); ``encode``: making LOAD DATA text of them; ``write``: blocked
    writing into the pipe, i.e. the downstream ingesting slower than rows come (or, spooled,
    writing the local file); ``wait``: waiting for one of the table's turns; ``load``: the LOAD
    statement reading the spooled file; ``finish``: the statement's end, the marker and the
    commit; ``spooled``: 1 when the chunk waited for a turn of its table in a local file.
    """

    rows: int = 0
    read: float = 0.0
    encode: float = 0.0
    write: float = 0.0
    wait: float = 0.0
    load: float = 0.0
    finish: float = 0.0
    spooled: int = 0


def load_chunk(conn, sql: str, items, before_commit=lambda rows: None, *, encoder=None,
               duplicates_fail: bool = False, turn: tuple[str, ...] | None = None, spool: bool = False) -> LoadStats:
    """Stream ``items`` through one LOAD DATA statement on ``conn`` (autocommit off,
    local_infile on); returns the rows sent and timings. ``encoder(item) -> (text, rows)``
    turns an item into LOAD DATA text (default: an Arrow RecordBatch through :func:`encode`).
    ``before_commit(rows)`` runs in the same transaction after the rows (the chunk marker);
    then commit. Any failure rolls back.

    ``duplicates_fail`` (on-duplicate-logical ``error``): a LOCAL load without REPLACE or
    IGNORE skips duplicate rows with a warning instead of failing (the server cannot stop the
    client's stream), so the statement's first duplicate-key warning is raised as the error
    an INSERT would have given.

    ``turn``: the names of the table's write turns (:func:`turn_names`); the chunk streams while
    holding one if one is free, else it is spooled to a local file, then loaded once a turn
    comes (the module says why).

    ``spool``: write the rows to a local file first, then load it, in this thread. For a small
    table (hundreds of rows) the pipe's thread, its wait for the server to open it and the
    pipe itself cost about as much as the load: 10.3 ms a table streamed, 200 tables in one
    thread."""
    encoder = _Sent(encoder or (lambda batch: (encode(batch), batch.num_rows)))
    if spool:
        return _load_spooled(conn, sql, items, before_commit, encoder, duplicates_fail, turn)
    if turn is None:
        return _load_streamed(conn, sql, items, before_commit, encoder, duplicates_fail)
    held = _take_turn(conn, turn, wait_s=0)
    if held is None:
        return _load_spooled(conn, sql, items, before_commit, encoder, duplicates_fail, turn)
    try:
        return _load_streamed(conn, sql, items, before_commit, encoder, duplicates_fail)
    finally:
        _release_turn(conn, held)


def _write_items(out, items, encoder, stats: LoadStats) -> None:
    """Encode each item and write it to ``out`` (the statement's pipe or a spool file),
    adding the rows and the time spent reading, encoding and writing to ``stats``."""
    clock = time.perf_counter
    items = iter(items)
    while True:
        t0 = clock()
        item = next(items, None)
        t1 = clock()
        if item is None:
            return
        text, n = encoder(item)
        t2 = clock()
        out.write(text)
        stats.read, stats.encode, stats.write = stats.read + t1 - t0, stats.encode + t2 - t1, stats.write + clock() - t2
        stats.rows += n


def _load_streamed(conn, sql, items, before_commit, encoder, duplicates_fail) -> LoadStats:
    tmp = tempfile.mkdtemp(prefix="sf-load-")
    pipe = os.path.join(tmp, "rows.tsv")
    os.mkfifo(pipe, 0o600)
    outcome: dict = {}

    def run_statement():
        try:
            with conn.cursor() as cur:
                cur.execute(sql, (pipe,))
        except BaseException as e:  # reported to the writing thread below
            outcome["error"] = e

    loader = threading.Thread(target=run_statement, name="load-data", daemon=True)
    loader.start()
    stats = LoadStats()
    clock = time.perf_counter
    try:
        fd = _open_writer(pipe, loader)
        if fd is not None:
            with os.fdopen(fd, "wb") as out:
                _write_items(out, items, encoder, stats)
        t0 = clock()
        loader.join()
        if "error" in outcome:
            raise _named(outcome["error"], encoder)
        _refuse_changed(conn, encoder, duplicates_fail)
        before_commit(stats.rows)
        conn.commit()
        stats.finish = clock() - t0
    except BaseException:
        if loader.is_alive():  # the writer failed: an EOF ends the statement, the rollback undoes it
            loader.join(timeout=60)
        try:
            conn.rollback()
        except Exception:
            pass
        if "error" in outcome:
            raise _named(outcome["error"], encoder) from None
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return stats


TURN_TIMEOUT_S = 24 * 3600  # a turn is held for one chunk's LOAD; a dead holder's ends with its connection
TABLE_WRITERS = 2  # chunks loading into one table at once, where the table has turns (the module says why)


def turn_names(schema: str, table: str, writers: int = TABLE_WRITERS) -> tuple[str, ...]:
    """The named locks that let at most ``writers`` chunks at a time load into a table (lock
    names are at most 64 characters, so the table is hashed).

    >>> turn_names("db", "t")
    ('shardflow-load-17bb61500f74c5b21e145135d30ff6f8-0', 'shardflow-load-17bb61500f74c5b21e145135d30ff6f8-1')
    """
    import hashlib

    base = "shardflow-load-" + hashlib.sha1(f"{schema}.{table}".encode()).hexdigest()[:32]
    return tuple(f"{base}-{i}" for i in range(max(1, writers)))


def _load_spooled(conn, sql, items, before_commit, encoder, duplicates_fail, turn) -> LoadStats:
    """The rows to a local file, then (once one of the table's write turns is free, when it has
    turns) one LOAD DATA of that file."""
    stats = LoadStats()
    clock = time.perf_counter
    fd, path = tempfile.mkstemp(prefix="sf-load-", suffix=".tsv")
    held = None
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            _write_items(out, items, encoder, stats)
        t0 = clock()
        held = _take_turn(conn, turn, wait_s=TURN_TIMEOUT_S) if turn else None
        if turn and held is None:
            raise RuntimeError(f"could not take a write turn ({', '.join(turn)}) downstream within "
                               f"{TURN_TIMEOUT_S}s; other loads into the same table hold them")
        t1 = clock()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, (path,))
        except Exception as e:
            raise _named(e, encoder) from None
        t2 = clock()
        _refuse_changed(conn, encoder, duplicates_fail)
        before_commit(stats.rows)
        conn.commit()
        stats.wait, stats.load, stats.finish, stats.spooled = t1 - t0, t2 - t1, clock() - t2, 1
    except BaseException:
        try:
            conn.rollback()
        except Exception:
            pass
        raise
    finally:
        if held is not None:
            _release_turn(conn, held)
        try:
            os.unlink(path)
        except OSError:
            pass
    return stats


def _take_turn(conn, turns: tuple[str, ...], *, wait_s: float) -> str | None:
    """The turn ``conn`` now holds, or None when every one stayed taken for ``wait_s``: each is
    tried without waiting, then (``GET_LOCK`` waits on one name) they are waited on in
    rotation, a second each, so a released turn is taken within about a second."""
    deadline = time.monotonic() + wait_s
    with conn.cursor() as cur:
        for i in itertools.count():
            left = deadline - time.monotonic()
            if i >= len(turns) and left <= 0:
                return None
            wait = 0 if i < len(turns) else (min(1.0, left) if len(turns) > 1 else left)
            cur.execute("SELECT GET_LOCK(%s, %s)", (turns[i % len(turns)], wait))
            if cur.fetchone()[0] == 1:
                return turns[i % len(turns)]
    return None  # unreachable: the loop ends by returning


def _release_turn(conn, turn: str) -> None:
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT RELEASE_LOCK(%s)", (turn,))
    except Exception:
        pass  # the connection is closing anyway, which releases it


# Warnings of a LOAD DATA that wrote another value than the one sent. A LOCAL load gives these
# as warnings even in a strict session (the server cannot stop the client's stream, so it goes
# on as IGNORE would), and a lenient session for every load: the statement succeeds either way.
VALUE_CHANGED = frozenset({
    1048,  # Column cannot be null (the column's implicit default written instead)
    1261, 1262,  # a line with fewer / more fields than columns
    1263,  # NULL supplied to a NOT NULL column: set to its default
    1264,  # Out of range value: clamped
    1265,  # Data truncated
    1292,  # Incorrect date/time value / truncated incorrect value
    1300, 1366,  # Invalid string / Incorrect integer, decimal or string value
    1406,  # Data too long
})
_KEEP_BYTES = 256 << 20  # the chunk's items kept to name a refused row; past it, its number only


class _Sent:
    """The encoder of one chunk, keeping what it encoded (up to :data:`_KEEP_BYTES` of text) so
    that a row the target refused can be named by its values, not only by its number."""

    def __init__(self, encoder):
        self.encoder, self.items, self.rows, self.kept = encoder, [], 0, 0

    def __call__(self, item):
        text, n = self.encoder(item)
        if self.kept <= _KEEP_BYTES:
            self.items.append((self.rows, item))
            self.kept += len(text)
        self.rows += n
        return text, n

    def row(self, number: int):
        """The ``number``-th row sent (1-based, the server's "at row N"), or None if not kept."""
        for first, item in reversed(self.items):
            if first < number:
                return _row_of(item, number - first - 1)
        return None


def _row_of(item, i: int):
    if hasattr(item, "slice") and hasattr(item, "to_pylist"):   # an Arrow RecordBatch
        return item.slice(i, 1).to_pylist()[0] if i < item.num_rows else None
    if hasattr(item, "line"):                                   # a compiled_lines.LineBlock
        line = item.line(i)
        return None if line is None else line.decode("utf-8", "replace").split("\t")
    try:                                                        # a block of text_rows' lines
        line = item[i][0]
    except (IndexError, TypeError, KeyError):
        return None
    return line.decode("utf-8", "replace").split("\t") if isinstance(line, bytes) else line


class ValueChanged(Exception):
    """The target would hold another value than the upstream's (truncated, clamped, defaulted);
    the chunk was rolled back. ``args``: (the server's warning number, the message)."""

    def __str__(self) -> str:
        return f"[{self.args[0]}] {self.args[1]}" if len(self.args) == 2 else super().__str__()


def _changed(code: int, message: str, sent: _Sent) -> ValueChanged:
    import re

    at = re.search(r"at row (\d+)", message)
    row = sent.row(int(at[1])) if at else None
    if isinstance(row, dict):
        shown = "; the row sent: " + ", ".join(f"{k}={v!r}" for k, v in row.items())
    else:
        shown = f"; the row sent: {', '.join(row)}" if row is not None else ""
    return ValueChanged(code, f"{message}{shown}. The target column cannot hold the upstream's value, so nothing "
                              "of this chunk was written: widen the target column (ALTER TABLE ... MODIFY) to the "
                              "upstream's type, or drop the target table and let the full phase create it, then rerun")


def _named(e: BaseException, sent: _Sent) -> BaseException:
    """A strict session's refusal of a value (the statement failed) as ValueChanged naming the
    row; any other error as it is."""
    code = (getattr(e, "args", ()) or (None,))[0]
    if code in VALUE_CHANGED and len(e.args) > 1:
        return _changed(code, str(e.args[1]), sent)
    return e


def _refuse_changed(conn, sent: _Sent, duplicates_fail: bool) -> None:
    """Raise for the load's first warning that a value was written changed (ValueChanged,
    naming the row) -- unless the session is lenient on purpose (no STRICT flag: a table whose
    definition drifted during the load, full/phase.py) -- and, with ``duplicates_fail``, for its
    first duplicate key (DuplicateRow: a LOCAL load skips one with a warning)."""
    counted = getattr(conn, "warning_count", None)   # mysqlclient: the load's OK packet, no round trip
    if callable(counted) and not counted():
        return
    with conn.cursor() as cur:
        cur.execute("SELECT @@warning_count, @@SESSION.sql_mode")
        count, mode = cur.fetchone()
        if not count:
            return
        cur.execute("SHOW WARNINGS")
        warnings = [(int(code), m if isinstance(m, str) else m.decode("utf-8", "replace"))
                    for _level, code, m in cur.fetchall()]
    strict = "STRICT_" in (mode if isinstance(mode, str) else mode.decode())
    for code, message in warnings:
        if code in VALUE_CHANGED and strict:
            raise _changed(code, message, sent)
    if duplicates_fail:
        for code, message in warnings:
            if code == DUP_ENTRY:
                raise DuplicateRow(DUP_ENTRY, message)


DUP_ENTRY = 1062


class DuplicateRow(Exception):
    """A duplicate key in a load that must not skip it; ``args`` as the drivers' errors."""


def _open_writer(pipe: str, loader: threading.Thread):
    """Open the pipe for writing once the client library opened it for reading; None if the
    statement ended before it asked for the file (it failed: the caller raises its error)."""
    import errno
    import time

    pause = 0.00005  # the server asks for the file within a millisecond or so: short naps first
    while True:
        try:
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            if not loader.is_alive():
                return None
            time.sleep(pause)
            pause = min(pause * 2, 0.002)
            continue
        os.set_blocking(fd, True)
        _widen(fd)
        return fd


def _widen(fd: int) -> None:
    """Let the pipe hold a whole block (1 MB, Linux's default most): the client library
    reads it 4 KB at a time, and with the default 64 KB the writing thread woke for nearly
    every read (executors' CPU 0.2-0.3 s less per 10M rows, measured in pairs of runs)."""
    import fcntl

    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except (OSError, AttributeError):   # above the user's pipe limit, or not Linux: the default size
        pass


def load_data_allowed(target_ep) -> tuple[bool, bool, bool]:
    """(the downstream takes LOAD DATA LOCAL, it is TiDB, it is MariaDB)."""
    from dm_core.db import as_str, connect

    down = connect(target_ep, downstream=True)
    try:
        with down.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.local_infile, VERSION()")
            on, version = cur.fetchone()
    finally:
        down.close()
    version = as_str(version).lower()
    return str(as_str(on)).upper() in ("1", "ON"), "tidb" in version, "mariadb" in version
