"""The tasks of ``dm_<task>_resync`` around the Spark comparison (dm_core/resync says how a
re-sync rewrites rows while sync runs):

    choose ─▶ spark_compare (only when tables must be compared first) ─▶ repair ─▶ trigger_validate
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from airflow.providers.standard.operators.branch import BaseBranchOperator
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from shardflow_airflow import retry, runtime

CHOICE = "choice"    # XCom key of what choose decided


def _target_tables(task, store) -> list[str]:
    from dm_core.db import connect
    from dm_core.full.discover import discover
    from dm_core.sources import source_endpoint

    found = set()
    for inst in task.mysql_instances:
        conn = connect(source_endpoint(store, inst.source_id))
        try:
            found |= {f"{st.target_schema}.{st.target_table}"
                      for st in discover(conn, inst.source_id, task.rules_for(inst.source_id))}
        finally:
            conn.close()
    return sorted(found)


class ResyncChooseOperator(BaseBranchOperator):
    """Decide what the run rewrites from its Params (``what``, ``tables``,
    ``validation_run``) and go to ``spark_compare`` when tables must be compared first,
    else straight to ``repair``."""

    template_fields: Sequence[str] = ("task_file",)
    ui_color = "#f0e4c4"

    def __init__(self, *, task_file: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.task_file = task_file

    def choose_branch(self, context) -> str | list[str]:
        from dm_core.errors import ShardflowError
        from dm_core.resync.choose import choose

        p = context["params"]
        task = runtime.load_task(self.task_file, self.log)
        try:
            with runtime.open_store() as store:
                run = p.get("validation_run") or None
                last = store.validation(task.name, run) if run else store.validation(task.name, finished=True)
                if run and last is None:
                    raise AirflowFailException(f"Param validation_run: no validation run {run!r} of task {task.name}")
                choice = choose(p.get("what", "last_validation"), list(p.get("tables") or []), last,
                                _target_tables(task, store) if p.get("what") == "tables" else [])
        except ShardflowError as e:
            raise AirflowFailException(str(e)) from None
        self.log.info("task %s: re-sync %s", task.name, choice.why)
        context["ti"].xcom_push(key=CHOICE, value=choice.to_dict())
        # repair follows spark_compare when there is one (it is downstream of both)
        return ["spark_compare", "repair"] if choice.compare else "repair"


class ResyncRepairOperator(BaseOperator):
    """Rewrite the chosen rows under the sync hold; log per table what was deleted and
    written, mirror the result to the Variable ``shardflow_<task>_resync`` and return it."""

    template_fields: Sequence[str] = ("task_file",)
    ui_color = "#f0d4c4"

    def __init__(self, *, task_file: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.task_file = task_file

    def execute(self, context) -> dict:
        from dm_core.resync.choose import keys_of
        from dm_core.resync.run import run_resync

        task = runtime.load_task(self.task_file, self.log)
        choice = context["ti"].xcom_pull(task_ids="choose", key=CHOICE) or {}
        run_id = context["run_id"]
        with runtime.open_store() as store:
            keys: dict[str, list[dict]] = {}
            if choice.get("validation_run"):
                got = store.validation(task.name, choice["validation_run"])
                keys, _ = keys_of(got or {})
            if choice.get("compare"):
                compared = store.validation(task.name, run_id)
                if compared is None or not compared.get("finished_at"):
                    raise AirflowFailException("the comparison stored no result: read the spark_compare task's log")
                if compared.get("error"):
                    raise AirflowFailException(f"the comparison failed: {compared['error']}")
                more, again = keys_of(compared, set(choice["compare"]))
                if again:
                    raise AirflowFailException(
                        f"the comparison could not name every differing row of {', '.join(again)} (more than "
                        "max-pending-row-count, or an error): raise max-pending-row-count in the task's validators "
                        "block, or run the full phase again for that table")
                for t, k in more.items():
                    keys.setdefault(t, []).extend(k)
            with retry.retried_when_servers_away(f"the re-sync of {task.name}", retry.resync_ends(task.name)):
                res = run_resync(task, store, run_id, keys, why=choice.get("why", ""), log=self.log.info)
        self.log.info("re-sync of task %s (run %s):\n%s", task.name, run_id, res.render())
        out = res.to_dict()
        try:
            from airflow.sdk import Variable

            Variable.set(f"shardflow_{task.name}_resync", json.dumps(out, default=str))
        except Exception as e:  # the mirror is a convenience; the log and XCom carry the result
            self.log.warning("could not update the re-sync Variable: %s", e)
        if res.servers_away:   # retried with backoff (retry.py): the rows it wrote are written again
            raise retry.servers_away(f"the re-sync of {task.name}", res.error or next(t.error for t in res.tables if t.error),
                                     retry.resync_ends(task.name))
        if not res.ok:
            raise AirflowFailException(res.summary())
        return out
