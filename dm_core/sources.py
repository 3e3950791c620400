"""Resolving where to connect: registered sources (state store) and the task's target.

A source's rules are the task instance's rules with the source file's own binlog event
``filters`` added (DM merges them into every task of the source; a task rule for the same
schema/table patterns wins).
"""

from __future__ import annotations

import zlib

from dm_core.db import Endpoint
from dm_core.errors import ErrorCode
from dm_core.tls import TLS


def source_endpoint(store, source_id: str) -> Endpoint:
    got = store.get_source(source_id)
    if got is None:
        raise ErrorCode.SOURCE_UNKNOWN.error(f"source {source_id!r} is not registered")
    cfg, password = got
    return endpoint_of(cfg, password)


def endpoint_of(cfg: dict, password: str) -> Endpoint:
    """The Endpoint of a registered source's config (``SourceConfig.to_dict()``)."""
    sid = cfg.get("source-id", "")
    return Endpoint(host=cfg["host"], port=int(cfg["port"]), user=cfg["user"], password=password,
                    name=f"source {sid}", session=tuple(sorted((cfg.get("session") or {}).items())),
                    tls=TLS.from_dict(cfg.get("security")))


def target_endpoint(task, *, load: bool = False) -> Endpoint:
    """The downstream, with the task's session variables. As in DM, ``foreign_key_checks``
    is 0 unless the task's ``session`` sets it: rows of a child table may arrive before its
    parent's (chunks load in parallel, shards merge), and target tables keep foreign keys.
    ``load``: the full phase's connections (target tables created, chunks loaded), where it is
    0 whatever the session says, as DM's loader has it: a child table is created and loaded
    before its parent (by name, in parallel), which checks would refuse."""
    t = task.target_database
    session = {k: v for k, v in (t.session or {}).items() if not (load and k.lower() == "foreign_key_checks")}
    if not any(k.lower() == "foreign_key_checks" for k in session):
        session["foreign_key_checks"] = "0"
    return Endpoint(host=t.host, port=int(t.port), user=t.user, password=t.password, name="target",
                    session=tuple(sorted(session.items())), tls=t.tls)


def foreign_key_checks(session: dict | None) -> bool:
    """Whether a task's ``target-database.session`` keeps foreign key checks on downstream (DM's
    IsForeignKeyChecksEnabled: ``1``, ``ON``, ``true``, any case; off when not set).

    >>> [foreign_key_checks(s) for s in ({"foreign_key_checks": "1"}, {"FOREIGN_KEY_CHECKS": "on"}, {}, None,
    ...                                  {"foreign_key_checks": "0"}, {"foreign_key_checks": 1})]
    [True, True, False, False, False, True]
    """
    for k, v in (session or {}).items():
        if k.lower() == "foreign_key_checks":
            return str(v).strip(" '\"").lower() in ("1", "on", "true")
    return False


def source_rules(task, store, source_id: str):
    """``task.rules_for(source_id)`` with the registered source's ``filters`` merged in."""
    rules = task.rules_for(source_id)
    got = store.get_source(source_id) if store is not None else None
    extra = (got[0].get("filters") if got else None) or []
    return task.with_source_filters(source_id, extra) if extra else rules


def replica_server_id(task_name: str, source_id: str) -> int:
    """A stable server id for our binlog client, far from any real server's."""
    return 0x70000000 + zlib.crc32(f"{task_name}/{source_id}".encode()) % 0x0FFFFFFF
