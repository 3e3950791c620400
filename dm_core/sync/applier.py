"""Executes statement batches downstream, one transaction per batch.

Consecutive statements with the same text go through one ``executemany`` (pymysql turns
INSERT/REPLACE ... VALUES into one multi-row statement), so a batch costs a few round trips
instead of one per row.

Workers never touch the same key at once (causality), but InnoDB's gap and next-key
locks on secondary indexes can still make two of them deadlock; the server then rolls
one transaction back whole, so running it again is exact. Deadlocks and lock-wait
timeouts are retried a few times before the batch fails.
"""

from __future__ import annotations

import time
from itertools import groupby

from dm_core.errors import ErrorCode
from dm_core.sync.dml import Stmt


_RETRYABLE = {1213, 1205}  # deadlock, lock wait timeout: the transaction was rolled back
_ATTEMPTS = 5


class Applier:
    def __init__(self, conn):
        self.conn = conn

    def apply(self, stmts: list[Stmt]) -> None:
        if not stmts:
            return
        import pymysql

        for attempt in range(_ATTEMPTS):
            try:
                return self._apply_once(stmts)
            except pymysql.err.MySQLError as e:
                code = e.args[0] if e.args else None
                try:
                    self.conn.rollback()
                except Exception:
                    pass
                if code in _RETRYABLE and attempt + 1 < _ATTEMPTS:
                    time.sleep(0.01 * 2 ** attempt)
                    continue
                raise ErrorCode.DML_EXEC_FAILED.error(f"downstream rejected a batch: {e.args}") from None

    def _apply_once(self, stmts: list[Stmt]) -> None:
        with self.conn.cursor() as cur:
            cur.execute("BEGIN")
            for sql, group in groupby(stmts, key=lambda s: s.sql):
                params = [s.params for s in group]
                if len(params) == 1:
                    cur.execute(sql, params[0])
                else:
                    cur.executemany(sql, params)
            cur.execute("COMMIT")
