"""Which downstream errors go away by themselves, by MySQL error number.

A *transient* error is retried: the server went away or is restarting, the connection
dropped, a lock wait timed out or a deadlock rolled the transaction back, too many
connections, TiDB's region/PD/TiKV timeouts and write conflicts. The source retries with
backoff a bounded number of times and then pauses (session.py). Everything else is
*permanent* (syntax, unknown or duplicate column, data too long, generated column,
constraint, unknown table, ...): retrying the same statement gives the same answer, so the
source pauses at once with the statement, its binlog position and the error. An error
without a MySQL number (a bug, a failed assumption) is permanent too: never retried in
silence.

>>> [classify(n) for n in (2013, 1213, 1054, 1906, 3105, 1062, 9005, None)]
['transient', 'transient', 'permanent', 'permanent', 'permanent', 'permanent', 'transient', 'permanent']
"""

from __future__ import annotations

TRANSIENT, PERMANENT = "transient", "permanent"

TRANSIENT_ERRNOS = {
    1040: "too many connections",
    1053: "server shutdown in progress",
    1077: "normal shutdown",
    1152: "aborted connection",
    1158: "error reading communication packets",
    1159: "timeout reading communication packets",
    1160: "error writing communication packets",
    1161: "timeout writing communication packets",
    1205: "lock wait timeout exceeded",
    1213: "deadlock found",
    1927: "connection was killed",
    2002: "cannot connect (socket)",
    2003: "cannot connect",
    2006: "server has gone away",
    2013: "lost connection during query",
    2055: "lost connection",
    8022: "TiDB: transaction commit failed, retry",
    8027: "TiDB: schema changed, retry",
    8028: "TiDB: information schema changed",
    9001: "TiDB: PD server timeout",
    9002: "TiKV server timeout",
    9003: "TiKV server busy",
    9004: "TiDB: resolve lock timeout",
    9005: "TiDB: region unavailable",
    9006: "TiDB: GC life time is shorter than the transaction duration",
    9007: "TiDB: write conflict",
}


def errno_of(exc: BaseException | None) -> int | None:
    """The MySQL error number of a pymysql / mysqlclient exception (its first argument)."""
    args = getattr(exc, "args", None)
    return args[0] if args and isinstance(args[0], int) else None


def classify(errno: int | None) -> str:
    return TRANSIENT if errno in TRANSIENT_ERRNOS else PERMANENT


def ddl_error(e: BaseException, what: str):
    """The ShardflowError for a DDL the downstream failed: transient ones are retried like DML
    (``DML_EXEC_FAILED``, retried by the source with backoff), permanent ones pause the source
    (``DDL_EXEC_FAILED``). ``what`` names the statement in the message."""
    from dm_core.errors import ErrorCode

    n = errno_of(e)
    detail = e.args[1] if n is not None and len(e.args) > 1 else (getattr(e, "args", ()) or e)
    if classify(n) == TRANSIENT and n is not None:
        err = ErrorCode.DML_EXEC_FAILED.error(f"downstream error {n} (transient) running {what}: {detail}")
    else:
        err = ErrorCode.DDL_EXEC_FAILED.error(f"downstream rejected {what}: {f'{n}: ' if n else ''}{detail}")
    err.errno = n
    return err
