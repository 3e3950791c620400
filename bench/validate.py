"""Validation at the full part's scale: shardflow's validation while sync runs vs a raw
server-side checksum scan of the same tables, with the full copy's time beside it.

Data: bench/full.py's data set (``rows`` rows in 2 sources x 2 schemas x 2 tables, reused when
seeded), merged into one target table with partition id by a task in task-mode ``all``.
Steps, in this order, on the same stack:

1. full copy (the bar): prepare + ``spark-submit spark_jobs/full_load.py`` + finish, as the full
   DAG runs them; timed from an empty downstream to every row committed.
2. sync runs from here to the end: one Syncer per source in a thread (the sensors' windows),
   and a writer changing rows of every shard the whole time (updates of ids 1..1000, inserts
   at the end: ``WRITER_ROWS_PER_S``), so the validations below compare tables in motion.
3. raw scan (the baseline): per table one ``SELECT COUNT(*), BIT_XOR(CAST(CRC32(CONCAT_WS(',',
   columns, CONCAT(ISNULL(c), ...))) AS UNSIGNED))`` -- sync-diff-inspector's checksum of a
   whole table -- on the 8 upstream tables and the downstream table, all 9 at once. No
   transformation, no chunks, nothing compared: the servers' own scan rate.
4. shardflow, clean: ``validate_task`` in process (what ``dmctl validate`` runs), and the
   scheduled job's entry (``spark-submit spark_jobs/validate.py``, its JVM start included);
   both must find the tables EQUAL with nothing pending.
5. shardflow, corrupted: 100 downstream rows damaged while sync runs -- 40 changed, 30 deleted,
   15 extra inside a shard's partition-id slice, 15 extra between slices, none of them rows
   the writer touches; ``validate_task`` must name exactly those 100 keys, nothing else.

Ratios: ``raw_vs_validation`` = raw scan seconds / validation seconds (the issue's target:
>= 0.8), ``full_copy_vs_validation`` = full copy seconds / validation seconds (>= 1: not slower
than the copy); the same for the job through spark-submit and the corrupted run.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from bench.common import (
    ROOT, VENV_BIN, Stack, execute, figures, finish, python_env, query, ratio, run_logged, work_dir,
)
from bench.full import PREFIX, SOURCES, TARGET_DB, _reset_downstream, _servers, _settle, full_load_cmd, layout, seed
from dm_core.db import connect, qi, qt
from dm_core.spark_options import driver_java_options

log = logging.getLogger("bench.validate")

TASK_NAME = "bench_validate"
WRITER_ROWS_PER_S = 100     # upstream row changes per second while the validations run
HOT_IDS = 1000              # the writer updates ids 1..HOT_IDS of each shard (and inserts above the end)
COLUMNS = ["id", "k", "name", "amount", "created_at", "note"]


def _task(stack: Stack):
    from dm_core.config.task import parse_task
    from tests.integration.helpers import shard_task_yaml

    text = shard_task_yaml(TASK_NAME, stack.down, [(sid, i) for i, (sid, _) in enumerate(SOURCES, 1)], PREFIX,
                           TARGET_DB, mode="all")
    return text, parse_task(text, f"<bench {TASK_NAME}>")


def full_copy(stack: Stack, task, store, rows: int) -> dict:
    from dm_core.full.phase import finish as finish_phase, prepare

    _reset_downstream(stack)
    logf = work_dir() / "spark-full-validate.log"
    logf.unlink(missing_ok=True)
    env = python_env()
    with _servers(stack) as servers:
        t0 = time.monotonic()
        prepare(task, store)
        finish(run_logged(full_load_cmd(TASK_NAME, env), logf, env=env, cwd=work_dir(), timeout=3600),
               "spark-submit full_load.py")
        finish_phase(task, store)
        seconds = time.monotonic() - t0
    got = query(stack.down, f"SELECT COUNT(*) FROM {qt(TARGET_DB, 't')}")[0][0]
    return figures(got, None, seconds, with_rss=False, rows_ok=got == rows, cpu_seconds=servers.seconds,
                   how="prepare() + spark-submit --master local[2] spark_jobs/full_load.py + finish(): merged 8 -> 1 "
                       "with partition id (the bench's full part, task-mode all)")


class Live:
    """Sync (a Syncer per source) and an upstream writer, in threads, until stopped."""

    def __init__(self, stack: Stack, task, rows: int):
        self.stack, self.task, self.stop, self.errors = stack, task, threading.Event(), []
        self.written = 0
        self.shards = layout(stack, rows)
        self.threads = [threading.Thread(target=self._sync, args=(sid,), daemon=True) for sid, _ in SOURCES] + \
            [threading.Thread(target=self._write, daemon=True)]

    def __enter__(self) -> "Live":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=300)

    def _sync(self, sid: str) -> None:
        from dm_core.state import StateStore
        from dm_core.sync.syncer import Syncer

        try:
            with StateStore(self.stack.state_dsn) as store:
                s = Syncer(self.task, sid, store)
                while not self.stop.is_set():
                    r = s.run_window()
                    if r.paused:
                        raise RuntimeError(f"source {sid} paused: {r.paused}")
                    if r.caught_up:
                        time.sleep(0.2)
        except BaseException as e:  # noqa: BLE001 - reported by the part
            self.errors.append(f"sync {sid}: {type(e).__name__}: {e}")

    def _write(self) -> None:
        try:
            conns = {sh: connect(sh.ep) for sh in self.shards}
            rnd = random.Random(7)
            pause = len(self.shards) * 2 / WRITER_ROWS_PER_S
            while not self.stop.is_set():
                for sh, c in conns.items():
                    with c.cursor() as cur:
                        cur.execute(f"UPDATE {qt(sh.schema, sh.table)} SET amount = amount + 1 WHERE id = %s",
                                    (rnd.randint(1, HOT_IDS),))
                        cur.execute(f"INSERT INTO {qt(sh.schema, sh.table)} (k, name, amount, created_at, note) "
                                    "VALUES (1, 'live', 1, NOW(), 'written while validating')")
                    self.written += 2
                time.sleep(pause)
            for c in conns.values():
                c.close()
        except BaseException as e:  # noqa: BLE001 - reported by the part
            self.errors.append(f"writer: {type(e).__name__}: {e}")


def raw_scan(stack: Stack, rows: int) -> dict:
    """sync-diff-inspector's whole-table checksum on every table of both sides, all at once."""
    cols = ", ".join(qi(c) for c in COLUMNS)
    nulls = ", ".join(f"ISNULL({qi(c)})" for c in COLUMNS)
    sql = f"SELECT COUNT(*), BIT_XOR(CAST(CRC32(CONCAT_WS(',', {cols}, CONCAT({nulls}))) AS UNSIGNED)) FROM {{t}}"
    tables = [(sh.ep, qt(sh.schema, sh.table)) for sh in layout(stack, rows)] + [(stack.down, qt(TARGET_DB, "t"))]
    with _servers(stack) as servers:
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=len(tables)) as ex:
            got = list(ex.map(lambda et: query(et[0], sql.format(t=et[1]))[0], tables))
        seconds = time.monotonic() - t0
    up = sum(n for n, _ in got[:-1])
    return figures(up, None, seconds, with_rss=False, downstream_rows=got[-1][0], cpu_seconds=servers.seconds,
                   how="per table SELECT COUNT(*), BIT_XOR(CAST(CRC32(CONCAT_WS(',', cols, CONCAT(ISNULL(col)...))) "
                       "AS UNSIGNED)) (sync-diff-inspector's checksum), the 8 upstream tables and the downstream "
                       "table at once")


def _validate(stack: Stack, task, store, expect: set) -> dict:
    from dm_core.validate.compare import validate_task
    from dm_core.validate.result import render
    from dm_core.validate.settings import settings_for

    s = settings_for(task)
    s.recheck.row_error_delay, s.recheck.check_interval = 300, 1.0
    with _servers(stack) as servers:
        t0 = time.monotonic()
        res = validate_task(task, store, settings=s, run_id="bench")
        seconds = time.monotonic() - t0
    t = res.tables[0]
    got = {(d.kind, int(d.key["id"])) for d in t.differences}
    ok = got == expect and not t.pending and not t.more_differences and not t.error and t.fallback is None
    if not ok:
        log.warning("validation named %d rows (%d expected), %d pending:\n%s", len(got), len(expect), len(t.pending),
                    render(res))
    return figures(t.upstream_rows, None, seconds, with_rss=False, rows_ok=ok, named=len(got),
                   named_expected=len(got & expect), named_unexpected=len(got - expect), missed=len(expect - got),
                   pending=len(t.pending), resolved=t.resolved, chunks=t.buckets, differing_chunks=t.differing_buckets,
                   queries=t.chunks, cpu_seconds=servers.seconds, summary=res.to_dict()["summary"],
                   how="validate_task() in process (dmctl validate's engine) while sync and the writer run")


def _spark_job(stack: Stack, store) -> dict:
    from dm_core.validate.result import from_dict

    env = python_env()
    logf = work_dir() / "spark-validate.log"
    cmd = [str(VENV_BIN / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--conf", f"spark.driver.extraJavaOptions={driver_java_options()}",   # as the DAG submits it
           "--conf", f"spark.pyspark.python={env['PYSPARK_PYTHON']}",
           "--conf", f"spark.pyspark.driver.python={env['PYSPARK_DRIVER_PYTHON']}",
           str(ROOT / "spark_jobs" / "validate.py"), "--task", TASK_NAME, "--run-id", "bench-spark"]
    with _servers(stack) as servers:
        t0 = time.monotonic()
        finish(run_logged(cmd, logf, env=env, cwd=work_dir(), timeout=3600), "spark-submit validate.py")
        seconds = time.monotonic() - t0
    res = from_dict(store.validation(TASK_NAME, "bench-spark"))
    t = res.tables[0]
    return figures(t.upstream_rows, None, seconds, with_rss=False, rows_ok=res.status == "equal",
                   summary=res.to_dict()["summary"], cpu_seconds=servers.seconds,
                   how="spark-submit spark_jobs/validate.py (the scheduled DAG's task; JVM start included)")


def corrupt(stack: Stack, task, rows: int, n: int = 100, seed_: int = 37) -> set:
    """Damage ``n`` downstream rows no writer touches; the (kind, id) validation must name."""
    rnd = random.Random(seed_)
    shards = layout(stack, rows)
    picks: set = set()
    while len(picks) < n * 7 // 10:
        sh = rnd.choice(shards)
        picks.add((sh, rnd.randint(HOT_IDS + 1, sh.rows)))
    ids = []
    for sh, src in sorted(picks, key=lambda p: (p[0].schema, p[0].table, p[1])):
        t = task.rules_for(sh.source_id).column_mapper.plan(sh.schema, sh.table, COLUMNS).transforms[0]
        ids.append((t.or_value | src, t.or_value))
    rnd.shuffle(ids)
    changed, deleted = ids[:n * 4 // 10], ids[n * 4 // 10:]
    inside = [orv + (1 << 40) + i for i, (_, orv) in enumerate(ids[:n * 15 // 100])]
    between = [1000 + i for i in range(n - len(changed) - len(deleted) - len(inside))]
    q = qt(TARGET_DB, "t")
    stmts = [f"UPDATE {q} SET note = 'corrupted' WHERE id = {i}" for i, _ in changed]
    stmts.append(f"DELETE FROM {q} WHERE id IN ({', '.join(str(i) for i, _ in deleted)})")
    stmts.append(f"INSERT INTO {q} (id, k, name, amount, created_at, note) VALUES "
                 + ", ".join(f"({i}, 0, 'extra', 0, '2024-01-01', 'extra')" for i in inside + between))
    execute(stack.down, *stmts)
    return ({("changed", i) for i, _ in changed} | {("missing", i) for i, _ in deleted}
            | {("extra", i) for i in inside + between})


def run(stack: Stack, rows: int) -> dict:
    from dm_core.reset import reset_task
    from dm_core.state import StateStore
    from tests.integration.helpers import register

    data = seed(stack, rows)
    text, task = _task(stack)
    res: dict = {}
    with StateStore(stack.state_dsn) as store:
        register(store, {sid: ep for (sid, _), ep in zip(SOURCES, stack.ups)}, TASK_NAME, text)
        try:
            res["full_copy"] = full_copy(stack, task, store, rows)
            _settle(stack.down)   # the copy's dirty pages flushed: the scans below start on a quiet server
            with Live(stack, task, rows) as live:
                time.sleep(5)    # sync past the full phase's watermarks, the writer going
                res["raw_scan"] = raw_scan(stack, rows)
                res["shardflow"] = _validate(stack, task, store, set())
                res["shardflow_spark_job"] = _spark_job(stack, store)
                expect = corrupt(stack, task, rows)
                res["shardflow_corrupted"] = _validate(stack, task, store, expect)
                res["shardflow_corrupted"]["corrupted"] = len(expect)
            res["live"] = {"row_changes_written": live.written, "errors": live.errors}
        finally:
            reset_task(store, TASK_NAME)
            for sid, _ in SOURCES:
                store.disable_source(sid)
            try:
                _reset_downstream(stack)
            except Exception as e:  # noqa: BLE001 - the next run drops leftovers
                log.warning("could not drop the downstream copy: %s", e)
    full_s = res["full_copy"].get("seconds")
    raw_s = res["raw_scan"].get("seconds")
    ratios = {}
    for key, name in (("shardflow", ""), ("shardflow_spark_job", "spark_job_"), ("shardflow_corrupted", "corrupted_")):
        s = res[key].get("seconds")
        ratios[f"{name}raw_vs_validation"] = ratio(raw_s, s)
        ratios[f"{name}full_copy_vs_validation"] = ratio(full_s, s)
    return {"data": {**data, "layout": "2 sources x 2 schemas x 2 tables, 6 columns, merged 8 -> 1 (partition id)",
                     "writer_rows_per_s": WRITER_ROWS_PER_S},
            "results": res, "ratios": ratios}
