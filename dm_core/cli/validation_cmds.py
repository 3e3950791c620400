"""dmctl's validation commands (DM: ``dmctl validation status|start``, plus ``validate``).

- ``validate TASK``: compare now, in this process (dm_core/validate/compare.py); the result is
  also stored as the task's newest validation (run id ``dmctl-<time>``).
- ``validation start TASK``: trigger the scheduled DAG ``dm_<task>_validate`` now (on Spark),
  its schedule resumed.
- ``validation stop TASK``: pause that schedule and end the runs under way (DM stops its
  continuous validator; `validation start` resumes both).
- ``validation status TASK``: the newest validation result in DM's response shape.
- ``validation show-error [--error all|unprocessed|ignored] TASK``: the newest result's differing
  rows as DM's validation errors (every one unprocessed: shardflow has no ignore-error).
- DM's ``validation ignore-error|resolve-error|clear-error|update`` say why there is nothing to
  act on (no error states kept: a re-sync mends the rows).
"""

from __future__ import annotations

import datetime as dt
import json
import sys


def cmd_validate(a, store, task) -> int:
    from dm_core.validate.compare import validate_task
    from dm_core.validate.result import render
    from dm_core.validate.settings import settings_for

    run_id = f"dmctl-{dt.datetime.now(dt.timezone.utc).strftime('%Y%m%dT%H%M%S')}"
    settings = settings_for(task)
    if a.wait is not None:
        settings.recheck.row_error_delay = a.wait
    res = validate_task(task, store, mode=a.mode, run_id=run_id, settings=settings)
    store.put_validation(task.name, run_id, res.status, res.to_dict(), finished=True)
    print(render(res))
    ok = res.status == "equal"
    print(f"task {task.name}: downstream {'EQUALS' if ok else 'DIFFERS FROM' if res.status == 'different' else 'is not yet confirmed equal to'} "
          "the union of the upstream shards")
    return 0 if ok else 1


def cmd_validation(a, store, task) -> int:
    from dm_core.validate.result import dm_errors, dm_status, from_dict

    if a.op == "status":
        got = store.validation(task.name)
        out = dm_status(from_dict(got) if got else None, task.name, [i.source_id for i in task.mysql_instances])
        if a.table_stage:  # DM filters table statuses by stage
            out["tableStatuses"] = [t for t in out["tableStatuses"] if t["stage"].lower() == a.table_stage]
        print(json.dumps(out, indent=2, default=str))
        return 0
    if a.op in NO_ERROR_STATES:
        print(f"dmctl validation {a.op}: shardflow's validation keeps no error states to change: every run compares "
              f"the tables anew. To mend the rows a validation named, trigger dm_{task.name}_resync "
              "(what=last_validation); the validation it triggers afterwards shows what is left", file=sys.stderr)
        return 1
    if a.op == "show-error":
        got = store.validation(task.name)
        print(json.dumps(dm_errors(from_dict(got) if got else None, a.error), indent=2, default=str))
        return 0
    from dm_core.cli.airflow_api import AirflowAPI

    from dm_core.state.lifecycle import dag_id as dag_of

    dag_id = dag_of(task.name, "validate")
    api = AirflowAPI()
    if api.dag(dag_id) is None:
        print(f"task {task.name}: Airflow has no DAG {dag_id} (start the task with `dmctl start-task` first)",
              file=sys.stderr)
        return 1
    if a.op == "stop":
        from dm_core.cli.lifecycle import stop_validation

        done = stop_validation(api, task.name, "stopped by `dmctl validation stop`", resync=False)
        print(f"task {task.name}: validation stopped: {'; '.join(done)}. `dmctl validation start {task.name}` "
              "runs it now and resumes its schedule")
        return 0
    from dm_core.validate.ready import not_ready

    api.set_paused(dag_id, False)
    why = not_ready(task, store.all_source_states(task.name))
    if why:   # the run would validate nothing (its gate skips it): say so now rather than after it
        print(f"{why}\nno run started; the schedule of {dag_id} is resumed", file=sys.stderr)
        return 1
    from dm_core.cli.lifecycle import ran_now, retry_now

    # a run waiting for its retry after a server stayed away would hold the new one back (one run
    # at a time) for up to its backoff's 5 min: it runs now
    now = retry_now(api, task.name, ("validate",))
    if now:
        print(f"task {task.name}: {ran_now(now, ', and the run this start adds follows it')}")
    run = api.trigger(dag_id, {"mode": a.mode} if a.mode else {})
    run_id = run.get("dag_run_id")
    print(f"task {task.name}: validation started: run {run_id} of {dag_id}; "
          f"`dmctl validation status {task.name}` shows its result")
    if not a.wait_result:
        return 0
    return _wait_for_result(api, store, task.name, dag_id, run_id, a.wait_result)


# DM's commands on its continuous validator's error states and settings, which shardflow has not
NO_ERROR_STATES = ("ignore-error", "resolve-error", "clear-error", "update")

def _wait_for_result(api, store, name: str, dag_id: str, run_id: str, timeout: float) -> int:
    """Wait for the run to finish; print its result. 0: equal, 1: differences/pending, 2: failed."""
    import time

    from dm_core.validate.result import from_dict, render

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = (api.run(dag_id, run_id) or {}).get("state")
        if state in ("success", "failed"):
            got = store.validation(name, run_id)
            if got is None:
                print(f"run {run_id} {state} without a result: read the task log of {dag_id}", file=sys.stderr)
                return 2
            res = from_dict(got)
            print(render(res))
            return 0 if res.status == "equal" else 1
        time.sleep(3)
    print(f"run {run_id} of {dag_id} did not finish within {timeout:.0f}s", file=sys.stderr)
    return 2
