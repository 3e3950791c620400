"""Errors of shard DDL coordination.

They carry codes of the central registry (``dm_core.errors.ErrorCode``), whose workaround
names the command that moves things on; each class says whether a retry can help
(``Terminal``: a person must act first).

    >>> e = ShardDDLUnsupported("RENAME TABLE is not supported on a sharded table: RENAME TABLE a TO b")
    >>> str(e).splitlines()[0]
    '[code=50006:shard-ddl] RENAME TABLE is not supported on a sharded table: RENAME TABLE a TO b'
"""

from __future__ import annotations

from dm_core.errors import ErrorCode, Terminal


class ShardDDLUnsupported(Terminal):
    """A statement shard DDL coordination cannot handle (rename table, several tables, unparseable)."""

    code = ErrorCode.SHARD_DDL_UNSUPPORTED


class ShardDDLInconsistent(Terminal):
    """Pessimistic mode: a member reported DDLs different from the lock's (or a table from its group's)."""

    code = ErrorCode.SHARD_DDL_INCONSISTENT


class ShardDDLConflict(Terminal):
    """Optimistic mode: a change cannot be merged into the other shards' schemas."""

    code = ErrorCode.SHARD_DDL_CONFLICT


class ShardDDLLockError(Terminal):
    """An operator command (unlock) or a caller's transition that the lock's state does not allow."""

    code = ErrorCode.SHARD_DDL_LOCK


class ShardDDLExecUnknown(Terminal):
    """After a restart the owner cannot tell whether a DDL it started took effect downstream."""

    code = ErrorCode.SHARD_DDL_EXEC_UNKNOWN
