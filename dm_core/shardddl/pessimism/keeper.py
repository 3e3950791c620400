"""The registry of pessimistic locks (DM's ``pessimism.LockKeeper``): see ``dm_core.shardddl.keeper``."""

from __future__ import annotations

from dm_core.shardddl import keeper
from dm_core.shardddl.pessimism.lock import Lock


class Keeper(keeper.Keeper):
    lock_cls = Lock
