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
timeouts are retried a few times before the batch fails. A failed batch raises by the
error's class (dm_core/classify.py): a transient one (``DML_EXEC_FAILED``) is retried by the
source with backoff; a permanent one (``DML_REJECTED``) makes the syncer find the exact
transaction (isolate.py) and pause there.
"""

from __future__ import annotations

import time
from itertools import groupby
from operator import attrgetter

from dm_core import faults
from dm_core.errors import ErrorCode
from dm_core.classify import TRANSIENT, classify
from dm_core.sync.dml import Stmt
from dm_core.sync.literal import Renderer, pack

_RETRYABLE = {1213, 1205}  # deadlock, lock wait timeout: the transaction was rolled back
_ATTEMPTS = 5
_sql = attrgetter("sql")


class Applier:
    """One executor's connection (mysqlclient: ``db.connect_native``)."""

    def __init__(self, conn):
        self.conn = conn
        self._render = Renderer(conn)
        self.multi = _takes_multi_statements(conn)

    def apply(self, stmts: list[Stmt]) -> None:
        if not stmts:
            return
        import MySQLdb

        texts = [t for sql, group in groupby(stmts, key=_sql) for t in self._render.render_run(sql, list(group))]
        longest = max(map(len, texts))
        if longest >= self._render.packet:
            raise _too_large(texts, longest, self._render.packet)
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
                kind = classify(code)
                err = (ErrorCode.DML_EXEC_FAILED if kind == TRANSIENT else ErrorCode.DML_REJECTED).error(
                    f"downstream error {code} ({kind}): {e.args[1] if len(e.args) > 1 else e}")
                err.errno = code
                raise err from None

    def _apply_once(self, texts: list[bytes]) -> None:
        cur = self.conn.cursor()
        try:
            cur.execute(b"BEGIN")
            for text in self._round_trips(texts):
                cur.execute(text)
                while cur.nextset():    # a later statement's error is raised here
                    pass
            faults.hit("sync.apply.before_commit")
            cur.execute(b"COMMIT")
        finally:
            cur.close()

    def _round_trips(self, texts: list[bytes]) -> list[bytes]:
        """``texts`` joined by ``;`` into as few sends as fit the join limit, on a connection
        that takes several statements at once (``db.connect_native(multi_statements=True)``):
        a batch of per-row UPDATEs and DELETEs costs a few round trips instead of one per row."""
        if not self.multi or len(texts) < 2:
            return texts
        return pack(b"", texts, b"", self._render.max_bytes, b";")


def _too_large(texts: list[bytes], longest: int, packet: int):
    """A statement the server would refuse for its size (one row longer than max_allowed_packet:
    multi-row statements are cut below it). Sent anyway, the server drops the connection ("Server
    has gone away", 2006), which reads as transient: the source would retry for minutes and then
    pause naming the wrong cause. Refused here instead, as a permanent error naming the fix."""
    import re

    mb = 1 << 20
    text = next(t for t in texts if len(t) == longest)
    m = re.search(rb"`(?:[^`]|``)+`\.`(?:[^`]|``)+`", text[:512])   # the statement's table, as rendered
    where = f" on {m.group(0).decode(errors='replace')}" if m else ""
    err = ErrorCode.DML_REJECTED.error(
        f"a statement{where} is {longest / mb:.1f} MB, more than the downstream's max_allowed_packet "
        f"({packet / mb:.1f} MB): the server would refuse it (error 1153)",
        workaround="Raise max_allowed_packet on the downstream above the row's size (SET GLOBAL "
                   "max_allowed_packet = ...; TiDB takes up to 1 GB), then `dmctl resume-task TASK -s SOURCE`.")
    err.errno = 1153
    return err


def _takes_multi_statements(conn) -> bool:
    from MySQLdb.constants import CLIENT

    try:
        return bool(conn.client_flag & CLIENT.MULTI_STATEMENTS)
    except AttributeError:
        return False
