"""What a binlog window delivers: whole transactions (``Txn``) of row changes
(``RowChange``), or one DDL statement. Both readers (``binlog.window`` and the
mysql-replication one in ``tests/oracle_binlog.py``) produce them and the syncer consumes them; they
live here so that ``binlog/`` does not depend on ``sync/``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.position import Position


@dataclass(slots=True)
class RowChange:
    """One row of a row event, before routing."""

    op: str  # insert | update | delete
    schema: str
    table: str
    before: dict | None
    after: dict | None


@dataclass(slots=True)
class Txn:
    """What the stream delivers: a committed transaction's rows, or one DDL statement."""

    end: Position                  # resume point after this transaction
    rows: list[RowChange] = field(default_factory=list)
    ddl: str | None = None         # set for a DDL (query event outside a transaction)
    ddl_schema: str | None = None  # the session's current database for the DDL
    start: Position | None = None  # where the event group began (DDL: to pause before it)
    timestamp: int = 0             # upstream commit time (unix seconds), for lag; a DDL runs at it
    gtid: str | None = None
    time_zone: str | None = None   # a DDL's session time zone, when the event records it
    sql_mode: int | None = None    # a DDL's session sql_mode (the upstream's bitmap), when recorded
    collation_server: int | None = None  # a DDL's session collation_server (collation id), when recorded
    event_start: Position | None = None  # a DDL's own QUERY event offset, as SHOW BINLOG EVENTS lists it
    # row images that lack columns (binlog_row_image MINIMAL / NOBLOB for this change): (schema,
    # table, which, in words); the syncer pauses before a transaction with such rows of a table
    # it moves rather than write them
    partial_images: list | None = None
    # A transaction too large to hold whole (window.PIECE_BYTES of row events) comes in pieces:
    # ``piece`` counts them from 0, ``more`` says others follow. A piece that is not the last has
    # ``end`` == ``start``: no checkpoint lands inside a transaction; a replay from there applies
    # the pieces again in safe mode (the exit point covers the window).
    piece: int = 0
    more: bool = False
    inside: Position | None = None   # a piece that is not the last: the end of its last event
    # Statements a session logged inside this transaction's BEGIN ... COMMIT (binlog_format
    # STATEMENT or MIXED for some of its changes), each as a statement ``Txn`` (``ddl`` and its
    # session's context, ``event_start`` its own offset, ``start`` this transaction's): never
    # run downstream; the syncer pauses before the transaction when one may write a table it
    # moves, and applies the rows otherwise
    statements: list | None = None
    # the QUERY event's LOG_EVENT_THREAD_SPECIFIC_F: the statement used a temporary table of its
    # session (or the session's id), which the binlog does not carry
    thread_specific: bool = False
    thread_id: int | None = None   # the upstream session (connection id) that logged the statement
    xid: str | None = None         # an XA transaction's rows (ended by XA PREPARE): its XID as the server writes it
    # a row of it could not be decoded: the error (table and event), rows left out; the syncer
    # pauses before the transaction, and `dmctl binlog skip` drops it whole
    undecodable: object = None
