"""The coordinator (DM-master's role for shard DDL), and a task's shard DDL locks as operators
see them, whatever the mode.

Three callers share this module, so that what they show and do cannot drift apart:

* the coordinator's round (``coordinate``), run by a sensor of the incremental DAG:
  each poke tells every lock which sources take part (from the upstreams' tables, as the
  task's routes group them) and settles it; its result is mirrored to the Airflow Variable
  ``shardflow_<task>_ddl_locks``;
* ``dmctl shard-ddl-lock [TASK]`` and ``query-status`` (``list_locks`` + ``render``);
* ``dmctl shard-ddl-lock unlock`` and the ``dm_<task>_shard_ddl_unlock`` DAG (``unlock``): on a
  stopped task a pessimistic lock whose DDL has not started is removed, as DM does (its
  sources report again at the next start).

Every change goes through the mode's lock store (``lock_ops``: one Postgres transaction per lock), so a
caller killed anywhere leaves the lock as it was before or after, never in between.
"""

from __future__ import annotations

from dm_core.shardddl import pg
from dm_core.shardddl.common import EXEC, SKIP
from dm_core.shardddl.errors import ShardDDLLockError
from dm_core.shardddl.lock_ops import ops_for

MODES = ("pessimistic", "optimistic")


def list_locks(store, task_name: str, *, active_only: bool = False) -> list[dict]:
    """Every lock of the task (both modes), with ``waiting_since`` for the ones not idle."""
    out = [lk for mode in MODES for lk in ops_for(mode).list_locks(store, task_name, active_only=active_only)]
    # read after the locks: a lock that left idle between the two reads has its time by now
    # (read before, a lock seen waiting could lack it)
    since = pg.waiting_since(store, task_name)
    for lk in out:
        ts = since.get(lk["lock_id"]) if lk["status"] != "idle" else None
        lk["waiting_since"] = ts.isoformat(timespec="seconds") if ts is not None else None
    return sorted(out, key=lambda lk: lk["lock_id"])


def coordinate(task, store) -> list[dict]:
    """The coordinator's round: name each lock's sources and settle it. Returns the active
    locks afterwards (what the Variable mirrors)."""
    if not task.shard_mode:
        return []
    if pg.lock_ids(store, task.name):
        from dm_core.shardddl.membership import task_membership

        membership = task_membership(task, store)
        ops_for(task.shard_mode).resolve(store, task.name, membership.sources_by_target())
        if task.shard_mode == "optimistic":
            ops_for(task.shard_mode).prune(store, task.name, membership.by_target)
    return list_locks(store, task.name, active_only=True)


def unlock(store, lock_id: str, *, owner: str | None = None, force_remove: bool = False,
           action: str = EXEC, table: tuple[str, str] | None = None) -> dict:
    """Resolve a stuck lock (DM's `shard-ddl-lock unlock`); returns the lock afterwards.
    ``table``: optimistic mode's conflicting member (DM's ``-d DB -t TABLE``)."""
    if action not in (EXEC, SKIP):
        raise ShardDDLLockError(f"unknown unlock action {action!r}", workaround="Use --action exec or --action skip.")
    got = pg.lock_task_mode(store, lock_id)
    if got is None:
        raise ShardDDLLockError(f"no shard DDL lock {lock_id!r}",
                                workaround="Run `dmctl shard-ddl-lock TASK` for the task's lock ids.")
    task, mode = got
    if table is not None and mode != "optimistic":
        raise ShardDDLLockError(f"lock {lock_id} is pessimistic: its DDL is unlocked for all its tables at once",
                                workaround="Leave out -d/-t; --owner names the source that executes the DDL.")
    if table is not None:
        return ops_for(mode).unlock(store, lock_id, owner=owner, force_remove=force_remove, action=action,
                                    table=table)
    if mode == "pessimistic" and _stopped(store, task):
        # DM: a stopped task has no subtasks, so nobody could run the DDL; its unlock force-removes
        # the lock and the sources report their DDLs again when the task starts (they stopped
        # before them, or hold the rows after them back). Nothing runs downstream now.
        lk = ops_for(mode).forget(store, lock_id)
        if lk is not None:
            return {**lk, "removed": True}
    return ops_for(mode).unlock(store, lock_id, owner=owner, force_remove=force_remove, action=action)


def _stopped(store, task: str) -> bool:
    from dm_core.state.lifecycle import STOPPED

    info = store.task_info(task)
    return info is not None and info["status"] == STOPPED


def unlock_note(lk: dict, action: str, force_remove: bool) -> str:
    """What an unlock did, for dmctl and the unlock DAG's log."""
    if lk.get("removed"):
        return ("the task is stopped, so no source could run its DDL: the lock is removed and nothing ran "
                "downstream; when the task starts, its sources report their DDLs again to a new lock (to have the "
                "DDL run or skipped instead, start the task and unlock it while it runs)")
    return f"unlocked ({'force-removed' if force_remove else action}); the sources carry it out at their next poke"


def summary(lk: dict) -> dict:
    """The part of a lock a user reads first (the Variable and query-status carry this)."""
    out = {"lock_id": lk["lock_id"], "mode": lk["mode"], "target": ".".join(f"`{x}`" for x in lk["target"]),
           "status": lk["status"], "waiting_since": lk.get("waiting_since"), "conflict": lk.get("conflict") or None}
    if lk["mode"] == "pessimistic":
        out.update(ddls=lk["ddls"], owner=lk["owner"], reported=lk["synced"], waiting_for=lk["unsynced"])
    else:
        pending = [m for m in lk["members"] if m["pending"]]
        out.update(ddls=sorted({d for m in pending for d in m["pending"]}),
                   reported=sorted({f"{m['source']}:{'.'.join(m['table'])}" for m in pending}),
                   waiting_for=[],
                   # tables whose rows their source holds back until every shard runs the change
                   held=[f"{m['source']}:{'.'.join(m['table'])}: {m['held']}" for m in pending if m.get("held")])
    return out


NO_DDL_MET = "this source has not met any shard DDL of this group"


def unresolved_groups(source_id: str, shard_groups, locks: list[dict]) -> list[dict]:
    """What query-status shows per source of its pessimistic sharding groups that wait on a DDL
    (DM's ``unresolvedGroups``): from the source's own first-level groups (``shard_groups`` of
    its state row) the round's DDLs, the tables that met them (``synced``) and those still to
    (``unsynced``); and for a lock that waits for this source while no table of it has met the
    DDL, DM's note that the source has not met any shard DDL of the group. ``locks``: the task's
    active locks (``list_locks``)."""
    from dm_core.shardddl.source_group import SourceShardGroups

    def name(t) -> str:
        return ".".join(f"`{x}`" for x in t)

    out = []
    if shard_groups:
        for g in SourceShardGroups.from_json(shard_groups).groups.values():
            u = g.unresolved()
            if u is not None:
                out.append({"target": name(u["target"]), "ddls": u["ddls"], "synced": [name(t) for t in u["synced"]],
                            "unsynced": [name(t) for t in u["unsynced"]]})
    seen = {g["target"] for g in out}
    for lk in locks:
        if lk["mode"] == "pessimistic" and source_id in lk.get("unsynced", ()) and name(lk["target"]) not in seen:
            out.append({"target": name(lk["target"]), "ddls": list(lk["ddls"] or []), "synced": [],
                        "unsynced": [NO_DDL_MET]})
    return out


def render(locks: list[dict]) -> str:
    """Plain lines for task logs and dmctl: one paragraph per lock."""
    if not locks:
        return "no shard DDL lock is active"
    lines = []
    for lk in map(summary, locks):
        head = f"lock {lk['lock_id']} ({lk['mode']}, {lk['status']}"
        head += f" since {lk['waiting_since']})" if lk["waiting_since"] else ")"
        lines.append(head)
        if lk["ddls"]:
            lines.append(f"  DDL: {'; '.join(lk['ddls'])}")
        if lk.get("owner"):
            lines.append(f"  owner: {lk['owner']}")
        if lk["reported"]:
            lines.append(f"  reported: {', '.join(lk['reported'])}")
        if lk["waiting_for"]:
            lines.append(f"  waiting for: {', '.join(lk['waiting_for'])}")
        for h in lk.get("held", ()):
            lines.append(f"  held back: {h}")
        if lk["conflict"]:
            lines.append(f"  CONFLICT: {lk['conflict']}")
    return "\n".join(lines)
