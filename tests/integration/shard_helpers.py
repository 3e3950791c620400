"""Shard DDL scenarios on real servers: upstream shards laid out over sources, a task
merging them into one target, round-robin syncing in process (``drive``) or in
subprocesses (the runner below, as separate sensor pokes would), and the checks a user
makes afterwards (downstream schema, union of the shards, lock state).

The runner (``python -m tests.integration.shard_helpers run TASK_FILE SOURCE_ID``) runs one
source's sync windows in a loop, one JSON line per window on stdout::

    --mode settle   until the source is caught up and no lock of the task is active
                    (exit 0), or paused (exit 3), or --timeout (exit 4);
    --mode forever  until killed (the random-SIGKILL tests);

and ``resolve TASK_FILE`` runs the coordinator once (``ops.resolve``). Faults come from
the environment (``SHARDFLOW_FAULTS``, see ``dm_core.faults``): a fault point ends
the process with exit code 97.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from dm_core.db import Endpoint, connect, qi, qt
from dm_core.reset import reset_task

from .helpers import run_sql as run  # noqa: F401 - the tests import it from here

ROOT = Path(__file__).resolve().parents[2]
FAULT_EXIT = 97


# ---- upstream / downstream SQL ------------------------------------------------------------------
def query(ep, sql, args=()) -> list[tuple]:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()


def columns(ep, schema, table) -> list[tuple[str, str]]:
    return [(str(a), str(b)) for a, b in query(
        ep, "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
            "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (schema, table))]


def indexes(ep, schema, table) -> list[str]:
    return sorted(str(r[0]) for r in query(
        ep, "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
            "AND TABLE_NAME = %s", (schema, table)))


def dml(ep, schema, table, tag, n=5) -> None:
    """Inserts, an update and a delete on one shard (columns the table has in every version)."""
    run(ep, *[f"INSERT INTO {qt(schema, table)} (name, amount) VALUES ('{tag}-{i}', {i})" for i in range(n)],
        f"UPDATE {qt(schema, table)} SET amount = amount + 1 WHERE name = '{tag}-1'",
        f"DELETE FROM {qt(schema, table)} WHERE name = '{tag}-2'")


def make_tables(ep, schema: str, tables: list[str], rows: int = 3, extra_cols: str = "") -> None:
    """Shard tables (id, name, amount``extra_cols``); the starting rows fill the first three."""
    run(ep, f"DROP DATABASE IF EXISTS {qi(schema)}", f"CREATE DATABASE {qi(schema)}")
    for t in tables:
        run(ep, f"CREATE TABLE {qt(schema, t)} (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, "
                f"name varchar(64) NULL, amount decimal(10,2) NOT NULL DEFAULT 0{extra_cols})")
        if rows:
            conn = connect(ep)
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {qt(schema, t)} (name, amount) VALUES (%s, %s)",
                                [(f"{schema}.{t}.{i}" if i % 5 else None, i) for i in range(rows)])
            conn.close()


# ---- the layout ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shard:
    sid: str
    ep: Endpoint
    schema: str
    table: str

    @property
    def q(self) -> str:
        return qt(self.schema, self.table)


@dataclass
class SourceSpec:
    sid: str
    ep: Endpoint
    schemas: list[str]            # this source's shard schemas (its own block-allow-list selects them)
    tables: list[str]             # tables in each schema
    instance: int = 1             # partition id's instance number


@dataclass
class ShardSetup:
    name: str
    task: object
    store: object
    text: str
    task_file: Path
    specs: list[SourceSpec]
    tdb: str
    down: Endpoint
    shards: list[Shard] = field(default_factory=list)

    @property
    def sources(self) -> list[str]:
        return [s.sid for s in self.specs]

    def of(self, sid: str) -> list[Shard]:
        return [s for s in self.shards if s.sid == sid]

    def reload(self) -> None:
        from dm_core.config.task import parse_task

        self.task = parse_task(self.text, str(self.task_file))


def setup_shards(uniq: str, specs: list[SourceSpec], down: Endpoint, tmp_path, *, prefix: str,
                 shard_mode: str = "pessimistic", rows: int = 3, extra_cols: str = "") -> ShardSetup:
    """Create the shards upstream, register sources and task, record the watermarks, copy
    the starting rows downstream (what the Spark full load does) and return the setup."""
    from dm_core.config.task import parse_task
    from dm_core.full.phase import finish, prepare
    from dm_core.state import StateStore

    from .helpers import register, shard_task_yaml

    name, tdb = f"shx{uniq}", f"tsx{uniq}"
    shards = []
    for spec in specs:
        for s in spec.schemas:
            make_tables(spec.ep, s, spec.tables, rows, extra_cols)
            shards += [Shard(spec.sid, spec.ep, s, t) for t in spec.tables]
    text = shard_task_yaml(name, down, [(spec.sid, spec.instance) for spec in specs], prefix, tdb,
                           shard_mode=shard_mode, do_dbs={spec.sid: spec.schemas for spec in specs})
    task_file = Path(tmp_path) / f"{name}.yaml"
    task_file.write_text(text)
    task = parse_task(text, str(task_file))
    store = StateStore()
    register(store, {s.sid: s.ep for s in specs}, name, text)
    prepare(task, store)
    finish(task, store)
    setup = ShardSetup(name, task, store, text, task_file, specs, tdb, down, shards)
    copy_initial(setup)
    return setup


def teardown(setup: ShardSetup) -> None:
    reset_task(setup.store, setup.name)
    setup.store.close()
    for spec in setup.specs:
        run(spec.ep, *[f"DROP DATABASE IF EXISTS {qi(s)}" for s in spec.schemas])
    run(setup.down, f"DROP DATABASE IF EXISTS {qi(setup.tdb)}")


def copy_initial(setup: ShardSetup) -> None:
    """The shards' starting rows (written before the low watermark), with partition ids."""
    down = connect(setup.down)
    with down.cursor() as dc:
        for sh in setup.shards:
            rules = setup.task.rules_for(sh.sid)
            plan = rules.column_mapper.plan(sh.schema, sh.table, ["id", "name", "amount"])
            for r in query(sh.ep, f"SELECT id, name, amount FROM {sh.q}"):
                dc.execute(f"INSERT INTO {qt(setup.tdb, 't')} (id, name, amount) VALUES (%s, %s, %s)",
                           plan.map_row(list(r)))
    down.commit()
    down.close()


# ---- syncing in process -------------------------------------------------------------------------
def active_locks(task, store) -> list[dict]:
    from dm_core.shardddl.lock_ops import ops_for

    if not task.shard_mode:
        return []
    return ops_for(task.shard_mode).list_locks(store, task.name, active_only=True)


def only_holds(lock: dict) -> bool:
    """An optimistic lock whose every pending member is held (nothing to run, nobody paused)."""
    pending = [m for m in lock.get("members", []) if m.get("pending")]
    return (lock.get("mode") == "optimistic" and not lock.get("conflict") and bool(pending)
            and all(m.get("held") for m in pending) and all(o.get("state") == "done" for o in lock.get("operations", [])))


def caught_up(r) -> bool:
    return r.caught_up


def drive(task, store, source_ids, *, max_rounds=60, budget_events=400, fail=True):
    """Run every source's windows round-robin until all are caught up and no lock waits
    (or a source pauses). Returns the last WindowResult of each source."""
    from dm_core.sync.syncer import Syncer

    syncers = {sid: Syncer(task, sid, store, budget_events=budget_events) for sid in source_ids}
    last = {}
    for _ in range(max_rounds):
        settled = True
        for sid, s in syncers.items():
            r = last[sid] = s.run_until(float("inf"), max_windows=20)
            if r.paused:
                return last
            if not caught_up(r):
                settled = False
        if settled and not active_locks(task, store):
            return last
    if fail:
        import pytest

        pytest.fail(f"sources did not settle: { {k: (v.end, v.until, v.waiting) for k, v in last.items()} }")
    return last


def drive_some(task, store, source_ids, windows=5):
    """A few windows per source without waiting for locks to settle (a partial sync)."""
    from dm_core.sync.syncer import Syncer

    for sid in source_ids:
        Syncer(task, sid, store, budget_events=400).run_until(float("inf"), max_windows=windows)


def assert_settled(last) -> None:
    paused = {k: r.paused for k, r in last.items() if r.paused}
    assert not paused, paused


def assert_union(task, store) -> None:
    from dm_core.validate.compare import compare_task, render

    diffs = compare_task(task, store)
    assert diffs and all(d.equal for d in diffs), render(diffs)


def source_states(task, store) -> dict[str, dict]:
    return {s["source_id"]: s for s in store.all_source_states(task.name)}


# ---- syncing in subprocesses --------------------------------------------------------------------
@dataclass
class Proc:
    sid: str
    popen: subprocess.Popen
    out: Path
    err: Path

    def wait(self, timeout: float = 90) -> int:
        return self.popen.wait(timeout=timeout)

    def windows(self) -> list[dict]:
        return [json.loads(x) for x in self.out.read_text().splitlines() if x.startswith("{")]

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")


def spawn(setup: ShardSetup, sid: str, tmp_path, *, mode: str = "settle", faults: str | None = None,
          timeout: float = 60, budget_events: int = 400, tag: str = "") -> Proc:
    base = Path(tmp_path) / f"{sid}-{tag or mode}-{time.monotonic_ns()}"
    out, err = base.with_suffix(".out"), base.with_suffix(".err")
    argv = ["run", str(setup.task_file), sid, "--mode", mode, "--timeout", str(timeout),
            "--budget-events", str(budget_events)]
    return Proc(sid, start_runner(argv, faults, out, err), out, err)


# The runner's processes are forked from a server that imported the sync code once (the
# fault-injection tests start hundreds; a fresh interpreter each cost a second of CPU apiece).
# A forked child is a process of its own as a sensor's is: its own connections, killed by SIGKILL,
# ended by os._exit at a fault point.
_PRELOAD = ["tests.integration.shard_helpers", "dm_core.sync.syncer", "dm_core.shardddl.lock_ops",
            "dm_core.config.task", "dm_core.state"]


class Runner:
    """A forked runner, with the part of subprocess.Popen the tests use (poll, wait, kill,
    returncode: the exit code, or minus the signal that ended it)."""

    def __init__(self, process):
        self.process = process

    @property
    def returncode(self) -> int | None:
        return self.process.exitcode

    def poll(self) -> int | None:
        return self.process.exitcode

    def kill(self) -> None:
        if self.process.exitcode is None:
            self.process.kill()

    def wait(self, timeout: float | None = None) -> int:
        self.process.join(timeout)
        if self.process.exitcode is None:
            raise subprocess.TimeoutExpired("shard_helpers runner", timeout)
        return self.process.exitcode


def start_runner(argv: list[str], faults: str | None, out: Path, err: Path | None = None) -> Runner:
    """``python -m tests.integration.shard_helpers ARGV`` with ``faults`` as SHARDFLOW_FAULTS,
    stdout to ``out`` and stderr to ``err`` (None: to ``out`` too), forked from the server."""
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    env = {k: v for k, v in os.environ.items() if k != "SHARDFLOW_FAULTS"}
    if faults:
        env["SHARDFLOW_FAULTS"] = faults
    proc = ctx.Process(target=_forked_main, args=(argv, env, str(out), str(err or out)), daemon=False)
    proc.start()
    return Runner(proc)


def _forked_main(argv: list[str], env: dict, out: str, err: str) -> None:
    os.environ.clear()
    os.environ.update(env)
    os.chdir(ROOT)
    fo = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fe = fo if err == out else os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fo, 1)
    os.dup2(fe, 2)
    sys.exit(_main(argv))


def run_sources(setup: ShardSetup, tmp_path, *, faults: str | None = None, sources=None,
                timeout: float = 60) -> dict[str, Proc]:
    """Each source's runner (``--mode settle``) as its own process, all at once; waits for all."""
    procs = {sid: spawn(setup, sid, tmp_path, faults=faults, timeout=timeout)
             for sid in (sources or setup.sources)}
    for p in procs.values():
        try:
            p.wait(timeout + 30)
        except subprocess.TimeoutExpired:
            p.popen.kill()
            p.popen.wait()
    return procs


def converge(setup: ShardSetup, tmp_path, *, timeout: float = 60) -> dict[str, Proc]:
    """Rerun every source without faults until each exits settled; fail with the logs if not."""
    procs = run_sources(setup, tmp_path, timeout=timeout)
    bad = {sid: p for sid, p in procs.items() if p.popen.returncode != 0}
    if bad:
        detail = "\n".join(f"--- {sid} exit {p.popen.returncode}\n{p.out.read_text()[-3000:]}\n{p.stderr()[-3000:]}"
                           for sid, p in bad.items())
        raise AssertionError(f"sources did not converge without faults:\n{detail}")
    return procs


# ---- the runner -----------------------------------------------------------------------------------
def _window_json(r) -> str:
    return json.dumps({"source": r.source_id, "start": r.start, "end": r.end, "until": r.until, "rows": r.rows,
                       "ddls": r.ddls, "shard": r.shard, "waiting": r.waiting, "paused": r.paused,
                       "stopped_early": r.stopped_early}, default=str)


def _main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="shard_helpers")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("task_file")
    r.add_argument("source_id")
    r.add_argument("--mode", choices=("settle", "forever"), default="settle")
    r.add_argument("--timeout", type=float, default=60)
    r.add_argument("--budget-events", type=int, default=400)
    c = sub.add_parser("resolve")
    c.add_argument("task_file")
    a = ap.parse_args(argv)

    import logging

    from dm_core.config.task import parse_task
    from dm_core.state import StateStore

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s", force=True)
    task = parse_task(Path(a.task_file).read_text(), a.task_file)
    store = StateStore()
    if a.cmd == "resolve":
        from dm_core.shardddl.lock_ops import ops_for
        from dm_core.shardddl.membership import task_membership

        out = ops_for(task.shard_mode).resolve(store, task.name, task_membership(task, store).sources_by_target())
        print(json.dumps(out, default=str))
        return 0

    from dm_core.sync.syncer import Syncer

    syncer = Syncer(task, a.source_id, store, budget_events=a.budget_events)
    deadline = time.monotonic() + a.timeout
    while True:
        res = syncer.run_window()
        print(_window_json(res), flush=True)
        if a.mode == "forever":
            time.sleep(0.02)
            continue
        if res.paused:
            return 3
        if caught_up(res) and not active_locks(task, store):
            return 0
        if time.monotonic() > deadline:
            return 4
        if res.waiting or caught_up(res):
            time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(_main())
