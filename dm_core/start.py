"""How a start of a task begins: the one decision that `dmctl start-task`, the precheck DAG
(``PrecheckOperator``) and the DM-case harness all take through :func:`decide_start`.

A start continues from what the state store recorded for the task (dm_core/state/lifecycle.py):

* ``fresh``: nothing recorded (or ``--remove-meta`` forgets it): precheck, then a new full
  phase (task-mode all/full) or a sync from ``meta`` (task-mode incremental);
* ``full``: the full phase began and did not finish: its low watermark and loaded chunks are
  kept, the full DAG loads only the chunks missing;
* ``incremental``: the full phase finished (or the task only replicates): every source syncs
  on from its checkpoint, no new dump.

Protocol of :func:`decide_start`, in order; it stores nothing, so a refusal leaves the task
as it was:

1. ``--start-time`` (a binlog time to start at) is for task-mode incremental only, and
   unless the start forgets everything, a shard-mode task's kept sharding groups and active
   locks refuse it: positions before or after the new start would contradict them.
2. With ``--remove-meta`` the start is fresh: nothing recorded is kept, so nothing is checked
   against it.
3. Otherwise, once the task was started before, the file must fit what that start left:
   the shard DDL state its sources keep (dm_core/shardddl/state_fit.py,
   SHARD_DDL_STATE_CHANGED) and the progress they recorded (dm_core/state/progress_fit.py,
   CONFIG_INVALID), and once the full phase has finished, the upstream tables holding rows
   that its block-allow list now adds, its routes send into another target or its column
   mappings map otherwise (dm_core/left_out.py, read from the upstreams: CONFIG_INVALID; the
   start creates the targets of those it takes, ``create_added_targets``). The file compared
   against is the one of the last start: dmctl compares the file it is given, the precheck DAG
   the file Airflow reads (which dmctl wrote, unless it was changed under it since).
4. The resume point (``lifecycle.resume_point``) of the recorded states, and the binlog times
   the sources start at (``--start-time`` now, or one an earlier start recorded).

The caller acts on the answer: dmctl ends earlier runs, stores the start and triggers the
precheck DAG; the precheck DAG runs DM's check items (a resuming start skips the sharding
items, as DM does) and hands over to the phase the resume point names.

This module sits above ``state``, ``shardddl`` and ``config`` (as dm_core/reset.py does), so
none of them imports another to decide a start.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from dm_core.errors import ErrorCode
from dm_core.state import lifecycle as lc

# the prefix of progress_fit's refusal of a moved downstream
MOVED = "target-database moved"


@dataclass(frozen=True)
class StartDecision:
    """Where a start continues, and what it starts at."""

    resume: str                 # fresh | full | incremental (module docstring)
    start_times: dict[str, str] = field(default_factory=dict)   # source → binlog time it starts at
    at: object = None           # the parsed --start-time (binlog.by_time.StartTime), if one was given
    # what the changed file sends where the full phase did not copy it (left_out.Added), whose
    # targets the start creates (full/phase.py ensure_added_targets) before the sync meets their rows
    added: tuple = ()

    def to_resync(self) -> list[str]:
        """The targets (``schema.table``) that lack rows of the tables in ``added``: what a re-sync copies."""
        return sorted({a.target for a in self.added if a.has_rows})


def decide_start(task, text: str, store, *, remove_meta: bool = False, start_time: str | None = None,
                 same_downstream: bool = False, resync_new_tables: bool = False) -> StartDecision:
    """The start of ``task`` (parsed from ``text``, the file's YAML) against what ``store``
    recorded, by the protocol of this module. ``same_downstream``: the user's word that a moved
    ``target-database`` address reaches the same server; ``resync_new_tables``: the tables with
    rows that the changed file sends where the full phase did not copy them (dm_core/left_out.py)
    are taken, a re-sync to copy their earlier rows. Raises CONFIG_INVALID or
    SHARD_DDL_STATE_CHANGED, each naming what does not fit and the way out."""
    at = check_start_time(task, start_time) if start_time is not None else None
    if start_time is not None and not remove_meta:
        refuse_start_time_with_shard_state(store, task)
    ids = [i.source_id for i in task.mysql_instances]
    if remove_meta:
        return StartDecision("fresh", dict.fromkeys(ids, start_time) if start_time else {}, at)
    info = store.task_info(task.name)
    if info is not None:
        refuse_shard_state_changes(store, task)
        refuse_progress_changes(store, task, info["started_text"], text, same_downstream=same_downstream)
    states = store.all_source_states(task.name)
    resume = lc.resume_point(task, states)
    added = ()
    if info is not None and info["started_text"] != text and resume == "incremental":
        from dm_core.left_out import tables_the_full_phase_left_out

        added = tuple(tables_the_full_phase_left_out(store, task, info["started_text"],
                                                     take_rows=resync_new_tables))
    kept = {s["source_id"]: s["start_time"] for s in states if s.get("start_time")}
    return StartDecision(resume, dict.fromkeys(ids, start_time) if start_time else kept, at, added)


def create_added_targets(task, store, start: StartDecision) -> str | None:
    """What a start does with ``start.added`` before the sync meets their rows (dmctl's
    start-task, the precheck DAG, the DM-case harness): their targets created
    (full/phase.py ``ensure_added_targets``). Returns the line that says so, None if none."""
    if not start.added:
        return None
    from dm_core.full.phase import ensure_added_targets

    made = ensure_added_targets(task, store, list(start.added))
    return (f"task {task.name}: the file sends {len(start.added)} table(s) where the full phase did not copy them; their "
            f"targets are there: {', '.join(made)}")


def check_start_time(task, text: str):
    """``--start-time``: a time in one of DM's spellings, for a task whose sync starts at a
    binlog position it is told (task-mode incremental): the parsed ``by_time.StartTime``.
    Raises CONFIG_INVALID saying why not."""
    from dm_core.binlog.by_time import parse_start_time

    at = parse_start_time(text)
    if task.task_mode != "incremental":
        raise ErrorCode.CONFIG_INVALID.error(
            f"--start-time is for task-mode incremental; task {task.name} has task-mode {task.task_mode}, whose "
            f"sync starts where its full phase's dump was taken",
            workaround="Set `task-mode: incremental` in the task file to sync from that time, or start without "
                       "--start-time.")
    return at


def refuse_start_time_with_shard_state(store, task) -> None:
    """The sharding groups a source tracks (what its tables have met, where a replay would
    begin; every source of a shard-mode task that has synced has them) and the task's locks
    refer to binlog positions the new start would jump over or go back behind: only a start
    that forgets them (--remove-meta) may move the sources to a time."""
    from dm_core.shardddl import coordinator

    if not task.shard_mode:
        return
    held = [s["source_id"] for s in store.all_source_states(task.name) if s.get("shard_groups")]
    locks = coordinator.list_locks(store, task.name, active_only=True)
    if held or locks:
        raise ErrorCode.CONFIG_INVALID.error(
            f"--start-time: task {task.name} has shard DDL state ("
            + "; ".join(([f"sources {', '.join(held)} track their sharding groups"] if held else [])
                        + ([f"{len(locks)} lock(s) active"] if locks else []))
            + "), which positions before or after the new start would contradict",
            workaround="Add --remove-meta to start over from that time (checkpoints and shard DDL state are "
                       "forgotten), or start without --start-time.")


def refuse_shard_state_changes(store, task) -> None:
    """A start from the checkpoints with a file the kept shard DDL state does not fit (shard-mode
    switched, a table or source taken out while rows are held back for it): refused before
    anything is stored (dm_core/shardddl/state_fit.py says why)."""
    from dm_core.shardddl.state_fit import conflicts

    found = conflicts(task, store)
    if found:
        raise ErrorCode.SHARD_DDL_STATE_CHANGED.error(
            f"task {task.name}: the task file does not fit the shard DDL state its sources keep; nothing "
            "started:\n  " + "\n  ".join(found))


def refuse_progress_changes(store, task, old_text: str, new_text: str, *, same_downstream: bool = False) -> None:
    """A start from recorded progress with a file that progress would be wrong under (the
    downstream moved, the shape of a part-loaded full phase changed, task-mode full then a
    syncing mode): refused before anything is stored (dm_core/state/progress_fit.py)."""
    from dm_core.state.progress_fit import refusals

    states = store.all_source_states(task.name)
    found = refusals(old_text, new_text, states, lc.resume_point(task, states))
    if any(f.startswith(MOVED) for f in found) and (same_downstream or _same_downstream(task, old_text)):
        found = [f for f in found if not f.startswith(MOVED)]   # the same server under another address
    if found:
        raise ErrorCode.CONFIG_INVALID.error(
            f"task {task.name}: the task file changed in a way its recorded progress does not fit; nothing "
            "started:\n  " + "\n  ".join(found),
            workaround=f"Start with the file the task ran with (config/tasks/{task.name}.yaml holds it): a change of "
                       "what shapes the full phase's rows may be made once that phase has finished (the tables "
                       "it moves are then checked for rows their new targets lack); the target "
                       "server, meta-schema and a task-mode full run stay as they are for good. Or start over with "
                       "`dmctl start-task --remove-meta FILE`: a new full phase under the new file (drop what the "
                       "old one loaded downstream first). A new address of the same downstream is recognised "
                       "when the old one still answers; else say so with `--same-downstream`.")


def _same_downstream(task, old_text: str) -> bool:
    """Whether the old file's target address and the new one reach the same data (a new DNS
    name, a VIP, a proxy, another instance of one TiDB cluster): a token written through the new
    address, with the new file's login, reads back through the old one, with the old file's own
    login (never the new password to an address that may now be another machine). Any failure
    says no: the start is refused and ``--same-downstream`` is the user's word for it."""
    import secrets

    from dm_core.config.task import parse_task
    from dm_core.db import connect, qi, qt
    from dm_core.sources import target_endpoint

    token = secrets.token_hex(16)
    table = qt(task.meta_schema, "shardflow_identity")
    try:
        old_ep = target_endpoint(parse_task(old_text, "<the task's last start>"))
        new = connect(target_endpoint(task), downstream=True, connect_timeout=5, read_timeout=15)
    except Exception:  # noqa: BLE001 - the old file's login or the new address: not shown to be the same
        return False
    try:
        with new.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {qi(task.meta_schema)}")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {table} (token varchar(64) PRIMARY KEY)")
            cur.execute(f"INSERT INTO {table} VALUES (%s)", (token,))
        try:
            old = connect(old_ep, downstream=True, connect_timeout=5, read_timeout=15)
            try:
                with old.cursor() as cur:
                    cur.execute(f"SELECT COUNT(*) FROM {table} WHERE token = %s", (token,))
                    return cur.fetchone()[0] == 1
            finally:
                old.close()
        except Exception as e:  # noqa: BLE001 - the old address is gone or another server
            print(f"the old target address does not answer ({str(e).splitlines()[0]})", file=sys.stderr)
            return False
    except Exception as e:  # noqa: BLE001 - no token could be written: not shown to be the same
        print(f"could not check the new target address ({str(e).splitlines()[0]})", file=sys.stderr)
        return False
    finally:
        try:
            with new.cursor() as cur:
                cur.execute(f"DELETE FROM {table} WHERE token = %s", (token,))
        except Exception:  # noqa: BLE001 - a token left behind matches nothing later
            pass
        new.close()
