"""The incremental phase: one sensor per upstream source (DM's worker of that source)."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Sequence

from airflow.sdk import BaseSensorOperator

from shardflow_airflow import runtime


class SourceSyncSensor(BaseSensorOperator):
    """Replicate one source's binlog downstream, in one long-lived process (DM's worker of
    that source).

    The sensor runs in poke mode: its task process stays up for as long as the source syncs and
    keeps one ``SyncSession`` (dm_core/sync/session.py), so a row written upstream reaches the
    downstream within a window plus ``poke_interval``, not after a worker start and a DAG parse
    per poke (reschedule mode cost 2-5 s per poke). The price is one Airflow worker slot per
    source while it syncs, as DM keeps one worker per source: set Airflow's parallelism to the
    number of sources plus the tasks you run beside them. Every window commits its checkpoint,
    so a killed process loses nothing; Airflow retries the task and it resumes from there.

    The sensor succeeds only when the task or the source is stopped (`dmctl stop-task [-s]`) or
    the run belongs to an earlier start (dm_core/state/lifecycle.py).

    :param task_file: path of the DM task file (templated)
    :param source_id: the upstream source this sensor replicates
    :param poke_budget_seconds: the longest one poke syncs before it returns to Airflow's loop
    """

    template_fields: Sequence[str] = ("task_file",)
    ui_color = "#c4e4f0"

    def __init__(self, *, task_file: str, source_id: str, poke_budget_seconds: float = 10.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.task_file = task_file
        self.source_id = source_id
        self.poke_budget_seconds = poke_budget_seconds
        self._session = None
        self._store = None
        self._mirrors = None

    def poke(self, context) -> bool:
        from dm_core.state import lifecycle
        from dm_core.sync.session import Pacing, SyncSession

        if self._session is None:
            task = runtime.load_task(self.task_file, self.log)
            self._check_sources(task, context)
            self._store = runtime.open_store().__enter__()
            self._session = SyncSession(task, self.source_id, self._store, generation=runtime.run_generation(context),
                                        pacing=Pacing(step_seconds=self.poke_budget_seconds,
                                                      window_seconds=min(30.0, self.poke_budget_seconds)))
        out = self._session.step()
        for level, text in out.messages:
            self.log.log(level, "%s", text)
        if out.state == lifecycle.STOPPED:
            self._close()
            return True
        if out.record:
            if self._mirrors is None:
                self._mirrors = _Latest(self._mirror, name=f"mirror-{self.source_id}")
            self._mirrors.put(self._session.task.name, self._store.all_source_states(self._session.task.name),
                              context, out.last)
        return False

    def _check_sources(self, task, context) -> None:
        """The DAG is built from the file Airflow reads, the sync from the file the task runs
        with (runtime.load_task): where they name other sources, say so rather than sync a source
        nothing checked, or leave one silently without a sensor."""
        from airflow.sdk.exceptions import AirflowFailException

        from dm_core.state.lifecycle import sensor_task_id

        ids = [i.source_id for i in task.mysql_instances]
        if self.source_id not in ids:
            raise AirflowFailException(
                f"source {self.source_id} is not in the file task {task.name} runs with (its sources: "
                f"{', '.join(ids)}); the changed file that names it is applied by `dmctl stop-task {task.name}` "
                f"then `dmctl start-task {self.task_file}`")
        dag = context.get("dag")
        have = set(getattr(dag, "task_ids", None) or ())
        lost = [s for s in ids if have and sensor_task_id(s) not in have]
        if lost:
            self.log.warning("task %s runs with source(s) %s, which this DAG has no sensor for (the file Airflow "
                             "reads no longer names them): they do not sync until `dmctl stop-task %s` then "
                             "`dmctl start-task %s` applies that file, or the file names them again",
                             task.name, ", ".join(lost), task.name, self.task_file)

    def _close(self) -> None:
        if self._mirrors is not None:
            self._mirrors.close()
        if self._store is not None:
            self._store.__exit__(None, None, None)
        self._store = self._session = self._mirrors = None

    def _mirror(self, task_name: str, states: list[dict], context, res=None) -> None:
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
        if res is None:
            return
        context["ti"].xcom_push(key=f"window_{self.source_id}", value={
            "start": res.start, "end": res.end, "rows": res.rows, "ddls": res.ddls, "paused": res.paused,
            "waiting": res.waiting, "shard_ddl": res.shard, "locks": res.locks})


class _Latest:
    """Run ``fn`` on a thread of its own with the newest arguments put, dropping older ones:
    the mirror goes through Airflow's API, which can take seconds under load, and the source's
    lag must not wait for it."""

    def __init__(self, fn, name: str):
        self._fn, self._args, self._cv, self._closed = fn, None, threading.Condition(), False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def put(self, *args) -> None:
        with self._cv:
            self._args = args
            self._cv.notify()

    def close(self) -> None:
        """Wait for the newest arguments to be mirrored (a stopped source's last state)."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._args is None and not self._closed:
                    self._cv.wait()
                args, self._args = self._args, None
            if args is None:
                return
            try:
                self._fn(*args)
            except Exception as e:  # the mirror is a convenience; the next put tries again
                logging.getLogger(__name__).warning("could not mirror the source's state: %s", e)


class ShardDDLCoordinatorSensor(BaseSensorOperator):
    """The shard DDL coordinator of one task (DM-master's role for sharding groups).

    Each poke tells every lock which sources take part and settles it (one Postgres
    transaction per lock: killing it anywhere loses nothing), then mirrors the active locks
    to the Variable ``shardflow_<task>_ddl_locks`` and to XCom (``locks``), and logs them when
    they changed (``locks_news``). Succeeds when the task is stopped or the run belongs to an
    earlier start, like the sources' sensors.

    It runs in poke mode, one process for as long as the task syncs, as the sources' sensors do:
    in reschedule mode every poke started a task process and parsed the DAG file (2-3 CPU-s on a
    2-core machine, a poke every 5 s: a tenth of a core per shard task while nothing happens), and
    a lock waited for that start before it was settled. The price is one more worker slot per
    task in shard mode. The mirror is written only when the locks changed, so an idle poke costs
    the API server nothing.

    :param task_file: path of the DM task file (templated)
    """

    template_fields: Sequence[str] = ("task_file",)
    ui_color = "#e4c4f0"

    def __init__(self, *, task_file: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.task_file = task_file
        self._task = None
        self._mirrored: str | None = None   # the locks' JSON this process last mirrored

    def poke(self, context) -> bool:
        from dm_core.shardddl import coordinator as admin
        from dm_core.state import lifecycle

        if self._task is None:   # the file of the start that began this run, as the sources' sensors keep
            self._task = runtime.load_task(self.task_file, self.log)
        task = self._task
        with runtime.open_store() as store:
            gate = lifecycle.gate(store.task_info(task.name), None, runtime.run_generation(context))
            if gate.state == lifecycle.STOPPED:
                self.log.info("the shard DDL coordinator of task %s ends: %s", task.name, gate.reason)
                return True
            locks = admin.coordinate(task, store)
        shown = [admin.summary(lk) for lk in locks]
        text = json.dumps(shown, default=str, sort_keys=True)
        if text == self._mirrored:
            return False
        context["ti"].xcom_push(key="locks", value=shown)
        name = f"shardflow_{task.name}_ddl_locks"
        from airflow.sdk import Variable

        before = self._mirrored
        if before is None:   # this process's first poke: what an earlier process mirrored
            try:
                before = Variable.get(name, default=None)
            except Exception:  # unknown: say it all again
                before = None
        news = locks_news(before, text)
        if news == "changed":
            self.log.info("shard DDL locks of task %s:\n%s", task.name, admin.render(locks))
        elif news == "resolved":
            self.log.info("shard DDL locks of task %s: none active any more", task.name)
        if text != before:
            try:
                Variable.set(name, text)
            except Exception as e:  # the mirror is a convenience; coordination must not stop for it
                self.log.warning("could not update the DDL locks Variable: %s", e)
                return False   # tried again at the next poke
        self._mirrored = text
        return False


def locks_news(before: str | None, now: str) -> str | None:
    """What a coordinator poke logs, given the locks the last poke mirrored (``before``, the
    Variable's JSON, None if unknown) and the ones now: "changed" (the lock table), "resolved"
    (none left), or None. Pokes come every 2 s in one task log: an unchanged lock table is shown
    once, when it changed, not on every poke.

    >>> locks_news(None, '[{"id": "a"}]'), locks_news('[{"id": "a"}]', '[{"id": "a"}]')
    ('changed', None)
    >>> locks_news('[{"id": "a"}]', '[]'), locks_news(None, '[]'), locks_news('[]', '[]')
    ('resolved', None, None)
    """
    if now == before:
        return None
    if now != "[]":
        return "changed"
    return "resolved" if before not in (None, "[]") else None
