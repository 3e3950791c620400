"""The coordinator's answer to one source for one DDL step of a pessimistic lock
(DM's ``pessimism.Operation``): ``exec`` for the owner, ``skip`` for the others, ``wait``
until the step is ready (or, for ``skip``, until the owner is done). See ``common``.
"""

from dm_core.shardddl.common import DONE, EXEC, EXECUTING, PENDING, SKIP, WAIT, Operation

__all__ = ["Operation", "EXEC", "SKIP", "WAIT", "PENDING", "EXECUTING", "DONE"]
