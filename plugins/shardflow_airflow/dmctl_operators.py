"""Operators of the operations DAGs (operations_dags.py): what a data engineer does with dmctl, done
from the Airflow UI's trigger form.

Each runs the dmctl command itself, in the task's process, so a command behaves exactly as on
the shell (check-task checks a pasted task file as it checks a file) and its output is the task
log. A command that fails fails the task with dmctl's message. Pasted files go to a private
temporary file, never to the log; see dm_core/cli/pasted.py for what a password may be.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from shardflow_airflow import runtime


def run_dmctl(log, *args: str) -> str:
    """dmctl ``args`` in this process; its output goes to the task log. Fails the task on a
    non-zero exit, with dmctl's message."""
    from dm_core.cli.dmctl import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as e:     # argparse: a bad argument
            rc = e.code if isinstance(e.code, int) else 2
    shown = " ".join(a if len(a) < 80 and "\n" not in a else "<text>" for a in args)
    log.info("dmctl %s (exit %s)\n%s%s", shown, rc, out.getvalue(), err.getvalue())
    if rc != 0:
        raise AirflowFailException(f"dmctl {shown} failed (exit {rc}):\n{err.getvalue() or out.getvalue()}")
    return out.getvalue()


@contextlib.contextmanager
def private_file(text: str, suffix: str = ".yaml"):
    """``text`` in a file only this user reads, removed afterwards."""
    fd, path = tempfile.mkstemp(prefix="shardflow-pasted-", suffix=suffix)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
    finally:
        Path(path).unlink(missing_ok=True)


def _params(context) -> dict:
    return dict(context.get("params") or {})


def _need(params: dict, key: str) -> str:
    v = str(params.get(key) or "").strip()
    if not v:
        raise AirflowFailException(f"Param {key!r} is empty: fill it in the trigger form")
    return v


class RegisterSourceOperator(BaseOperator):
    """``dmctl operate-source create`` of a pasted source.yaml (Params ``source_yaml``,
    ``password_connection``). With a Connection named, its password (and its host, port and
    login where the file leaves them out) fill ``from``: the password goes from the Connection
    to the state store, sealed, and nowhere else."""

    ui_color = "#dfe9f5"

    def execute(self, context) -> str:
        import yaml

        from dm_core.cli import pasted
        from dm_core.errors import ShardflowError

        p = _params(context)
        conn_id = str(p.get("password_connection") or "").strip()
        try:
            doc = pasted.check_source(_need(p, "source_yaml"), connection=conn_id)
        except ShardflowError as e:
            raise AirflowFailException(str(e)) from None
        if conn_id:
            from airflow.sdk import BaseHook

            c = BaseHook.get_connection(conn_id)
            if not isinstance(doc.get("from"), dict):
                doc["from"] = {}
            frm = doc["from"]
            for key, value in (("host", c.host), ("port", c.port), ("user", c.login)):
                if value and not frm.get(key):
                    frm[key] = value
            frm["password"] = c.password or ""
        with private_file(yaml.safe_dump(doc, sort_keys=False)) as path:
            return run_dmctl(self.log, "operate-source", "create", path)


def _start_time(p: dict) -> list[str]:
    """Param ``start_time`` as dmctl's ``--start-time`` (empty: none)."""
    at = str(p.get("start_time") or "").strip()
    return ["--start-time", at] if at else []


class AddTaskOperator(BaseOperator):
    """A pasted DM task file (Param ``task_yaml``): ``dmctl check-task``, then ``start-task``
    (Param ``start``; ``remove_meta`` starts over) or, without starting, into the tasks folder
    so its DAGs appear."""

    ui_color = "#dfe9f5"

    def execute(self, context) -> str:
        from dm_core.cli import pasted
        from dm_core.cli.lifecycle import install_task_file
        from dm_core.errors import ShardflowError

        p = _params(context)
        text = _need(p, "task_yaml")
        try:
            doc = pasted.check_task(text)
        except ShardflowError as e:
            raise AirflowFailException(str(e)) from None
        name = str(doc.get("name") or "").strip()
        if not name or "/" in name or name.startswith("."):
            raise AirflowFailException(f"task file: name: {name!r} is not a task name; fix the file's `name` key")
        with tempfile.TemporaryDirectory(prefix="shardflow-task-") as d:
            path = Path(d) / f"{name}.yaml"     # start-task copies it into the tasks folder under this name
            path.write_text(text)
            at = _start_time(p)
            out = run_dmctl(self.log, "check-task", str(path), *at)
            if p.get("start", True):
                args = ["start-task", str(path)] + (["--remove-meta"] if p.get("remove_meta") else []) + at
                return out + run_dmctl(self.log, *args)
            dest = install_task_file(runtime.tasks_dir(), name, path)
            from dm_core.cli.airflow_api import AirflowAPI
            from dm_core.cli.lifecycle import parse_again

            with contextlib.suppress(Exception):   # best effort: else the dag-processor's next pass
                parse_again(AirflowAPI())
            self.log.info("task %s: checked and saved as %s; its DAGs appear once the dag-processor reads it "
                          "(asked to now). Start it with shardflow_operate_task (action start)", name, dest)
            return out


class OperateTaskOperator(BaseOperator):
    """start / pause / resume / stop a task, or only some of its sources (Params ``task``,
    ``action``, ``sources``, ``remove_meta``): dmctl's ``<action>-task [-s SOURCE ...]``."""

    ui_color = "#dfe9f5"

    def execute(self, context) -> str:
        p = _params(context)
        task, action = _need(p, "task"), _need(p, "action")
        if action not in ("start", "pause", "resume", "stop"):
            raise AirflowFailException(f"Param 'action' is {action!r}: one of start, pause, resume, stop")
        sources = [x for s in (p.get("sources") or []) for x in ("-s", str(s).strip()) if str(s).strip()]
        if action == "start":
            f = runtime.tasks_dir() / f"{task}.yaml"
            if not f.exists():
                raise AirflowFailException(f"task {task!r} has no file {f}: add it first (DAG shardflow_add_task)")
            args = ["start-task", str(f), *sources] + (["--remove-meta"] if p.get("remove_meta") else []) \
                + _start_time(p)
        else:
            args = [f"{action}-task", task, *sources]
        return run_dmctl(self.log, *args)


class HandleErrorOperator(BaseOperator):
    """``dmctl binlog skip|replace|inject|revert|list``: what a source does with a binlog event --
    the one it is paused on, or the one at ``binlog_pos`` (Params ``task``, ``source``, ``op``,
    ``binlog_pos``, ``statements``)."""

    ui_color = "#f5e0df"

    def execute(self, context) -> str:
        p = _params(context)
        task, op = _need(p, "task"), _need(p, "op")
        args = ["binlog", op, task]
        if op in ("replace", "inject"):
            args.append(_need(p, "statements"))
        pos = str(p.get("binlog_pos") or "").strip()
        source = str(p.get("source") or "").strip()
        return run_dmctl(self.log, *args, *(["-b", pos] if pos else []), *(["-s", source] if source else []))