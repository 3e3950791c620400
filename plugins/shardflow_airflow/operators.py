"""Operators of the precheck and full DAGs. Each resolves its inputs and calls dm_core."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from shardflow_airflow import retry, runtime


def _end_if_not_current(store, task_name: str, context) -> None:
    """Skip a phase of a stopped task, or of a run of an earlier start (lifecycle.py)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from dm_core.state import lifecycle

    gate = lifecycle.gate(store.task_info(task_name), None, runtime.run_generation(context))
    if gate.state == lifecycle.STOPPED:
        raise AirflowSkipException(f"task {task_name}: {gate.reason}")


class PrecheckOperator(BaseOperator):
    """Run DM's check items for a task against the real servers.

    :param task_file: path of the DM task file (templated)
    Errors fail the task (each names the server, the table and the fix); warnings are
    logged. The whole report is returned (XCom ``return_value``).
    """

    template_fields: Sequence[str] = ("task_file",)
    ui_color = "#f0e4c4"

    def __init__(self, *, task_file: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.task_file = task_file

    def execute(self, context) -> dict:
        from dm_core.check import run_prechecks
        from dm_core.errors import ShardflowError
        from dm_core.sources import source_endpoint, target_endpoint
        from dm_core.start import create_added_targets, decide_start

        from dm_core.config.task import load_task_file
        from dm_core.state.runs_with import adopt

        # the file Airflow reads, checked as start-task checks it; the task runs with it once it passed
        task = load_task_file(self.task_file)
        text = Path(self.task_file).read_text()
        for w in task.warnings:     # keys the task file sets that shardflow does not act on
            self.log.warning("task file: %s", w)
        with runtime.open_store() as store:
            _end_if_not_current(store, task.name, context)
            try:   # the file Airflow reads against the progress of the start that triggered this run
                start = decide_start(task, text, store)
            except ShardflowError as e:
                raise AirflowFailException(str(e)) from None
            resuming, start_times = start.resume, start.start_times
            said = create_added_targets(task, store, start)   # a file changed where Airflow reads it
            if said:
                self.log.info("%s", said)
            sources = {i.source_id: source_endpoint(store, i.source_id) for i in task.mysql_instances}
            if resuming == "fresh":  # a restart keeps the stage that says where it resumes
                for sid in sources:
                    store.update_source_state(task.name, sid, stage="precheck", error=None)
        report = run_prechecks(task, sources, target_endpoint(task), resuming=resuming, start_times=start_times)
        self.log.info("precheck of task %s (%s):\n%s", task.name,
                      "a fresh start" if resuming == "fresh" else f"a restart that resumes its {resuming} phase; "
                      "sharding items are skipped as the task has checkpoints", report.render())
        if not report.ok:
            raise AirflowFailException(f"precheck of task {task.name} failed:\n{report.render()}")
        with runtime.open_store() as store:
            adopt(store, task, text)
        return report.to_dict()


class FullPrepareOperator(BaseOperator):
    """Record each source's low watermark and create the merged target tables.

    :param task_file: path of the DM task file (templated)
    """

    template_fields: Sequence[str] = ("task_file",)

    def __init__(self, *, task_file: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.task_file = task_file

    def execute(self, context) -> dict:
        from dm_core.full.phase import prepare

        task = runtime.load_task(self.task_file, self.log)
        with runtime.open_store() as store:
            _end_if_not_current(store, task.name, context)
            with retry.retried_when_servers_away(f"the full phase of {task.name} prepares"):
                summary = prepare(task, store)
        self.log.info("full phase of %s prepared: %s", task.name, json.dumps(summary, indent=2))
        return summary


class FullFinishOperator(BaseOperator):
    """Record each source's high watermark: the incremental phase leaves safe mode after it.

    :param task_file: path of the DM task file (templated)
    """

    template_fields: Sequence[str] = ("task_file",)

    def __init__(self, *, task_file: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.task_file = task_file

    def execute(self, context) -> dict:
        from dm_core.full.phase import finish

        task = runtime.load_task(self.task_file, self.log)
        with runtime.open_store() as store, retry.retried_when_servers_away(f"the full phase of {task.name} finishes"):
            out = finish(task, store)
        self.log.info("full phase of %s finished: %s", task.name, json.dumps(out, indent=2))
        return out


class ShardDDLUnlockOperator(BaseOperator):
    """Resolve a stuck shard DDL lock, as `dmctl shard-ddl-lock unlock` does.

    :param lock_id: the lock (``dmctl shard-ddl-lock TASK`` / the ``shardflow_<task>_ddl_locks``
        Variable list them); templated, normally ``{{ params.lock_id }}``
    :param lock_owner: the source that executes the DDL (empty: the lock's owner; not
        ``owner``, which is every Airflow operator's own field)
    :param action: ``exec`` (the owner runs the DDL) or ``skip`` (it already ran downstream)
    :param force_remove: release the lock without anyone executing the DDL
    """

    template_fields: Sequence[str] = ("lock_id", "lock_owner", "action", "force_remove")
    ui_color = "#f0c4c4"

    def __init__(self, *, lock_id: str, lock_owner: str = "", action: str = "exec", force_remove: Any = False,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.lock_id, self.lock_owner, self.action, self.force_remove = lock_id, lock_owner, action, force_remove

    def execute(self, context) -> dict:
        from dm_core.errors import ShardflowError
        from dm_core.shardddl import coordinator as admin

        if not self.lock_id:
            raise AirflowFailException("no lock_id given: trigger this DAG with the Param lock_id "
                                       "(`dmctl shard-ddl-lock TASK` lists the locks)")
        force = str(self.force_remove).lower() in ("true", "1", "yes")
        with runtime.open_store() as store:
            try:
                lk = admin.unlock(store, self.lock_id, owner=self.lock_owner or None, force_remove=force,
                                  action=self.action)
            except ShardflowError as e:
                raise AirflowFailException(str(e)) from None
        self.log.info("lock %s: %s:\n%s", self.lock_id, admin.unlock_note(lk, self.action, force),
                      admin.render([lk]))
        return admin.summary(lk)
