"""What start-task refuses in a task file changed since the task's progress was recorded.

Why: the progress a start resumes from was made under the stored file. These changes make it
silently wrong under a new one (the first three confirmed on the stack):

* the downstream moved (``target-database`` host or port): the checkpoints and loaded chunks
  describe the old server; the new one would get only later changes (DM keeps its
  checkpoints downstream, so a new server starts afresh there);
* while the full phase is part loaded, a change of what shapes the rows it copies -- a
  route, a column mapping, ``mydumpers.where``, ``case-sensitive``: chunks loaded before
  the stop keep the old shape (another target, other ids, the other filter) and are not
  loaded again;
* a task that ran task-mode full (its snapshot is a mark, not a binlog position) started in
  a mode that syncs: there is no position to sync from;
* ``meta-schema`` changed: the load's chunk markers and the keyless tables' ledger are
  downstream in the old one.

Each is refused with what changed and the way out (the old file, or ``--remove-meta``).
Pure functions of the two files' YAML and the sources' states, so the rules are testable
without servers; ``dm_core/shardddl/state_fit.py`` does the same for shard DDL state.
"""

from __future__ import annotations

import yaml

_SHAPING_GLOBAL = ("case-sensitive",)


def task_doc(text: str) -> dict:
    """A task file's YAML as a dict ({} where it is not one)."""
    try:
        d = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return d if isinstance(d, dict) else {}


def _instance(doc: dict, sid: str) -> dict:
    return next((i for i in doc.get("mysql-instances") or () if isinstance(i, dict) and i.get("source-id") == sid),
                {})


def _where(doc: dict, inst: dict):
    md = inst.get("mydumper") or (doc.get("mydumpers") or {}).get(inst.get("mydumper-config-name") or "", {})
    return (md or {}).get("where") if isinstance(md, dict) else None


def shape(doc: dict, sid: str) -> dict:
    """What decides the rows the full phase copies for source ``sid``, by name.

    >>> d = {"routes": {"r": {"schema-pattern": "a*", "target-schema": "b"}},
    ...      "mysql-instances": [{"source-id": "s", "route-rules": ["r"], "mydumper": {"where": "id > 1"}}]}
    >>> shape(d, "s")["routes"], shape(d, "s")["mydumpers.where"], shape(d, "s")["case-sensitive"]
    ([{'schema-pattern': 'a*', 'target-schema': 'b'}], 'id > 1', False)
    """
    inst = _instance(doc, sid)
    routes = doc.get("routes") or {}
    maps = doc.get("column-mappings") or {}
    # rule order means nothing (at most one rule matches per level); a key left out is its default
    out = {"routes": sorted((routes.get(r) for r in set(inst.get("route-rules") or ())), key=repr),
           "column mappings": sorted((maps.get(c) for c in set(inst.get("column-mapping-rules") or ())), key=repr),
           "mydumpers.where": _where(doc, inst) or None}
    for k in _SHAPING_GLOBAL:
        out[k] = bool(doc.get(k))
    return out


def _target(doc: dict) -> tuple:
    t = doc.get("target-database") or {}
    return (str(t.get("host", "")).lower(), str(t.get("port", "")))


def refusals(old_text: str, new_text: str, states: list[dict], resuming: str) -> list[str]:
    """What in ``new_text`` the progress made under ``old_text`` (``states``: the sources'
    state rows; ``resuming``: lifecycle.resume_point under the new file) would be wrong for."""
    from dm_core.full.phase import is_binlog_watermark

    if resuming == "fresh":
        return []
    old, new = task_doc(old_text), task_doc(new_text)
    out = []
    if _target(old) != _target(new):
        out.append("target-database moved from {}:{} to {}:{}, but the task's checkpoints and loaded chunks "
                   "describe the old server: the new one would get only later changes".format(*_target(old),
                                                                                             *_target(new)))
    if (old.get("meta-schema") or "dm_meta") != (new.get("meta-schema") or "dm_meta"):
        out.append(f"meta-schema changed from {old.get('meta-schema') or 'dm_meta'} to "
                   f"{new.get('meta-schema') or 'dm_meta'}, but the loaded chunks' markers and the keyless tables' "
                   "ledger live in the old one downstream: a replay would write keyless rows twice")
    mode = new.get("task-mode", "all")
    marks = [s["source_id"] for s in states
             if s.get("low_file") and not is_binlog_watermark(s["low_file"]) and not s.get("binlog_file")]
    if marks and mode in ("all", "incremental"):
        out.append(f"source(s) {', '.join(marks)} ran task-mode full: their snapshot is a mark, not a binlog "
                   f"position, so task-mode {mode} has no place to sync from")
    if resuming == "full":
        for s in states:
            if s.get("high_file"):
                continue   # this source's full phase has finished
            sid = s["source_id"]
            was, now = shape(old, sid), shape(new, sid)
            changed = [k for k in was if was[k] != now[k] and _instance(old, sid) and _instance(new, sid)]
            if changed:
                out.append(f"source {sid}: {', '.join(changed)} changed while its full phase is part loaded: the "
                           f"chunks loaded before the stop keep the old shape and are not loaded again")
    return out
