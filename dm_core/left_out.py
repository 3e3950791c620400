"""What a task file changed after the full phase sends where that phase did not copy it, read
from the upstreams at a start (``dm_core/start.py`` asks, in its step 3).

Why: the full phase copied each selected table into its routed target under the file the task
ran with, and the sync brings only the changes after its checkpoints. A new file that

* lets in a table the old one left out,
* routes a table into another target, or
* maps a table's columns otherwise (``column-mappings``),

leaves rows written before the checkpoints missing from where the file now sends them (or, for
a mapping, holding the old values, which later changes miss): silently, in DM. Each such table
is an :class:`Added`; one holding rows is refused, naming it, unless the start takes it for a
re-sync (``--resync-new-tables``). Taken as they are, since nothing is missing:

* an empty table;
* a table created after its source's checkpoint (dm_core/ddl/created_since.py: the sync replays
  its CREATE TABLE and every row);
* a rerouted table whose old target is gone downstream while the new one holds rows (the user
  renamed it there).

The re-sync names each differing row of a target, at most ``max-pending-row-count``: what it
could not name is refused before anything starts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

from dm_core.errors import ErrorCode


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


def tables_the_full_phase_left_out(store, task, old_text: str, *, take_rows: bool = False) -> list[Added]:
    """What ``task``'s file sends where the full phase, run under ``old_text``, did not copy it
    (the module docstring says what counts and what is taken as it is), once that phase has
    finished and the task syncs after it (task-mode all). Raises CONFIG_INVALID naming the
    tables that hold rows, unless ``take_rows`` (then a re-sync is to copy them, and what it
    could not name is refused). A source new to the file is not looked at; an upstream that
    does not answer leaves its tables unchecked, said on stderr (the start goes on, and the
    sync waits for the server)."""
    from dm_core.config.task import parse_task
    from dm_core.db import connect, qt
    from dm_core.full.discover import discover
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
        remap = old_rules.column_mapper.rules != rules.column_mapper.rules
        try:
            conn = connect(source_endpoint(store, sid), connect_timeout=10, read_timeout=60)
        except Exception as e:  # noqa: BLE001 - see the docstring
            print(f"task {task.name}: source {sid} did not answer, so the tables its changed block-allow list or "
                  f"routes send into new targets were not checked "
                  f"({str(e).splitlines()[0] if str(e) else type(e).__name__})", file=sys.stderr)
            continue
        try:
            tables = discover(conn, sid, rules)   # the tables the new file allows, routed, with their columns
            with conn.cursor() as cur:
                for st in tables:
                    sc, t, now = st.schema, st.table, (st.target_schema, st.target_table)
                    target, was, remapped = ".".join(now), None, False
                    if old_rules.block_allow.allow_table(sc, t):
                        before = old_rules.router.route(sc, t)
                        if before != now:
                            was = ".".join(before)
                            routed.update({was: before, target: now})
                        elif remap and _mapping_of(old_rules, st) != _mapping_of(rules, st):
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
                       "task of their own (task-mode all, a block-allow list naming only them). A target you "
                       "renamed downstream (RENAME TABLE old TO new) is taken once the old name is gone and the new "
                       "one holds the rows. Or start over with `dmctl start-task --remove-meta FILE`: a new full "
                       "phase of every table (drop what the old one loaded downstream first).")
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
    def tables(target: str) -> str:
        return ", ".join(f"{a.schema}.{a.table} on {a.source_id}" for a in taken if a.target == target and a.has_rows)

    raise ErrorCode.CONFIG_INVALID.error(
        f"task {task.name}: --resync-new-tables: the re-sync names every row that differs in a target, at most "
        f"max-pending-row-count ({cap}) per table, and these would differ by more; nothing started:\n  "
        + "\n  ".join(f"{t}: at least {need[t]} row(s), of {tables(t)}" for t in over),
        workaround="Raise max-pending-row-count in the validators block the task's instances name "
                   "(continuous-validator-config-name) above those counts, and start again. The re-sync holds every "
                   "differing key in memory and in the state store: for tables of millions of rows, move them with a "
                   "task of their own instead (task-mode all, a block-allow list naming only them), or start over "
                   "with `dmctl start-task --remove-meta FILE`.")


def _mapping_of(rules, st):
    """The column rewrite of ``st`` (discover.SourceTable) under ``rules``, or the error its rule
    raises for the table (the sync will raise it too): two files differ for the table when their
    answers do."""
    try:
        return rules.column_mapper.plan(st.schema, st.table, st.columns)
    except Exception as e:  # noqa: BLE001 - an invalid rule for this table is an answer too
        return str(e)


def _created_after_the_checkpoint(store, task, found: list[Added]) -> list[Added]:
    """``found`` with the let-in tables that the binlog after their source's checkpoint creates
    whole marked as holding no rows to miss: the sync replays their CREATE TABLE and every row
    (dm_core/ddl/created_since.py). A binlog that cannot be read or scanned in time leaves them
    as they are (refused)."""
    from dm_core.ddl.created_since import created_since
    from dm_core.position import Position
    from dm_core.sources import replica_server_id, source_endpoint

    def new(a: Added) -> bool:
        return a.has_rows and a.was_into is None and not a.remapped

    for sid in sorted({a.source_id for a in found if new(a)}):
        st = store.source_state(task.name, sid) or {}
        if not st.get("binlog_file"):
            continue
        at = Position(st["binlog_file"], int(st["binlog_pos"]))
        try:
            made = created_since(source_endpoint(store, sid), at,
                                 {(a.schema, a.table) for a in found if a.source_id == sid and new(a)},
                                 server_id=replica_server_id(f"{task.name}/start", sid))
            why = "was not read to its end in time"
        except Exception as e:  # noqa: BLE001 - see the docstring
            made, why = None, f"could not be read ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
        if made is None:
            print(f"task {task.name}: source {sid}: the binlog after its checkpoint {at} {why}, so a table it lets in "
                  "cannot be told created after the checkpoint (which would miss nothing)", file=sys.stderr)
        if made:
            found = [replace(a, has_rows=False) if a.source_id == sid and new(a) and (a.schema, a.table) in made
                     else a for a in found]
    return found


def _renamed_downstream(task, found: list[Added], routed: dict) -> list[Added]:
    """``found`` with the rerouted tables whose rows the new target already holds marked as
    holding none to miss: the old target is gone downstream and the new one has rows (the user
    renamed the table there), or the two names differ only in case on a downstream that folds
    it (TiDB: ``lower_case_table_names`` 2). A downstream that does not answer leaves them as
    they are (the start is refused, naming them)."""
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

            cur.execute("SELECT @@lower_case_table_names")
            folds = int(cur.fetchone()[0] or 0)
            for was, target in moved:
                if _same_table(was, target, folds) or (holds_rows(was) is None and holds_rows(target)):
                    renamed.add((was, target))
    finally:
        down.close()
    return [replace(a, has_rows=False) if (a.was_into, a.target) in renamed else a for a in found]


def _same_table(a: str, b: str, lower_case_table_names: int) -> bool:
    """Whether two routed names reach one downstream table: only their case differs, and the
    server folds it.

    >>> _same_table("S.t", "s.T", 2), _same_table("S.t", "s.T", 0), _same_table("s.t", "s.u", 1)
    (True, False, False)
    """
    return lower_case_table_names != 0 and a.lower() == b.lower()
