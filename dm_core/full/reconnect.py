"""A chunk whose upstream or downstream went away is loaded again once the server is back.

Why: a chunk lands in one transaction with its marker (chunk_writer.py), so a chunk cut off by a
lost connection left nothing behind, and loading it again is safe -- unless the connection went
while the COMMIT was under way and the server committed it unheard: then its marker is there,
and the chunk counts as landed instead of being loaded again (land.Lander). Without it, a restarted downstream (a
TiDB rolling restart, a failover, a killed process) would fail the whole full phase, which
would then wait for someone to run `dmctl start-task`; DM's loader retries such errors itself.

What counts as lost: the MySQL client errors of a connection that broke or could not be made
(``LOST_CODES``), and shardflow's own "cannot connect" errors (``Transient``: the upstream or
downstream unreachable). An executor marks such an error with ``LOST_MARK``, which survives
Spark's wrapping of it into the driver's exception text. Everything else -- a value the
target refuses, a missing table -- fails the chunk at once, naming the cause.

How long: a chunk waits 1, 2, 4 ... 30 s between tries, for at most ``SHARDFLOW_FULL_RECONNECT_S``
seconds (default 600) from its first loss; then it fails, naming the last error. A job that
failed only so (``away_for_good``) exits with ``SERVERS_AWAY_EXIT``, and Airflow runs it again
with backoff (plugins/shardflow_airflow/retry.py), as DM's task checker resumes its load unit:
a server down for longer than the patience costs no `dmctl start-task`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time

from dm_core.errors import Transient

log = logging.getLogger("shardflow.full")

# server gone, lost during query, cannot connect (socket / TCP), server shutting down, connection killed
LOST_CODES = frozenset({2002, 2003, 2006, 2013, 2055, 1053, 1927})
LOST_MARK = "[shardflow: connection lost]"


def lost(e: BaseException) -> bool:
    """Whether an executor's error is a lost or refused connection.

    >>> import MySQLdb
    >>> lost(MySQLdb.OperationalError(2013, "Lost connection to server during query"))
    True
    >>> lost(MySQLdb.OperationalError(1062, "Duplicate entry"))
    False
    """
    if isinstance(e, Transient):
        return True
    code = (getattr(e, "args", ()) or (None,))[0]
    return isinstance(code, int) and code in LOST_CODES


def server_away(e: BaseException) -> bool:
    """Whether a driver-side step (the full phase's prepare and finish) lost an upstream or the
    downstream: a connection that broke, or one that could not be made because the server is
    down. Narrower than ``lost``: shardflow's other transient errors (a chunk that failed, a
    refused login) are not waited out there.

    >>> import pymysql
    >>> server_away(pymysql.err.OperationalError(2013, "Lost connection to server during query"))
    True
    >>> from dm_core.errors import ErrorCode
    >>> refused = ErrorCode.UPSTREAM_UNREACHABLE.error("cannot connect: Access denied")
    >>> refused.errno = 1045
    >>> server_away(refused)
    False
    """
    from dm_core.errors import ErrorCode

    if getattr(e, "code", None) in (ErrorCode.UPSTREAM_UNREACHABLE, ErrorCode.DOWNSTREAM_UNREACHABLE):
        return getattr(e, "errno", None) in LOST_CODES
    code = (getattr(e, "args", ()) or (None,))[0]
    return type(e).__name__ == "OperationalError" and isinstance(code, int) and code in LOST_CODES


# The full-load job's exit code when it stopped only because a server stayed away longer than its
# patience (BSD's EX_TEMPFAIL: "try again later"); any other failure exits 1.
SERVERS_AWAY_EXIT = 75


def away_for_good(e: BaseException | None) -> bool:
    """Whether a step or job failed because a server stayed away: ``e``, or an exception it was
    raised from, is a server gone (``server_away``) or an executor's lost connection (its
    ``LOST_MARK`` or the JDBC driver's words). A refused login or a value refused is not.

    >>> import pymysql
    >>> try:
    ...     try:
    ...         raise pymysql.err.OperationalError(2003, "Can't connect")
    ...     except Exception as inner:
    ...         raise RuntimeError("chunk 3 failed") from inner
    ... except RuntimeError as outer:
    ...     away_for_good(outer)
    True
    >>> away_for_good(RuntimeError(f"t chunk 1: {LOST_MARK} OperationalError: (2013, 'Lost connection')"))
    True
    >>> away_for_good(pymysql.err.OperationalError(1045, "Access denied")), away_for_good(ValueError("x"))
    (False, False)
    """
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = str(e)
        if any(w in text for w in _REFUSED):   # an executor marks any unreachable error, a refused login too
            return False
        if server_away(e) or LOST_MARK in text or any(w in text for w in _JAVA_LOST):
            return True
        e = e.__cause__ or e.__context__
    return False


def only_servers_away(*parts) -> bool:
    """Whether some of ``parts`` (a run, its tables: each with ``error`` and ``server_away``)
    failed, and every one that failed did so only because a server stayed away: the same run
    later can succeed (the job exits ``SERVERS_AWAY_EXIT``, the step raises ``ServersAway``)."""
    failed = [p.server_away for p in parts if p.error]
    return bool(failed) and all(failed)


# a server that answered and refused the login: waiting does not cure it
_REFUSED = ("Access denied for user", "(1045,")


# the JDBC driver's words for the same, in the JVM's exception text (the JDBC path reads in Java)
_JAVA_LOST = ("SQLNonTransientConnectionException", "SQLTransientConnectionException", "Communications link failure",
              "Connection refused", "Connection reset")


def marked(e: BaseException) -> bool:
    """Whether the driver's exception (of any wrapping) carries an executor's ``LOST_MARK`` or
    the JDBC driver's lost connection, or is a lost connection of the driver's own."""
    text = str(e)
    return LOST_MARK in text or lost(e) or any(w in text for w in _JAVA_LOST)


@contextlib.contextmanager
def marking():
    """On an executor: a lost connection raised inside leaves as ``LOST_MARK`` text, which the
    driver reads through Spark's wrapping."""
    try:
        yield
    except Exception as e:
        if lost(e) and LOST_MARK not in str(e):
            raise RuntimeError(f"{LOST_MARK} {type(e).__name__}: {e}") from None
        raise


class Patience:
    """One chunk's retries after lost connections."""

    def __init__(self, budget_s: float | None = None, sleep=time.sleep, clock=time.monotonic):
        self.budget = float(os.environ.get("SHARDFLOW_FULL_RECONNECT_S") or 600) if budget_s is None else budget_s
        self.sleep, self.clock = sleep, clock
        self.first: float | None = None
        self.tries = 0

    def again(self, name: str, chunk_id: int, e: BaseException) -> bool:
        """After a lost connection: wait and say so (True: load the chunk again), or False when
        the budget is spent."""
        return self.wait(f"{name} chunk {chunk_id}", e, "loading the chunk again")

    def wait(self, what: str, e: BaseException, then: str) -> bool:
        """``again`` for any step: ``what`` went away, ``then`` happens after the wait."""
        now = self.clock()
        if self.first is None:
            self.first = now
        wait = min(30.0, 2.0 ** self.tries)
        if now + wait - self.first > self.budget:
            return False
        self.tries += 1
        first_line = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        log.warning("%s: a server went away (%s); %s in %.0fs (try %d, for up to %.0fs in all)", what, first_line,
                    then, wait, self.tries, self.budget)
        self.sleep(wait)
        return True
