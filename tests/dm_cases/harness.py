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


def binlog_gtid_pos(ep, file: str, pos: int) -> str | None:
    """The server's GTID state at (file, pos), MariaDB's BINLOG_GTID_POS, asked in a session whose
    max_allowed_packet admits any event: the function reads the binlog in the asking session and
    says NULL past an event larger than that (another test's 20 MB row on the shared upstream)."""
    (was,) = run_sql(ep, "SELECT @@GLOBAL.max_allowed_packet")[0]
    run_sql(ep, "SET GLOBAL max_allowed_packet = 1073741824")   # read by the sessions opened from now on
    try:
        return run_sql(ep, "SELECT BINLOG_GTID_POS(%s, %s)", args=(file, pos))[0][0]
    finally:
        run_sql(ep, "SET GLOBAL max_allowed_packet = %s", args=(int(was),))


class DMFiles:
    def __init__(self, case: str, tmp_path: Path, stack, sources: dict[str, str], placeholders: dict | None = None,
                 flavor: str | None = None, task_file: str = "dm-task.yaml", out: str | None = None,
                 source_keys: dict | None = None):
        """``sources``: DM source file name → stack endpoint key (up1 / up2); ``placeholders``:
        what DM's run.sh substitutes in its task file before starting it (``sed``), same here;
        ``flavor``: replaces a source file's (DM's CI runs MySQL where ours run MariaDB);
        ``task_file``: which of the case's task files (DM's cases with several name them);
        ``out``: the scratch copy's file name (default ``task_file``), for two variants of one
        file; ``source_keys``: keys run.sh's `sed` changes in the source files (e.g.
        ``{"enable-gtid": False}``)."""
        self.conf = HERE / case / "conf"
        self.tmp = tmp_path
        self.sources = []
        for fname, key in sources.items():
            doc = yaml.safe_load((self.conf / fname).read_text())
            ep = stack[key]
            doc["from"].update(host=ep.host, port=ep.port, user=ep.user, password=ep.password)
            if flavor is not None:
                doc["flavor"] = flavor
            doc.update(source_keys or {})
            path = tmp_path / fname
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
            self.sources.append(str(path))
        self.down = stack["down"]
        self.task_file = self.task(task_file, placeholders, out)
        self.name = yaml.safe_load(self.task_file.read_text())["name"]

    def task(self, fname: str, placeholders: dict | None = None, out: str | None = None) -> Path:
        """Another task file of the case (``conf/<fname>``), its placeholders replaced as run.sh's
        ``sed`` does and the target swapped for the stack's; written as ``out`` (default ``fname``)."""
        text = (self.conf / fname).read_text()
        for k, v in (placeholders or {}).items():
            text = text.replace(k, v)
        task = yaml.safe_load(text)
        d = self.down
        task["target-database"].update(host=d.host, port=d.port, user=d.user, password=d.password)
        path = self.tmp / (out or fname)
        path.write_text(yaml.safe_dump(task, sort_keys=False, allow_unicode=True))
        return path


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
        # every task of the case ends as a user ends it (stop-task): a later case may stop its sources
        from dm_core.cli.dmctl import _tasks_using

        for src in files.sources:
            for name in _tasks_using(store, yaml.safe_load(Path(src).read_text())["source-id"]):
                store.stop_task(name)
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


def start_task(task_file, store, *, remove_meta: bool = False, settle: bool = True, start_time: str | None = None):
    """What `dmctl start-task [--remove-meta] [--start-time T] FILE` has Airflow run, in this
    process: the start decided as dmctl and the precheck DAG decide it (dm_core.start.decide_start:
    its refusals, then the resume point), the reset (--remove-meta), the targets of tables a changed
    file lets in after the full phase, the precheck as the precheck
    DAG runs it (a task resuming from checkpoints skips the sharding items, as in DM), the start in
    the state store, then the phases the decision calls for: the full phase unless it finished
    before, then, in task-mode all and incremental, every source synced (until settled, with
    ``settle``). Returns (task, Sync or None)."""
    from dm_core.check import run_prechecks
    from dm_core.config.task import load_task_file
    from dm_core.reset import reset_task
    from dm_core.sources import source_endpoint, target_endpoint
    from dm_core.start import create_added_targets, decide_start

    task = load_task_file(str(task_file))
    text = Path(task_file).read_text()
    start = decide_start(task, text, store, remove_meta=remove_meta, start_time=start_time)
    if remove_meta:
        reset_task(store, task.name, task)
    create_added_targets(task, store, start)   # tables the changed file lets in after the full phase
    ids = [i.source_id for i in task.mysql_instances]
    report = run_prechecks(task, {sid: source_endpoint(store, sid) for sid in ids}, target_endpoint(task),
                           resuming=start.resume, start_times=start.start_times)
    assert report.ok, report.render()
    store.start_task(task.name, text)
    if start_time is not None:
        store.set_start_time(task.name, ids, start_time)
    if task.task_mode in ("all", "full") and start.resume != "incremental":
        full_phase(task, store, fresh=start.resume == "fresh")
    if task.task_mode == "full":
        return task, None
    sync = Sync(task, store)
    if settle:
        sync.settle()
    return task, sync


def checked_prepare(files: DMFiles, store):
    """check-task, the task started in the state store and its full phase prepared (low
    watermarks, targets): what dm_<task>_full does before its Spark job, for a case that runs
    the job itself (to read its log, or with a fault point). Returns the task."""
    from dm_core.config.task import load_task_file
    from dm_core.full.phase import forget, prepare

    rc, out, err = dmctl("check-task", str(files.task_file))
    assert rc == 0, out + err
    task = load_task_file(str(files.task_file))
    store.start_task(task.name, files.task_file.read_text())
    forget(task, store)
    prepare(task, store)
    return task


def full_phase(task, store, *, fresh: bool = True) -> None:
    """What dm_<task>_full does: low watermarks + targets, the Spark load, high watermarks
    (``fresh``: a new snapshot; else the chunks an earlier run loaded are kept)."""
    from dm_core.full.phase import finish, forget, prepare
    from tests.integration.test_full_support import run_load

    if fresh:
        forget(task, store)
    prepare(task, store)
    r = run_load(task.name)
    assert r.returncode == 0, r.stderr[-4000:]
    finish(task, store)


class Sync:
    """Every source of a task synced in this process, round-robin."""

    def __init__(self, task, store):
        self.task, self.store = task, store
        self.said: list[str] = []
        self.restart()

    def restart(self, *sources: str) -> None:
        from dm_core.sync.session import Clocks, SyncSession

        ids = sources or [i.source_id for i in self.task.mysql_instances]
        if not sources:
            self.sessions = {}
        for sid in ids:
            self.sessions[sid] = SyncSession(self.task, sid, self.store, clocks=Clocks(sleep=lambda s: None))

    def step(self) -> dict[str, str]:
        from dm_core.shardddl.coordinator import coordinate

        states = {}
        for sid, s in self.sessions.items():
            out = s.step()
            states[sid] = out.state
            self.said.extend(text for _, text in out.messages)   # what the sensor's task log shows
        coordinate(self.task, self.store)
        return states

    def settle(self, rounds: int = 80, *, paused_ok: bool = False, held_ok: bool = False) -> dict[str, str]:
        """Until every source caught up with no active lock (twice in a row), or one pauses.
        ``held_ok``: a lock that only holds tables back (optimistic: a rename the other shards
        have not run yet) counts as settled."""
        from tests.integration.shard_helpers import active_locks, only_holds

        calm = 0
        for _ in range(rounds):
            states = self.step()
            if "paused" in states.values():
                if paused_ok:
                    return states
                errs = {s["source_id"]: s["error"] for s in self.store.all_source_states(self.task.name) if s["error"]}
                pytest.fail(f"a source paused: {errs}")
            locks = [lk for lk in active_locks(self.task, self.store) if not (held_ok and only_holds(lk))]
            calm = calm + 1 if set(states.values()) == {"caught_up"} and not locks else 0
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


def stop_task(name: str) -> str:
    """`dmctl stop-task NAME`: the task stops in the state store (every source's next step ends
    it); Airflow, which this process does not run, cannot be told, and dmctl says so (exit 1)."""
    rc, out, err = dmctl("stop-task", name)
    assert rc == 0 or "Airflow could not be told" in err, out + err
    return out + err


def sync_process(task_file, source_id: str, tmp_path, *, faults: str | None = None, timeout: float = 60) -> int:
    """One source's sync in a process of its own until settled (what a sensor's process runs),
    with ``faults`` (dm_core/faults.py) switched on: its exit code (97: it died at a fault point)."""
    from tests.integration.shard_helpers import start_runner

    log = Path(tmp_path) / f"sync-{source_id}-{(faults or 'plain').replace('=', '-')}.log"
    p = start_runner(["run", str(task_file), source_id, "--mode", "settle", "--timeout", str(timeout)], faults, log)
    try:
        return p.wait(timeout + 60)
    finally:
        p.kill()


# ---- a source's sync killed at a named fault point -------------------------------------------
FAULT_EXIT = 97  # dm_core.faults.EXIT_CODE: the process ended itself at its fault point


def spawn(files: DMFiles, sid: str, faults: str, tmp_path: Path, *, mode: str = "settle", timeout: float = 40):
    """One source syncing in its own process, as its sensor would (the runner of
    tests/integration/shard_helpers.py: ``settle`` ends when it caught up with no active lock
    (0), paused on an error (3) or after ``timeout`` (4); ``forever`` runs until killed), with
    ``faults`` as ``SHARDFLOW_FAULTS``. Returns (the process, path of its output)."""
    import time

    from tests.integration.shard_helpers import start_runner

    path = tmp_path / f"sync-{sid}-{time.monotonic_ns()}.log"
    p = start_runner(["run", str(files.task_file), sid, "--mode", mode, "--timeout", str(timeout),
                      "--budget-events", "400"], faults, path)
    return p, path


def run_killed(files: DMFiles, faults: dict[str, str], tmp_path: Path, *, timeout: float = 40,
               wait_all: bool = False) -> dict[str, int]:
    """What DM's failpoints that end a worker do, with shardflow's named fault points
    (dm_core/faults.py): each source of ``faults`` (source id → ``SHARDFLOW_FAULTS``) syncs
    in its own process (``spawn``) until it ends itself at its fault point (exit 97), settles
    (0), pauses (3) or ``timeout`` (4). Once one ended at its fault point, the others are
    SIGKILLed wherever they are (a worker whose peer died waits on a shard DDL lock
    otherwise), unless ``wait_all``: then each runs until it ends by itself. Returns each
    source's exit code (-9: killed)."""
    import time

    procs, logs = {}, {}
    for sid, spec in faults.items():
        procs[sid], logs[sid] = spawn(files, sid, spec, tmp_path, timeout=timeout)
    deadline = time.monotonic() + timeout + 20
    while time.monotonic() < deadline:
        codes = {sid: p.poll() for sid, p in procs.items()}
        if all(c is not None for c in codes.values()) or (FAULT_EXIT in codes.values() and not wait_all):
            break
        time.sleep(0.05)
    for p in procs.values():
        if p.poll() is None:
            p.kill()
    codes = {sid: p.wait() for sid, p in procs.items()}
    for sid, c in codes.items():
        assert c in (0, FAULT_EXIT, -9), f"{sid} exited {c} under {faults[sid]}:\n{logs[sid].read_text()[-4000:]}"
    return codes


def pending_replay(store, task_name: str, source_id: str) -> bool:
    """Whether the source's next start replays in safe mode: its safe-mode exit point (or the
    full phase's high watermark) lies past its checkpoint (DM's check_exit_safe_binlog `<`;
    False is its `=`: nothing to replay, safe mode off)."""
    from dm_core.position import Position

    st = store.source_state(task_name, source_id)
    cp = Position(st["binlog_file"], int(st["binlog_pos"]))
    ends = [Position(st[f], int(st[p])) for f, p in (("safe_exit_file", "safe_exit_pos"), ("high_file", "high_pos"))
            if st[f]]
    return any(e.key() > cp.key() for e in ends)
