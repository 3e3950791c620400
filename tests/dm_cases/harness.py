"""Running a DM integration case's situations through shardflow, with DM's own files.

DM's task and source files (vendored unchanged under tests/dm_cases/<case>/conf/) name their
servers as DM's CI has them (127.0.0.1:3306/3307/4000, root/123456); ``DMFiles`` swaps in the
local stack's hosts, ports, users and passwords in memory and writes the result to a scratch
directory, nothing else. The phases run in this process on real servers: sources registered
and the task checked through dmctl, the full phase (low watermark, Spark load, high
watermark), then every source's ``SyncSession`` stepped round-robin with the shard DDL
coordinator's round between, as the Airflow sensors do. Restarting a source is a new session
(what Airflow does after a killed sensor process).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import yaml

from dm_core.db import connect, qi, qt

HERE = Path(__file__).resolve().parent


def run_sql(ep, *stmts, sql_mode: str | None = None, args=None) -> list:
    """Statements on one connection (a client of the upstream, with its own sql_mode)."""
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            if sql_mode is not None:
                cur.execute("SET SESSION sql_mode = %s", (sql_mode,))
            out = []
            for s in stmts:
                cur.execute(s, args)
                out = list(cur.fetchall())
            return out
    finally:
        conn.close()


class DMFiles:
    def __init__(self, case: str, tmp_path: Path, stack, sources: dict[str, str], placeholders: dict | None = None,
                 flavor: str | None = None, task: str = "dm-task.yaml"):
        """``sources``: DM source file name → stack endpoint key (up1 / up2); ``placeholders``:
        what DM's run.sh substitutes in its task file before starting it (``sed``), same here;
        ``flavor``: replaces a source file's (DM's CI runs MySQL where ours run MariaDB);
        ``task``: the task file of conf/ (cases with several name theirs)."""
        self.conf = HERE / case / "conf"
        self.tmp = tmp_path
        self.sources = []
        for fname, key in sources.items():
            doc = yaml.safe_load((self.conf / fname).read_text())
            ep = stack[key]
            doc["from"].update(host=ep.host, port=ep.port, user=ep.user, password=ep.password)
            if flavor is not None:
                doc["flavor"] = flavor
            out = tmp_path / fname
            out.write_text(yaml.safe_dump(doc, sort_keys=False))
            self.sources.append(str(out))
        text = (self.conf / task).read_text()
        for k, v in (placeholders or {}).items():
            text = text.replace(k, v)
        doc = yaml.safe_load(text)
        d = stack["down"]
        doc["target-database"].update(host=d.host, port=d.port, user=d.user, password=d.password)
        self.task_file = tmp_path / task
        self.task_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        self.name = doc["name"]


@contextlib.contextmanager
def dm_case(case: str, tmp_path: Path, stack, sources: dict[str, str], databases: dict[str, list[str]], **files_kw):
    """A case's scene: ``databases`` (stack key → names) dropped before and after, DM's files
    (``DMFiles``: ``sources``, ``placeholders``, ``flavor``) and a state store with the task's
    rows forgotten before and after. Yields (files, store)."""
    from dm_core.reset import reset_task
    from dm_core.state import StateStore

    def clean():
        for key, names in databases.items():
            run_sql(stack[key], *[f"DROP DATABASE IF EXISTS {qi(db)}" for db in names])

    clean()
    files = DMFiles(case, tmp_path, stack, sources, **files_kw)
    store = StateStore()
    reset_task(store, files.name)
    try:
        yield files, store
    finally:
        reset_task(store, files.name)
        store.close()
        clean()


def dmctl(*args: str) -> tuple[int, str, str]:
    from dm_core.cli.dmctl import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


def register_sources(files: DMFiles) -> None:
    rc, _, err = dmctl("operate-source", "create", *files.sources)
    assert rc == 0, err


def start(files: DMFiles, store):
    """check-task, then what start-task runs: the full phase, then every source synced until
    settled. Returns (task, Sync)."""
    from dm_core.config.task import load_task_file

    rc, out, err = dmctl("check-task", str(files.task_file))
    assert rc == 0, out + err
    task = load_task_file(str(files.task_file))
    store.start_task(task.name, files.task_file.read_text())
    full_phase(task, store)
    sync = Sync(task, store)
    sync.settle()
    return task, sync


def full_phase(task, store) -> None:
    """What dm_<task>_full does: low watermarks + targets, the Spark load, high watermarks."""
    from dm_core.full.phase import finish, forget, prepare
    from tests.integration.test_full_support import run_load

    forget(task, store)
    prepare(task, store)
    r = run_load(task.name)
    assert r.returncode == 0, r.stderr[-4000:]
    finish(task, store)


class Sync:
    """Every source of a task synced in this process, round-robin."""

    def __init__(self, task, store):
        self.task, self.store = task, store
        self.restart()

    def restart(self, *sources: str) -> None:
        from dm_core.sync.session import SyncSession

        ids = sources or [i.source_id for i in self.task.mysql_instances]
        if not sources:
            self.sessions = {}
        for sid in ids:
            self.sessions[sid] = SyncSession(self.task, sid, self.store, sleep=lambda s: None)

    def step(self) -> dict[str, str]:
        from dm_core.shardddl.coordinator import coordinate

        states = {sid: s.step().state for sid, s in self.sessions.items()}
        coordinate(self.task, self.store)
        return states

    def settle(self, rounds: int = 80, *, paused_ok: bool = False) -> dict[str, str]:
        """Until every source caught up with no active lock (twice in a row), or one pauses."""
        from tests.integration.shard_helpers import active_locks

        calm = 0
        for _ in range(rounds):
            states = self.step()
            if "paused" in states.values():
                if paused_ok:
                    return states
                errs = {s["source_id"]: s["error"] for s in self.store.all_source_states(self.task.name) if s["error"]}
                pytest.fail(f"a source paused: {errs}")
            calm = calm + 1 if set(states.values()) == {"caught_up"} and not active_locks(self.task, self.store) else 0
            if calm >= 2:
                return states
        pytest.fail(f"the sources did not settle: {states}")


def union_rows(shards, columns: list[str], where: str = "") -> list[tuple]:
    """Rows of every (endpoint, schema, table) shard, sorted: what the merged table must hold."""
    out = []
    for ep, s, t in shards:
        out += [tuple(r) for r in run_sql(ep, f"SELECT {', '.join(columns)} FROM {qt(s, t)} {where}")]
    return sorted(out, key=repr)


def table_rows(ep, schema: str, table: str, columns: list[str], where: str = "") -> list[tuple]:
    return sorted((tuple(r) for r in run_sql(ep, f"SELECT {', '.join(columns)} FROM {qt(schema, table)} {where}")),
                  key=repr)
