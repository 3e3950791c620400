"""Executes statement batches downstream, one transaction per batch.

Consecutive statements with the same text go through one ``executemany`` (pymysql turns
INSERT/REPLACE ... VALUES into one multi-row statement), so a batch costs a few round trips
instead of one per row.
"""

from __future__ import annotations

from itertools import groupby

from dm_core.errors import ErrorCode
from dm_core.sync.dml import Stmt


class Applier:
    def __init__(self, conn):
        self.conn = conn

    def apply(self, stmts: list[Stmt]) -> None:
        if not stmts:
            return
        import pymysql

        try:
            with self.conn.cursor() as cur:
                cur.execute("BEGIN")
                for sql, group in groupby(stmts, key=lambda s: s.sql):
                    params = [s.params for s in group]
                    if len(params) == 1:
                        cur.execute(sql, params[0])
                    else:
                        cur.executemany(sql, params)
                cur.execute("COMMIT")
        except pymysql.err.MySQLError as e:
            try:
                self.conn.rollback()
            except Exception:
                pass
            raise ErrorCode.DML_EXEC_FAILED.error(f"downstream rejected a batch: {e.args}") from None
