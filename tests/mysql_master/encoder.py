"""BinlogBuilder: MySQL binlog files (bytes) from transactions described in Python.

    b = BinlogBuilder(flavour="8.0", server_uuid="3e11fa47-71ca-11e1-9e33-c80aa9429562",
                      row_metadata="MINIMAL")
    spec = ["id INT UNSIGNED PRIMARY KEY", "name VARCHAR(32)", "price DECIMAL(10,2)"]
    b.ddl("shop", "CREATE TABLE t (id INT UNSIGNED PRIMARY KEY, name VARCHAR(32), price DECIMAL(10,2))")
    b.insert("shop", "t", spec, [(1, "a", Decimal("1.50"))])
    b.update("shop", "t", spec, [((1, "a", Decimal("1.50")), (1, "b", Decimal("2.00")))])
    mark = b.commit()                   # Mark(file, pos, gtid, gtid_set) after the transaction
    b.compressed_transaction([("delete", "shop", "t", spec, [(1, "b", Decimal("2.00"))])])
    b.rotate()
    b.files                             # {"binlog.000001": b"\\xfebin...", "binlog.000002": ...}

A file is what the server writes: the magic, FORMAT_DESCRIPTION, PREVIOUS_GTIDS, then per
transaction GTID (gtid_mode ON) or ANONYMOUS_GTID, BEGIN, TABLE_MAP and row events per
statement, XID; a DDL is GTID + QUERY. Every event has its log_pos (the next event's offset)
and CRC32; GTID events carry the transaction's length, so a transaction is framed whole at
commit. Each insert/update/delete call is one statement: its TABLE_MAP, then row events of at
most ``max_event_size`` bytes of rows (binlog_row_event_max_size, 8 KiB by default), the last
flagged STMT_END_F.
"""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass

from tests.mysql_master import columns as colspec
from tests.mysql_master import events as ev
from tests.mysql_master import tablemap
from tests.mysql_master.flavours import Flavour, sql_mode_bits
from tests.mysql_master.flavours import flavour as get_flavour
from tests.mysql_master.gtidset import GtidSet


@dataclass(frozen=True)
class Mark:
    """Where the binlog stands after one transaction."""

    file: str
    pos: int
    gtid: str | None          # "uuid:n" (None with gtid_mode OFF)
    gtid_set: str             # gtid_executed after it ("" with gtid_mode OFF)
    start: tuple[str, int]    # (file, pos) where the transaction's first event begins


class BinlogBuilder:
    def __init__(self, flavour: str | Flavour = "8.0", *, server_uuid: str | None = None, server_id: int = 1,
                 row_metadata: str | None = None, checksum: bool = True, gtid_mode: bool = True,
                 file_prefix: str | None = None, first_file: int = 1, timestamp: int = 1_700_000_000,
                 max_event_size: int = 8192, purged: str = ""):
        self.flavour = fl = get_flavour(flavour)
        self.server_uuid = str(_uuid.UUID(server_uuid)) if server_uuid else str(
            _uuid.uuid5(_uuid.NAMESPACE_OID, f"shardflow-mysql-master-{server_id}"))
        self.server_id = server_id
        self.row_metadata = (row_metadata or ("NONE" if fl.v < (8, 0) else "MINIMAL")).upper()
        if fl.v < (8, 0) and self.row_metadata != "NONE":
            raise ValueError("MySQL 5.7 has no binlog_row_metadata: its TABLE_MAPs carry no optional metadata")
        self.checksum = checksum
        self.gtid_mode = gtid_mode
        self.prefix = file_prefix or fl.binlog_prefix
        self.ts = timestamp
        self.max_event_size = max_event_size
        self.gtid_executed = GtidSet(purged)
        self.gtid_purged = GtidSet(purged)
        self.sql_mode = sql_mode_bits(fl, fl.default_sql_mode)
        self.marks: list[Mark] = []
        self._files: list[list] = []       # [name, bytearray]
        self._tables: dict[tuple[str, str], tuple[int, tuple]] = {}
        self._next_table_id = 100
        self._xid = 0
        self._thread_id = 10
        self._seq = 0                      # logical clock within the current file
        self._txn: list | None = None      # buffered (type, body, flags) of the open transaction
        self._txn_schema = ""
        self._new_file(first_file, created=timestamp)

    # ---- the binlog so far ------------------------------------------------------------------
    @property
    def files(self) -> dict[str, bytes]:
        return {name: bytes(data) for name, data in self._files}

    @property
    def file(self) -> str:
        return self._files[-1][0]

    @property
    def position(self) -> tuple[str, int]:
        return self.file, len(self._files[-1][1])

    @property
    def gtid_set(self) -> str:
        return str(self.gtid_executed)

    def columns(self, spec) -> list[colspec.Column]:
        """Column specs (strings or Columns) as Columns of this flavour."""
        return [c if isinstance(c, colspec.Column) else colspec.parse(c, self.flavour.utf8mb4_collation)
                for c in spec]

    def create_table_sql(self, schema: str, table: str, spec) -> str:
        return colspec.create_table_sql(schema, table, self.columns(spec))

    # ---- transactions ------------------------------------------------------------------------
    def begin(self, schema: str = "") -> None:
        if self._txn is not None:
            raise RuntimeError("a transaction is already open")
        self._txn, self._txn_schema = [], schema

    def insert(self, schema: str, table: str, spec, rows) -> None:
        self._statement(ev.WRITE_ROWS, schema, table, spec, list(rows))

    def update(self, schema: str, table: str, spec, pairs) -> None:
        """``pairs``: (before, after) row images."""
        self._statement(ev.UPDATE_ROWS, schema, table, spec, list(pairs))

    def delete(self, schema: str, table: str, spec, rows) -> None:
        self._statement(ev.DELETE_ROWS, schema, table, spec, list(rows))

    def commit(self, *, compress: bool = False, ts: int | None = None) -> Mark:
        """End the open transaction with an XID; ``compress``: as one TRANSACTION_PAYLOAD (zstd)."""
        if self._txn is None:
            raise RuntimeError("no open transaction")
        self._xid += 1
        events = [(ev.QUERY, self._query(self._txn_schema, "BEGIN", ddl=False), 0)] + self._txn
        events.append((ev.XID, ev.xid(self._xid), 0))
        self._txn = None
        if compress:
            if self.flavour.v < (8, 0):
                raise ValueError("binlog_transaction_compression needs MySQL 8.0.20+")
            events = [self._payload(events)]
        return self._write_group(events, may_have_sbr=False, ts=ts)

    def compressed_transaction(self, ops, ts: int | None = None) -> Mark:
        """One transaction as a TRANSACTION_PAYLOAD: ``ops`` are ("insert"|"update"|"delete",
        schema, table, spec, rows) tuples."""
        for op, schema, table, spec, rows in ops:
            getattr(self, op)(schema, table, spec, rows)
        return self.commit(compress=True, ts=ts)

    def ddl(self, schema: str, sql: str, ts: int | None = None) -> Mark:
        """A statement logged on its own (GTID + QUERY), as MySQL logs DDL."""
        if self._txn is not None:
            raise RuntimeError("a DDL commits the open transaction first: commit() it")
        self._tables = {k: v for k, v in self._tables.items() if k[0] != schema}   # reopened: new ids
        return self._write_group([(ev.QUERY, self._query(schema, sql, ddl=True), 0)], may_have_sbr=True, ts=ts)

    def rotate(self, next_file: str | None = None) -> str:
        """End the current file with a ROTATE and start the next one; returns its name."""
        if self._txn is not None:
            raise RuntimeError("cannot rotate inside a transaction")
        name, data = self._files[-1]
        number = int(name.rsplit(".", 1)[1]) + 1
        nxt = next_file or f"{self.prefix}.{number:06d}"
        body = ev.rotate(4, nxt)
        end = len(data) + ev.event_size(len(body), self.checksum)
        data += ev.frame(ev.ROTATE, body, ts=self.ts, server_id=self.server_id, log_pos=end, checksum=self.checksum)
        self._new_file(int(nxt.rsplit(".", 1)[1]), created=0, name=nxt)
        return nxt

    # ---- internals ---------------------------------------------------------------------------
    def _new_file(self, number: int, created: int, name: str | None = None) -> None:
        name = name or f"{self.prefix}.{number:06d}"
        data = bytearray(ev.BINLOG_MAGIC)
        fde = ev.format_description(self.flavour, created, self.checksum)
        # the FDE always has its CRC32, whatever binlog_checksum says (its algorithm byte does)
        end = 4 + ev.event_size(len(fde), True)
        data += ev.frame(ev.FORMAT_DESCRIPTION, fde, ts=self.ts, server_id=self.server_id, log_pos=end)
        prev = ev.previous_gtids(self.gtid_executed)
        end = len(data) + ev.event_size(len(prev), self.checksum)
        data += ev.frame(ev.PREVIOUS_GTIDS, prev, ts=self.ts, server_id=self.server_id, log_pos=end,
                         checksum=self.checksum)
        self._files.append([name, data])
        self._seq = 0
        self._tables.clear()

    def _query(self, schema: str, sql: str, *, ddl: bool) -> bytes:
        fl = self.flavour
        return ev.query(fl, schema, sql, thread_id=self._thread_id, sql_mode=self.sql_mode, ddl=ddl,
                        collation=fl.utf8mb4_collation, server_collation=fl.handshake_collation)

    def _table_id(self, schema: str, table: str, cols) -> int:
        sig = tuple((c.name, c.type, c.meta, c.unsigned, c.collation, c.members) for c in cols)
        known = self._tables.get((schema, table))
        if known and known[1] == sig:
            return known[0]
        self._next_table_id += 1
        self._tables[(schema, table)] = (self._next_table_id, sig)
        return self._next_table_id

    def _statement(self, typ: int, schema: str, table: str, spec, images: list) -> None:
        if self._txn is None:
            self.begin(schema)
        cols = self.columns(spec)
        tid = self._table_id(schema, table, cols)
        visibility = self.flavour.v >= (8, 0)
        self._txn.append((ev.TABLE_MAP, tablemap.table_map(tid, schema, table, cols, self.row_metadata, visibility),
                          0))
        update = typ == ev.UPDATE_ROWS
        chunks, cur, size = [], [], 0
        for img in images:
            n = len(tablemap.rows(tid, cols, [img], update=update, last=False))
            if cur and size + n > self.max_event_size:
                chunks.append(cur)
                cur, size = [], 0
            cur.append(img)
            size += n
        chunks.append(cur)
        for i, chunk in enumerate(chunks):
            self._txn.append((typ, tablemap.rows(tid, cols, chunk, update=update, last=i == len(chunks) - 1), 0))

    def _payload(self, events: list) -> tuple:
        """The transaction's events (no checksums, log_pos 0) zstd-compressed into one body."""
        import zstandard

        raw = b"".join(ev.frame(t, body, ts=self.ts, server_id=self.server_id, log_pos=0, flags=flags,
                                checksum=False) for t, body, flags in events)
        return ev.TRANSACTION_PAYLOAD, ev.transaction_payload(zstandard.ZstdCompressor().compress(raw), len(raw)), 0

    def _write_group(self, events: list, *, may_have_sbr: bool, ts: int | None) -> Mark:
        """Frame GTID (or ANONYMOUS_GTID) + ``events`` at the end of the current file."""
        fl = self.flavour
        self.ts = ts if ts is not None else self.ts + 1
        name, data = self._files[-1]
        start = len(data)
        self._seq += 1
        if self.gtid_mode:
            gno = max((b for a, b in self.gtid_executed.sets.get(self.server_uuid, [])), default=0) + 1
            sid, typ = _uuid.UUID(self.server_uuid).bytes, ev.GTID
        else:
            gno, sid, typ = 0, bytes(16), ev.ANONYMOUS_GTID
        rest = sum(ev.event_size(len(body), self.checksum) for _, body, _ in events)
        length = rest
        while True:   # the GTID event's own size counts, and holds the length as a packed integer
            total = rest + ev.event_size(ev.gtid_body_len(fl, length), self.checksum)
            if total == length:
                break
            length = total
        body = ev.gtid(fl, sid, gno, last_committed=self._seq - 1, sequence_number=self._seq,
                       commit_us=self.ts * 1_000_000, transaction_length=length, may_have_sbr=may_have_sbr)
        pos = start
        for t, b, flags in [(typ, body, 0)] + events:
            pos += ev.event_size(len(b), self.checksum)
            data += ev.frame(t, b, ts=self.ts, server_id=self.server_id, log_pos=pos, flags=flags,
                             checksum=self.checksum)
        gtid = None
        if self.gtid_mode:
            self.gtid_executed.add(self.server_uuid, gno)
            gtid = f"{self.server_uuid}:{gno}"
        mark = Mark(name, len(data), gtid, self.gtid_set, (name, start))
        self.marks.append(mark)
        return mark
