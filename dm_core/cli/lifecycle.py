"""dmctl start-task / stop-task / pause-task / resume-task, per task or per source (``-s``).

DM's semantics: stop keeps checkpoints; start of a task whose full phase finished resumes
sync from them (``--remove-meta`` starts over); pause and resume keep everything. The
protocol -- generations, gates, fences -- is in dm_core/state/lifecycle.py; this module
makes the transitions in the state store and ends or restarts the Airflow side through its
REST API. Nothing here needs the target's password except start-task (which connects).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from dm_core.errors import ErrorCode, ShardflowError
from dm_core.cli.status_view import waiting_for_retry
from dm_core.state import lifecycle as lc

# a DAG of dags/shardflow_dags.py that every Airflow running shardflow has (parse_again)
OPERATE_DAG = "shardflow_operate_task"
_RUN_ENDS_AS = {"precheck": "failed", "full": "failed", "incremental": "success"}


# ---- the Airflow side ----------------------------------------------------------------------
def install_task_file(tasks_dir: Path, name: str, src: Path) -> Path:
    """Put a task's file into the folder Airflow's DAG factory reads, as ``<name>.yaml``."""
    dest = tasks_dir / f"{name}.yaml"
    dest.parent.mkdir(parents=True, exist_ok=True)
    if Path(src).resolve() != dest.resolve():
        shutil.copyfile(src, dest)
    return dest


def end_runs(api, name: str, note: str) -> list[str]:
    """End every queued/running run of the task's DAGs (a few rounds: a run that is ending
    may trigger the next phase meanwhile). Returns what was ended."""
    ended = []
    for _ in range(3):
        found = False
        for phase in lc.PHASES:
            dag = lc.dag_id(name, phase)
            for run in api.active_runs(dag):
                found = True
                api.end_run(dag, run["dag_run_id"], _RUN_ENDS_AS[phase], note)
                ended.append(f"{dag} run {run['dag_run_id']} ({run['state']} → {_RUN_ENDS_AS[phase]})")
        if not found:
            break
    return ended


def stop_validation(api, name: str, note: str, *, resync: bool = True) -> list[str]:
    """Pause the task's scheduled validation DAG and end its active runs: a stopped task's
    downstream no longer follows the upstream, so a validation would report drift that is only
    the stop. start-task (and `validation start`) unpauses it. With ``resync``, a re-sync run
    ends too (its hold then lapses: dm_core/resync/hold.py)."""
    dag = lc.dag_id(name, "validate")
    api.set_paused(dag, True)  # a task file without it (404) is fine
    ended = []
    for d in (dag, lc.dag_id(name, "resync")) if resync else (dag,):
        for run in api.active_runs(d):
            api.end_run(d, run["dag_run_id"], "failed", note)
            ended.append(f"{d} run {run['dag_run_id']} ({run['state']} → failed)")
    return [f"{dag} paused"] + ended


def end_sensors(api, name: str, sources: list[str], note: str) -> list[str]:
    """End the sync sensors of ``sources`` in the task's active incremental runs."""
    dag = lc.dag_id(name, "incremental")
    wanted = {lc.sensor_task_id(s) for s in sources}
    ended = []
    for run in api.active_runs(dag):
        for ti in api.task_instances(dag, run["dag_run_id"]):
            if ti["task_id"] in wanted and ti.get("state") not in _FINISHED:
                api.end_task(dag, run["dag_run_id"], ti["task_id"], "success", note)
                ended.append(f"{ti['task_id']} of {dag} run {run['dag_run_id']} ({ti.get('state')} → success)")
    return ended


_FINISHED = {"success", "failed", "skipped", "upstream_failed", "removed"}


def still_alive(api, store, name: str, sources: list[str], *, whole: bool) -> list[str]:
    """What of the task (whole) or of ``sources`` has not ended yet, in words."""
    left = []
    if whole:
        for phase in lc.PHASES:
            dag = lc.dag_id(name, phase)
            left += [f"{dag} run {r['dag_run_id']} is {r['state']}" for r in api.active_runs(dag)]
    else:
        dag = lc.dag_id(name, "incremental")
        wanted = {lc.sensor_task_id(s) for s in sources}
        for run in api.active_runs(dag):
            left += [f"{ti['task_id']} of {dag} run {run['dag_run_id']} is {ti.get('state')}"
                     for ti in api.task_instances(dag, run["dag_run_id"])
                     if ti["task_id"] in wanted and ti.get("state") not in _FINISHED]
    left += [f"a poke of source {s} has not exited yet (it holds the source's fence)"
             for s in sorted(store.held_sources(name, sources))]
    if whole and store.full_load_held(name):
        left.append("the full load's Spark job has not ended yet (it holds the task's load fence)")
    return left


def wait_ended(api, store, name: str, sources: list[str], timeout: float, *, whole: bool, note: str) -> list[str]:
    """Wait until the runs (whole) or the sources' sensors ended and every poke exited; ends
    what appears meanwhile (a phase that triggered the next one). Returns what is left."""
    deadline = time.monotonic() + timeout
    while True:
        left = still_alive(api, store, name, sources, whole=whole)
        if not left or time.monotonic() > deadline:
            return left
        if whole:
            end_runs(api, name, note)
        else:
            end_sensors(api, name, sources, note)
        time.sleep(1)


# ---- commands ------------------------------------------------------------------------------
def _task(store, name: str):
    """(info, task parsed without expanding ${ENV}) of a registered task."""
    from dm_core.config.task import parse_task

    info = store.task_info(name)
    if info is None:
        raise ErrorCode.TASK_UNKNOWN.error(f"task {name!r} does not exist")
    return info, parse_task(info["config_text"], f"<task {name}>", expand_env=False)


def _sources(task, given: list[str] | None) -> list[str]:
    ids = [i.source_id for i in task.mysql_instances]
    unknown = [s for s in given or () if s not in ids]
    if unknown:
        raise ErrorCode.CONFIG_INVALID.error(
            f"task {task.name} has no source {', '.join(unknown)}",
            workaround=f"Use one of its sources: {', '.join(ids)} (`dmctl query-status {task.name}` lists them).")
    return list(given) if given else ids


def cmd_stop_task(a, open_store, api_factory) -> int:
    with open_store() as store:
        info, task = _task(store, a.task)
        sources = _sources(task, a.source)
        all_ids = [i.source_id for i in task.mysql_instances]
        if info["status"] == lc.STOPPED:
            print(f"task {task.name}: already stopped; ending anything of it still running in Airflow")
            whole = True
        else:
            store.request_sources(task.name, sources, lc.STOPPED, all_sources=all_ids)
            states = {s["source_id"]: s for s in store.all_source_states(task.name)}
            whole = all(states.get(s, {}).get("requested") == lc.STOPPED for s in all_ids)
            if whole:
                store.stop_task(task.name)
        what = "the task" if whole else f"source(s) {', '.join(sources)}"
        note = f"dmctl stop-task: {what} stopped"
        try:
            api = api_factory()
            ended = end_runs(api, task.name, note) + stop_validation(api, task.name, note) if whole \
                else end_sensors(api, task.name, sources, note)
        except ShardflowError as e:
            print(f"task {task.name}: {what} stopped in the state store, but Airflow could not be told: {e}\n"
                  f"its runs end by themselves at their next poke once Airflow runs", file=sys.stderr)
            return 1
        for line in ended:
            print(f"ended {line}")
        if not a.no_wait:
            left = wait_ended(api, store, task.name, sources if not whole else all_ids, a.timeout, whole=whole,
                              note=note)
            if left:
                print(f"task {task.name}: {what} stopped, but after {a.timeout:.0f}s these have not ended:\n  "
                      + "\n  ".join(left), file=sys.stderr)
                return 1
    kept = "checkpoints, watermarks, loaded chunks and shard DDL locks are kept"
    again = ("`dmctl start-task FILE` resumes from them" if whole
             else f"`dmctl start-task -s {' -s '.join(sources)} FILE` starts {'it' if len(sources) == 1 else 'them'} again")
    print(f"task {task.name}: {'stopped' if whole else what + ' stopped'}"
          f"{' (not waiting for the runs to end)' if a.no_wait else ''}; "
          f"{kept}; {again}")
    return 0


def pause_full_phase(api, name: str) -> list[str]:
    """A pause of the whole task ends its precheck and full runs, as DM's pause stops its dump and
    load units: the Spark job stops (spark-submit killed, or cancelled on the job host), the
    chunks it recorded stay, and :func:`resume_phases` starts the phase again from them."""
    ended = []
    for phase in ("precheck", "full"):
        dag = lc.dag_id(name, phase)
        for run in api.active_runs(dag):
            api.end_run(dag, run["dag_run_id"], "failed",
                        "dmctl pause-task: the full phase pauses; dmctl resume-task loads the chunks not loaded yet")
            ended.append(f"{dag} run {run['dag_run_id']}")
    return ended


PAUSE_WAIT_S = 120.0


def _load_ended(store, name: str, timeout: float) -> bool:
    """Wait until no full-load job of the task holds its fence (dm_core/full/fence.py); whether it ended."""
    deadline = time.monotonic() + timeout
    while store.full_load_held(name):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def resume_phases(api, store, task, states: list[dict]) -> str | None:
    """On resume of a task none of whose phases runs (a pause ended its full phase, maybe in
    its finish step, before it handed over): the phase it is at again, the chain on from there
    to the incremental phase. None when a phase runs, or nothing follows."""
    if any(api.active_runs(lc.dag_id(task.name, p)) for p in lc.PHASES):
        return None   # the phases run (the pause came after the full phase, or was of sources alone)
    phase = lc.resume_phase(task, states)
    if phase is None:
        return None
    dag = lc.dag_id(task.name, phase)
    if api.dag(dag) is None:   # Airflow has not loaded the task's DAGs (it was never started through it)
        return None
    run = api.trigger(dag, {"chain": True, "generation": store.task_info(task.name)["generation"]}) or {}
    return f"{dag} run {run.get('dag_run_id')}"


# The DAGs whose steps wait for a retry while a server stays away (retry.when_servers_away()):
# the full phase's, the scheduled validation's and the re-sync's.
RETRIED_PHASES = ("full", "validate", "resync")


def retry_now(api, name: str, phases=RETRIED_PHASES) -> list[str]:
    """A resume while a step waits for its retry after a server stayed away
    (plugins/shardflow_airflow/retry.py, up to 5 min of backoff): the step runs now, as DM's
    resume-task resumes a unit its checker would resume later. Returns the steps so started."""
    started = []
    for phase in phases:
        dag = lc.dag_id(name, phase)
        for run in api.active_runs(dag):
            waiting = [ti["task_id"] for ti in waiting_for_retry(api, dag, run["dag_run_id"])]
            if waiting:
                api.clear_tasks(dag, run["dag_run_id"], waiting)
                started += [f"{dag} {t}" for t in waiting]
    return started


def ran_now(steps: list[str], then: str) -> str:
    """How a command says the steps ``retry_now`` started, ``then`` finishing the sentence.

    >>> ran_now(["dm_t_validate spark_validate"], " instead of after the backoff")
    'dm_t_validate spark_validate waited for its retry after a server stayed away: it runs now instead of after the backoff'
    """
    return (f"{', '.join(steps)} waited for its retry after a server stayed away: "
            f"{'it runs' if len(steps) == 1 else 'they run'} now{then}")


def cmd_pause_resume(a, open_store, pause: bool, api_factory=None) -> int:
    """``api_factory``: Airflow's API. A pause asks it only while the task's full phase has not
    finished; a resume asks it whether a phase runs. Airflow out of reach is said (while the
    full phase has not finished), not an exit code: the pause or resume is recorded either way."""
    with open_store() as store:
        info, task = _task(store, a.task)
        sources = _sources(task, a.source)
        if info["status"] == lc.STOPPED:
            print(f"task {task.name} is stopped: there is nothing to {'pause' if pause else 'resume'}; "
                  f"`dmctl start-task FILE` starts it from its checkpoints", file=sys.stderr)
            return 1
        states = {s["source_id"]: s for s in store.all_source_states(task.name)}
        stopped = [s for s in sources if states.get(s, {}).get("requested") == lc.STOPPED]
        if stopped and not a.source and len(stopped) < len(sources):
            # the whole task: DM acts on the sources it runs; those stopped alone stay stopped
            print(f"task {task.name}: source(s) {', '.join(stopped)} stay stopped (stop-task -s; "
                  f"`dmctl start-task -s SOURCE FILE` starts them)")
            sources = [s for s in sources if s not in stopped]
        elif stopped:
            print(f"task {task.name}: source(s) {', '.join(stopped)} stopped (stop-task -s): "
                  f"`dmctl start-task -s SOURCE FILE` starts them", file=sys.stderr)
            return 1
        erred = [s for s in sources if states.get(s, {}).get("stage") == "paused" and states[s].get("error")]
        status = store.request_sources(task.name, sources, lc.PAUSED if pause else lc.RUNNING,
                                       all_sources=[i.source_id for i in task.mysql_instances],
                                       clear_error=not pause)
        full = api_factory is not None and task.task_mode != "incremental" and \
            not lc.full_finished(task, list(states.values()))
        phase_note = ""
        try:
            if full and pause and status == lc.PAUSED:
                ended = pause_full_phase(api_factory(), task.name)
                if ended:
                    stopped = _load_ended(store, task.name, getattr(a, "timeout", PAUSE_WAIT_S))
                    phase_note = (f"; the full phase is paused ({', '.join(ended)} ended; " + (
                        "its Spark job has stopped" if stopped else
                        "its Spark job has not stopped yet: the job of `dmctl resume-task` waits for it") +
                        "; the chunks it loaded are kept)")
            elif full and pause:
                phase_note = ("; the full phase, while it runs, loads every source in one Spark job: it goes "
                              "on, and these sources pause when their sync starts")
            elif api_factory is not None and not pause and status == lc.RUNNING:
                api = api_factory()
                again = resume_phases(api, store, task, list(states.values()))
                phase_note = (f"; the {'full phase goes on from the chunks loaded' if full else 'sync starts'} "
                              f"({again})" if again else "")
                # a full phase started again above has no step waiting; validation and re-sync may
                now = retry_now(api, task.name, RETRIED_PHASES if full and not again else RETRIED_PHASES[1:])
                if now:
                    phase_note += f"; {ran_now(now, ' instead of after the backoff')}"
        except ShardflowError as e:
            # the pause or resume itself is recorded, and the sync obeys it; only the full phase's run
            # (if one runs) could not be ended or started again. After the full phase nothing is missed:
            # the sensors' run outlives a pause.
            if full:
                phase_note = (f"; Airflow could not be told, so the full phase, if it runs, is as it was (run "
                              f"this command again once Airflow answers): {str(e).splitlines()[0]}")
    who = f"source(s) {', '.join(sources)}" if a.source or stopped else "every source"
    if pause:
        print(f"task {task.name}: {who} paused (task {status}); replication stops at the end of the window "
              f"in progress; checkpoints and shard DDL locks are kept{phase_note}; `dmctl resume-task` resumes")
    else:
        print(f"task {task.name}: {who} resumed (task {status}); they continue from their checkpoints at the next "
              f"poke{phase_note}")
        for s in erred:
            print(f"  source {s} was paused on an error: it retries the failed statement once and pauses again "
                  f"with the same report if it fails again ({states[s]['error'].splitlines()[0]})")
    return 0


def cmd_start_task(a, open_store, api_factory, tasks_dir: Path, on_loaded=None) -> int:
    """``on_loaded(task)``: called once the file parsed (dmctl prints its warnings there)."""
    from dm_core.config.task import load_task_file
    from dm_core.sources import source_endpoint
    from dm_core.start import create_added_targets, decide_start

    task = load_task_file(a.file)  # an invalid file (or a missing ${ENV}) raises here: nothing is started
    if on_loaded is not None:
        on_loaded(task)
    text = Path(a.file).read_text()
    all_ids = [i.source_id for i in task.mysql_instances]
    start_time = getattr(a, "start_time", None)
    api = api_factory()
    with open_store() as store:
        only = _sources(task, a.source) if a.source else None
        for sid in all_ids:
            source_endpoint(store, sid)  # every source must be registered
        start = decide_start(task, text, store, remove_meta=a.remove_meta, start_time=start_time,
                             same_downstream=getattr(a, "same_downstream", False),
                             resync_new_tables=getattr(a, "resync_new_tables", False))
        info = store.task_info(task.name)
        if info is not None and info["status"] != lc.STOPPED:
            if only and text != info["started_text"]:
                raise ErrorCode.CONFIG_INVALID.error(
                    f"start-task -s starts sources of task {task.name} as it runs, and {a.file} differs from the "
                    f"file it runs with: nothing started",
                    workaround=f"Give the file the task was started with, or `dmctl stop-task {task.name}` and "
                               f"start the whole task with the new file.")
            active = [f"{lc.dag_id(task.name, p)} run {r['dag_run_id']} ({r['state']})"
                      for p in lc.PHASES for r in api.active_runs(lc.dag_id(task.name, p))]
            if only:
                return _start_sources(api, store, task, only, active, start_time)
            if active:
                print(f"task {task.name} is already {info['status']} ({'; '.join(active)}): nothing done. "
                      f"`dmctl stop-task {task.name}` first to start it again"
                      f"{', or `dmctl resume-task ' + task.name + '`' if info['status'] == lc.PAUSED else ''}",
                      file=sys.stderr)
                return 1
            print(f"task {task.name} was {info['status']}, but no run of its DAGs is active in Airflow (left by a "
                  f"crash or a killed scheduler?): starting it again")
        # runs left behind (stop --no-wait, a crash, a killed scheduler) must not hold the new start back
        note = "dmctl start-task: ended to make way for a new start"
        for line in end_runs(api, task.name, note):
            print(f"ended {line}")
        left = wait_ended(api, store, task.name, all_ids, a.timeout, whole=True, note=note)
        if left:
            print(f"task {task.name}: not started: after {a.timeout:.0f}s these of an earlier start have not "
                  f"ended:\n  " + "\n  ".join(left), file=sys.stderr)
            return 1
        said = create_added_targets(task, store, start)   # tables the changed file lets in after the full phase
        if said:
            print(said)
        dest = install_task_file(tasks_dir, task.name, Path(a.file))
        if a.remove_meta:
            from dm_core.reset import reset_task

            reset_task(store, task.name, task)
        generation = store.start_task(task.name, text)
        if only:
            store.request_sources(task.name, [s for s in all_ids if s not in only], lc.STOPPED, all_sources=all_ids)
        if start_time is not None:
            store.set_start_time(task.name, only or all_ids, start_time)
            print(f"task {task.name}: source(s) {', '.join(only or all_ids)} start at the binlog position of "
                  f"{start_time}{'' if start.at.offset is not None else ' (in the upstream time zone)'}; "
                  f"their checkpoints move there")
        resume = start.resume
    ids = {p: lc.dag_id(task.name, p) for p in ("precheck", "full", "incremental", "shard_ddl_unlock", "validate",
                                                 "resync")}
    wanted = [ids["precheck"]] + ([ids["full"]] if task.task_mode != "incremental" else []) \
        + ([ids["incremental"]] if task.task_mode in ("all", "incremental") else []) \
        + ([ids["shard_ddl_unlock"]] if task.shard_mode else []) + [ids["validate"], ids["resync"]]
    parse_again(api)
    missing = _wait_dags(api, wanted, a.wait_dags)
    if missing:
        errs = [e for e in api.import_errors() if task.name in e.get("stack_trace", "")]
        hint = ("\n" + errs[0]["stack_trace"][-1500:]) if errs else ""
        print(f"task {task.name}: Airflow has not loaded {', '.join(missing)} after {a.wait_dags}s "
              f"(dmctl put the task file into {dest.parent}: does the dag-processor read that folder? Set "
              f"SHARDFLOW_TASKS_DIR alike for dmctl and Airflow){hint}", file=sys.stderr)
        return 1
    for d in wanted:
        api.set_paused(d, False)
    run = api.trigger(ids["precheck"], {"chain": True, "generation": generation})
    path = {"fresh": "precheck → full → incremental" if task.task_mode == "all" else "precheck → " + task.task_mode,
            "full": "precheck → full (only chunks not loaded yet) → incremental",
            "incremental": "precheck → incremental from the checkpoints (the full phase had finished: no new dump)"}
    print(f"task {task.name}: started (#{generation}: {path[resume] if task.task_mode == 'all' else path['fresh']}); "
          f"run {run.get('dag_run_id')} of {ids['precheck']}")
    resync = start.to_resync()
    if resync:   # --resync-new-tables: the rows the full phase never copied
        # its hold stops every source between two windows, one that starts later before its first
        # (dm_core/resync/hold.py): it may run before the sync does
        rs = api.trigger(ids["resync"], {"what": "tables", "tables": resync})
        print(f"task {task.name}: run {rs.get('dag_run_id')} of {ids['resync']} compares {', '.join(resync)} and "
              f"rewrites the rows that differ (the earlier rows of the tables taken); its log and the Variable "
              f"shardflow_{task.name}_resync say what it wrote")
    return 0


def _start_sources(api, store, task, sources: list[str], active: list[str], start_time: str | None = None) -> int:
    """start-task -s on a running task: start the named stopped sources again."""
    all_ids = [i.source_id for i in task.mysql_instances]
    store.request_sources(task.name, sources, lc.RUNNING, all_sources=all_ids, clear_error=True)
    if start_time is not None:
        store.set_start_time(task.name, sources, start_time)
    dag = lc.dag_id(task.name, "incremental")
    runs = api.active_runs(dag) or api.runs(dag, 1)
    if not runs:
        print(f"task {task.name}: source(s) {', '.join(sources)} will sync when the incremental phase starts")
        return 0
    run_id = runs[-1]["dag_run_id"]
    api.clear_tasks(dag, run_id, [lc.sensor_task_id(s) for s in sources])
    print(f"task {task.name}: source(s) {', '.join(sources)} started again in {dag} run {run_id}; "
          + (f"they start at the binlog position of {start_time}" if start_time is not None
             else "they resume from their checkpoints"))
    return 0


def parse_again(api) -> None:
    """The task's DAGs (new, or changed with its file) as soon as the dag-processor can build them:
    dags/shardflow_dags.py, which also defines OPERATE_DAG, is read again now. Best effort: an
    Airflow that refuses leaves them to its next pass (min_file_process_interval)."""
    try:
        api.parse_again(OPERATE_DAG)
    except Exception:  # noqa: BLE001 - the wait below says what is missing, if anything
        pass


def _wait_dags(api, wanted: list[str], timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        missing = [d for d in wanted if api.dag(d) is None]
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(2)
