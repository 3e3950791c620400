"""Errors of shard DDL coordination.

They carry codes of the central registry (``dm_core.errors.ErrorCode``); each class says
whether a retry can help (``Terminal``: a person must act first) and names the command
that moves things on.

    >>> e = ShardDDLUnsupported("RENAME TABLE is not supported on a sharded table: RENAME TABLE a TO b")
    >>> str(e).splitlines()[0]
    '[code=50006:shard-ddl] RENAME TABLE is not supported on a sharded table: RENAME TABLE a TO b'
"""

from __future__ import annotations

from dm_core.errors import ErrorCode, Terminal

_SHOW = "Run `dmctl shard-ddl-lock TASK` for the lock's members and statements."


class ShardDDLUnsupported(Terminal):
    """A statement shard DDL coordination cannot handle (rename table, several tables, unparseable)."""

    code = ErrorCode.SHARD_DDL_UNSUPPORTED

    def __init__(self, message: str, *, workaround: str | None = None):
        super().__init__(message, workaround=workaround or (
            "Run `dmctl binlog skip TASK` to skip the statement, or `dmctl binlog replace TASK \"SQL\"` "
            "with statements on one table each."))


class ShardDDLInconsistent(Terminal):
    """Pessimistic mode: a member reported DDLs different from the lock's (or a table from its group's)."""

    code = ErrorCode.SHARD_DDL_INCONSISTENT

    def __init__(self, message: str, *, workaround: str | None = None):
        super().__init__(message, workaround=workaround or (
            "Every shard must run the same DDL statements in the same order. " + _SHOW + " Then make the "
            "upstream consistent, or `dmctl binlog replace TASK \"SQL\"` on the source that differs, or "
            "`dmctl shard-ddl-lock unlock LOCK_ID` to force the lock."))


class ShardDDLConflict(Terminal):
    """Optimistic mode: a change cannot be merged into the other shards' schemas."""

    code = ErrorCode.SHARD_DDL_CONFLICT

    def __init__(self, message: str, *, workaround: str | None = None):
        super().__init__(message, workaround=workaround or (
            _SHOW + " Make the shards' definitions compatible upstream (the lock resolves by itself once "
            "they are), or `dmctl shard-ddl-lock unlock LOCK_ID --action skip|exec` after fixing the "
            "downstream table by hand."))


class ShardDDLLockError(Terminal):
    """An operator command (unlock) or a caller's transition that the lock's state does not allow."""

    code = ErrorCode.SHARD_DDL_LOCK

    def __init__(self, message: str, *, workaround: str | None = None):
        super().__init__(message, workaround=workaround or _SHOW)


class ShardDDLExecUnknown(Terminal):
    """After a restart the owner cannot tell whether a DDL it started took effect downstream."""

    code = ErrorCode.SHARD_DDL_EXEC_UNKNOWN

    def __init__(self, message: str, *, workaround: str | None = None):
        super().__init__(message, workaround=workaround or (
            "Look at the downstream table: if the statement took effect run "
            "`dmctl shard-ddl-lock unlock LOCK_ID --action skip`, otherwise `--action exec`."))
