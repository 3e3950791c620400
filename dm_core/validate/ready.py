"""Whether a task's downstream is ready to be validated.

DM's validator runs with the sync unit, so never before the full phase has finished. Here
the validation is a DAG on a schedule, unpaused by ``dmctl start-task``: Airflow runs its
latest interval at once, while the full phase has only begun. That run read every upstream
row to report what the load had not written yet (an ERROR), and on the job host (one job at a
time) the full load itself waited behind it. So a run before the full phase has finished
validates nothing and says why; the next one after it does.
"""

from __future__ import annotations

from dm_core.state.lifecycle import full_unfinished


def not_ready(task, states: list[dict]) -> str | None:
    """Why ``task`` cannot be validated now (``states``: its sources' states), or None."""
    loading = [] if task.task_mode == "incremental" else full_unfinished(task, states)
    if not loading:
        return None   # task-mode incremental: the downstream held its rows before the task
    return (f"task {task.name}: its full phase has not finished (source(s) {', '.join(loading)}): nothing to "
            f"validate yet. The validation's next scheduled run after the full phase validates, or "
            f"`dmctl validation start {task.name}` once `dmctl query-status {task.name}` shows the sources syncing")
