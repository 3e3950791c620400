"""Executes statement batches downstream, one transaction per batch.

Statements are rendered to text by ``literal.Renderer`` (values escaped by mysqlclient's C
escaper) and sent on a mysqlclient connection, which releases the GIL while the server
works, so the binlog reader keeps decoding meanwhile. Consecutive single-row INSERT/REPLACE
statements with the same text are sent as one multi-row statement, so a batch costs a few
round trips instead of one per row; multi-row statements longer than the server takes
(max_allowed_packet) are sent in pieces, in order.

Workers never touch the same key at once (causality), but InnoDB's gap and next-key
locks on secondary indexes can still make two of them deadlock; the server then rolls
one transaction back whole, so running it again is exact. Deadlocks and lock-wait
timeouts are retried a few times before the batch fails.
"""

from __future__ import annotations

import time
from itertools import groupby
from operator import attrgetter

from dm_core.errors import ErrorCode
from dm_core.sync.dml import Stmt
from dm_core.sync.literal import Renderer

_RETRYABLE = {1213, 1205}  # deadlock, lock wait timeout: the transaction was rolled back
_ATTEMPTS = 5
_sql = attrgetter("sql")


class Applier:
    """One executor's connection (mysqlclient: ``db.connect_native``)."""

    def __init__(self, conn):
        self.conn = conn
        self._render = Renderer(conn)

    def apply(self, stmts: list[Stmt]) -> None:
        if not stmts:
            return
        import MySQLdb

        texts = [t for sql, group in groupby(stmts, key=_sql) for t in self._render.render_run(sql, list(group))]
        for attempt in range(_ATTEMPTS):
            try:
                return self._apply_once(texts)
            except MySQLdb.MySQLError as e:
                code = e.args[0] if e.args else None
                try:
                    self.conn.rollback()
                except Exception:
                    pass
                if code in _RETRYABLE and attempt + 1 < _ATTEMPTS:
                    time.sleep(0.01 * 2 ** attempt)
                    continue
                raise ErrorCode.DML_EXEC_FAILED.error(f"downstream rejected a batch: {e.args}") from None

    def _apply_once(self, texts: list[bytes]) -> None:
        cur = self.conn.cursor()
        try:
            cur.execute(b"BEGIN")
            for text in texts:
                cur.execute(text)
            cur.execute(b"COMMIT")
        finally:
            cur.close()
