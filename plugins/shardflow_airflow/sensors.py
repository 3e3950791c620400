"""The incremental phase: one sensor per upstream source (DM's worker of that source)."""

from __future__ import annotations

import json
import time
from typing import Any, Sequence

from airflow.sdk import BaseSensorOperator

from shardflow_airflow import runtime


class SourceSyncSensor(BaseSensorOperator):
    """Replicate one source's binlog downstream in bounded windows.

    Each poke syncs windows until the source has caught up with what the upstream had
    written when the poke started, or ``poke_budget_seconds`` pass; every window commits
    its checkpoint to the state store, so the next poke can run on any worker. The sensor
    succeeds only when the task is stopped (`dmctl stop-task`).

    :param task_file: path of the DM task file (templated)
    :param source_id: the upstream source this sensor replicates
    :param poke_budget_seconds: how long one poke may sync before returning
    """

    template_fields: Sequence[str] = ("task_file",)
    ui_color = "#c4e4f0"

    def __init__(self, *, task_file: str, source_id: str, poke_budget_seconds: float = 60.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.task_file = task_file
        self.source_id = source_id
        self.poke_budget_seconds = poke_budget_seconds

    def poke(self, context) -> bool:
        from dm_core.sync.syncer import Syncer

        task = runtime.load_task(self.task_file)
        deadline = time.monotonic() + self.poke_budget_seconds
        with runtime.open_store() as store:
            syncer = Syncer(task, self.source_id, store, budget_seconds=min(30.0, self.poke_budget_seconds))
            while True:
                res = syncer.run_window()
                if res.state == "stopped":
                    self.log.info("task %s is stopped: source %s ends its sync", task.name, self.source_id)
                    return True
                if res.state == "paused" and res.paused:
                    self.log.error("source %s is paused: %s\nwhat to do: fix it, then `dmctl binlog skip %s` / "
                                   "`dmctl binlog replace %s \"SQL\"` / `dmctl resume-task %s`",
                                   self.source_id, res.paused, task.name, task.name, task.name)
                    break
                if res.state != "sync":
                    self.log.info("task %s is %s: source %s waits", task.name, res.state, self.source_id)
                    break
                self.log.info(res.summary())
                if res.waiting:
                    self.log.warning("source %s waits on a shard DDL lock: %s\nsee `dmctl shard-ddl-lock %s`; "
                                     "a lock stuck for good is released with `dmctl shard-ddl-lock unlock LOCK_ID`",
                                     self.source_id, res.waiting, task.name)
                    break
                if (res.end == res.until and not res.stopped_early) or time.monotonic() >= deadline:
                    break
            states = store.all_source_states(task.name)
        self._mirror(task.name, states, context, res)
        return False

    def _mirror(self, task_name: str, states: list[dict], context, res) -> None:
        """What the UI and other tasks read: a per-task Variable and this poke's XCom."""
        summary = {
            s["source_id"]: {
                "stage": s["stage"], "checkpoint": f"({s['binlog_file']}, {s['binlog_pos']})" if s["binlog_file"] else None,
                "lag_seconds": s["lag_seconds"], "applied_rows": s["applied_rows"], "error": s["error"],
            } for s in states
        }
        try:
            from airflow.sdk import Variable

            Variable.set(f"shardflow_{task_name}_status", json.dumps(summary, default=str))
        except Exception as e:  # the mirror is a convenience; replication must not stop for it
            self.log.warning("could not update the status Variable: %s", e)
        context["ti"].xcom_push(key=f"window_{self.source_id}", value={
            "start": res.start, "end": res.end, "rows": res.rows, "ddls": res.ddls, "paused": res.paused,
            "waiting": res.waiting, "shard_ddl": res.shard, "locks": res.locks})


class ShardDDLCoordinatorSensor(BaseSensorOperator):
    """The shard DDL coordinator of one task (DM-master's role for sharding groups).

    Each poke tells every lock which sources take part and settles it (one Postgres
    transaction per lock: killing it anywhere loses nothing), then mirrors the active locks
    to the Variable ``shardflow_<task>_ddl_locks`` and to XCom (``locks``), and logs them. Succeeds
    when the task is stopped, like the sources' sensors.

    :param task_file: path of the DM task file (templated)
    """

    template_fields: Sequence[str] = ("task_file",)
    ui_color = "#e4c4f0"

    def __init__(self, *, task_file: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.task_file = task_file

    def poke(self, context) -> bool:
        from dm_core.shardddl import admin

        task = runtime.load_task(self.task_file)
        with runtime.open_store() as store:
            got = store.get_task(task.name)
            if got is not None and got[1] == "stopped":
                self.log.info("task %s is stopped: the shard DDL coordinator ends", task.name)
                return True
            locks = admin.coordinate(task, store)
        shown = [admin.summary(lk) for lk in locks]
        text = json.dumps(shown, default=str, sort_keys=True)
        if locks:
            self.log.info("shard DDL locks of task %s:\n%s", task.name, admin.render(locks))
        context["ti"].xcom_push(key="locks", value=shown)
        try:
            from airflow.sdk import Variable

            Variable.set(f"shardflow_{task.name}_ddl_locks", text)
        except Exception as e:  # the mirror is a convenience; coordination must not stop for it
            self.log.warning("could not update the DDL locks Variable: %s", e)
        return False
