"""BinlogWindow: the product's binlog reader, on our own dump reader and row decoders.

The tests hold it to an oracle, ``tests/oracle_binlog.py`` (mysql-replication, the reader
shardflow began with; read its docstring for why windows stop where they do): the same
interface and output: iterate the transactions in [start, until) of one
upstream as ``Txn`` objects holding ``RowChange`` rows; ``position`` is the last position
safe to resume from; ``events_read`` counts the events the old reader counted (row events,
XID, QUERY, ROTATE, MariaDB GTID, HEARTBEAT), so ``budget_events`` cuts windows at the same
transactions. Windows end only between transactions: after XID/COMMIT, after a DDL, or on
a ROTATE or HEARTBEAT seen outside a transaction; then, and only then, the window stops if
``position`` reached ``until`` or a budget is spent. A transaction larger than
``PIECE_BYTES`` of row events comes in pieces (``Txn.more``, ``Txn.piece``), each with
``end`` at the transaction's start, so that memory stays bounded; ``position`` still moves
only between transactions.

Positions follow the server's event headers: every event's ``log_pos`` (the end of that
event) moves the stream position; a ROTATE moves it to (next file, position).

MariaDB and MySQL (5.7, 8.0, 8.4) differ in how a transaction starts and what a GTID state
is; the loop picks the MySQL way once per connection (``dump.mariadb``), and MySQL's own
events are tested only after all those MariaDB sends per transaction, so its path costs
MariaDB nothing. MariaDB: a GTID event opens the group (or marks a DDL), the state is one
GTID per domain. MySQL: a GTID (or, with gtid_mode OFF, ANONYMOUS_GTID) event precedes the
group's BEGIN ... XID or its DDL; the state is a GTID set (binlog/mysql_gtid.py) that each
transaction's uuid:gno joins, and a start without one learns it from the next file's
PREVIOUS_GTIDS. A compressed transaction (TRANSACTION_PAYLOAD, MySQL 8.0.20+) goes through
the loop as the events it holds (binlog/payload.py). MySQL's GTID events are not counted in
``events_read`` (the old reader did not count them); MariaDB's are.

Differences from the oracle, all on inputs it mishandles:
- the budgets end a window only once it has moved past ``start`` (a budget spent before
  the first transaction, e.g. ``budget_events=1``, made the old reader return without
  progress, forever);
- negative TIME values with a fractional part are read right (see ``decode.make_time2``);
- events it would skip silently and lose rows with (MariaDB compressed events,
  MySQL partial JSON updates, tagged GTIDs) raise a Terminal error instead, and MySQL's
  compressed transactions, which it could not read, are read;
- a TABLE_MAP that changes under the same table id is recompiled (the old reader froze the
  first one); ENUM/SET member names of 128 bytes or more are read per the format;
- a SET with no member is the empty set, not None (None is SQL NULL: the row went downstream
  with NULL instead of '').
"""

from __future__ import annotations

import struct
import time
import zlib
from dataclasses import dataclass
from itertools import chain
from typing import Iterator

from dm_core import faults
from dm_core.binlog import events as ev
from dm_core.binlog import mysql_gtid
from dm_core.binlog import payload as _payload
from dm_core.binlog.codec import compile_table
from dm_core.binlog.decode import python_codec
from dm_core.binlog.dump import BinlogDump
from dm_core.binlog.gtid import merge_gtid
from dm_core.binlog.txn import Txn
from dm_core.db import Endpoint
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.position import Position

_HDR = ev.HEADER.unpack_from
_OPS = {**{t: "insert" for t in ev.WRITE_ROWS}, **{t: "update" for t in ev.UPDATE_ROWS},
        **{t: "delete" for t in ev.DELETE_ROWS}}
_UPDATES, _ROWS_V2 = ev.UPDATE_ROWS, ev.ROWS_V2
# the event types the loop tests, in the order it tests them
_LOOP_TYPES = (ev.TABLE_MAP, ev.MARIADB_GTID, ev.XID, ev.QUERY, ev.ROTATE, ev.HEARTBEAT, ev.FORMAT_DESCRIPTION,
               ev.XA_PREPARE, ev.EXECUTE_LOAD_QUERY)
_MYSQL_TYPES = (ev.GTID, ev.ANONYMOUS_GTID, ev.PREVIOUS_GTIDS, ev.TRANSACTION_PAYLOAD)


class BinlogWindow:
    """Iterate the transactions in [start, until) of one upstream (the syncer's reader).

    ``budget_events``/``budget_seconds`` bound the window; both are checked only at
    transaction boundaries, so a window always ends at a position safe to resume from.
    """

    def __init__(self, ep: Endpoint, start: Position, until: Position, *, server_id: int,
                 wanted=None, tracker=None, **limits):
        """:param limits: the fields of ``WindowLimits`` (budgets, heartbeat, checksum check,
            piece size), as keywords.
        :param wanted: ``(schema, table) -> bool``, the tables whose rows are decoded (the task's
            block-allow list); the rows of the others are passed over undecoded, so a value
            shardflow cannot read stops no task that does not replicate its table. None: all.
        :param tracker: the source's ``SchemaTracker`` (dm_core/schema_tracker): every DDL read moves
            it forward, and it names the columns of TABLE_MAPs that do not carry their names.
        """
        self.ep = ep
        self.start = start
        self.until = until
        self.server_id = server_id
        self.limits = WindowLimits(**limits)
        self.position = start  # last safe position delivered
        self.events_read = 0
        self.wanted = wanted
        self.tracker = tracker

    def __iter__(self) -> Iterator[Txn]:
        if self.start.key() >= self.until.key():
            return
        dump = BinlogDump(self.ep, self.start.file, self.start.pos, server_id=self.server_id,
                          heartbeat=self.limits.heartbeat)
        try:
            yield from self._run(dump)
        finally:
            dump.close()

    def _run(self, dump: BinlogDump) -> Iterator[Txn]:  # noqa: C901 - one hot loop, kept flat
        """The window's loop over the dump's events (``_Cold`` says which are handled inline)."""
        lim = self.limits
        until_key, start_key, budget = self.until.key(), self.start.key(), lim.budget_events
        deadline, monotonic, piece_cap = time.monotonic() + lim.budget_seconds, time.monotonic, lim.piece_bytes
        hdr, ifb, ops, verify = _HDR, int.from_bytes, _OPS, lim.verify_checksum
        T_MAP, T_GTID, T_XID, T_QUERY, T_ROTATE, T_HEARTBEAT, T_FDE, T_XA_PREPARE, T_LOAD_QUERY = _LOOP_TYPES
        T_MY_GTID, T_ANON_GTID, T_PREV_GTIDS, T_PAYLOAD = _MYSQL_TYPES   # tested after all of MariaDB's
        advance, gstate = _gtid_rule(dump.mariadb, self.start.gtid)
        cold = _Cold(self, dump, advance)
        phl, tables, table_bodies, decode, fault = cold.phl, cold.tables, cold.table_bodies, cold.rows, cold.fault
        cks, tid_len = 4 if dump.checksum else 0, 6   # the file's CRC bytes and table id length, per its FDE
        file, pos, fno = self.start.file, self.start.pos, _file_no(self.start.file)   # the stream position
        position = txn_start = self.start
        pkey, txn, gtid, count = position.key(), None, None, self.events_read
        piece_cap, piece_bytes = piece_cap or PIECE_BYTES, 0   # row-event bytes in the transaction's current piece
        src = base = dump.events()
        while src is not None:  # one pass, and one more after each TRANSACTION_PAYLOAD (see there)
            stream, src = src, None
            for buf, s, e in stream:
                ts, typ, sid, size, logpos, flags = hdr(buf, s)
                if verify and cks and typ != T_FDE:
                    _check_crc(buf, s, e, file, pos, dump.ep)
                end = e - cks
                if logpos:   # 0 inside a TRANSACTION_PAYLOAD; a ROTATE moves pos itself
                    pos = logpos
                if typ in ops:
                    codec = tables.get(ifb(buf[s + 19:s + 19 + tid_len], "little"))
                    if codec is None:  # no TABLE_MAP seen (started mid-transaction): skipped, as before
                        continue
                    count += 1
                    if txn is None:  # a row event outside BEGIN: only after MySQL's CREATE TABLE ... SELECT
                        txn = Txn(end=Position(file, pos), start=txn_start, gtid=gtid)
                    txn.timestamp = ts
                    if codec is not _PASSED and txn.undecodable is None:   # else passed over (see _Cold)
                        decode(txn, codec, typ, buf, s + 19, end, file, pos)
                        piece_bytes += e - s
                        if piece_bytes >= piece_cap:   # too large to hold whole: hand on what is decoded
                            piece_bytes, done, txn = 0, txn, _next_piece(txn, file, pos)
                            yield done
                    elif fault:
                        faults.hit("binlog.in_transaction")
                    continue
                if typ == T_MAP:
                    tid, b = ifb(buf[s + 19:s + 19 + tid_len], "little"), s + 19 + phl[T_MAP]
                    old = table_bodies.get(tid)
                    if old is None or len(old) != end - b or not buf.startswith(old, b):  # else: the same table
                        cold.table_map(buf, b, end, tid, file, fno, pos)
                    continue
                if typ == T_GTID:   # MariaDB: a transaction or a DDL begins
                    count, txn_start, piece_bytes = count + 1, position, 0
                    txn, gtid = _mariadb_gtid(buf, s, sid, position)
                    continue
                if typ == T_XID or typ == T_XA_PREPARE:   # XA: its rows are delivered at PREPARE (see _Cold)
                    count, done, txn = count + 1, txn, None
                    if gtid is not None:
                        gstate, gtid = advance(gstate, gtid), None
                    position, pkey = Position(file, pos, gstate), (fno, pos)
                    if done is not None:
                        done.end, done.timestamp = position, done.timestamp or ts
                        if typ == T_XA_PREPARE:
                            done.xid = _xa_prepare_xid(buf, s + ev.HEADER_LEN)
                        self.position, self.events_read = position, count
                        yield done
                elif typ == T_QUERY or typ == T_LOAD_QUERY:  # the latter: a LOAD DATA logged as a statement
                    count += 1
                    qphl = phl.get(typ, 26)
                    if buf[end - 6:end] == b"\0BEGIN" and typ == T_QUERY and \
                            end - 5 == s + 20 + qphl + buf[s + 27] + (buf[s + 30] | buf[s + 31] << 8):
                        txn, piece_bytes = Txn(position, [], None, None, position, 0, gtid), 0   # MySQL's BEGIN
                        continue
                    txn, gtid, gstate, position, pkey, piece_bytes = yield from cold.query(
                        _QueryAt(buf, s, end, qphl, file, fno, pos, size, flags, ts, count),
                        txn, txn_start, gtid, gstate, position, pkey, piece_bytes)
                elif typ == T_ROTATE or typ == T_HEARTBEAT:   # HEARTBEAT: the server is at (file, pos), no more to send
                    count += 1
                    if typ == T_ROTATE:
                        pos, file, fno = _rotate(buf, s, end, file, fno)
                    if txn is None and (pos and file if typ == T_ROTATE else (fno, pos) >= pkey):
                        position, pkey = Position(file, pos, gstate), (fno, pos)
                elif typ == T_FDE:
                    cks, tid_len = _format_description(buf, s, e, dump.checksum, phl)
                    continue
                elif typ == T_MY_GTID or typ == T_ANON_GTID:   # MySQL: a transaction or a DDL begins
                    txn_start, piece_bytes, txn, gtid = position, 0, None, cold.gtid_of(buf, s, typ)
                    continue
                elif typ == T_PAYLOAD:   # a fresh pass over its events, then the stream goes on
                    src = chain(cold.payload(buf, s, end, cks, f"at ({file}, {pos - size})"), base)
                    break
                elif typ == T_PREV_GTIDS:
                    gstate, position = _previous_gtids(buf, s, gstate, txn, position, file)
                    continue
                else:   # GTID_LIST, checkpoints, ...: not counted (as by the old reader); unsupported ones raise
                    cold.check_supported(typ, file, pos - size)
                    continue
                if txn is None:
                    txn_start = position
                    if pkey >= until_key or (pkey > start_key and (count >= budget or monotonic() >= deadline)):
                        break
        self.position, self.events_read = position, count


# A transaction's rows are handed on in pieces of about this many bytes of row events (a piece
# holds ~20x that in Python objects): a nightly `DELETE ... WHERE created < ...` of ten million
# rows would otherwise be decoded whole into memory (1M updated rows of six columns: 1.3 GB) and
# the task process killed, at the same transaction on every retry.
PIECE_BYTES = 1 << 20

# Statements logged inside BEGIN ... COMMIT that leave the group open: the rows before and after
# them are one transaction. (A ROLLBACK TO of transactional tables only is not logged: the server
# drops the rolled-back rows from the group instead.)
_IN_GROUP = ("SAVEPOINT", "XA END")

_DDL_WORDS = ("CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE")

# MySQL 8.0.21+ logs CREATE TABLE ... SELECT as one group: GTID, `CREATE TABLE ... START TRANSACTION`,
# the rows (no BEGIN), XID. The DDL goes on without the clause; the group's GTID joins the state at
# the XID, with the rows, so that no checkpoint between them claims the rows applied.
_CTAS = " START TRANSACTION"

_ENGINES_WORKAROUND = (
    "Make the upstream tables transactional (ALTER TABLE ... ENGINE=InnoDB). Then run the full phase again, or start "
    "the task again from a `meta` position past this transaction and re-sync the tables it changed (trigger "
    "dm_TASK_resync).")

_GTID = struct.Struct("<QIB")  # MariaDB GTID body: seq_no, domain_id, flags2
_gtid_body = _GTID.unpack_from
_STANDALONE = ev.GTID_FL_STANDALONE
# Post-header lengths of the v4 format, until a FORMAT_DESCRIPTION says otherwise.
_DEFAULT_POST_HEADER = {ev.QUERY: 13, ev.TABLE_MAP: 8, **{t: 8 for t in ev.ROWS - ev.ROWS_V2},
                        **{t: 10 for t in ev.ROWS_V2}}


@dataclass(frozen=True, slots=True)
class WindowLimits:
    """How a window reads: ``BinlogWindow``'s keyword options, checked by name here.

    ``budget_events``/``budget_seconds`` end the window (only between transactions);
    ``heartbeat``: seconds between server heartbeats while the server is idle;
    ``verify_checksum``: check every event's CRC32 (TCP already checks the bytes);
    ``piece_bytes``: a transaction with more row events than this (bytes) comes in pieces
    (``Txn.more``); None: ``PIECE_BYTES``.
    """

    budget_events: int = 200_000
    budget_seconds: float = 30.0
    heartbeat: float = 1.0
    verify_checksum: bool = False
    piece_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class _QueryAt:
    """A QUERY (or EXECUTE_LOAD_QUERY) event as the loop met it: its bytes (``buf[s:end]``,
    checksum excluded), post-header length, where it sits (``pos``: its end, in ``file``
    numbered ``fno``), its header's size, flags and timestamp, and the events read with it."""

    buf: object
    s: int
    end: int
    qphl: int
    file: str
    fno: int
    pos: int
    size: int
    flags: int
    ts: int
    count: int


class _Cold:
    """The events the loop meets once per file, per DDL or per statement rather than per row,
    each a method that gets the loop state it reads and returns what it changes; here lives
    what they need besides: the window (its ``position``/``events_read`` are set before each
    Txn is yielded), the connection's constants, the table maps, how a GTID joins the state.

    ``BinlogWindow._run`` handles inline, on local variables, only the events met per row and per
    transaction: a row event (its rows decoded by ``rows``), a TABLE_MAP seen before, MariaDB's
    GTID (``_mariadb_gtid``), XID, MySQL's BEGIN. Its state: ``(file, pos)`` the stream position
    (the end of the last event; ``fno`` the file's number, for key order); ``cks``/``tid_len``
    the current file's trailing CRC bytes and table id length (4 in pre-5.1 formats), per its
    FORMAT_DESCRIPTION; ``gstate`` the GTID state after the last complete transaction
    (``advance``: how a GTID joins it); ``piece_bytes`` the row-event bytes decoded into the
    transaction's current piece. Its cases, in brief:

    - row events of a table the task does not replicate (``_PASSED``), or the rest of a
      transaction that cannot be decoded (the syncer pauses before it, or skips it whole), are
      passed over undecoded;
    - XA: the rows are logged at XA_PREPARE and delivered as committed there (as DM does); its
      XA COMMIT comes later and only moves the position, an XA ROLLBACK goes on as a statement
      (the syncer pauses on it);
    - MySQL's BEGIN (MariaDB's GTID event stands for it): a QUERY whose text after the schema
      (length at +8) and the status vars (length at +11) is exactly BEGIN; nothing else to read.
    """

    __slots__ = ("window", "ep", "charsets", "charsets_key", "mariadb", "advance", "wanted", "tracker", "tables",
                 "table_bodies", "uuids", "phl", "fault", "decode_fault")

    def __init__(self, window: BinlogWindow, dump: BinlogDump, advance):
        self.window = window
        self.ep = dump.ep
        self.charsets = dump.charsets
        self.charsets_key = (dump.ep.host, int(dump.ep.port))
        self.mariadb = dump.mariadb
        self.advance = advance
        self.wanted, self.tracker = window.wanted, window.tracker
        self.tables: dict[int, object] = {}       # table id → TableCodec (or _PASSED)
        self.table_bodies: dict[int, bytes] = {}  # table id → its TABLE_MAP body, to spot the same map again
        self.uuids: dict[bytes, str] = {}         # MySQL server UUIDs met, as text
        self.phl = dict(_DEFAULT_POST_HEADER)     # post-header length by event type (from the FDE)
        self.fault = faults.armed("binlog.in_transaction")  # tests only: checked once, not per event
        self.decode_fault = faults.armed("binlog.decode_row")

    def rows(self, txn: Txn, codec, typ: int, buf, b: int, end: int, file: str, pos: int) -> None:
        """A row event of a table the window decodes (body at ``buf[b:end]``, after the stream
        position ``(file, pos)``): its rows join ``txn.rows``; a value that cannot be decoded
        makes ``txn`` undecodable instead (and drops its rows)."""
        q = b + self.phl[typ]
        if typ in _ROWS_V2:
            q += (buf[b + 8] | buf[b + 9] << 8) - 2
        ncols = buf[q]
        if ncols < 0xFB:
            q += 1
        else:
            ncols, q = ev.lenenc(buf, q)
        nb = (ncols + 7) >> 3
        updates, ops = _UPDATES, _OPS
        try:
            if self.decode_fault:
                _decode_fault()
            full = codec.full
            if ncols == codec.ncols and buf.startswith(full, q) and (
                    typ not in updates or buf.startswith(full, q + nb)):
                fn = codec.by_type.get(typ) or codec.full_decoder(typ, ops[typ])
            elif typ in updates:
                fn = codec.decoder(ops[typ], buf[q:q + nb], buf[q + nb:q + 2 * nb])
                _partial(txn, codec, ops[typ], buf[q:q + nb], buf[q + nb:q + 2 * nb], file, pos)
            else:
                fn = codec.decoder(ops[typ], buf[q:q + nb])
                _partial(txn, codec, ops[typ], buf[q:q + nb], None, file, pos)
            txn.rows += fn(buf, q + (2 * nb if typ in updates else nb), end)
        except ShardflowError:
            raise
        except Exception as exc:   # delivered undecoded: `dmctl binlog skip` may drop it whole
            txn.undecodable = _decode_error(codec, file, pos, exc)
            txn.rows = []
        if self.fault:
            faults.hit("binlog.in_transaction")

    def table_map(self, buf, b: int, end: int, tid: int, file: str, fno: int, pos: int) -> None:
        """A TABLE_MAP (body at ``buf[b:end]``) that is not the same as table ``tid``'s last one:
        compile its codec (``_PASSED`` for a table the task does not replicate)."""
        body = buf[b:end]
        wanted, tracker = self.wanted, self.tracker
        if wanted is not None and not wanted(*_table_name(buf, b)):
            self.tables[tid], self.table_bodies[tid] = _PASSED, body
            return
        charsets, mariadb, charsets_key = self.charsets, self.mariadb, self.charsets_key
        try:
            codec = compile_table(body, charsets, mariadb=mariadb, charsets_key=charsets_key)
            if tracker is not None:
                if codec.td.full_metadata:
                    tracker.check_names(codec.td, (fno, pos), file)
                else:
                    tracked = tracker.for_rows(codec.td, (fno, pos), file)
                    if tracked is None:
                        # rows from before the full phase's seed: passed over at this position only,
                        # so the map is not remembered (the same map after the seed must decode)
                        self.tables[tid] = _PASSED
                        self.table_bodies.pop(tid, None)
                        return
                    codec = compile_table(body, charsets, mariadb=mariadb, charsets_key=charsets_key, tracked=tracked)
            self.tables[tid] = codec
        except ShardflowError:
            raise
        except Exception as exc:
            raise ErrorCode.BINLOG_UNREADABLE.error(
                f"cannot decode TABLE_MAP at ({file}, {pos}) from {self.ep}: {exc}") from exc
        self.table_bodies[tid] = body

    def query(self, at: _QueryAt, txn: Txn | None, txn_start: Position, gtid: str | None, gstate: str | None,
              position: Position, pkey: tuple, piece_bytes: int):
        """A QUERY event other than MySQL's plain BEGIN (the loop's fast path): a BEGIN or XA START,
        a statement inside the open group, the group's COMMIT, XA COMMIT or ROLLBACK, or a DDL
        (a group of its own). Yields the Txn it ends; returns the loop state after it:
        ``(txn, gtid, gstate, position, pkey, piece_bytes)``."""
        buf, s, end, file, fno, pos = at.buf, at.s, at.end, at.file, at.fno, at.pos
        schema, text = ev.parse_query(buf, s, end, at.qphl)
        q = text.strip()
        uq = q.upper()
        if uq == "BEGIN" or uq.startswith("XA START"):  # MySQL logs XA START as a statement
            return Txn(end=position, start=position, gtid=gtid), gtid, gstate, position, pkey, 0
        if txn is not None and uq.startswith(_IN_GROUP):
            # part of the group (an ORM's nested transaction, XA END before XA_PREPARE)
            return txn, gtid, gstate, position, pkey, piece_bytes
        if txn is not None and uq.startswith("ROLLBACK TO"):
            raise ErrorCode.BINLOG_UNREADABLE.error(
                f"binlog at ({file}, {pos - at.size}) from {self.ep} holds `{q[:200]}` inside a transaction: "
                "the server logs it only when the transaction changed a non-transactional (MyISAM, Aria) "
                "table, and which of its rows after the savepoint the server kept depends on each "
                "table's engine, which the binlog does not say",
                workaround=_ENGINES_WORKAROUND)
        if txn is not None and uq != "COMMIT" and not uq.startswith("XA COMMIT") and (
                txn.rows or txn.statements or not uq.startswith(_DDL_WORDS)):
            # a statement a STATEMENT/MIXED session logged among the group's rows: the group
            # stays whole (ending it here dropped the rows before it); the syncer judges it.
            # A DDL that opens the group (CREATE TABLE ... SELECT: the table, then its rows)
            # goes on alone as before, the rows after it as their own transaction
            if uq != "ROLLBACK":
                stmt = _statement(at, schema, q, self.charsets, txn.start, gstate)
                if txn.statements is None:
                    txn.statements = []
                txn.statements.append(stmt)   # a copy per statement was quadratic in them
                return txn, gtid, gstate, position, pkey, piece_bytes
            # a group the session rolled back: logged only for what it changed in
            # non-transactional tables (a STATEMENT/MIXED session logs its statements)
            if txn.rows:
                raise ErrorCode.BINLOG_UNREADABLE.error(
                    f"binlog at ({file}, {pos - at.size}) from {self.ep} ends a transaction with rows by "
                    "`ROLLBACK`: the server kept the rows of its non-transactional (MyISAM, Aria) tables "
                    "and dropped the others, and the binlog does not say which are which",
                    workaround=_ENGINES_WORKAROUND)
            uq = "COMMIT"   # its statements are judged as any others; it wrote no rows
        if gtid is not None and not (txn is None and uq.endswith(_CTAS)):
            gstate, gtid = self.advance(gstate, gtid), None
        cur = Position(file, pos, gstate)
        w = self.window
        if uq == "COMMIT" or uq.startswith("XA COMMIT"):
            done, txn = txn, None
            if done is not None:  # XA COMMIT ... ONE PHASE ends MySQL's group itself
                done.end = cur
                position, pkey = cur, (fno, pos)
                w.position, w.events_read = position, at.count
                yield done
            elif uq != "COMMIT":  # a prepared XA's commit: its rows came at its XA_PREPARE
                position, pkey = cur, (fno, pos)
                w.position, w.events_read = position, at.count
        else:
            position, pkey = cur, (fno, pos)
            w.position, w.events_read = position, at.count
            ctas = uq.endswith(_CTAS)
            if ctas:
                q = q[:-len(_CTAS)].rstrip()
            st = _statement(at, schema, q, self.charsets, txn_start, gstate, cur)
            if ctas and st.ddl.upper().endswith(_CTAS):   # re-read in the client's charset
                st.ddl = st.ddl[:-len(_CTAS)].rstrip()
            if self.tracker is not None:
                # before any later TABLE_MAP is compiled: rows after it decode with its schema
                self.tracker.on_ddl(st.ddl, st.ddl_schema, pkey, file, st.sql_mode)
                self.tables.clear()
                self.table_bodies.clear()
            yield st
            txn = None
        return txn, gtid, gstate, position, pkey, piece_bytes

    def gtid_of(self, buf, s: int, typ: int) -> str | None:
        """MySQL: a transaction (GTID, BEGIN ... XID/COMMIT) or a DDL (GTID, QUERY) begins; the
        BEGIN opens the Txn as without GTIDs. Its GTID, ``uuid:gno``; the anonymous kind
        (ANONYMOUS_GTID, gtid_mode OFF) has none."""
        if typ != ev.GTID:
            return None
        raw = buf[s + 20:s + 36]   # flags u8, server UUID (16 bytes), gno u64
        u = self.uuids.get(raw)
        if u is None:
            u = self.uuids[raw] = mysql_gtid.uuid_text(raw)
        return f"{u}:{int.from_bytes(buf[s + 36:s + 44], 'little')}"

    def payload(self, buf, s: int, end: int, cks: int, where: str):
        """MySQL 8.0.20+ compressed transaction (TRANSACTION_PAYLOAD): the events it holds, which
        go through the loop as if the server had sent them (log_pos 0 inside: ``pos`` stays this
        event's end, which is the transaction's end), then the stream goes on. The loop makes a
        fresh pass over them chained to the stream rather than put a generator in front of every
        event: nothing is added per event."""
        return _payload.events(buf, s, end, cks, f"{where} from {self.ep}")

    def check_supported(self, typ: int, file: str, at: int) -> None:
        """An event the loop passes over (GTID_LIST, checkpoints, ...: the old reader did not count
        them), unless shardflow cannot read it (``events.UNSUPPORTED``): then an error, naming
        where the event starts, ``(file, at)``."""
        if typ in ev.UNSUPPORTED:
            what, workaround = ev.UNSUPPORTED[typ]
            raise ErrorCode.BINLOG_UNREADABLE.error(
                f"binlog at ({file}, {at}) from {self.ep} holds {what}, which shardflow cannot read",
                workaround=workaround)


def _gtid_rule(mariadb: bool, gstate: str | None):
    """``(advance, gstate)``: how a transaction's GTID joins the state, picked once per
    connection, and the start's state in that form. MariaDB keeps one GTID per domain; MySQL a
    set of intervals per server UUID (None: not known, stays so until a PREVIOUS_GTIDS)."""
    if mariadb:
        return _advance, gstate
    # a bad meta binlog-gtid fails here, not mid-window
    return mysql_gtid.GtidSetState().add, mysql_gtid.normalize(gstate)


def _mariadb_gtid(buf, s: int, sid: int, position: Position) -> tuple[Txn | None, str]:
    """MariaDB's GTID event (server ``sid``, the window at ``position``): ``(txn, gtid)``. It opens
    a BEGIN ... XID/COMMIT group, whose Txn ``end`` is set at XID/COMMIT before the Txn is ever
    seen, or, flagged standalone, precedes a DDL (no Txn)."""
    seq, domain, flags2 = _gtid_body(buf, s + 19)
    gtid = f"{domain}-{sid}-{seq}"
    if flags2 & _STANDALONE:
        return None, gtid
    return Txn(position, [], None, None, position, 0, gtid), gtid   # positional: per transaction


def _rotate(buf, s: int, end: int, file: str, fno: int) -> tuple[int, str, int]:
    """A ROTATE: the stream position it moves to and that file's number, ``(pos, file, fno)``."""
    pos, nxt = ev.parse_rotate(buf, s, end)
    if nxt != file:
        file, fno = nxt, _file_no(nxt)
    return pos, file, fno


def _check_crc(buf, s: int, e: int, file: str, pos: int, ep: Endpoint) -> None:
    """``verify_checksum``: the event at ``buf[s:e]`` (after the stream position ``(file,
    pos)``) must match its trailing CRC32."""
    if zlib.crc32(memoryview(buf)[s:e - 4]) != int.from_bytes(buf[e - 4:e], "little"):
        raise ErrorCode.UPSTREAM_UNREACHABLE.error(f"binlog event at ({file}, {pos}) from {ep} fails its CRC32 check")


def _format_description(buf, s: int, e: int, checksum: bool, phl: dict) -> tuple[int, int]:
    """A FORMAT_DESCRIPTION (each file's first event): it updates ``phl``, the post-header
    length by event type, and gives ``(cks, tid_len)``: the file's trailing checksum bytes and
    its table id length (4 in pre-5.1 formats)."""
    fde = ev.parse_format_description(buf, s, e, checksum)
    cks = 4 if fde.checksum else 0
    phl.update({i + 1: n for i, n in enumerate(fde.post_header_len) if n})
    return cks, 4 if phl[ev.TABLE_MAP] == 6 else 6


def _previous_gtids(buf, s: int, gstate: str | None, txn: Txn | None, position: Position, file: str):
    """MySQL's PREVIOUS_GTIDS, after each file's FORMAT_DESCRIPTION: the GTID set of everything
    before the file. It makes a state the window did not know (a start without one) known;
    returns ``(gstate, position)`` after it."""
    if gstate is None:
        gstate = mysql_gtid.decode(buf, s + ev.HEADER_LEN)[0]
        if txn is None and position.file == file:
            position = Position(position.file, position.pos, gstate)
    return gstate, position

def _advance(state: str | None, gtid: str) -> str:
    """The GTID state after one more transaction (fast path: one replication domain)."""
    if state is None or ("," not in state and state.startswith(gtid[:gtid.find("-") + 1])):   # "d-": its domain
        return gtid
    return merge_gtid(state, gtid)


def _statement(at: _QueryAt, schema: bytes, text: str, charsets, start: Position, gstate: str | None,
               cur: Position | None = None) -> Txn:
    """The statement ``Txn`` of the QUERY event ``at`` (``text`` already read as UTF-8): its
    session's zone, sql_mode and collation, its text in the client's charset, its own offset.
    ``start``: where its group began; ``gstate``: the GTID state there; ``cur``: the position
    after it, when it is a group of its own (a DDL)."""
    buf, s, file, pos = at.buf, at.s, at.file, at.pos
    qs = ev.query_status(buf, s, at.qphl)
    codec = python_codec(charsets.get(qs.client_charset)) if qs.client_charset is not None else None
    if codec and codec != "utf-8":  # the client wrote its own charset's bytes
        text = ev.parse_query(buf, s, at.end, at.qphl, codec)[1].strip()
    return Txn(end=cur or Position(file, pos, gstate), ddl=text, ddl_schema=schema.decode() or None, start=start,
               timestamp=at.ts, gtid=gstate, time_zone=qs.zone, sql_mode=qs.sql_mode,
               collation_server=qs.server_collation, event_start=Position(file, pos - at.size),
               thread_specific=bool(at.flags & ev.LOG_EVENT_THREAD_SPECIFIC_F),
               thread_id=int.from_bytes(buf[s + ev.HEADER_LEN:s + ev.HEADER_LEN + 4], "little"))


def _xa_prepare_xid(buf, b: int) -> str:
    """The XID of an XA_PREPARE event (one_phase, formatID, gtrid and bqual lengths, data), as
    the server writes it in the XA COMMIT / XA ROLLBACK statement it logs later."""
    fmt, glen, blen = struct.unpack_from("<iii", buf, b + 1)
    data = bytes(buf[b + 13:b + 13 + glen + blen])
    return f"X'{data[:glen].hex()}',X'{data[glen:].hex()}',{fmt}"


def _next_piece(done: Txn, file: str, pos: int) -> Txn:
    """A transaction too large to hold whole: ``done`` becomes the piece handed on (it ends at the
    transaction's start, ``inside`` at ``(file, pos)``); returns the Txn of the next piece."""
    done.end, done.more, done.inside = done.start, True, Position(file, pos)
    txn = Txn(done.start, [], None, None, done.start, done.timestamp, done.gtid)
    txn.piece = done.piece + 1
    return txn


def _file_no(file: str) -> int:
    return Position(file, 0).key()[0]


def _partial(txn: Txn, codec, op: str, present: bytes, present2: bytes | None, file: str, pos: int) -> None:
    """Record on ``txn`` that a row image lacks columns (the upstream logged it with
    binlog_row_image MINIMAL or NOBLOB): its rows cannot be written whole downstream."""
    missing = sorted(set(codec.missing(present)) | set(codec.missing(present2) if present2 else ()))
    if missing:
        if txn.partial_images is None:
            txn.partial_images = []
        txn.partial_images.append((codec.schema, codec.table,
                                   f"the {op} row image of `{codec.schema}`.`{codec.table}` in the event ending at "
                                   f"({file}, {pos}) lacks column(s) {', '.join(missing)}"))


_PASSED = object()   # the codec of a table the window does not decode (``wanted``)


def _decode_fault() -> None:
    """Fault point ``binlog.decode_row`` (``raise:N``): the N-th row event decoded fails as a
    value the decoder cannot read would."""
    try:
        faults.hit("binlog.decode_row")
    except faults.FaultInjected as e:
        raise ValueError(str(e)) from None


def _table_name(buf, b: int) -> tuple[str, str]:
    """(schema, table) of the TABLE_MAP body at ``b``: a length byte, the name, a NUL, each.

    >>> _table_name(b"\\x02db\\x00\\x01t\\x00...", 0)
    ('db', 't')
    """
    n = buf[b]
    schema = bytes(buf[b + 1:b + 1 + n]).decode("utf-8", "surrogateescape")
    b += n + 2
    return schema, bytes(buf[b + 1:b + 1 + buf[b]]).decode("utf-8", "surrogateescape")


def _decode_error(codec, file: str, pos: int, exc: Exception) -> ShardflowError:
    return ErrorCode.BINLOG_UNREADABLE.error(
        f"cannot decode a row of `{codec.schema}`.`{codec.table}` in the event ending at "
        f"({file}, {pos}): {type(exc).__name__}: {exc}",
        workaround="The transaction is not applied and the source is paused before it. Check the column's "
                   "character set and value upstream; `dmctl binlog skip TASK -s SOURCE` drops the whole "
                   "transaction downstream if losing it is acceptable.")
