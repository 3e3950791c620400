"""What `dmctl query-status` says about each source, from the state store and from Airflow.

A source is ``finished`` (task-mode full: its load is done), ``running`` (its sensor syncs it), ``paused`` (by pause-task, or on an error:
the error is shown), ``stopped`` (stop-task; the checkpoint is kept), ``waiting`` (behind
something named in the message: another run of the same DAG, the precheck, the full phase,
a queued sensor, a retry) or ``not running`` (the store says running but no run of the
task is active in Airflow). The message always says what happens next, so a source at
``applied_rows: 0`` is never left unexplained.
"""

from __future__ import annotations

import datetime

from dm_core.slot_wait import slot_wait
from dm_core.state import lifecycle as lc

_ACTIVE = ("queued", "running")


def waiting_for_retry(api, dag: str, run_id: str) -> list[dict]:
    """The task instances of a run that wait for Airflow's retry (``up_for_retry``)."""
    return [ti for ti in api.task_instances(dag, run_id) if ti.get("state") == "up_for_retry"]


def airflow_view(api, name: str, generation: int | None) -> dict:
    """The task's DAG runs as they stand: latest state per phase, active runs, what waits
    behind what, and the task instances of the running incremental run."""
    view: dict = {"phases": {}, "active": {}, "waiting": [], "sensors": {}, "failed": []}
    down = api.down_components()
    if down:
        view["down"] = (f"Airflow's {', '.join(down)} is not running: nothing starts, retries or ends this task's "
                         f"runs until it is restarted (locally `make airflow-down && make airflow-up`; in production "
                         f"the supervisor of each component: docs/operations.md)")
    for phase in lc.PHASES:
        dag = lc.dag_id(name, phase)
        runs = api.runs(dag, 10)  # newest first
        if not runs:
            continue
        view["phases"][phase] = runs[0].get("state")
        current = [r for r in runs if _generation(r) in (None, generation)]
        if current and current[0].get("state") == "failed":  # a run ended by stop-task is an earlier start's
            view["failed"].append(phase)
        active = [r for r in reversed(runs) if r.get("state") in _ACTIVE]
        if active:
            view["active"][phase] = active
        running = [r for r in active if r["state"] == "running"]
        for q in (r for r in active if r["state"] == "queued"):
            if running:
                r = running[0]
                view["waiting"].append(
                    f"{dag} run {q['dag_run_id']} waits behind run {r['dag_run_id']} (running since "
                    f"{r.get('start_date')}{_of_start(r, generation)}; Airflow runs one at a time)")
            elif (api.dag(dag) or {}).get("is_paused"):
                view["waiting"].append(f"{dag} run {q['dag_run_id']} is queued but the DAG is paused in Airflow "
                                       f"(unpause it, or `dmctl start-task` does)")
            else:
                view["waiting"].append(f"{dag} run {q['dag_run_id']} is queued: waiting for the Airflow scheduler")
    full = [r for r in view["active"].get("full", []) if r["state"] == "running"]
    if full:   # a step that gave up on a server waits for Airflow's retry (plugins/shardflow_airflow/retry.py)
        dag = lc.dag_id(name, "full")
        view["full_retry"] = waiting_for_retry(api, dag, full[-1]["dag_run_id"])
    inc = [r for r in view["active"].get("incremental", []) if r["state"] == "running"]
    if inc:
        dag = lc.dag_id(name, "incremental")
        view["sensor_run"] = inc[-1]["dag_run_id"]
        view["sensors"] = {ti["task_id"]: ti for ti in api.task_instances(dag, inc[-1]["dag_run_id"])}
    return view


def _generation(run: dict) -> int | None:
    return lc.parse_generation((run.get("conf") or {}).get("generation"))


def _of_start(run: dict, generation: int | None) -> str:
    got = _generation(run)
    if got is None or generation is None:
        return ""
    return f", start #{got}" + (" -- an earlier start, being ended" if got != generation else "")


def describe(name: str, info: dict, st: dict, view: dict | None, loaded_rows: int = 0) -> tuple[str, str]:
    """(status, message) of one source; ``view``: airflow_view, or {"error": ...} when
    Airflow could not be asked, or None when not asked."""
    sid = st["source_id"]
    cp = f"({st['binlog_file']}, {st['binlog_pos']})" if st.get("binlog_file") else None
    gate = lc.gate(info, st)
    finished = st.get("stage") == "finished"   # task-mode full loaded it (dm_core/full/phase.py)
    if gate.state == lc.STOPPED:
        kept = (f"checkpoint {cp} kept" if cp else
                f"the full phase had finished ({loaded_rows} rows loaded)" if finished else
                f"stopped in the full phase with {loaded_rows} rows loaded: start-task loads only the rest"
                if st.get("low_file") and not st.get("high_file") else "nothing synced yet")
        again = "`dmctl start-task FILE` resumes it" if info["status"] == lc.STOPPED \
            else f"`dmctl start-task -s {sid} FILE` starts it again"
        erred = (f" (it was paused on an error, which it retries then: {str(st['error']).splitlines()[0]})"
                 if st.get("stage") == "paused" and st.get("error") else "")
        return lc.STOPPED, f"{gate.reason}; {kept}; {again}{erred}"
    if st.get("stage") == "paused" and st.get("error"):
        from dm_core.sync.auto_resume import said_at

        first = str(st["error"]).splitlines()[0]
        if st.get("auto_resume_at") and gate.state == lc.RUNNING:   # dm_core/sync/auto_resume.py
            return lc.PAUSED, (f"paused on an error after its checkpoint {cp or 'none yet'}: {first}; it resumes by "
                               f"itself at {said_at(st['auto_resume_at'])} (the source's checker, while its sensor "
                               f"runs), or at once with `dmctl resume-task {name} -s {sid}`; `dmctl pause-task "
                               f"{name} -s {sid}` keeps it paused")
        if st.get("error_pos"):
            return lc.PAUSED, (f"paused on an error at {st.get('error_pos')}: {first}; fix the cause, then "
                               f"`dmctl resume-task {name} -s {sid}` (retries it once) or `dmctl binlog skip|replace`")
        return lc.PAUSED, (f"paused on an error after its checkpoint {cp or 'none yet'}: {first}; fix the cause, then "
                           f"`dmctl resume-task {name} -s {sid}` (retries from the checkpoint)")
    if finished:
        return "finished", (f"the full phase finished: {loaded_rows} rows of this source loaded; task-mode full "
                            f"replicates nothing after it (`dmctl start-task --remove-meta FILE` loads again)")
    if gate.state == lc.PAUSED:
        return lc.PAUSED, f"{gate.reason}; checkpoint {cp or 'none yet'}"
    if st.get("stage") == "full" and st.get("error"):   # finish refused to hand over (dm_core/full/reread.py)
        return "not running", (f"the full phase did not hand over to the sync: {str(st['error']).splitlines()[0]} "
                               f"(the full DAG's finish task log names the statements and what to do)")
    if st.get("error"):   # not paused: a transient error the source is retrying (dm_core/sync/session.py)
        return lc.RUNNING, (f"retrying from its checkpoint {cp or 'none yet'} after a {str(st['error']).splitlines()[0]}; "
                            f"it pauses with the error if it stays; `dmctl pause-task|stop-task {name} -s {sid}` "
                            f"end the retries at once")
    if view is None:
        return lc.RUNNING, "running (Airflow not asked)"
    if view.get("error"):
        return lc.RUNNING, f"the state store says running, but Airflow could not be asked: {view['error']}"
    if view.get("down"):
        return lc.RUNNING, f"the state store says running, but {view['down']}"
    if view["waiting"]:
        return "waiting", "; ".join(view["waiting"])
    active = view["active"]
    if "incremental" in active:  # (a precheck or full run is still active for a moment after triggering it)
        return _sensor(name, st, view)
    if "precheck" in active:
        return "waiting", f"the precheck runs ({lc.dag_id(name, 'precheck')} run {active['precheck'][-1]['dag_run_id']})"
    if "full" in active and view.get("full_retry"):
        ti = view["full_retry"][0]
        return "waiting", (f"the full phase's {ti.get('task_id')} stopped because a server stayed away longer than "
                           f"it waits (its task log in {lc.dag_id(name, 'full')} names it); Airflow runs it again "
                           f"with backoff (try {ti.get('try_number')}, 1 s doubling to 5 min): {loaded_rows} rows of "
                           f"this source loaded so far, kept; `dmctl resume-task {name}` runs it now, "
                           f"`dmctl stop-task {name}` ends the tries")
    if "full" in active:
        return "waiting", (f"the full phase runs ({lc.dag_id(name, 'full')} run {active['full'][-1]['dag_run_id']}): "
                           f"{loaded_rows} rows of this source loaded so far; sync starts after it")
    failed = view.get("failed", [])
    if failed:
        return "not running", (f"the {failed[0]} phase failed in Airflow: read the task log of DAG "
                               f"{lc.dag_id(name, failed[0])}; once fixed, `dmctl start-task FILE` starts it again")
    last = ", ".join(f"{p} {s}" for p, s in view["phases"].items()) or "none"
    return "not running", (f"no run of the task's DAGs is active in Airflow (latest runs: {last}): "
                           f"`dmctl start-task FILE` starts it again")


def _sensor(name: str, st: dict, view: dict) -> tuple[str, str]:
    """A source of a task whose incremental run is active: what its sensor is doing."""
    sid = st["source_id"]
    cp = f"({st['binlog_file']}, {st['binlog_pos']})" if st.get("binlog_file") else None
    ti = view["sensors"].get(lc.sensor_task_id(sid))
    state = (ti or {}).get("state")
    lag = f", lag {st['lag_seconds']:.1f}s" if st.get("lag_seconds") is not None else ""
    if state == "running" and sid not in view.get("held", {sid}):
        return "waiting", ("its sensor is marked running in Airflow but nothing syncs the source yet (starting, or "
                           "its process died: Airflow retries it after its heartbeat timeout)")
    if state == "running":
        return lc.RUNNING, f"syncing now from {cp or 'its start position'}{lag}"
    if state == "up_for_reschedule":  # a sensor of a DAG file parsed before sensors ran in poke mode
        return lc.RUNNING, (f"synced up to {cp}{lag}; next poke in a few seconds" if cp
                            else "its first poke is due in a few seconds")
    if state == "up_for_retry":
        return "waiting", (f"its sync process failed (try {ti.get('try_number')}); Airflow retries it: read the log of "
                           f"{ti['task_id']} in {lc.dag_id(name, 'incremental')} run {view.get('sensor_run')}")
    if state in ("scheduled", "queued"):
        return "waiting", _slot_wait(ti, state)
    if state in (None, "none"):
        return "waiting", "its sensor has not been scheduled yet"
    return "not running", (f"its sensor ended ({state}) while the task runs: `dmctl start-task -s {sid} FILE` "
                           f"starts it again")


def _slot_wait(ti: dict, state: str, now: datetime.datetime | None = None) -> str:
    """What a source whose sensor is scheduled or queued in Airflow waits for (dm_core/slot_wait.py
    decides whether that is a worker slot)."""
    return (slot_wait({**ti, "state": state}, now)
            or f"its sensor is {state} in Airflow: it starts syncing when a worker takes it")
