"""Task lifecycle: start, stop, pause and resume, per task or per source (DM's semantics),
on top of Airflow DAG runs that may outlive the command that started them.

State (Postgres, one transaction per transition, dm_core/state/store.py):

- ``task.status``: running | paused | stopped (paused: every source is paused).
- ``task.generation``: moves on at every start-task and every stop-task. start-task puts the
  new value in the conf of the precheck run it triggers (``{"generation": N}``) and every phase
  hands it on to the next one it triggers, so each DAG run knows which start it belongs to.
- ``source_state.requested``: running | paused | stopped, what the operator asked of that
  source (``pause-task -s``, ``stop-task -s``); ``stage``/``error`` say what it is doing
  (stage ``paused`` with an error: paused on an error).

Protocol:

1. stop-task: status stopped and generation+1 in one transaction; then dmctl ends the task's
   active DAG runs through Airflow's REST API (running tasks are killed, pending ones skipped)
   and waits until no run is active and no syncer holds a source fence (4). Every poke and
   every phase checks its run's generation first (``gate``): a run of an earlier start ends
   by itself -- sensors succeed, operators skip, the chain stops -- even if start-task set
   the status back to running before it poked, or Airflow was down when dmctl tried.
2. start-task of a stopped task: ends leftover runs the same way (left by a crash or a killed
   scheduler), then status running, generation+1, every source requested running (a source
   paused on an error retries its statement); the precheck run carries the new generation.
   ``resume_point`` picks the path: every source has its high watermark (the full phase
   finished) → precheck goes straight to the incremental DAG, which resumes from the
   checkpoints (DM: a task whose load finished resumes sync); a stop during the full phase
   kept the low watermark and the loaded chunks → the full DAG loads only missing chunks.
   Nothing is forgotten unless ``--remove-meta``. dmctl, the precheck DAG and the test
   harness take this decision through one function, ``dm_core.start.decide_start``,
   with the checks that the task file still fits the recorded progress.
3. pause/resume, whole task or ``-s`` sources: ``requested`` per source. A syncer checks its
   gate before each window, so a pause takes effect within one window; resuming a source
   paused on an error clears the error: the next window retries the statement once and, if
   it fails again, pauses again with the same report.
4. Fence: a poke holds a session advisory lock per (task, source) while it syncs
   (``StateStore.hold_source``). A poke killed by stop-task that has not died yet cannot run
   beside the next start's poke, and stop-task waits until the fences are free.

Crash at any step: a transition is one transaction, so the store is either before or after
it; runs of a generation that is no longer current end at their next poke; a stop whose
REST calls did not happen is finished by the runs themselves (1) or by the next start (2).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

RUNNING, PAUSED, STOPPED = "running", "paused", "stopped"

# The DAGs one start runs in order; their runs carry the start's generation.
PHASES = ("precheck", "full", "incremental")


_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def dag_key(task_name: str) -> str:
    """The task's name as it goes into DAG ids: itself when Airflow takes it (letters, digits,
    ``_ . -``), else those characters kept, the others ``_``, and a hash of the name (DM allows
    any name, e.g. ``t-Ë!s`t``; Airflow refuses such keys, and REST paths carry them).

    >>> dag_key("shard-merge_01"), dag_key("t-Ë!s`t")
    ('shard-merge_01', 't-__s_t-ceb43516')
    """
    if _PLAIN_NAME.match(task_name):
        return task_name
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', task_name)}-{zlib.crc32(task_name.encode()):08x}"


def dag_id(task_name: str, phase: str) -> str:
    """Airflow's id of a task's DAG (phase: precheck | full | incremental | shard_ddl_unlock | validate
    | resync)."""
    return f"dm_{dag_key(task_name)}_{phase}"


def sensor_task_id(source_id: str) -> str:
    """Airflow's id of a source's sync sensor in the incremental DAG.

    >>> sensor_task_id("mysql-replica-01")
    'sync_mysql_replica_01'
    """
    return f"sync_{dag_key(source_id)}".replace("-", "_")


@dataclass(frozen=True)
class Gate:
    """What a poke of one source (or a phase of the task) may do now, and why not."""

    state: str      # running | paused | stopped
    reason: str = ""


def parse_generation(value) -> int | None:
    """The generation of a DAG run's conf; None when the run was triggered without one (from
    the UI, or by an older shardflow): such a run belongs to the current start."""
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    return int(text) if text.lstrip("-").isdigit() else None


def gate(info: dict | None, source: dict | None = None, generation: int | None = None) -> Gate:
    """``info``: StateStore.task_info; ``source``: its source_state row (None: the whole task);
    ``generation``: the DAG run's. A stop beats a pause, a pause beats running."""
    if info is None:
        return Gate(STOPPED, "the task is not registered (dmctl start-task registers it)")
    if info["status"] == STOPPED:
        return Gate(STOPPED, "the task is stopped (dmctl stop-task)")
    if generation is not None and generation != info["generation"]:
        return Gate(STOPPED, f"this run belongs to start #{generation}; the task was started or stopped "
                             f"again since (now #{info['generation']})")
    requested = (source or {}).get("requested") or RUNNING
    if requested == STOPPED:
        return Gate(STOPPED, f"source {source['source_id']} is stopped (dmctl stop-task -s)")
    if info["status"] == PAUSED or requested == PAUSED:
        who = f"source {source['source_id']}" if source and requested == PAUSED else "the task"
        return Gate(PAUSED, f"{who} is paused (dmctl pause-task); dmctl resume-task resumes it")
    return Gate(RUNNING)


def full_unfinished(task, states: list[dict]) -> list[str]:
    """The sources whose full phase has not finished (no high watermark yet), in task order."""
    by_id = {s["source_id"]: s for s in states}
    return [i.source_id for i in task.mysql_instances if not (by_id.get(i.source_id) or {}).get("high_file")]


def full_finished(task, states: list[dict]) -> bool:
    """Whether the full phase finished for every source (each has its high watermark)."""
    return not full_unfinished(task, states)


def resume_point(task, states: list[dict]) -> str:
    """Where a start of ``task`` continues: ``fresh`` (nothing recorded), ``full`` (the full
    phase began: keep its snapshot, load missing chunks) or ``incremental`` (the full phase
    finished, or the task replicates only: sync from the checkpoints)."""
    if task.task_mode == "incremental":
        return "incremental" if any(s.get("binlog_file") for s in states) else "fresh"
    if task.task_mode == "all" and full_finished(task, states):
        return "incremental"
    if task.task_mode == "all" and any(s.get("binlog_file") for s in states) \
            and not any(s.get("low_file") or s.get("high_file") for s in states):
        return "incremental"   # it synced as task-mode incremental: no dump over what it wrote (DM: IsFreshTask)
    return "full" if any(s.get("low_file") or s.get("high_file") or s.get("binlog_file") for s in states) else "fresh"


def resume_phase(task, states: list[dict]) -> str | None:
    """The phase a resumed task none of whose phases runs goes on with (a pause ended its
    precheck or full phase, maybe in the full phase's finish, before it handed over), or None."""
    if task.task_mode == "incremental" or full_finished(task, states):
        return None if task.task_mode == "full" else "incremental"
    return "full" if any(s.get("low_file") for s in states) else "precheck"


def next_phase(task, states: list[dict], after: str) -> str | None:
    """The phase a finished ``after`` (precheck | full) hands over to, or None."""
    if after == "precheck":
        if task.task_mode == "incremental" or resume_point(task, states) == "incremental":
            return "incremental"
        return "full"
    if after == "full" and task.task_mode == "all":
        return "incremental"
    return None
