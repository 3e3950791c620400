"""The publishing end of ``dm_<task>_validate``: the Spark job (spark_jobs/validate.py) stored
its result in the state store under the DAG run's id; this task shows it where users look."""

from __future__ import annotations

import json
from typing import Any, Sequence

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from shardflow_airflow import runtime

SHOWN_ROWS = 50    # differing rows per table kept in the Variable and XCom (the store has them all)


def trimmed(result: dict) -> dict:
    """The result with at most SHOWN_ROWS named rows per table (Variables and XCom stay small)."""
    out = dict(result)
    out["tables"] = []
    for t in result.get("tables", []):
        t = dict(t)
        for k in ("differences", "pending"):
            rows = t.get(k) or []
            if len(rows) > SHOWN_ROWS:
                t[f"{k}_not_shown"] = len(rows) - SHOWN_ROWS
                t[k] = rows[:SHOWN_ROWS]
        out["tables"].append(t)
    return out


class ValidationPublishOperator(BaseOperator):
    """Log the validation result of this DAG run, mirror it to the Variable
    ``shardflow_<task>_validation`` and return it (XCom). Fails the task when rows differ
    (or the validation failed), naming them; pending rows only warn.

    :param task_name: the DM task
    :param run_id: the run id the Spark job stored the result under (templated)
    """

    template_fields: Sequence[str] = ("run_id",)
    ui_color = "#d4f0c4"

    def __init__(self, *, task_name: str, run_id: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.task_name, self.run_id = task_name, run_id

    def execute(self, context) -> dict:
        from dm_core.validate.result import from_dict, render

        with runtime.open_store() as store:
            got = store.validation(self.task_name, self.run_id)
        if got is None:
            raise AirflowFailException(f"no validation result of task {self.task_name} for run {self.run_id}: "
                                       "read the spark_validate task's log")
        res = from_dict(got)
        self.log.info("validation of task %s (run %s, mode %s, %s):\n%s", self.task_name, self.run_id, res.mode,
                      res.engine, render(res))
        shown = trimmed(res.to_dict())
        try:
            from airflow.sdk import Variable

            Variable.set(f"shardflow_{self.task_name}_validation", json.dumps(shown, default=str))
        except Exception as e:  # the mirror is a convenience; the store and XCom carry the result
            self.log.warning("could not update the validation Variable: %s", e)
        context["ti"].xcom_push(key="validation", value=shown)
        if res.status in ("different", "error"):
            raise AirflowFailException(f"{shown['summary']} (the log above names the rows; "
                                       f"`dmctl validation status {self.task_name}` shows them too)")
        if res.status == "pending":
            self.log.warning("some rows could not be confirmed before row-error-delay (replication behind?): "
                             "they are listed as pending above; the next run checks them again")
        return shown
