"""dmctl: operate shardflow tasks the way DM's dmctl does.

State (sources, task status, checkpoints) lives in the state store (SHARDFLOW_STATE_DSN);
phases run in Airflow, reached through its REST API (SHARDFLOW_AIRFLOW_URL).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

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

        return load_task_file(p).name
    return arg


def _load_task_from_store(store, name: str):
    from dm_core.config.task import parse_task
    from dm_core.errors import ErrorCode

    got = store.get_task(name)
    if got is None:
        raise ErrorCode.TASK_UNKNOWN.error(f"task {name!r} is not known")
    return parse_task(got[0], f"<task {name}>"), got[1]


# ---- operate-source -----------------------------------------------------------------------
def cmd_operate_source(a) -> int:
    from dm_core.config.source import load_source_file

    with _store() as store:
        if a.op == "create":
            for f in a.files:
                src = load_source_file(f)
                from dm_core.db import Endpoint, connect

                conn = connect(Endpoint(src.host, src.port, src.user, src.password, name=f"source {src.source_id}"))
                conn.close()
                store.put_source(src.source_id, src.to_dict(with_password=False), src.password)
                print(f"source {src.source_id}: created ({src.user}@{src.host}:{src.port})")
            return 0
        if a.op == "show":
            rows = store.list_sources()
            if a.files:
                wanted = set(a.files)
                rows = [r for r in rows if r.get("source-id") in wanted or r.get("source_id") in wanted]
            print(json.dumps({"result": True, "sources": rows}, indent=2))
            return 0
        if a.op == "stop":
            for f in a.files:
                sid = f
                if Path(f).exists():
                    sid = load_source_file(f).source_id
                ok = store.disable_source(sid)
                print(f"source {sid}: {'stopped' if ok else 'not registered'}")
            return 0
    return 2


# ---- check-task / start-task ----------------------------------------------------------------
def _precheck(task, store):
    """The prechecks on the task's servers; an unregistered source is a failed `connection`
    item of the report (not an exception), so the report still covers everything else."""
    from dm_core.check import run_prechecks
    from dm_core.sources import source_endpoint, target_endpoint

    sources = {}
    for inst in task.mysql_instances:
        try:
            sources[inst.source_id] = source_endpoint(store, inst.source_id)
        except ShardflowError:
            continue
    return run_prechecks(task, sources, target_endpoint(task))


def cmd_check_task(a) -> int:
    from dm_core.config.task import load_task_file

    task = load_task_file(a.file)  # every problem of the file, each naming its key, or nothing
    print(f"task file {a.file}: valid (task {task.name}, task-mode {task.task_mode}, "
          f"shard-mode {task.shard_mode or 'none'}, {len(task.mysql_instances)} source(s)); "
          f"checking the servers")
    with _store() as store:
        report = _precheck(task, store)
    print(report.render())
    return 0 if report.ok else 1


def cmd_start_task(a) -> int:
    from dm_core.cli.airflow_api import AirflowAPI
    from dm_core.config.task import load_task_file
    from dm_core.sources import source_endpoint

    task = load_task_file(a.file)  # an invalid file raises here: nothing is started
    text = Path(a.file).read_text()
    with _store() as store:
        for inst in task.mysql_instances:
            source_endpoint(store, inst.source_id)  # every source must be registered
        dest = _tasks_dir() / f"{task.name}.yaml"
        dest.parent.mkdir(parents=True, exist_ok=True)
        if Path(a.file).resolve() != dest.resolve():
            shutil.copyfile(a.file, dest)
        if a.remove_meta:
            from dm_core.full.phase import forget

            store.reset_task(task.name)
            forget(task, store)  # chunk plans, downstream markers, staging leftovers
        store.put_task(task.name, text, "running")
    api = AirflowAPI()
    ids = {p: f"dm_{task.name}_{p}" for p in ("precheck", "full", "incremental", "shard_ddl_unlock")}
    wanted = [ids["precheck"]] + ([ids["full"]] if task.task_mode != "incremental" else []) \
        + ([ids["incremental"]] if task.task_mode in ("all", "incremental") else []) \
        + ([ids["shard_ddl_unlock"]] if task.shard_mode else [])
    deadline = time.monotonic() + a.wait_dags
    missing = wanted
    while True:
        missing = [d for d in wanted if api.dag(d) is None]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(2)
    if missing:
        errs = [e for e in api.import_errors() if task.name in e.get("stack_trace", "")]
        hint = ("\n" + errs[0]["stack_trace"][-1500:]) if errs else ""
        print(f"task {task.name}: Airflow has not loaded {', '.join(missing)} after {a.wait_dags}s "
              f"(is the dag-processor running on {dest.parent}?){hint}", file=sys.stderr)
        return 1
    for d in wanted:
        api.set_paused(d, False)
    run = api.trigger(ids["precheck"], {"chain": True})
    print(f"task {task.name}: started (precheck → {'full → ' if task.task_mode != 'incremental' else ''}"
          f"{'incremental' if task.task_mode != 'full' else 'done'}); run {run.get('dag_run_id')} of {ids['precheck']}")
    return 0


# ---- status ---------------------------------------------------------------------------------
def _fmt_state(s: dict) -> dict:
    return {
        "source": s["source_id"], "stage": s["stage"],
        "checkpoint": f"({s['binlog_file']}, {s['binlog_pos']})" if s["binlog_file"] else None,
        "low_watermark": f"({s['low_file']}, {s['low_pos']})" if s["low_file"] else None,
        "high_watermark": f"({s['high_file']}, {s['high_pos']})" if s["high_file"] else None,
        "applied_rows": s["applied_rows"], "lag_seconds": s["lag_seconds"],
        # 0.0 is a measured idle window; None means no window has run yet
        "rows_per_second": round(s["rows_per_second"], 1) if s["rows_per_second"] is not None else None,
        "error": s["error"], "error_statement": s["error_stmt"], "error_position": s["error_pos"],
    }


def _dag_runs(task_name: str) -> dict:
    from dm_core.cli.airflow_api import AirflowAPI

    try:
        api = AirflowAPI()
        out = {}
        for p in ("precheck", "full", "incremental"):
            runs = api.runs(f"dm_{task_name}_{p}", 1)
            if runs:
                out[p] = runs[0].get("state")
        return out
    except ShardflowError:
        return {}


def _status(store, name: str) -> dict:
    got = store.get_task(name)  # no parse: status must show even if the file needs env it lacks
    if got is None:
        from dm_core.errors import ErrorCode

        raise ErrorCode.TASK_UNKNOWN.error(f"task {name!r} is not known")
    from dm_core.shardddl import admin

    status = got[1]
    return {"task": name, "status": status, "phases": _dag_runs(name),
            "sources": [_fmt_state(s) for s in store.all_source_states(name)],
            "ddl_locks": [admin.summary(lk) for lk in admin.list_locks(store, name, active_only=True)]}


def cmd_query_status(a) -> int:
    with _store() as store:
        names = [_task_name(a.task)] if a.task else [n for n, _ in store.list_tasks()]
        if a.wait_synced is None:
            print(json.dumps({"result": True, "tasks": [_status(store, n) for n in names]}, indent=2, default=str))
            return 0
        rc = 0
        for n in names:
            rc = max(rc, _wait_synced(store, n, a.wait_synced))
        return rc


def _wait_synced(store, name: str, timeout: float) -> int:
    """Wait until every source applied what its upstream had written when this started."""
    from dm_core.db import connect, master_position
    from dm_core.sources import source_endpoint
    from dm_core.state.store import Position

    task, _ = _load_task_from_store(store, name)
    targets = {}
    for inst in task.mysql_instances:
        conn = connect(source_endpoint(store, inst.source_id))
        try:
            f, p, _g = master_position(conn)
        finally:
            conn.close()
        targets[inst.source_id] = Position(f, p)
    deadline = time.monotonic() + timeout
    last_phase_check = 0.0
    while True:
        states = {s["source_id"]: s for s in store.all_source_states(name)}
        behind = []
        for sid, target in targets.items():
            s = states.get(sid)
            if s and s["stage"] == "paused" and s["error"]:
                print(json.dumps(_status(store, name), indent=2, default=str))
                print(f"task {name}: source {sid} is paused on an error (see above)", file=sys.stderr)
                return 2
            if not s or not s["binlog_file"] or Position(s["binlog_file"], s["binlog_pos"]).key() < target.key():
                behind.append(f"{sid} at {'(' + s['binlog_file'] + ', ' + str(s['binlog_pos']) + ')' if s and s['binlog_file'] else 'nothing yet'}, needs {target}")
        if not behind:
            print(f"task {name}: synced: every source applied its upstream up to {', '.join(f'{k} {v}' for k, v in targets.items())}")
            return 0
        now = time.monotonic()
        if now - last_phase_check > 10:
            last_phase_check = now
            failed = [p for p, st in _dag_runs(name).items() if st == "failed"]
            if failed:
                print(f"task {name}: the {', '.join(failed)} phase failed in Airflow: read the task log of "
                      f"DAG dm_{name}_{failed[0]}", file=sys.stderr)
                return 2
        if now > deadline:
            print(f"task {name}: not synced after {timeout:.0f}s: {'; '.join(behind)}", file=sys.stderr)
            return 1
        time.sleep(1)


# ---- lifecycle ------------------------------------------------------------------------------
def cmd_set_status(a, status: str) -> int:
    name = _task_name(a.task)
    with _store() as store:
        _load_task_from_store(store, name)
        store.set_task_status(name, status)
        if status == "running":  # resume also retries sources paused on errors
            for s in store.all_source_states(name):
                if s["stage"] == "paused":
                    store.update_source_state(name, s["source_id"], stage="sync", error=None, error_code=None)
    print(f"task {name}: {status}")
    return 0


def cmd_binlog(a) -> int:
    name = _task_name(a.task)
    with _store() as store:
        _load_task_from_store(store, name)
        paused = [s["source_id"] for s in store.all_source_states(name) if s["stage"] == "paused" and s["error"]]
        sources = [a.source] if a.source else paused
        if not sources:
            print(f"task {name}: no source is paused on an error; nothing to {a.op}", file=sys.stderr)
            return 1
        for sid in sources:
            store.add_command(name, sid, a.op, {"sql": " ".join(a.sql)} if a.op == "replace" else {})
            print(f"task {name}: source {sid}: {a.op} queued; it takes effect at the next poke")
    return 0


def cmd_shard_ddl_lock(a) -> int:
    """`shard-ddl-lock [TASK]` lists locks; `shard-ddl-lock unlock LOCK_ID` resolves one."""
    from dm_core.shardddl import admin

    args = list(a.args)
    with _store() as store:
        if args and args[0] == "unlock":
            if len(args) != 2:
                print("dmctl shard-ddl-lock unlock LOCK_ID [--owner SOURCE] [--force-remove] [--action exec|skip]: "
                      "give exactly one lock id (`dmctl shard-ddl-lock TASK` lists them)", file=sys.stderr)
                return 2
            lk = admin.unlock(store, args[1], owner=a.owner, force_remove=a.force_remove, action=a.action)
            print(json.dumps({"result": True, "lock": admin.summary(lk)}, indent=2, default=str))
            print(f"lock {args[1]}: unlocked ({'force-removed' if a.force_remove else a.action}); the sources "
                  f"carry it out at their next poke", file=sys.stderr)
            return 0
        if len(args) > 1:
            print("dmctl shard-ddl-lock [TASK]: at most one task", file=sys.stderr)
            return 2
        names = [_task_name(args[0])] if args else [n for n, _ in store.list_tasks()]
        locks = [lk for n in names for lk in admin.list_locks(store, n, active_only=not a.all)]
        shown = locks if a.verbose else [admin.summary(lk) for lk in locks]
        print(json.dumps({"result": True, "locks": shown}, indent=2, default=str))
    return 0


def cmd_validate(a) -> int:
    from dm_core.validate.compare import compare_task, render

    name = _task_name(a.task)
    with _store() as store:
        task, _ = _load_task_from_store(store, name)
        diffs = compare_task(task, store)
    print(render(diffs))
    ok = all(d.equal for d in diffs)
    print(f"task {name}: downstream {'EQUALS' if ok else 'DIFFERS FROM'} the union of the upstream shards")
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dmctl", description="operate shardflow migrations (DM-compatible)")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("operate-source", help="create | show | stop upstream sources (DM source.yaml)")
    s.add_argument("op", choices=["create", "show", "stop"])
    s.add_argument("files", nargs="*")
    s.set_defaults(fn=cmd_operate_source)
    s = sub.add_parser("check-task", help="validate a task file and run the prechecks")
    s.add_argument("file")
    s.set_defaults(fn=cmd_check_task)
    s = sub.add_parser("start-task", help="register a task file and run precheck → full → incremental in Airflow")
    s.add_argument("file")
    s.add_argument("--remove-meta", action="store_true", help="forget checkpoints and loaded chunks first")
    s.add_argument("--wait-dags", type=float, default=180, help="seconds to wait for Airflow to load the DAGs")
    s.set_defaults(fn=cmd_start_task)
    s = sub.add_parser("query-status", help="per-source phase, position, lag and errors")
    s.add_argument("task", nargs="?")
    s.add_argument("--wait-synced", type=float, metavar="SECONDS")
    s.set_defaults(fn=cmd_query_status)
    for name, status in (("stop-task", "stopped"), ("pause-task", "paused"), ("resume-task", "running")):
        s = sub.add_parser(name)
        s.add_argument("task")
        s.set_defaults(fn=lambda a, st=status: cmd_set_status(a, st))
    s = sub.add_parser("binlog", help="skip or replace the statement a source is paused on")
    s.add_argument("op", choices=["skip", "replace"])
    s.add_argument("task")
    s.add_argument("sql", nargs="*")
    s.add_argument("-s", "--source")
    s.set_defaults(fn=cmd_binlog)
    s = sub.add_parser("shard-ddl-lock", aliases=["show-ddl-locks"],
                       help="list shard DDL locks ([TASK]) or resolve one (unlock LOCK_ID)")
    s.add_argument("args", nargs="*", metavar="TASK | unlock LOCK_ID")
    s.add_argument("--owner", help="unlock: the source that executes the DDL (default: the lock's owner)")
    s.add_argument("--force-remove", action="store_true",
                   help="unlock: nobody executes the DDL; the lock is released (you answer for the downstream)")
    s.add_argument("--action", choices=["exec", "skip"], default="exec",
                   help="unlock: exec (the owner runs the DDL) or skip (you already ran it downstream)")
    s.add_argument("--all", action="store_true", help="list idle locks too")
    s.add_argument("-v", "--verbose", action="store_true", help="members, operations and schemas of each lock")
    s.set_defaults(fn=cmd_shard_ddl_lock)
    s = sub.add_parser("validate", help="compare downstream with the union of the shards (row counts, checksums)")
    s.add_argument("task")
    s.set_defaults(fn=cmd_validate)
    return p


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    if getattr(a, "op", None) == "replace" and not a.sql:
        print("dmctl binlog replace TASK SQL...: give the statement(s) to run instead", file=sys.stderr)
        return 2
    try:
        return a.fn(a)
    except ShardflowError as e:
        print(str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
