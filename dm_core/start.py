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
   that its block-allow list now adds or its routes now send into another target
   (``tables_the_full_phase_left_out``, read from the upstreams: CONFIG_INVALID; the start
   creates the targets of those it takes, ``create_added_targets``). The file compared against is the one of the last start: dmctl compares the file it is given, the precheck DAG the file Airflow reads (which dmctl
   wrote, unless it was changed under it since).
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
    # the tables the changed block-allow list lets in, or routes elsewhere, after the full phase (``Added``), whose
    # targets the start creates (full/phase.py ensure_added_targets) before the sync meets their rows
    added: tuple = ()

    def to_resync(self) -> list[str]:
        """The targets (``schema.table``) that lack rows of the tables in ``added``: what a re-sync copies."""
        return sorted({a.target for a in self.added if a.has_rows})


@dataclass(frozen=True)
class Added:
    """A table a changed task file lets in after the full phase, routes into another target than
    the one the full phase copied it into, or maps otherwise (``tables_the_full_phase_left_out``)."""

    source_id: str
    schema: str
    table: str
    target: str         # schema.table downstream, routed
    has_rows: bool      # rows the new target lacks: the full phase copied them elsewhere, otherwise or not at all
    was_into: str | None = None     # rerouted: the target the full phase copied it into
    remapped: bool = False          # same target, another column mapping: its copied rows hold the old values
    rows: int = 0                   # its rows, counted up to one more than a re-sync can name (when taken)


def decide_start(task, text: str, store, *, remove_meta: bool = False, start_time: str | None = None,
                 same_downstream: bool = False, resync_new_tables: bool = False) -> StartDecision:
    """The start of ``task`` (parsed from ``text``, the file's YAML) against what ``store``
    recorded, by the protocol of this module. ``same_downstream``: the user's word that a moved
    ``target-database`` address reaches the same server; ``resync_new_tables``: tables with rows
    that the block-allow list lets in, or routes send into another target, after the full phase are taken, their earlier rows to be
    copied by a re-sync (``tables_the_full_phase_left_out``). Raises CONFIG_INVALID or
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


def tables_the_full_phase_left_out(store, task, old_text: str, *, take_rows: bool = False) -> list[Added]:
    """The upstream tables whose rows a file sends into a target the full phase did not copy
    them into, once that phase has finished: tables its block-allow list lets in that the file
    the task ran with left out, tables a changed route sends into another target, and tables
    whose column mapping changed (the rows copied hold the old mapping's values, which later
    changes would miss). The start creates their targets.

    Refused (CONFIG_INVALID, naming them) when one holds rows, unless ``take_rows`` (then a
    re-sync copies them): rows written before the checkpoints were never copied there, and the
    sync brings only the changes after them, so the downstream would silently lack them (DM does
    just that). A table whose CREATE TABLE the binlog after the source's checkpoint holds (created
    while the task was stopped, say) misses nothing either: the sync replays it and every row. A
    table let in while empty has nothing to miss. A rerouted table whose old target is gone downstream while the new one holds rows was
    renamed there by the user (``RENAME TABLE``): taken as it is. A source new to the file is
    not looked at. An upstream that does not answer leaves its tables unchecked, said on
    stderr: the start goes on, and the sync waits for the server."""
    from dm_core.config.task import parse_task
    from dm_core.db import connect, qt
    from dm_core.full.discover import SYSTEM_SCHEMAS
    from dm_core.sources import source_endpoint

    if task.task_mode != "all":   # incremental: the user loaded the rows; full: nothing syncs after
        return []
    try:
        old = parse_task(old_text, "<the task's last start>")
    except Exception:  # noqa: BLE001 - a file an older shardflow took: nothing to compare with
        return []
    old_ids = {i.source_id for i in old.mysql_instances}
    cap = _resync_cap(task) if take_rows else 0
    out, routed = [], {}   # routed: "schema.table" -> (schema, table), for the downstream's look
    for inst in task.mysql_instances:
        sid = inst.source_id
        if sid not in old_ids:
            continue
        rules, old_rules = task.rules_for(sid), old.rules_for(sid)
        remap = _mapping_rules(old, sid) != _mapping_rules(task, sid)
        try:
            conn = connect(source_endpoint(store, sid), connect_timeout=10, read_timeout=60)
        except Exception as e:  # noqa: BLE001 - see the docstring
            print(f"task {task.name}: source {sid} did not answer, so the tables its changed block-allow list or "
                  f"routes send into new targets were not checked "
                  f"({str(e).splitlines()[0] if str(e) else type(e).__name__})", file=sys.stderr)
            continue
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT table_schema, table_name FROM information_schema.tables "
                            "WHERE table_type = 'BASE TABLE' ORDER BY table_schema, table_name")
                tables = [(sc, t) for sc, t in cur.fetchall()
                          if sc.lower() not in SYSTEM_SCHEMAS and rules.block_allow.allow_table(sc, t)]
                columns = _columns(cur) if remap else {}
                for sc, t in tables:
                    now = rules.router.route(sc, t)
                    target, was, remapped = ".".join(now), None, False
                    if old_rules.block_allow.allow_table(sc, t):
                        before = old_rules.router.route(sc, t)
                        if before != now:
                            was = ".".join(before)
                            routed.update({was: before, target: now})
                        elif remap and _mapping_of(old_rules, sc, t, columns) != _mapping_of(rules, sc, t, columns):
                            remapped = True
                        else:
                            continue
                    cur.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM {qt(sc, t)} LIMIT %s) AS r", (cap + 1,))
                    n = cur.fetchone()[0]
                    out.append(Added(sid, sc, t, target, n > 0, was, remapped, n))
        finally:
            conn.close()
    out = _created_after_the_checkpoint(store, task, _renamed_downstream(task, out, routed))
    found = [f"source {a.source_id}: {a.schema}.{a.table} (into {a.target}) has rows"
             + (f"; the full phase copied them into {a.was_into}" if a.was_into else "")
             + ("; its column mapping changed, so the rows copied hold the old mapping's values and later "
                "changes address them by the new ones" if a.remapped else "")
             for a in out if a.has_rows]
    if found and not take_rows:
        raise ErrorCode.CONFIG_INVALID.error(
            f"task {task.name}: the task file now sends tables into targets the full phase did not copy them into "
            "(the file the task ran with left them out, routed them elsewhere or mapped their columns otherwise): "
            "their rows written before the sync's checkpoints would never reach those targets as the file now "
            "shapes them, only the changes after them; nothing started:\n  "
            + "\n  ".join(found),
            workaround=f"Start with `--resync-new-tables`: their targets are created, they sync, and a re-sync "
                       f"(dm_{task.name}_resync, what: tables) compares those targets and rewrites the rows that "
                       "differ while the task runs (rows already copied into an old target stay there). Or keep the "
                       "block-allow list, routes and column mappings the task ran with and move these tables with a "
                       "task of their own (task-mode all, a block-allow list naming only them). A target you renamed downstream (RENAME TABLE old TO new) is taken "
                       "once the old name is gone and the new one holds the rows. Or start over with "
                       "`dmctl start-task --remove-meta FILE`: a new full phase of every table (drop what the old one "
                       "loaded downstream first).")
    if take_rows:
        _refuse_what_a_resync_cannot_name(task, out, cap)
    return out


def _resync_cap(task) -> int:
    from dm_core.validate.settings import settings_for

    return settings_for(task).max_pending_row_count


def _refuse_what_a_resync_cannot_name(task, taken: list[Added], cap: int) -> None:
    """The re-sync that ``--resync-new-tables`` triggers compares each target and names its
    differing rows, at most ``max-pending-row-count`` of them (it fails past that): refused
    before anything starts when a target would differ by more. A changed column mapping counts
    its rows twice (the old ones are deleted, the new ones written)."""
    need: dict[str, int] = {}
    for a in taken:
        if a.has_rows:
            need[a.target] = need.get(a.target, 0) + a.rows * (2 if a.remapped else 1)
    over = sorted(t for t, n in need.items() if n > cap)
    if not over:
        return
    raise ErrorCode.CONFIG_INVALID.error(
        f"task {task.name}: --resync-new-tables: the re-sync names every row that differs in a target, at most "
        f"max-pending-row-count ({cap}) per table, and these would differ by more; nothing started:\n  "
        + "\n  ".join(f"{t}: at least {need[t]} row(s), of "
                       + ", ".join(f"{a.schema}.{a.table} on {a.source_id}" for a in taken if a.target == t and a.has_rows)
                       for t in over),
        workaround="Raise max-pending-row-count in the validators block the task's instances name "
                   "(continuous-validator-config-name) above those counts, and start again. The re-sync holds every "
                   "differing key in memory and in the state store: for tables of millions of rows, move them with a "
                   "task of their own instead (task-mode all, a block-allow list naming only them), or start over "
                   "with `dmctl start-task --remove-meta FILE`.")


def _mapping_rules(task, sid: str) -> list:
    return [task.column_mappings.get(n) for n in task.instance(sid).column_mapping_rules]


def _columns(cur) -> dict[tuple[str, str], list[str]]:
    """Every upstream table's column names in order (what a column mapping is planned over)."""
    cur.execute("SELECT table_schema, table_name, column_name FROM information_schema.columns "
                "ORDER BY table_schema, table_name, ordinal_position")
    out: dict[tuple[str, str], list[str]] = {}
    for sc, t, c in cur.fetchall():
        out.setdefault((sc, t), []).append(c)
    return out


def _mapping_of(rules, schema: str, table: str, columns: dict):
    """The table's column rewrite under ``rules``, or the error its rule raises for the table (the
    sync will raise it too): two files differ for the table when their answers do."""
    try:
        return rules.column_mapper.plan(schema, table, columns.get((schema, table), []))
    except Exception as e:  # noqa: BLE001 - an invalid rule for this table is an answer too
        return str(e)


def _created_after_the_checkpoint(store, task, found: list[Added]) -> list[Added]:
    """``found`` with the let-in tables that the binlog after their source's checkpoint creates
    whole marked as holding no rows to miss: the sync replays their CREATE TABLE and every row
    (dm_core/ddl/created_since.py). A binlog that cannot be read or scanned in time leaves them
    as they are (refused)."""
    from dataclasses import replace

    from dm_core.ddl.created_since import created_since
    from dm_core.position import Position
    from dm_core.sources import replica_server_id, source_endpoint

    def new(a: Added) -> bool:
        return a.has_rows and a.was_into is None and not a.remapped

    for sid in sorted({a.source_id for a in found if new(a)}):
        st = store.source_state(task.name, sid) or {}
        if not st.get("binlog_file"):
            continue
        try:
            made = created_since(source_endpoint(store, sid), Position(st["binlog_file"], int(st["binlog_pos"])),
                                 {(a.schema, a.table) for a in found if a.source_id == sid and new(a)},
                                 server_id=replica_server_id(f"{task.name}/start", sid))
        except Exception:  # noqa: BLE001 - see the docstring
            made = None
        if made:
            found = [replace(a, has_rows=False) if a.source_id == sid and new(a) and (a.schema, a.table) in made else a
                     for a in found]
    return found


def _renamed_downstream(task, found: list[Added], routed: dict) -> list[Added]:
    """``found`` with the rerouted tables whose rows the new target already holds marked as
    holding none to miss: the old target is gone downstream and the new one has rows (the user
    renamed the table there). A downstream that does not answer leaves them as they are (the
    start is refused, naming them)."""
    from dataclasses import replace

    from dm_core.db import connect, qt
    from dm_core.sources import target_endpoint

    moved = {(a.was_into, a.target) for a in found if a.was_into and a.has_rows}
    if not moved:
        return found
    try:
        down = connect(target_endpoint(task), downstream=True, connect_timeout=10, read_timeout=60)
    except Exception:  # noqa: BLE001 - see the docstring
        return found
    renamed = set()
    try:
        with down.cursor() as cur:
            def holds_rows(name: str) -> bool | None:   # None: no such table
                cur.execute("SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                            routed[name])
                if not cur.fetchone():
                    return None
                cur.execute(f"SELECT 1 FROM {qt(*routed[name])} LIMIT 1")
                return bool(cur.fetchone())

            for was, target in moved:
                if holds_rows(was) is None and holds_rows(target):
                    renamed.add((was, target))
    finally:
        down.close()
    return [replace(a, has_rows=False) if (a.was_into, a.target) in renamed else a for a in found]


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
