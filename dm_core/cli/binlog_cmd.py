"""``dmctl binlog skip|replace|inject|revert|list TASK [-b FILE:POS] [-s SOURCE ...] [SQL ...]``:
DM's handle-error command (dm_core/sync/handle_error.py says what each operation does).

Without ``-b`` an operation is for the event each source is paused on (every source of the
task paused on an error, or those named with ``-s``); with ``-b`` it is for the event at that
position of each named source (``-s`` is then needed when the task has several sources,
since a position means something in one source's binlog only).
"""

from __future__ import annotations

import sys

from dm_core.errors import ErrorCode
from dm_core.position import Position
from dm_core.sync import handle_error as he


def register(sub, store_factory, load_task, task_name) -> None:
    s = sub.add_parser("binlog", help="skip, replace or inject statements at a binlog event (DM's handle-error); "
                                      "revert or list what waits")
    s.add_argument("op", choices=he.COMMANDS)
    s.add_argument("task")
    s.add_argument("sql", nargs="*", help="replace / inject: the statements (`;` between them)")
    s.add_argument("-b", "--binlog-pos", metavar="FILE:POS",
                   help="the event's position (default: where the source is paused)")
    s.add_argument("-s", "--source", action="append", help="source id (repeatable, or comma-separated)")
    s.set_defaults(fn=lambda a: run(a, store_factory, load_task, task_name))


_OPTIONS = ("-s", "--source", "-b", "--binlog-pos")


def options_first(argv: list[str]) -> list[str]:
    """``binlog OP TASK -s S1 ALTER ...``: DM's dmctl takes options among the statement's words;
    argparse takes none after the statement has begun, so they are moved before it.

    >>> options_first(["binlog", "inject", "t", "-s", "a", "alter", "table", "d.t", "add", "c", "int"])
    ['binlog', '-s', 'a', 'inject', 't', 'alter', 'table', 'd.t', 'add', 'c', 'int']
    """
    if argv and argv[0] == "handle-error":
        return _from_handle_error(argv)
    if not argv or argv[0] != "binlog":
        return argv
    opts, rest, i = [], [], 1
    while i < len(argv):
        word = argv[i]
        if word in _OPTIONS and i + 1 < len(argv):
            opts += argv[i:i + 2]
            i += 2
            continue
        if word.startswith(tuple(o + "=" for o in _OPTIONS if o.startswith("--"))):
            opts.append(word)
        else:
            rest.append(word)
        i += 1
    return ["binlog", *opts, *rest]


HANDLE_ERROR_USAGE = ("dmctl handle-error <task-name | task-file> [-s source ...] [-b binlog-pos] "
                      "<skip/replace/revert> [replace-sql1;replace-sql2;]")
HANDLE_ERROR_OPS = ("skip", "replace", "revert")


def _from_handle_error(argv: list[str]) -> list[str]:
    """DM's older ``handle-error TASK [-s S] [-b POS] OP [SQL]`` (still in DM's dmctl) as
    ``binlog OP TASK ...``; a wrong form is refused with DM's usage or words.

    >>> _from_handle_error(["handle-error", "t", "-b", "mysql-bin.000001:4", "replace", "alter", "table", "d.t", "add", "c", "int"])
    ['binlog', '-b', 'mysql-bin.000001:4', 'replace', 't', 'alter', 'table', 'd.t', 'add', 'c', 'int']
    """
    moved = options_first(["binlog", *argv[1:]])[1:]
    opts = []
    while moved and moved[0].startswith("-"):
        opts += moved[:1] if "=" in moved[0] else moved[:2]
        moved = moved[1:] if "=" in moved[0] else moved[2:]
    if len(moved) < 2:
        raise SystemExit(f"usage: {HANDLE_ERROR_USAGE}\n(handle-error is DM's older name for `dmctl binlog`)")
    task, op, *sql = moved
    if op not in HANDLE_ERROR_OPS:
        raise SystemExit(f"invalid operation '{op}': {HANDLE_ERROR_USAGE}")
    return ["binlog", *opts, op, task, *sql]


def _sources(a, task, states: dict, status: str = "running") -> list[str]:
    named = [x.strip() for arg in (a.source or []) for x in arg.split(",") if x.strip()]
    ids = [inst.source_id for inst in task.mysql_instances]
    for sid in named:
        if sid not in ids:
            raise ErrorCode.CONFIG_INVALID.error(f"source {sid!r} is not a source of task {task.name!r} "
                                                 f"(its sources: {', '.join(ids)})")
    if named:
        return named
    if a.op == "list":
        return ids
    if a.binlog_pos:
        if len(ids) > 1:
            raise ErrorCode.CONFIG_INVALID.error(
                f"binlog {a.op} -b names a position in one source's binlog; task {task.name!r} has "
                f"{len(ids)} sources", workaround="Add `-s SOURCE` for the source whose binlog it is.")
        return ids
    paused = [sid for sid in ids if _erred(states.get(sid))]
    if not paused and status == "stopped":   # DM: a stopped task "not exist"s; here it keeps its checkpoints
        raise ErrorCode.CONFIG_INVALID.error(
            f"task {task.name} is stopped and no source of it is paused on an error; nothing to {a.op}",
            workaround="`dmctl start-task FILE` starts it from its checkpoints; `-b FILE:POS -s SOURCE` sets an "
                       "operation ahead of time.")
    if not paused:
        raise ErrorCode.CONFIG_INVALID.error(   # DM's words per source: "source '...' has no error"
            f"task {task.name}: " + ", ".join(f"source '{sid}' has no error" for sid in ids)
            + f" (none is paused on one); nothing to {a.op}",
            workaround="Give the event's position with `-b FILE:POS -s SOURCE` to act on it ahead of time.")
    return paused


def _erred(st) -> bool:
    return bool(st and st["stage"] == "paused" and st["error"])


def _paused(st) -> bool:
    """Paused on an error at a known event (``error_pos``)."""
    return _erred(st) and bool(st["error_pos"])


def _statements(a) -> list[str]:
    """DDL naming its databases; only a replace of the row transaction a source is paused on
    (no ``-b``) may give other SQL, which runs downstream as written."""
    sqls = he.split_statements(" ".join(a.sql))
    if a.op == "inject" or a.binlog_pos or not sqls or all(he.is_ddl(s) for s in sqls):
        he.check_statements(sqls)
    return sqls


def run(a, store_factory, load_task, task_name) -> int:
    name = task_name(a.task)
    if a.op in ("skip", "revert", "list") and a.sql:
        print(f"dmctl binlog {a.op} takes no statements (got: {' '.join(a.sql)})", file=sys.stderr)
        return 2
    sqls = _statements(a) if a.op in ("replace", "inject") else []
    at = he.parse_binlog_pos(a.binlog_pos) if a.binlog_pos else None
    with store_factory() as store:
        task, status = load_task(store, name)
        states = {s["source_id"]: s for s in store.all_source_states(name)}
        sources = _sources(a, task, states, status)
        if not a.source and not a.binlog_pos and a.op != "list":
            for sid in (i.source_id for i in task.mysql_instances):   # DM answers for every source
                if sid not in sources:
                    print(f"task {name}: source '{sid}' has no error; nothing to {a.op} there")
        failed = 0
        for sid in sources:
            st = states.get(sid)
            checkpoint = Position(st["binlog_file"], st["binlog_pos"]) if st and st["binlog_file"] else None
            if a.op == "list":
                pending = he.PendingOps.load(store, name, sid, checkpoint).ops
                pending = [op for op in pending if at is None or op.pos.key() >= at.key()]
                print(f"task {name}: source {sid}: " + ("; ".join(op.describe() for op in pending) if pending
                                                        else "no operation waits"))
                continue
            pos = at
            if pos is None:
                if not _paused(st):
                    why = ("its error names no binlog event (it was raised after the checkpoint "
                           f"({st['binlog_file']}, {st['binlog_pos']}))" if _erred(st)
                           else f"source '{sid}' has no error (it is not paused on one)")
                    print(f"task {name}: source {sid}: {why}; give `-b FILE:POS` of the event (SHOW BINLOG EVENTS "
                          f"on the upstream lists them)", file=sys.stderr)
                    failed += 1
                    continue
                pos = he.parse_binlog_pos(st["error_pos"])
            if checkpoint is not None and pos.key() < checkpoint.key():
                print(f"task {name}: source {sid}: {pos} is before its checkpoint {checkpoint}: that event "
                      f"is already past", file=sys.stderr)
                failed += 1
                continue
            if a.op == "revert":
                if store.revert_error_op(name, sid, pos):
                    print(f"task {name}: source {sid}: the operation at {pos} is reverted")
                    if _paused(st) and pos.key() == he.parse_binlog_pos(st["error_pos"]).key():
                        # DM resumes a paused subtask after every binlog operation: the event is
                        # read again as the upstream wrote it (the report of the reverted one goes)
                        store.request_sources(name, [sid], st["requested"] or "running",
                                              all_sources=[i.source_id for i in task.mysql_instances],
                                              clear_error=True)
                        print(f"task {name}: source {sid}: it retries the event as the upstream wrote it")
                else:
                    print(f"task {name}: source {sid}: no operation waits at {pos}", file=sys.stderr)
                    failed += 1
                continue
            store.add_error_op(name, sid, a.op, pos, sqls)
            print(f"task {name}: source {sid}: {a.op} at {pos} queued; it takes effect when the source reads "
                  f"that event" + (" (at its next poke)" if _paused(st) else ""))
    return 1 if failed else 0
