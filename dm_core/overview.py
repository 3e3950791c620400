"""What a person wants to know about each task at a glance (the Migrations page in the
Airflow UI renders it; it is plain data, so anything else can too).

Per task: status, phase (from the latest DAG runs), per-source stage, checkpoint, lag,
rows/s and their recent history (the sensors record each window), full-phase tables and
chunks loaded, the error of a paused source, a source whose sensor waits for an Airflow worker
slot (dm_core/slot_wait.py decides it, as for query-status), shard DDL locks with who is waited for, the last
validation, and the *actions*
a user may take. An action is "trigger DAG X with conf Y": the page renders each as a
button, so new operations are new entries of :func:`actions`, not new page code.

A fleet (dozens of sources, thousands of tables) stays readable and its page quick: sources
come paused first and then by lag, locks and validated tables the worst first and only the
first few of them listed, everything else counted (``dm_core/state/summaries.py`` counts in
the store).

Nothing here reads a password: source rows of the store carry them, so only source states
are read, and the task file is parsed for names only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from dm_core.slot_wait import slot_wait
from dm_core.sync.auto_resume import said_at
from dm_core.state.lifecycle import dag_id, sensor_task_id

SYNCED_LAG_SECONDS = 10.0   # a syncing source this close to its upstream counts as synced
LOCKS_SHOWN = 20            # active shard DDL locks listed (with an Unlock button each), the worst first
VALIDATION_TABLES_SHOWN = 50    # tables of the last validation listed, the worst first


@dataclass
class Action:
    label: str
    dag_id: str
    conf: dict = field(default_factory=dict)
    confirm: str = ""            # question shown before triggering ('' = none)
    kind: str = "normal"         # normal | danger


def phase(status: str, runs: dict, sources: list[dict]) -> str:
    """The task's phase from its status, the newest run state of each DAG and source stages."""
    if status == "stopped":
        return "stopped"
    for p, label in (("incremental", "sync"), ("full", "full load"), ("precheck", "precheck")):
        st = runs.get(p)
        if st in ("failed", "upstream_failed"):
            return f"{label} failed"
        if st in ("running", "queued"):
            if p == "incremental" and status == "paused":
                return "paused"
            if p == "incremental" and any(s["stage"] == "paused" for s in sources):
                return "sync (a source is paused)"
            return label
        if st == "success" and p == "incremental":
            return "stopped"
        if st == "success":
            return f"{label} done"
    return "not started"


def synced(sources: list[dict]) -> bool:
    return bool(sources) and all(s["stage"] == "sync" and s["lag_seconds"] is not None and not s.get("slot_wait")
                                 and s["lag_seconds"] <= SYNCED_LAG_SECONDS for s in sources)


def actions(name: str, shard_mode: str | None, locks: list[dict], status: str = "", sources: list[dict] = (),
            validation: str = "") -> list[Action]:
    """The buttons of a task: validate now; re-sync what the last validation found when it
    found differences (``validation``: its status); pause / resume / stop / start by the task's
    status (the operations DAG shardflow_operate_task); skip the statement a source is paused
    on (shardflow_handle_error); per active shard DDL lock, unlock it."""
    out = [Action("Validate now", dag_id(name, "validate"), {}, f"Run a validation of task {name} on Spark now?")]
    if validation in ("different", "pending") and status != "stopped":
        out.append(Action("Re-sync what validation found", dag_id(name, "resync"),
                          {"what": "last_validation", "tables": [], "validation_run": ""},
                          f"Rewrite the rows the last validation of task {name} named from the upstream shards? Sync "
                          "holds at its checkpoint while they are written, then resumes in safe mode."))
    op = "shardflow_operate_task"

    def lifecycle(action: str, label: str, confirm: str, kind: str = "normal") -> Action:
        return Action(label, op, {"task": name, "action": action, "sources": [], "remove_meta": False}, confirm, kind)

    if status == "running":
        out.append(lifecycle("pause", "Pause", f"Pause task {name}? Its sources stop applying and keep their place."))
    if status == "paused":
        out.append(lifecycle("resume", "Resume", f"Resume task {name} from where it paused?"))
    if status in ("running", "paused"):
        out.append(lifecycle("stop", "Stop", f"Stop task {name}? Its DAG runs end; a start resumes from the "
                                              "checkpoints.", "danger"))
    if status == "stopped":
        out.append(lifecycle("start", "Start", f"Start task {name} again from its checkpoints?"))
    for s in sources:
        if s.get("stage") == "paused" and s.get("error"):
            out.append(Action(f"Skip the statement {s['source']} is paused on", "shardflow_handle_error",
                              {"task": name, "source": s["source"], "op": "skip", "statements": ""},
                              f"Skip the statement source {s['source']} stopped at (it is not applied downstream)? "
                              "To run other SQL instead, trigger shardflow_handle_error with op replace.", "danger"))
    if shard_mode:
        for lk in locks:
            if lk.get("owner") or lk.get("waiting_for"):
                out.append(Action(f"Unlock {lk['lock_id']} (owner runs the DDL)", dag_id(name, "shard_ddl_unlock"),
                                  {"lock_id": lk["lock_id"], "owner": "", "action": "exec", "force_remove": False},
                                  f"Release lock {lk['lock_id']}: its owner runs the DDL downstream now, the sources "
                                  "that have not reached it skip it later. Continue?", "danger"))
    return out


def _source(s: dict, sensors: dict, now) -> dict:
    return {"source": s["source_id"], "stage": s["stage"],
            "slot_wait": slot_wait(sensors.get(sensor_task_id(s["source_id"])), now),
            "checkpoint": f"({s['binlog_file']}, {s['binlog_pos']})" if s.get("binlog_file") else None,
            "lag_seconds": s.get("lag_seconds"), "rows_per_second": s.get("rows_per_second"),
            "applied_rows": s.get("applied_rows"), "error": s.get("error"), "error_statement": s.get("error_stmt"),
            # a pause the source's checker resumes (dm_core/sync/auto_resume.py): when
            "auto_resume_at": said_at(s.get("auto_resume_at")) if s.get("stage") == "paused" else None,
            "updated_at": s.get("updated_at")}



def by_urgency(sources: list[dict]) -> list[dict]:
    """Sources as a person reads them on a fleet: paused or failed first, then those waiting for a
    worker slot (they sync nothing, so their lag is not measured), then the ones most behind
    (greatest lag; none measured yet after those), then by name."""
    def key(s: dict):
        lag = s.get("lag_seconds")
        return (s["stage"] not in ("paused", "error"), not s.get("slot_wait"), lag is None, -(lag or 0.0), s["source"])

    return sorted(sources, key=key)


def _lock_urgency(lk: dict):
    """Conflicts first, then locks waiting longest, then the rest by id."""
    return ({"conflict": 0, "waiting": 1}.get(lk["status"], 2), lk.get("waiting_since") or "~", lk["lock_id"])


def counts(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _validation(store, name: str) -> dict | None:
    """The last finished validation as the page shows it: a few tables, the worst first, and
    the number of tables of each result."""
    from dm_core.state.summaries import last_validation
    from dm_core.validate.result import from_dict

    v = last_validation(store, name, VALIDATION_TABLES_SHOWN)
    if v is None:
        return None
    shown = from_dict({"task": name, "tables": v["tables"]}).tables
    return {"run_id": v["run_id"], "status": v["status"], "mode": v.get("mode"), "engine": v.get("engine"),
            "started_at": v.get("started_at"), "finished_at": v.get("finished_at"), "summary": v.get("summary"),
            "counts": v["counts"], "not_shown": v["not_shown"],
            "tables": [{"target": t.target, "status": t.status, "upstream_rows": t.upstream_rows,
                        "downstream_rows": t.downstream_rows, "chunks": t.chunks, "seconds": t.seconds,
                        "filtered": t.filtered, "error": t.error,
                        "differences": [asdict(d) for d in t.differences[:20]],
                        "more": t.differing_rows() - min(20, len(t.differences)),
                        "pending": [asdict(d) for d in t.pending[:20]]} for t in shown]}


def task_overview(store, name: str, runs: dict, sensors: dict | None = None, now=None) -> dict:
    """Everything the page shows for one task. ``runs``: DAG kind → state of its newest run;
    ``sensors``: task id → task instance (Airflow's REST API) of the sensors of its running
    incremental run that are scheduled or queued; ``now``: the time their wait is measured to.
    Its cost does not grow with the task's tables: per-table state is counted in the store,
    and only the first ``*_SHOWN`` locks and tables, the worst first, are listed."""
    from dm_core.config.task import parse_task
    from dm_core.shardddl import coordinator
    from dm_core.state.summaries import full_progress, running_validation

    text, status = store.get_task(name) or ("", "unknown")
    try:
        task = parse_task(text, f"<task {name}>")
        mode, shard_mode, error = task.task_mode, task.shard_mode, None
    except Exception as e:  # e.g. an env var the page's process lacks: still show the state
        mode, shard_mode, error = "?", None, f"task file does not load here: {str(e).splitlines()[0]}"
    sources = by_urgency([_source(s, sensors or {}, now) for s in store.all_source_states(name)])
    all_locks = sorted((coordinator.summary(lk) for lk in coordinator.list_locks(store, name, active_only=True)),
                       key=_lock_urgency)
    locks = all_locks[:LOCKS_SHOWN]
    last = _validation(store, name)
    return {"task": name, "status": status, "task_mode": mode, "shard_mode": shard_mode, "config_error": error,
            "phase": phase(status, runs, sources), "synced": synced(sources), "runs": runs,
            "sources": sources, "stages": counts(s["stage"] for s in sources),
            "slot_waits": sum(1 for s in sources if s["slot_wait"]), "full": full_progress(store, name),
            "windows": store.windows(name), "locks": locks, "lock_counts": counts(lk["status"] for lk in all_locks),
            "locks_not_shown": len(all_locks) - len(locks), "validation": last,
            "validation_running": running_validation(store, name),
            "actions": [asdict(a) for a in actions(name, shard_mode, locks, status, sources,
                                                   last["status"] if last else "")]}
