"""The registry of optimistic locks (DM's ``optimism.LockKeeper``): see ``dm_core.shardddl.keeper``."""

from __future__ import annotations

from dm_core.shardddl import keeper
from dm_core.shardddl.optimism.lock import Lock


class Keeper(keeper.Keeper):
    lock_cls = Lock
