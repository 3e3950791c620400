"""dmctl: operate shardflow tasks the way DM's dmctl does.

State (sources, task status, checkpoints) lives in the state store (SHARDFLOW_STATE_DSN);
phases run in Airflow, reached through its REST API (SHARDFLOW_AIRFLOW_URL).
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import sys
import time
from pathlib import Path

from dm_core.cli import binlog_cmd, schema_cmd, secret_cmds, validation_cmds
from dm_core.errors import ShardflowError


def _store():
    from dm_core.state import StateStore

    return StateStore()


def _tasks_dir() -> Path:
    root = Path(__file__).resolve().parents[2]
    return Path(os.environ.get("SHARDFLOW_TASKS_DIR") or root / "config" / "tasks")


def _task_name(arg: str) -> str:
    """DM's dmctl takes a task name or its file."""
    p = Path(arg)
    if p.suffix in (".yaml", ".yml") and p.exists():
        from dm_core.config.task import load_task_file

        return load_task_file(p, expand_env=False).name  # naming a task needs no credentials
    return arg


def _tasks_using(store, source_id: str) -> list[str]:
    """Tasks not stopped whose file names ``source_id`` (read as YAML only: a file stored by an
    older version must not keep a source from being checked)."""
    import yaml

    from dm_core.state.lifecycle import STOPPED

    out = []
    for name, status in store.list_tasks():
        got = store.get_task(name) if status != STOPPED else None
        try:
            doc = yaml.safe_load(got[0]) if got else None
        except yaml.YAMLError:
            doc = None
        instances = doc.get("mysql-instances") if isinstance(doc, dict) else None
        if any(isinstance(i, dict) and i.get("source-id") == source_id for i in instances or ()):
            out.append(name)
    return out


def _load_task_from_store(store, name: str, *, credentials: bool = False):
    """(task, status); ``credentials``: expand ${ENV} (only commands that connect downstream)."""
    from dm_core.config.task import parse_task
    from dm_core.errors import ErrorCode

    got = store.get_task(name)
    if got is None:
        raise ErrorCode.TASK_UNKNOWN.error(f"task {name!r} does not exist")
    return parse_task(got[0], f"<task {name}>", expand_env=credentials), got[1]


def _print_warnings(warnings) -> None:
    """A config file's warnings (keys shardflow accepts but does not act on), on stderr."""
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)


# ---- operate-source -----------------------------------------------------------------------
def _global_variable(conn, name: str) -> str | None:
    """A server's global variable, None when it has none by that name."""
    import pymysql

    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT @@GLOBAL.{name}")
            return str(cur.fetchone()[0])
    except pymysql.err.OperationalError as e:
        if e.args and e.args[0] == 1193:   # Unknown system variable
            return None
        raise


def cmd_operate_source(a) -> int:
    from dm_core.config.source import check_gtid_mode, check_server_flavor, load_source_file

    with _store() as store:
        if a.op == "create":
            for f in a.files:
                src = load_source_file(f)
                from dm_core.db import connect

                _print_warnings(src.warnings)
                conn = connect(src.endpoint())
                try:
                    check_server_flavor(src, conn.get_server_info(), f)
                    if src.enable_gtid:
                        check_gtid_mode(src, conn.get_server_info(), _global_variable(conn, "gtid_mode"), f)
                finally:
                    conn.close()
                store.put_source(src.source_id, src.to_dict(with_password=False), src.password)
                print(f"source {src.source_id}: created ({src.user}@{src.host}:{src.port})")
            return 0
        if a.op == "show":
            rows = store.list_sources()
            if a.files:
                wanted = set(a.files)
                rows = [r for r in rows if r.get("source-id") in wanted or r.get("source_id") in wanted]
            for r in rows:      # TLS material is long and the key is sealed: say whether it is there
                if r.get("security"):
                    r["security"] = {k: bool(v) for k, v in r["security"].items()}
            print(json.dumps({"result": True, "sources": rows}, indent=2))
            return 0
        if a.op == "stop":
            rc = 0
            for f in a.files:
                sid = f
                if Path(f).exists():   # only its source-id is read: stopping needs no connection
                    sid = load_source_file(f).source_id
                users = _tasks_using(store, sid)
                if users:   # DM's 46010: its sensors and the others' shard DDL locks need it
                    print(f"source {sid}: not stopped: task(s) {', '.join(users)} use it and are not stopped (a source "
                          f"stopped with stop-task -s counts too: the task's other sources read its tables); "
                          "`dmctl stop-task TASK` first (the task's other sources and its shard DDL locks read this one too)",
                          file=sys.stderr)
                    rc = 1
                elif store.disable_source(sid):
                    print(f"source {sid}: stopped")
                else:                  # DM's words
                    print(f"source config with ID {sid} not exists (not registered, or stopped already)",
                          file=sys.stderr)
                    rc = 1
            return rc
    return 2


# ---- check-task / start-task ----------------------------------------------------------------
def _precheck(task, store, start_time: str | None = None):
    """The prechecks on the task's servers; an unregistered source is a failed `connection`
    item of the report (not an exception), so the report still covers everything else.
    ``start_time``: check-task --start-time (meta is then not used)."""
    from dm_core.check import run_prechecks
    from dm_core.sources import source_endpoint, target_endpoint

    sources = {}
    for inst in task.mysql_instances:
        try:
            sources[inst.source_id] = source_endpoint(store, inst.source_id)
        except ShardflowError:
            continue
    return run_prechecks(task, sources, target_endpoint(task),
                         start_times=dict.fromkeys(sources, start_time) if start_time else None)


def cmd_check_task(a) -> int:
    from dm_core.config.task import load_task_file

    task = load_task_file(a.file)  # every problem of the file, each naming its key, or nothing
    _print_warnings(task.warnings)
    if a.start_time is not None:
        from dm_core.start import check_start_time

        check_start_time(task, a.start_time)
    print(f"task file {a.file}: valid (task {task.name}, task-mode {task.task_mode}, "
          f"shard-mode {task.shard_mode or 'none'}, {len(task.mysql_instances)} source(s)); "
          f"checking the servers")
    with _store() as store:
        report = _precheck(task, store, a.start_time)
    print(report.render())
    return 0 if report.ok else 1


def cmd_start_task(a) -> int:
    from dm_core.cli.airflow_api import AirflowAPI
    from dm_core.cli.lifecycle import cmd_start_task as start

    return start(a, _store, AirflowAPI, _tasks_dir(), on_loaded=lambda t: _print_warnings(t.warnings))


# ---- status ---------------------------------------------------------------------------------
def _fmt_state(s: dict) -> dict:
    from dm_core.full.phase import is_binlog_watermark

    return {
        "source": s["source_id"], "stage": s["stage"],
        "checkpoint": f"({s['binlog_file']}, {s['binlog_pos']})" if s["binlog_file"] else None,
        "low_watermark": f"({s['low_file']}, {s['low_pos']})" if is_binlog_watermark(s["low_file"]) else None,
        "high_watermark": f"({s['high_file']}, {s['high_pos']})" if s["high_file"] else None,
        "applied_rows": s["applied_rows"], "lag_seconds": s["lag_seconds"],
        # 0.0 is a measured idle window; None means no window has run yet
        "rows_per_second": round(s["rows_per_second"], 1) if s["rows_per_second"] is not None else None,
        "error": s["error"], "error_statement": s["error_stmt"], "error_position": s["error_pos"],
        "start_time": s.get("start_time"),   # start-task --start-time not yet applied (or too late)
        # a pause the source's checker resumes (dm_core/sync/auto_resume.py): when, for scripts
        **({"auto_resume_at": s["auto_resume_at"].isoformat()} if s.get("stage") == "paused"
           and isinstance(s.get("auto_resume_at"), datetime.datetime) else {}),
    }


def _airflow_view(name: str, generation: int | None) -> dict:
    from dm_core.cli.airflow_api import AirflowAPI
    from dm_core.cli.status_view import airflow_view

    try:
        return airflow_view(AirflowAPI(), name, generation)
    except ShardflowError as e:
        return {"error": str(e).splitlines()[0], "phases": {}, "waiting": []}


def _source_rows(store, name: str, info: dict) -> list[dict]:
    """Every source of the task file (a source not started yet has no state row: shown as new)."""
    from dm_core.config.task import parse_task

    rows = {s["source_id"]: s for s in store.all_source_states(name)}
    try:
        ids = [i.source_id for i in parse_task(info["config_text"], f"<task {name}>", expand_env=False).mysql_instances]
    except ShardflowError:
        ids = []
    blank = dict.fromkeys(("binlog_file", "binlog_pos", "low_file", "low_pos", "high_file", "high_pos", "lag_seconds",
                           "rows_per_second", "error", "error_stmt", "error_pos"))
    for sid in ids:
        rows.setdefault(sid, {**blank, "source_id": sid, "stage": "new", "applied_rows": 0, "requested": "running"})
    return [rows[k] for k in sorted(rows)]


def _status(store, name: str, only: list[str] | None = None) -> dict:
    from dm_core.cli.status_view import describe
    from dm_core.errors import ErrorCode
    from dm_core.shardddl import coordinator
    from dm_core.shardddl.optimism.held import held_lines

    info = store.task_info(name)  # no credentials: status must show even if the file needs env it lacks
    if info is None:
        raise ErrorCode.TASK_UNKNOWN.error(f"task {name!r} does not exist")
    view = _airflow_view(name, info["generation"])
    loaded = store.chunk_totals(name)
    rows = _source_rows(store, name, info)
    view["held"] = store.held_sources(name, [s["source_id"] for s in rows])  # which have a live poke
    locks = coordinator.list_locks(store, name, active_only=True)
    sources = []
    for s in rows:
        if only and s["source_id"] not in only:
            continue
        row = _fmt_state(s)
        row["loaded_rows"] = loaded.get(s["source_id"], 0)   # the full phase's (DM: the load unit's progress)
        row["status"], row["message"] = describe(name, info, s, view, loaded.get(s["source_id"], 0))
        row["unresolved_groups"] = coordinator.unresolved_groups(s["source_id"], s.get("shard_groups"), locks)
        row["held_tables"] = held_lines(s.get("shard_groups"))   # optimistic: tables held back, since when
        sources.append(row)
    return {"task": name, "status": info["status"], "start": info["generation"], "phases": view.get("phases", {}),
            "waiting": view.get("waiting", []), **({"airflow_error": view.get("error") or view["down"]} if view.get("error") or view.get("down") else {}),
            "sources": sources, "ddl_locks": [coordinator.summary(lk) for lk in locks]}


def _source_ids(given: list[str] | None) -> list[str] | None:
    """``-s a -s b`` or ``-s a,b`` (DM takes both)."""
    ids = [x.strip() for g in given or () for x in g.split(",") if x.strip()]
    return ids or None


def _unknown_sources(store, ids: list[str] | None) -> int:
    """DM's refusal of sources never registered ("sources [x] haven't been added"): 1, printed."""
    known = {r.get("source-id") or r.get("source_id") for r in store.list_sources()}
    unknown = [s for s in ids or () if s not in known]
    if unknown:
        print(f"sources [{' '.join(unknown)}] haven't been added: `dmctl operate-source create SOURCE.yaml` "
              f"registers a source (`dmctl operate-source show` lists them)", file=sys.stderr)
        return 1
    return 0


def cmd_query_status(a) -> int:
    a.source = _source_ids(a.source)
    with _store() as store:
        if _unknown_sources(store, a.source):
            return 1
        names = [_task_name(a.task)] if a.task else [n for n, _ in store.list_tasks()]
        if a.wait_synced is None:
            print(json.dumps({"result": True, "tasks": [_status(store, n, a.source) for n in names]}, indent=2,
                             default=str))
            return 0
        rc = 0
        for n in names:
            rc = max(rc, _wait_synced(store, n, a.wait_synced, a.source))
        return rc


def _wait_synced(store, name: str, timeout: float, only: list[str] | None = None) -> int:
    """Wait until every source (or ``only``) applied what its upstream had written when this
    started. Exit 2 at once when one cannot get there by itself (stopped, paused, a failed phase)."""
    from dm_core.db import connect, master_position
    from dm_core.sources import source_endpoint
    from dm_core.state import lifecycle
    from dm_core.position import Position

    task, _ = _load_task_from_store(store, name)
    targets = {}
    for inst in task.mysql_instances:
        if only and inst.source_id not in only:
            continue
        conn = connect(source_endpoint(store, inst.source_id))
        try:
            f, p, _g = master_position(conn)
        finally:
            conn.close()
        targets[inst.source_id] = Position(f, p)
    deadline = time.monotonic() + timeout
    last_phase_check = 0.0
    while True:
        info = store.task_info(name)
        states = {s["source_id"]: s for s in store.all_source_states(name)}
        behind = []
        for sid, target in targets.items():
            s = states.get(sid)
            gate = lifecycle.gate(info, s)
            if gate.state != lifecycle.RUNNING or (s and s["stage"] == "paused" and s["error"]):
                print(json.dumps(_status(store, name, only), indent=2, default=str))
                why = "paused on an error" if gate.state == lifecycle.RUNNING else gate.reason
                print(f"task {name}: source {sid} cannot sync: {why} (see above)", file=sys.stderr)
                return 2
            if not s or not s["binlog_file"] or s.get("start_time") \
                    or Position(s["binlog_file"], s["binlog_pos"]).key() < target.key():   # a --start-time moves it first
                behind.append(sid)
        if not behind:
            print(f"task {name}: synced: every source applied its upstream up to {', '.join(f'{k} {v}' for k, v in targets.items())}")
            return 0
        now = time.monotonic()
        if now - last_phase_check > 10:
            last_phase_check = now
            failed = _airflow_view(name, info["generation"]).get("failed", [])  # this start's runs only
            if failed:
                print(f"task {name}: the {', '.join(failed)} phase failed in Airflow: read the task log of "
                      f"DAG {lifecycle.dag_id(name, failed[0])}", file=sys.stderr)
                return 2
        if now > deadline:
            shown = {r["source"]: r for r in _status(store, name, behind)["sources"]}
            print(f"task {name}: not synced after {timeout:.0f}s:\n  " + "\n  ".join(
                f"{sid}: at {shown[sid]['checkpoint'] or 'nothing yet'}, needs {targets[sid]}; "
                f"{shown[sid]['status']}: {shown[sid]['message']}" for sid in behind), file=sys.stderr)
            return 1
        time.sleep(1)


# ---- lifecycle ------------------------------------------------------------------------------
def _per_task(a, run_one) -> int:
    """``CMD TASK [-s ...]``, or DM's batch form ``CMD -s SOURCE`` (no task): the command on that
    source of every task that has it and is not stopped."""
    import copy

    a.source = _source_ids(a.source)
    if a.task:
        a.task = _task_name(a.task)
        return run_one(a)
    if not a.source or len(a.source) != 1:
        print(f"usage: dmctl {a.cmd} [-s source ...] [task-name | task-file]: give the task, or exactly one "
              f"source (`-s SOURCE`) to {a.cmd.split('-')[0]} it in every task", file=sys.stderr)
        return 2
    from dm_core.config.task import parse_task

    sid = a.source[0]
    with _store() as store:
        if _unknown_sources(store, a.source):
            return 1
        names = []
        for name, status in store.list_tasks():
            info = store.task_info(name)
            try:
                ids = [i.source_id for i in parse_task(info["config_text"], f"<task {name}>",
                                                       expand_env=False).mysql_instances]
            except ShardflowError:
                continue
            states = {s["source_id"]: s for s in store.all_source_states(name)}
            if status != "stopped" and sid in ids and (states.get(sid) or {}).get("requested") != "stopped":
                names.append(name)
    if not names:
        print(f"source {sid}: no task that is not stopped has it", file=sys.stderr)
        return 1
    rc = 0
    for name in names:
        one = copy.copy(a)
        one.task = name
        rc = max(rc, run_one(one))
    return rc


def cmd_stop_task(a) -> int:
    from dm_core.cli.airflow_api import AirflowAPI
    from dm_core.cli.lifecycle import cmd_stop_task as stop

    return _per_task(a, lambda one: stop(one, _store, AirflowAPI))


def cmd_pause_resume(a, pause: bool) -> int:
    from dm_core.cli.airflow_api import AirflowAPI
    from dm_core.cli.lifecycle import cmd_pause_resume as pause_resume

    return _per_task(a, lambda one: pause_resume(one, _store, pause, AirflowAPI))


def cmd_shard_ddl_lock(a) -> int:
    """`shard-ddl-lock [TASK]` lists locks; `shard-ddl-lock unlock LOCK_ID` resolves one."""
    from dm_core.shardddl import coordinator

    args = list(a.args)
    with _store() as store:
        if args and args[0] == "unlock":
            if len(args) != 2:
                print("dmctl shard-ddl-lock unlock LOCK_ID [--owner SOURCE] [-s SOURCE -d DB -t TABLE] [--force-remove] "
                      "[--action exec|skip]: give exactly one lock id (`dmctl shard-ddl-lock TASK` lists them)",
                      file=sys.stderr)
                return 2
            if (a.database is None) != (a.table is None) or (a.source and a.owner and a.source != a.owner):
                print("dmctl shard-ddl-lock unlock: -d and -t go together (an optimistic lock's member table); "
                      "-s and --owner, when both given, must name one source", file=sys.stderr)
                return 2
            table = (a.database, a.table) if a.table is not None else None
            lk = coordinator.unlock(store, args[1], owner=a.owner or a.source, force_remove=a.force_remove,
                                    action=a.action, table=table)
            print(json.dumps({"result": True, "lock": coordinator.summary(lk)}, indent=2, default=str))
            print(f"lock {args[1]}: {coordinator.unlock_note(lk, a.action, a.force_remove)}", file=sys.stderr)
            return 0
        if len(args) > 1:
            print("dmctl shard-ddl-lock [TASK]: at most one task", file=sys.stderr)
            return 2
        names = [_task_name(args[0])] if args else [n for n, _ in store.list_tasks()]
        locks = [lk for n in names for lk in coordinator.list_locks(store, n, active_only=not a.all)]
        shown = locks if a.verbose else [coordinator.summary(lk) for lk in locks]
        print(json.dumps({"result": True, **({} if shown else {"msg": "no DDL lock exists"}), "locks": shown},
                         indent=2, default=str))
    return 0


def cmd_validate(a) -> int:
    with _store() as store:
        task, _ = _load_task_from_store(store, _task_name(a.task), credentials=True)
        return validation_cmds.cmd_validate(a, store, task) if a.cmd == "validate" else \
            validation_cmds.cmd_validation(a, store, task)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dmctl", description="operate shardflow migrations (DM-compatible)")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("operate-source", help="create | show | stop upstream sources (DM source.yaml)")
    s.add_argument("op", choices=["create", "show", "stop"])
    s.add_argument("files", nargs="*")
    s.set_defaults(fn=cmd_operate_source)
    s = sub.add_parser("check-task", help="validate a task file and run the prechecks")
    s.add_argument("file")
    s.add_argument("--start-time", metavar="TIME", help="as start-task's: check the task as it would start at "
                                                        "that time (its meta is not used)")
    s.set_defaults(fn=cmd_check_task)
    s = sub.add_parser("start-task", help="register a task file and run precheck → full → incremental in Airflow; "
                                          "a stopped task resumes from its checkpoints")
    s.add_argument("file")
    s.add_argument("--remove-meta", action="store_true", help="forget checkpoints and loaded chunks first")
    s.add_argument("--same-downstream", action="store_true",
                   help="target-database's new address reaches the same server as the old one (a DNS name or "
                        "VIP changed): not refused as a move")
    s.add_argument("--resync-new-tables", action="store_true",
                   help="tables with rows that the changed block-allow list lets in, or a changed route or column "
                        "mapping sends elsewhere, after the full phase are not refused: their targets are created, they "
                        "sync, and a run of dm_<task>_resync (what: tables) copies their earlier rows")
    s.add_argument("--start-time", metavar="TIME",
                   help="task-mode incremental: sync from the binlog position of this time, e.g. "
                        "'2021-10-21 00:01:00' (the upstream's time zone), '2021-10-21T00:01:00' or "
                        "'2021-10-21T00:01:00+08:00'; the checkpoints move there")
    s.add_argument("-s", "--source", action="append", help="only this source (repeatable); on a running task: "
                                                           "start a source stopped with stop-task -s again")
    s.add_argument("--wait-dags", type=float, default=180, help="seconds to wait for Airflow to load the DAGs")
    s.add_argument("--timeout", type=float, default=120,
                   help="seconds to wait for runs of an earlier start to end before starting")
    s.set_defaults(fn=cmd_start_task)
    s = sub.add_parser("query-status", help="per source: running / paused (why) / stopped / waiting (on what), "
                                            "position, lag and errors")
    s.add_argument("task", nargs="?")
    s.add_argument("-s", "--source", action="append", help="only this source (repeatable)")
    s.add_argument("--wait-synced", type=float, metavar="SECONDS")
    s.set_defaults(fn=cmd_query_status)
    s = sub.add_parser("stop-task", help="end the task's runs (or -s sources' sensors) and wait until they ended; "
                                         "checkpoints are kept")
    s.add_argument("task", nargs="?", help="task name or file (none: `-s SOURCE` in every task)")
    s.add_argument("-s", "--source", action="append", help="only this source (repeatable)")
    s.add_argument("--no-wait", action="store_true", help="return at once; the runs end by themselves")
    s.add_argument("--timeout", type=float, default=120, help="seconds to wait for the runs to end")
    s.set_defaults(fn=cmd_stop_task)
    for name, pause in (("pause-task", True), ("resume-task", False)):
        s = sub.add_parser(name, help="pause replication (keeps everything)" if pause else
                           "resume replication (a source paused on an error retries its statement once)")
        s.add_argument("task", nargs="?", help="task name or file (none: `-s SOURCE` in every task)")
        s.add_argument("-s", "--source", action="append", help="only this source (repeatable)")
        if pause:
            s.add_argument("--timeout", type=float, default=120,
                           help="seconds to wait for a full load's Spark job to stop")
        s.set_defaults(fn=lambda a, p=pause: cmd_pause_resume(a, p))
    binlog_cmd.register(sub, _store, _load_task_from_store, _task_name)
    s = sub.add_parser("shard-ddl-lock", aliases=["show-ddl-locks"],
                       help="list shard DDL locks ([TASK]) or resolve one (unlock LOCK_ID)")
    s.add_argument("args", nargs="*", metavar="TASK | unlock LOCK_ID")
    s.add_argument("--owner", help="unlock: the source that executes the DDL (default: the lock's owner)")
    s.add_argument("--force-remove", action="store_true",
                   help="unlock: nobody executes the DDL; the lock is released (you answer for the downstream)")
    s.add_argument("--action", choices=["exec", "skip"], default="exec",
                   help="unlock: exec (the owner runs the DDL) or skip (you already ran it downstream)")
    s.add_argument("-s", "--source", help="unlock, optimistic: only this source's conflicting members (as --owner)")
    s.add_argument("-d", "--database", help="unlock, optimistic: only the member of this upstream database (with -t)")
    s.add_argument("-t", "--table", help="unlock, optimistic: only the member of this upstream table (with -d)")
    s.add_argument("--all", action="store_true", help="list idle locks too")
    s.add_argument("-v", "--verbose", action="store_true", help="members, operations and schemas of each lock")
    s.set_defaults(fn=cmd_shard_ddl_lock)
    s = sub.add_parser("validate", help="compare downstream with the union of the shards now, in this process")
    s.add_argument("task")
    s.add_argument("--mode", choices=["full", "fast"], help="full: every column; fast: keys only (default: the task file's)")
    s.add_argument("--wait", type=float, default=60.0, metavar="SECONDS",
                   help="re-check rows that differ while replication catches up for at most this long "
                        "(default 60; the task file's row-error-delay applies to scheduled runs)")
    s.set_defaults(fn=cmd_validate)
    s = sub.add_parser("validation", help="status: the last validation result; start: run dm_<task>_validate now; "
                                          "stop: pause its schedule and end its runs; show-error: the differing rows")
    s.add_argument("op", choices=["status", "start", "stop", "show-error", *validation_cmds.NO_ERROR_STATES])
    s.add_argument("task")
    s.add_argument("--mode", choices=["full", "fast"], help="start: override the task file's mode")
    s.add_argument("--table-stage", choices=["running", "stopped"], help="status: only tables in this stage")
    s.add_argument("--wait-result", type=float, metavar="SECONDS",
                   help="start: wait for the run and print its result (exit 0 equal, 1 differences, 2 failed)")
    s.add_argument("--error", choices=["all", "unprocessed", "ignored"], default="unprocessed",
                   help="show-error: which errors (DM's states; none is ever ignored here)")
    s.set_defaults(fn=cmd_validate)
    schema_cmd.register(sub, _store, _load_task_from_store, _task_name)
    secret_cmds.register(sub)
    return p


def main(argv=None) -> int:
    logging.getLogger("sqlglot").setLevel(logging.ERROR)   # its parser's fallbacks are no news to a dmctl user
    a = build_parser().parse_args(binlog_cmd.options_first(list(sys.argv[1:] if argv is None else argv)))
    try:
        return a.fn(a)
    except ShardflowError as e:
        print(str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
