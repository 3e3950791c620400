"""What the syncer does with the statements of upstream sessions that logged some of their
changes as statements (binlog_format STATEMENT or MIXED), rather than as rows or table DDL.

Why a stage of its own: none of these statements ever runs downstream, yet each can lose rows
or break the target when misread (sync/statements.py reads the text; this module decides):

- a row change logged as a statement (``row_statement``): skipped when it writes no database
  the task moves or only its session's temporary tables, else the source pauses (50021) naming
  it; ``XA ROLLBACK`` pauses (50022) unless its transaction, prepared while this process read
  the binlog, changed no table the task moves;
- such statements among a transaction's rows (``in_transaction``): judged one by one before the
  rows apply; the pause names the statement's own offset, where `dmctl binlog skip` passes that
  statement by and the rows still apply;
- a session's temporary tables (``on_ddl``): their CREATE, ALTER, TRUNCATE, RENAME and DROP are
  skipped (a temporary table may bear the name of a table the task moves, and the server logs
  their DROP by itself when the session ends); a CREATE TABLE built from one pauses.

The temporary tables of each upstream session (by connection id, from the binlog's QUERY
events) are kept in memory: after a restart, a row change into one pauses once, a ``binlog
skip`` away, rather than being judged harmless by a guess.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from dm_core.binlog.txn import Txn
from dm_core.ddl.parsed import parse_ddl
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.secrets.redact import redact_sql
from dm_core.sync import statements

log = logging.getLogger("shardflow.sync")


_XA_KEPT = 100_000


class LoggedStatements:
    """One source's judge of statement-logged changes and temporary tables."""

    def __init__(self, source_id: str, block_allow, upstream=None):
        self.source_id = source_id
        self.block_allow = block_allow
        self.upstream = upstream   # () -> context manager of an upstream connection (the pause's message)
        self.temporary_tables: dict[int, set[tuple[str, str]]] = {}   # connection id -> its temporary tables
        # XA transactions prepared while this process read the binlog: XID -> whether any of
        # their rows belong to a table the task moves (the last _XA_KEPT of them)
        self.xa_prepared: OrderedDict[str, bool] = OrderedDict()

    def prepared(self, txn: Txn) -> None:
        """Row transaction ``txn`` ended with XA PREPARE: remember whether it moved rows, so
        that its XA ROLLBACK pauses only when it did."""
        moved = txn.piece > 0 or any(self.block_allow.allow_table(r.schema, r.table) for r in txn.rows)
        self.xa_prepared[txn.xid.lower()] = moved
        while len(self.xa_prepared) > _XA_KEPT:
            self.xa_prepared.popitem(last=False)

    def in_transaction(self, txn: Txn, mode_of, op_at, on_op) -> tuple[Txn, ShardflowError] | None:
        """The statements inside row transaction ``txn``: None when its rows may apply, else the
        statement to pause at and why. ``mode_of(stmt)``: its session's sql_mode names;
        ``op_at(position)``: an operator's `dmctl binlog` there (or None for no operations),
        which ``on_op(stmt, op)`` carries out (an error, or None to go on)."""
        for stmt in txn.statements:
            op = op_at(stmt.event_start) if op_at is not None else None
            if op is not None:
                err = on_op(stmt, op)
                if err is not None:
                    return stmt, err
                continue
            mode = mode_of(stmt)
            if statements.temporary(stmt.ddl, mode, stmt.thread_specific) == "temporary":
                self._temporary(stmt, "temporary", mode)   # CREATE TEMPORARY TABLE does not end a transaction
                continue
            said = statements.kind_of(stmt.ddl, mode)
            err = self.row_statement(stmt, stmt.ddl, said, mode) if said is not None else None
            if err is not None:
                return stmt, err
            if said is None:
                log.info("source %s: skipping a statement inside the transaction at %s (session statements are "
                         "not migrated): %.200s", self.source_id, txn.start, redact_sql(stmt.ddl))
        return None

    def on_ddl(self, txn: Txn, mode: str | None) -> tuple[bool, ShardflowError | None]:
        """(True, error or None) when DDL ``txn`` is about its session's temporary tables (the
        error to pause with, else nothing to do); (False, None) for a DDL to handle as usual."""
        temp = statements.temporary(txn.ddl, mode, txn.thread_specific) or self._of_temporary(txn, mode)
        if temp is None:
            return False, None
        return True, self._temporary(txn, temp, mode)

    def row_statement(self, txn: Txn, sql: str, kind: str, mode: str | None) -> ShardflowError | None:
        """A statement that is not DDL but concerns rows (sync/statements.py): None to go on,
        else the error to pause with."""
        shown = redact_sql(sql)
        if kind == "xa rollback":
            if self.xa_prepared.get(sql.strip()[len("XA ROLLBACK"):].strip().lower()) is False:
                log.info("source %s: skipping %s: the XA transaction it rolls back changed no table the task moves",
                         self.source_id, shown)
                return None
            return ErrorCode.XA_ROLLED_BACK.error(
                f"the upstream rolled back a prepared XA transaction: {shown}; its rows were applied downstream "
                f"at its XA PREPARE")
        temps = self.temporary_tables.get(txn.thread_id) if txn.thread_specific else None
        written = statements.tables_written(sql, txn.ddl_schema, mode) if temps else None
        if written and written <= temps:
            log.info("source %s: skipping a row change of its session's temporary tables at %s: %.200s",
                     self.source_id, txn.event_start or txn.start, shown)
            return None
        if not any(self.block_allow.selects_schema(db) for db in statements.databases_written(sql, txn.ddl_schema,
                                                                                              mode)):
            log.info("source %s: skipping a row change logged as a statement at %s, on no table the task moves: "
                     "%.200s", self.source_id, txn.event_start or txn.start, shown)
            return None
        precise = self._transaction_precise(statements.tables_written(sql, txn.ddl_schema, mode) or set())
        if precise:
            names = ", ".join(f"`{s}`.`{t}`" for s, t in precise)
            return ErrorCode.STATEMENT_ROW_CHANGE.error(
                f"a row change of {names}, a system-versioned table with a transaction-precise period (BIGINT "
                f"UNSIGNED ... AS ROW START): MariaDB logs its changes as statements even in ROW format, so its rows "
                f"are not in the binlog: {shown:.500}",
                workaround="Give the table a TIMESTAMP(6) period upstream (ALTER TABLE ... DROP SYSTEM VERSIONING, "
                           "then ADD SYSTEM VERSIONING with TIMESTAMP(6) ROW START / ROW END columns), re-sync it "
                           "(trigger dm_TASK_resync), and `dmctl binlog skip TASK -s SOURCE` past the statements "
                           "logged before.")
        return ErrorCode.STATEMENT_ROW_CHANGE.error(
            f"a row change logged as a statement (binlog_format STATEMENT or MIXED), not as row events: {shown:.500} "
            f"(session database {txn.ddl_schema or '(none)'}; it may write a database whose tables the task moves)")

    def _transaction_precise(self, tables: set) -> list[tuple[str, str]]:
        """Of ``tables``, those the task moves that are system-versioned by transaction ids (their
        ROW START column is a BIGINT), asked of the upstream; [] when it cannot be asked."""
        tables = sorted((s, t) for s, t in tables if s and t and self.block_allow.allow_table(s, t))
        if not tables or self.upstream is None:
            return []
        cond = " OR ".join(["(table_schema = %s AND table_name = %s)"] * len(tables))
        try:
            with self.upstream() as conn, conn.cursor() as cur:
                cur.execute("SELECT DISTINCT table_schema, table_name FROM information_schema.columns WHERE "
                            f"generation_expression = 'ROW START' AND data_type = 'bigint' AND ({cond})",
                            [v for st in tables for v in st])
                return sorted(tuple(r) for r in cur.fetchall())
        except Exception as e:  # noqa: BLE001 - only the message's detail: the pause stands without it
            log.warning("source %s: could not ask the upstream about %s: %s", self.source_id, tables, e)
            return []

    def _temporary(self, txn: Txn, temp: str, mode: str | None) -> ShardflowError | None:
        """Skipped (and the session's temporary tables tracked), or a pause when it builds a
        table the task moves from a temporary one."""
        shown = redact_sql(txn.ddl)
        d = parse_ddl(txn.ddl, txn.ddl_schema, mode)
        if temp == "from temporary":
            if any(self.block_allow.allow_table(s, t) for s, t in d.tables[:1]):
                return ErrorCode.STATEMENT_ROW_CHANGE.error(
                    f"a table built from a temporary table of its upstream session (binlog_format STATEMENT or "
                    f"MIXED): the binlog holds neither the temporary table's definition nor the rows: {shown:.500}",
                    workaround="Create the table downstream yourself with its rows (the statement is above, with "
                               "upstream names), then `dmctl binlog skip TASK -s SOURCE`; set binlog_format=ROW in "
                               "the sessions that set STATEMENT or MIXED.")
        self._track(txn, d)
        log.info("source %s: skipping a statement on temporary tables at %s (they live in one upstream session and "
                 "are not migrated): %.200s", self.source_id, txn.event_start or txn.start, shown)
        return None

    def _of_temporary(self, txn: Txn, mode: str | None) -> str | None:
        """For a DDL naming a temporary table of its session that the event does not say is
        about one (MariaDB logs RENAME TABLE of one without the flag): ``temporary`` when it
        acts on one, ``from temporary`` when it creates a table from one (CREATE TABLE ...
        SELECT / LIKE); else None."""
        mine = self.temporary_tables.get(txn.thread_id) if txn.thread_id is not None else None
        if not mine:
            return None
        d = parse_ddl(txn.ddl, txn.ddl_schema, mode)
        if d.kind == "create table":
            used = statements.names_in(txn.ddl, txn.ddl_schema, mode) - set(d.tables[:1])
            return "from temporary" if used & mine else None
        return "temporary" if d.tables and d.tables[0] in mine else None

    def _track(self, txn: Txn, d) -> None:
        """The temporary tables of the session of ``txn`` after its DDL ``d`` (parsed)."""
        if txn.thread_id is None or d.kind not in ("create table", "drop table", "rename table"):
            return
        mine = self.temporary_tables.setdefault(txn.thread_id, set())
        if d.kind == "create table":
            mine |= set(d.tables[:1])
        elif d.kind == "rename table":
            for old, new in zip(d.tables[::2], d.tables[1::2]):
                if old in mine:
                    mine.discard(old)
                    mine.add(new)
        else:
            mine -= set(d.tables)
        if not mine:
            del self.temporary_tables[txn.thread_id]
