"""``dmctl binlog-schema list|update|delete TASK DB TABLE -s SOURCE``: DM's commands on its
schema tracker (dm_core/schema_tracker), for an operator who knows better than the tracker:
a source paused on SCHEMA_TRACKER_MISMATCH, or a table changed upstream outside the binlog.

``update`` sets the table from a CREATE TABLE file, from the upstream now (``--from-source``)
or from the routed downstream table (``--from-target``), on a paused source (a running syncer
may be decoding with the versions it holds; it reads them again before its next window). It is written at the source's
checkpoint, and the versions after it are dropped: the sync reads from the checkpoint again
and follows the DDLs after it from the new version. ``delete`` drops every version: the table
is read from the upstream when its rows next come.
"""

from __future__ import annotations

import json
import sys

USAGE = {
    "list": "dmctl binlog-schema list <task-name> <database> <table> -s SOURCE",
    "update": "dmctl binlog-schema update <task-name> <database> <table> [schema-file] [flags] "
              "(-s SOURCE, --from-source | --from-target)",
    "delete": "dmctl binlog-schema delete <task-name> <database> <table> [flags] (-s SOURCE)",
}


def register(sub, store_factory, load_task, task_name) -> None:
    s = sub.add_parser("binlog-schema", help="list, update or delete a table in a source's schema tracker "
                                             "(the columns rows without names are decoded with)")
    s.add_argument("words", nargs="*", help="list|update|delete TASK DATABASE TABLE [SCHEMA-FILE]")
    s.add_argument("-s", "--source", action="append", help="source id (repeatable, or comma-separated)")
    s.add_argument("--from-source", action="store_true", help="update: the upstream's table as it is now")
    s.add_argument("--from-target", action="store_true", help="update: the downstream table it is routed to")
    s.add_argument("--flush", default=True, help="accepted for DM's dmctl: the version is always written at once")
    s.add_argument("--sync", nargs="?", const="true", default="true",
                   help="update, optimistic mode: tell the table's shard DDL lock its schema too (default true; "
                        "--sync=false: only the tracker)")
    s.set_defaults(fn=lambda a: run(a, store_factory, load_task, task_name))


def _usage(words: list[str]) -> int:
    op = words[0] if words else None
    if op in USAGE:
        print(f"Usage: {USAGE[op]}", file=sys.stderr)
    else:
        print("Usage: dmctl binlog-schema <command>\n\nAvailable Commands:\n"
              + "\n".join(f"  {k:7s} {v}" for k, v in USAGE.items()), file=sys.stderr)
    return 2


def run(a, store_factory, load_task, task_name) -> int:
    words = list(a.words)
    if len(words) < 4 or words[0] not in USAGE or (words[0] != "update" and len(words) != 4) or len(words) > 5:
        return _usage(words)
    op, task, db, table = words[0], task_name(words[1]), words[2], words[3]
    sources = [x for s in a.source or () for x in s.split(",") if x]
    if op == "update":
        if a.from_source and a.from_target:
            print("from-source and from-target can not be used together", file=sys.stderr)
            return 2
        if len(words) == 5 and (a.from_source or a.from_target):
            print("can not set schema-file when use from-source or from-target", file=sys.stderr)
            return 2
        if len(words) == 4 and not (a.from_source or a.from_target):
            print(f"Usage: {USAGE['update']}: give a schema file or --from-source / --from-target", file=sys.stderr)
            return 2
    if not sources:
        print("must specify at least one source (`-s SOURCE`)", file=sys.stderr)
        return 2
    from dm_core.schema_tracker.tracker import SchemaTracker

    with store_factory() as store:
        tk, _ = load_task(store, task, credentials=op == "update" and (a.from_target or _syncs_lock(a, None)))
        known = {i.source_id for i in tk.mysql_instances}
        unknown = [s for s in sources if s not in known]
        if unknown:
            print(f"task {tk.name} has no source {', '.join(unknown)} (it has {', '.join(sorted(known))})",
                  file=sys.stderr)
            return 2
        if op != "list":
            running = [sid for sid in sources if _running(store, tk.name, sid)]
            if running:
                print(f"source(s) {', '.join(running)} of task {tk.name} are running: pause first "
                      f"(`dmctl pause-task {tk.name} -s {running[0]}`), then {op}, then `dmctl resume-task`",
                      file=sys.stderr)
                return 2
        out = {}
        for sid in sources:
            tracker = SchemaTracker(tk.name, sid, store)
            if op == "list":
                out[sid] = _list(tracker, db, table)
            elif op == "delete":
                out[sid] = {"deleted_versions": tracker.forget_table(db, table)}
            else:
                out[sid] = _update(a, store, tk, sid, tracker, db, table, words[4] if len(words) == 5 else None)
        print(json.dumps({"result": True, "sources": out}, indent=2, default=str))
    return 0


def _running(store, task: str, sid: str) -> bool:
    """A source whose syncer may be reading (it keeps the tracker in memory until a new start)."""
    st = store.source_state(task, sid) or {}
    got = store.get_task(task)
    return (got is not None and got[1] == "running" and st.get("requested", "running") == "running"
            and st.get("stage") != "paused")


def _list(tracker, db: str, table: str) -> dict:
    from dm_core.schema_tracker import store as _store

    rows = [r for r in _store.load(tracker.store, tracker.task, tracker.source_id) if r[:2] == (db, table)]
    if not rows:
        return {"msg": f"`{db}`.`{table}` is not tracked: it is read from the upstream when its rows first come"}
    return {"versions": [{"from": f"({f}, {k[1]})", "table": d} for _s, _t, k, f, d in rows]}


def _update(a, store, tk, sid: str, tracker, db: str, table: str, path: str | None) -> dict:
    from dm_core.errors import ErrorCode
    from dm_core.position import Position
    from dm_core.schema_tracker import store as _store
    from dm_core.schema_tracker.evolve import STALE, evolve
    from dm_core.schema_tracker.table import TrackedTable, read_upstream
    from dm_core.db import connect
    from dm_core.sources import source_endpoint, target_endpoint

    if path is not None:
        sql = open(path, encoding="utf-8").read().strip().rstrip(";")

        class Empty:
            get = staticmethod(lambda s, t: None)
            tables_of = staticmethod(lambda s: [])
            charset_of = staticmethod(lambda s: tracker.schema_charset(s))
        tracker.upstream = source_endpoint(store, sid)
        got = evolve(sql, db, Empty()).get((db, table))
        if not isinstance(got, TrackedTable) or got == STALE:
            raise ErrorCode.CONFIG_INVALID.error(
                f"{path}: not a CREATE TABLE of `{db}`.`{table}` with its column definitions shardflow can read")
        new = TrackedTable(got.columns, got.charset, f"set by binlog-schema update from {path}")
    else:
        if a.from_source:
            ep, s, t, where = source_endpoint(store, sid), db, table, "the upstream"
        else:
            s, t = tk.rules_for(sid).router.route(db, table)
            ep, where = target_endpoint(tk), "the downstream"
        conn = connect(ep)
        try:
            got = read_upstream(conn, s, t)
        finally:
            conn.close()
        if got is None:
            raise ErrorCode.CONFIG_INVALID.error(f"`{s}`.`{t}` does not exist in {where}")
        new = TrackedTable(got.columns, got.charset, f"set by binlog-schema update from {where}")
    st = store.source_state(tk.name, sid)
    if not st or not st.get("binlog_file"):
        raise ErrorCode.CONFIG_INVALID.error(f"source {sid} of task {tk.name} has no checkpoint yet: nothing to set")
    at = Position(st["binlog_file"], int(st["binlog_pos"]))
    later = _store.delete_table(store, tk.name, sid, db, table, after=at.key())   # followed again from the new one
    tracker.set_table(db, table, new, at.key(), at.file)
    out = {"from": str(at), "table": new.to_dict(), "dropped_later_versions": later}
    if _syncs_lock(a, tk):
        out["shard_ddl_lock"] = _sync_lock(store, tk, sid, db, table, sql if path is not None else
                                           _show_create(ep, s, t))
    return out


def _syncs_lock(a, tk) -> bool:
    """DM's ``--sync``: in optimistic mode the lock learns the schema too (``tk`` None: the
    task is not loaded yet, so whether it will)."""
    wanted = str(a.sync).strip().lower() not in ("false", "0", "no", "off")
    return wanted and (tk is None or tk.shard_mode == "optimistic")


def _show_create(ep, schema: str, table: str) -> str:
    from dm_core.db import connect
    from dm_core.full.target_schema import show_create

    conn = connect(ep)
    try:
        return show_create(conn, schema, table)
    finally:
        conn.close()


def _sync_lock(store, tk, sid: str, db: str, table: str, create_sql: str) -> str:
    """The table's optimistic lock learns its schema (``OptimisticOps.set_schema``); what it said."""
    from dm_core.db import connect
    from dm_core.shardddl.ddl_norm import schema_from_create
    from dm_core.shardddl.downstream import read_table_schema
    from dm_core.shardddl.lock_ops import OPTIMISTIC
    from dm_core.sources import target_endpoint

    target = tk.rules_for(sid).router.route(db, table)
    conn = connect(target_endpoint(tk))
    try:
        initial = read_table_schema(conn, *target)
    finally:
        conn.close()
    return OPTIMISTIC.set_schema(store, tk.name, tuple(target), (sid, db, table), schema_from_create(create_sql),
                                 initial)
