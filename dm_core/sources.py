"""Resolving where to connect: registered sources (state store) and the task's target."""

from __future__ import annotations

import zlib

from dm_core.db import Endpoint
from dm_core.errors import ErrorCode


def source_endpoint(store, source_id: str) -> Endpoint:
    got = store.get_source(source_id)
    if got is None:
        raise ErrorCode.SOURCE_UNKNOWN.error(f"source {source_id!r} is not registered")
    cfg, password = got
    return Endpoint(host=cfg["host"], port=int(cfg["port"]), user=cfg["user"], password=password,
                    name=f"source {source_id}")


def target_endpoint(task) -> Endpoint:
    t = task.target_database
    return Endpoint(host=t.host, port=int(t.port), user=t.user, password=t.password, name="target",
                    session=tuple(sorted((t.session or {}).items())))


def replica_server_id(task_name: str, source_id: str) -> int:
    """A stable server id for our binlog client, far from any real server's."""
    return 0x70000000 + zlib.crc32(f"{task_name}/{source_id}".encode()) % 0x0FFFFFFF
