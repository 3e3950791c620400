"""Which task file a task's processes run with: the one its last start checked.

Why: the DAGs read the task file from the tasks folder (``SHARDFLOW_TASKS_DIR``), and a file
there can change without a start: edited by hand, or deployed by a git-sync of the DAG folder
while the task runs. A sensor, a full-phase step or a re-sync that (re)starts later would
read the new file, and with it routes, filters or column mappings that no check compared with
the progress already made: a shard let in without its existing rows, a table routed away
from the target its rows were copied into. DM reads the file only at ``start-task``; shardflow
does the same: start-task (or a precheck run, which checks the file as start-task does)
stores the text it checked (``task.started_text``), and everything else runs with that text.
A different file where Airflow reads it is said in each task's log, with the way to apply it.

A task never started here (no stored text) runs with its file, which is stored as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dm_core.config.task import TaskConfig, TaskConfigError, load_task_file, parse_task
from dm_core.state.progress_fit import task_doc


@dataclass
class RunsWith:
    task: TaskConfig
    text: str            # the text ``task`` was parsed from
    note: str | None     # for the log: the file Airflow reads is not what runs, and why


def task_it_runs_with(store, path: str | Path) -> RunsWith:
    """The task as its processes must run it. Raises the file's TaskConfigError only when no
    start stored a text to run with instead."""
    path = Path(path)
    try:
        on_disk: TaskConfig | None = load_task_file(path)
        disk_text, problem = path.read_text(encoding="utf-8"), None
    except TaskConfigError as e:
        on_disk, disk_text, problem = None, None, e
    name = on_disk.name if on_disk is not None else path.stem   # start-task installs it as <name>.yaml
    info = store.task_info(name)
    started = info.get("started_text") if info is not None else None
    if started is None:
        if on_disk is None:
            raise problem
        store.register_task(name, disk_text)
        return RunsWith(on_disk, disk_text, None)
    task = parse_task(started, str(path))
    task.source_file = str(path)
    if disk_text == started:
        return RunsWith(task, started, None)
    if on_disk is None:
        why = f"does not parse ({_first_line(problem)})"
    else:
        why = f"differs in {', '.join(changed_keys(started, disk_text)) or 'its layout only'}"
    return RunsWith(task, started, (
        f"task {name}: {path} {why}: it is not applied; the task runs with the file of its last start"
        f"{f' (#{gen})' if (gen := info.get('generation')) else ''}. To apply it: `dmctl stop-task {name}`, then `dmctl start-task {path}`, which "
        f"checks what the change does to rows already copied (or trigger dm_{name}_precheck, which checks it the "
        f"same way)"))


def adopt(store, task: TaskConfig, text: str) -> None:
    """A precheck run checked ``text`` as start-task does (``start.decide_start``): the task
    runs with it from now on."""
    store.set_started_text(task.name, text)


def changed_keys(old: str, new: str) -> list[str]:
    """The top-level keys the two files set differently (names only: values may be secrets),
    a source's block as ``mysql-instances[<source-id>]``.

    >>> changed_keys("name: a\\nroutes: {r: {target-schema: x}}\\n", "name: a\\nroutes: {r: {target-schema: y}}\\n")
    ['routes']
    >>> changed_keys("mysql-instances: [{source-id: s1, route-rules: [a]}, {source-id: s2}]\\n",
    ...              "mysql-instances: [{source-id: s1, route-rules: [b]}]\\n")
    ['mysql-instances[s1]', 'mysql-instances[s2]']
    >>> changed_keys("a: 1\\n", "a: 1  # a comment\\n")
    []
    """
    a, b = task_doc(old), task_doc(new)
    out = []
    for k in sorted(set(a) | set(b), key=str):
        if k == "mysql-instances":
            ia, ib = _instances(a.get(k)), _instances(b.get(k))
            out += [f"mysql-instances[{s}]" for s in sorted(set(ia) | set(ib), key=str) if ia.get(s) != ib.get(s)]
        elif a.get(k) != b.get(k):
            out.append(str(k))
    return out


def _instances(v) -> dict:
    return {i.get("source-id"): i for i in v or () if isinstance(i, dict)} if isinstance(v, list) else {}


def _first_line(e: Exception | None) -> str:
    return str(e).strip().splitlines()[0] if e is not None and str(e).strip() else "unreadable"
