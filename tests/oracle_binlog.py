"""The test oracle for dm_core/binlog: mysql-replication reading a bounded window of whole
transactions from a position, by a library written apart from ours. The integration tests hold
``dm_core.binlog.BinlogWindow`` to its output; the bench's decode-only baseline uses it.

mysql-replication 1.0 against MariaDB 10.11 has two traps (both seen on the test stack):
- with ``is_mariadb=True`` and no GTID it ignores file/pos and replays from the start;
- with ``blocking=False`` the end of the stream is error 2013, which it treats as transient
  and reconnects from the original start forever.
So we speak the classic file/pos dump protocol (``is_mariadb=False``, which MariaDB serves),
read *blocking*, and stop ourselves: at the upstream's write position captured when the
window opened (events up to there exist, so the read never waits on an idle server), or
earlier when the window's event/time budget is spent. A heartbeat every second hands
control back even if the server sends nothing.

Windows end only between transactions (after XID or a DDL), because resuming inside a
transaction drops rows until the next TableMapEvent.
"""

from __future__ import annotations

import time
from typing import Iterator

from dm_core.binlog.txn import RowChange, Txn
from dm_core.db import Endpoint
from dm_core.position import Position


class OracleBinlogWindow:
    """Iterate the transactions in [start, until) of one upstream.

    ``budget_events``/``budget_seconds`` bound the window; both are checked only at
    transaction boundaries, so a window always ends at a position safe to resume from.
    """

    def __init__(self, ep: Endpoint, start: Position, until: Position, *, server_id: int,
                 budget_events: int = 200_000, budget_seconds: float = 30.0):
        self.ep = ep
        self.start = start
        self.until = until
        self.server_id = server_id
        self.budget_events = budget_events
        self.budget_seconds = budget_seconds
        self.position = start  # last safe position delivered
        self.events_read = 0

    def __iter__(self) -> Iterator[Txn]:
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import (
            HeartbeatLogEvent, MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent,
        )
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        from dm_core.tls import pymysql_ssl

        if self.start.key() >= self.until.key():
            return
        stream = BinLogStreamReader(
            connection_settings={"host": self.ep.host, "port": int(self.ep.port), "user": self.ep.user,
                                 "passwd": self.ep.password, "charset": "utf8mb4",
                                 **({"ssl": pymysql_ssl(self.ep.tls)} if self.ep.tls else {})},
            server_id=self.server_id, log_file=self.start.file, log_pos=self.start.pos,
            resume_stream=True, blocking=True, is_mariadb=False, freeze_schema=True,
            enable_logging=False, slave_heartbeat=1,
            only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent, QueryEvent,
                         RotateEvent, MariadbGtidEvent, HeartbeatLogEvent],
        )
        deadline = time.monotonic() + self.budget_seconds
        until_key = self.until.key()
        txn: Txn | None = None
        txn_start = self.start
        gtid: str | None = None
        try:
            for ev in stream:
                self.events_read += 1
                cur = Position(stream.log_file, stream.log_pos)
                if isinstance(ev, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                    if txn is None:  # a row event outside BEGIN: cannot happen with ROW format
                        txn = Txn(end=cur, start=txn_start)
                    txn.timestamp = ev.timestamp
                    schema, table = ev.schema, ev.table
                    if isinstance(ev, WriteRowsEvent):
                        txn.rows.extend(RowChange("insert", schema, table, None, r["values"]) for r in ev.rows)
                    elif isinstance(ev, UpdateRowsEvent):
                        txn.rows.extend(RowChange("update", schema, table, r["before_values"], r["after_values"]) for r in ev.rows)
                    else:
                        txn.rows.extend(RowChange("delete", schema, table, r["values"], None) for r in ev.rows)
                    continue
                if isinstance(ev, MariadbGtidEvent):
                    gtid = ev.gtid
                    txn_start = self.position
                    if ev.flags & 0x01:  # FL_STANDALONE: a DDL follows, not a BEGIN…COMMIT group
                        txn = None
                    else:
                        txn = Txn(end=cur, start=txn_start, gtid=gtid)
                    continue
                if isinstance(ev, QueryEvent):
                    q = ev.query.strip() if isinstance(ev.query, str) else ev.query.decode("utf-8", "replace").strip()
                    uq = q.upper()
                    if uq == "BEGIN":
                        txn = Txn(end=cur, start=self.position, gtid=gtid)
                        continue
                    if uq == "COMMIT":
                        done, txn = txn, None
                        if done is not None:
                            done.end = cur
                            self.position = cur
                            yield done
                    else:
                        schema = ev.schema.decode() if isinstance(ev.schema, bytes) else ev.schema
                        self.position = cur
                        yield Txn(end=cur, ddl=q, ddl_schema=schema or None, start=txn_start,
                                  timestamp=ev.timestamp, gtid=gtid)
                        txn = None
                elif isinstance(ev, XidEvent):
                    done, txn = txn, None
                    if done is not None:
                        done.end = cur
                        done.timestamp = done.timestamp or ev.timestamp
                        self.position = cur
                        yield done
                    else:
                        self.position = cur
                elif isinstance(ev, RotateEvent):
                    if txn is None and ev.position and ev.next_binlog:
                        self.position = Position(ev.next_binlog, ev.position)
                elif isinstance(ev, HeartbeatLogEvent) and txn is None:
                    # The server is at `cur` with nothing more to send past our target.
                    if cur.key() >= self.position.key():
                        self.position = cur
                if txn is None:
                    txn_start = self.position
                    if (self.position.key() >= until_key or self.events_read >= self.budget_events
                            or time.monotonic() >= deadline):
                        break
        finally:
            stream.close()
