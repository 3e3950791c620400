"""Whether the shard DDL state a task keeps still fits the task file it is started with.

Why: what a source of a shard-mode task holds back lives in its saved state, and only under
the mode and the membership it was made with does that state say where those rows are:

* pessimistic: a first-level round is open (a table ran a DDL its sibling tables have not),
  the table's later rows are skipped and the checkpoint moves past them; the round's end
  replays them;
* optimistic: a table is held by a lock, its rows from its DDL on are skipped;
* the task's locks wait on named sources.

A file changed between stop-task and start-task, started as it is, would drop that state
without a word: shard-mode switched or removed (the held rows would never reach the
downstream), a table taken out of the block-allow list or routed elsewhere (its round would
wait for it forever, every later row of its siblings skipped, the source "caught up"), a
source taken out while a lock waits on it (the lock would stay active for good). DM rebuilds
its groups from the new file and replays from the unresolved round's first DDL; here the state
is kept and checked instead:

* ``start-task`` (without ``--remove-meta``) refuses such a file before storing it, naming
  each conflict (:func:`conflicts`, SHARD_DDL_STATE_CHANGED);
* a source whose saved state does not fit the file it runs under (a file changed where
  Airflow reads it) pauses at its window's start with SHARD_DDL_STATE_CHANGED
  (:func:`source_conflicts` via ``ShardSync.load``).

State that holds nothing back decides nothing and is never a conflict: an idle group's member
that the file no longer routes to the group's target is dropped from it (:func:`prune`), so a
later round does not wait for it.

Membership is judged by the file's rules (block-allow list, routes), not by the upstream's
tables now: a table dropped upstream while the task was stopped is still selected, and its
DROP TABLE, still ahead in the binlog, takes it out of its round as usual.
"""

from __future__ import annotations

import json

from dm_core.shardddl.common import fmt_tables

Table = tuple[str, str]


def _decoded(saved) -> dict:
    if not saved:
        return {}
    return json.loads(saved) if isinstance(saved, str) else dict(saved)


def saved_mode(saved) -> str | None:
    """The mode a source's saved shard state was made in (None: nothing saved).

    >>> saved_mode(None), saved_mode('{"mode": "optimistic", "held": []}'), saved_mode('{"groups": []}')
    (None, 'optimistic', 'pessimistic')
    """
    d = _decoded(saved)
    if not d:
        return None
    return "optimistic" if d.get("mode") == "optimistic" else "pessimistic"


def _selected(rules, table: Table, target: Table | None) -> bool:
    """Whether the file's rules still replicate ``table`` (into ``target``, when given)."""
    s, t = table
    if not rules.block_allow.allow_table(s, t):
        return False
    return target is None or tuple(x.lower() for x in rules.router.route(s, t)) == tuple(x.lower() for x in target)


def parsed(saved):
    """A source's saved shard state as its mode's object (HeldTables or SourceShardGroups), None
    when nothing is saved: parse once, then ask ``source_conflicts`` and ``holds`` of it."""
    from dm_core.shardddl.optimism.held import HeldTables
    from dm_core.shardddl.source_group import SourceShardGroups

    mode = saved_mode(saved)
    if mode is None:
        return None
    return (HeldTables if mode == "optimistic" else SourceShardGroups).from_json(_decoded(saved))


def source_conflicts(task, source_id: str, saved, state=None) -> list[str]:
    """What in ``source_id``'s saved shard state the task (as now written) would lose.
    ``state``: ``parsed(saved)`` when the caller has it (it is only read here)."""
    from dm_core.shardddl.optimism.held import HeldTables

    state = parsed(saved) if state is None else state
    if state is None:
        return []
    rules = task.rules_for(source_id)
    out = []
    if isinstance(state, HeldTables):
        held = state
        if held.idle:
            return []
        what = (f"holds back {fmt_tables(sorted(held.held))} for optimistic shard DDL locks" if held.held
                else f"is replaying rows of {fmt_tables(sorted(held.replaying))} a lock released")
        if task.shard_mode != "optimistic":
            return [f"source {source_id} {what}, but the task file sets shard-mode "
                    f"{task.shard_mode or '(none)'}: their rows would never reach the downstream"]
        # a held table the file no longer replicates leaves its lock (DM's TryRemoveTable): its
        # held rows are not wanted any more, and no other table's rows wait for it
        return []
    groups = state
    busy = [g for g in groups.groups.values() if not g.idle]
    if not busy:
        return []
    if task.shard_mode != "pessimistic":
        return [f"source {source_id} has a pessimistic shard DDL round open on "
                + ", ".join(f"`{g.target[0]}`.`{g.target[1]}`" for g in busy)
                + f" (rows of its tables past the round's DDL are held back), but the task file sets shard-mode "
                  f"{task.shard_mode or '(none)'}: those rows would never reach the downstream"]
    for g in busy:
        gone = [t for t in sorted(g.members) if not _selected(rules, t, g.target)]
        if gone:
            rnd = g.unresolved() or {}
            out.append(f"source {source_id}: the pessimistic shard DDL round on `{g.target[0]}`.`{g.target[1]}` "
                       f"({'; '.join(rnd.get('ddls') or ['a replay'])}) counts {fmt_tables(gone)}, which the task "
                       "file no longer replicates into that table: the round would wait for them forever")
    return out


def lock_conflicts(task, locks: list[dict]) -> list[str]:
    """Active locks the task (as now written) could never settle: another mode's, or waiting
    on sources it no longer has."""
    ids = {i.source_id for i in task.mysql_instances}
    out = []
    for lk in locks:
        target = "`{}`.`{}`".format(*lk["target"])
        if lk.get("mode") != task.shard_mode:
            out.append(f"the {lk.get('mode')} shard DDL lock {lk['lock_id']} on {target} is active, but the task "
                       f"file sets shard-mode {task.shard_mode or '(none)'}")
            continue
        members = lk.get("members") or {}
        named = set(lk.get("sources") or ()) | (set(members) if isinstance(members, dict)
                                                else {m.get("source") for m in members})
        gone = sorted(s for s in named if s and s not in ids)
        if gone:
            out.append(f"the shard DDL lock {lk['lock_id']} on {target} counts source(s) {', '.join(gone)}, which "
                       "the task file no longer has: it would wait for them forever")
    return out


def conflicts(task, store) -> list[str]:
    """Every conflict between the task's kept shard DDL state and ``task`` (start-task)."""
    from dm_core.shardddl import coordinator

    out = []
    for st in store.all_source_states(task.name):
        if any(i.source_id == st["source_id"] for i in task.mysql_instances):
            out += source_conflicts(task, st["source_id"], st.get("shard_groups"))
        elif saved_mode(st.get("shard_groups")) is not None and holds(st.get("shard_groups")):
            out.append(f"source {st['source_id']} holds rows back for a shard DDL lock, but the task file no longer "
                       "has it")
    return out + lock_conflicts(task, coordinator.list_locks(store, task.name, active_only=True))


def holds(saved, state=None) -> bool:
    """Whether a source's saved shard state holds rows back (or replays them). ``state``:
    ``parsed(saved)`` when the caller has it."""
    state = parsed(saved) if state is None else state
    return state is not None and not state.idle


def prune(groups, rules, memo: dict | None = None) -> list[Table]:
    """Drop from idle groups the members the rules no longer route to the group's target;
    returns them. A group with a round open is left alone (``source_conflicts`` reports it).
    ``memo``: earlier answers for these same ``rules`` (a source of thousands of tables asks
    the rules of every member at each window's start; the answers change only with the rules)."""
    memo = {} if memo is None else memo
    out = []
    for g in groups.groups.values():
        if not g.idle:
            continue
        gone = []
        for t in g.members:
            key = (t, g.target)
            ok = memo.get(key)
            if ok is None:
                ok = memo[key] = _selected(rules, t, g.target)
            if not ok:
                gone.append(t)
        for t in gone:
            g.members.pop(t)
            out.append(t)
    return out

