"""The coordinator's answer to one upstream table for one DDL of an optimistic lock:
``exec`` the DDLs that change the merged schema, ``skip`` when the merged schema already
holds the change, ``wait`` while an earlier exec op of the lock is not done or (with
``conflict``) until the conflict is resolved. ``upstream`` names the table. See ``common``.
"""

from dm_core.shardddl.common import DONE, EXEC, EXECUTING, PENDING, SKIP, WAIT, Operation

__all__ = ["Operation", "EXEC", "SKIP", "WAIT", "PENDING", "EXECUTING", "DONE"]
