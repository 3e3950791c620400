"""Thousands of tables: one sharded task over 2 sources with many small tables, each phase timed.

Data: ``tables`` tables (default 10,000; ``--fleet-tables``), half on each source (schemas
bench_fleet_1 on up1, bench_fleet_2 on up2), ``ROWS`` rows each, ids unique over the task
(``source * 10**11 + table * 10**6 + n``), so one route merges every table into
bench_fleet_merged.t: a sharding group of ``tables`` members, as a fleet's task has. Seeded with
the binlog off; reused while the layout matches (a run's own rows are deleted first).

Phases, each a figure:
- precheck: ``run_prechecks`` against both sources and the downstream (what the precheck DAG runs);
- full: ``prepare`` + spark-submit spark_jobs/full_load.py + ``finish``, every table into the
  merged one;
- sync: each source's ``SyncSession`` stepped in a spawned process of its own (as a sensor's task
  process is), both at once: first from the full phase's low watermark until caught up, then after
  two bursts written while no session runs: ``burst`` single-row transactions a source on 2 of
  its tables, then as many spread over all of its tables (60 % insert, 30 % update, 10 % delete).
  Each burst's figure is the time from starting the sessions to both checkpoints past the burst.

Baselines, same run, same tables: mydumper+myloader (as bench/small_tables.py runs them) for the
copy; mysql-replication decoding the all-tables burst's binlog (``OracleBinlogWindow``, nothing
applied) for the sync. ``ratios``: full_vs_myloader and precheck_plus_full_vs_myloader are
mydumper+myloader seconds ÷ shardflow seconds (> 1: shardflow faster); sync_vs_decode is sync rows/s
÷ decode-only rows/s; all_tables_vs_2_tables is the all-tables burst's rows/s ÷ the 2-table
burst's (what many tables cost the sync). The downstream is checked equal to the union of the
tables (count + CRC32 sum) after the full phase and after each burst.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from bench import full, small_tables
from bench.common import (
    Stack, TreeRSS, bench_schema, drop_schemas, execute, figures, finish, guarded, python_env, query, ratio,
    run_logged, work_dir,
)
from dm_core.db import Endpoint, connect, master_position, qt
from dm_core.position import Position

log = logging.getLogger("bench.fleet")

PREFIX = "bench_fleet"
SOURCES = [("bench-fleet-1", f"{PREFIX}_1"), ("bench-fleet-2", f"{PREFIX}_2")]
TARGET_DB = f"{PREFIX}_merged"
TASK_NAME = "bench_fleet"
LAYOUT_VERSION = "v1"
ROWS = 3
ID_SOURCE, ID_TABLE, ID_BURST = 10**11, 10**6, 10**5   # a burst inserts < ID_BURST rows a table
WRITERS = 4                      # writer connections a source during a burst
CHUNK = 500                      # tables a checksum query reads (UNION ALL)
SYNC_TIMEOUT_S = 1800.0

_DDL = ("CREATE TABLE {t} (id bigint NOT NULL PRIMARY KEY, name varchar(32) NOT NULL, amount int NOT NULL) "
        "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT = %s")
_ROW_CRC = "SELECT COUNT(*) AS c, COALESCE(SUM(CRC32(CONCAT_WS('#', id, name, amount))), 0) AS s FROM {t}"


def _names(count: int) -> list[list[str]]:
    """The tables of each source: t_00001 ... (half each, source 1 takes an odd one)."""
    half = count // 2
    return [[f"t_{j:05d}" for j in range(1, half + (count % 2 if i == 0 else 0) + 1)] for i in range(len(SOURCES))]


def _base(i: int, j: int) -> int:
    """The first id of table ``j`` (1-based) of source ``i`` (0-based)."""
    return (i + 1) * ID_SOURCE + j * ID_TABLE


def _each_table(stack: Stack, count: int, fn, threads: int = 4) -> list:
    """``fn(cursor, source index, schema, table index, table)`` for every table, ``threads``
    connections a source (binlog off: set-up, not changes to replicate)."""
    names = _names(count)

    def part(args):
        i, k = args
        _, schema = SOURCES[i]
        conn = connect(stack.ups[i])
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin = 0")
                return [fn(cur, i, schema, j, t) for j, t in enumerate(names[i], 1) if j % threads == k]
        finally:
            conn.close()

    with ThreadPoolExecutor(max_workers=threads * len(SOURCES)) as ex:
        return [x for got in ex.map(part, [(i, k) for i in range(len(SOURCES)) for k in range(threads)]) for x in got]


def seed(stack: Stack, count: int) -> dict:
    t0 = time.monotonic()
    mark = f"shardflow-bench fleet {LAYOUT_VERSION} tables={count} rows={ROWS}"
    have = [query(ep, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s AND table_comment = %s",
                  (schema, mark))[0][0] for ep, (_, schema) in zip(stack.ups, SOURCES)]
    if have == [len(n) for n in _names(count)]:
        # a run's bursts leave rows past the seeded ones and changed amounts: back to the seed
        def reset(cur, i, schema, j, t):
            cur.execute(f"DELETE FROM {qt(schema, t)} WHERE id > %s", (_base(i, j) + ROWS,))
            cur.execute(f"UPDATE {qt(schema, t)} SET amount = id - %s WHERE amount <> id - %s",
                        (_base(i, j), _base(i, j)))

        _each_table(stack, count, reset)
        return {"seeded": "reused", "seconds": round(time.monotonic() - t0, 1)}
    for ep in stack.ups:
        drop_schemas(ep, PREFIX + "_")
    for ep, (_, schema) in zip(stack.ups, SOURCES):
        execute(ep, f"CREATE DATABASE {bench_schema(schema)}", session=("SET SESSION sql_log_bin = 0",))

    def create(cur, i, schema, j, t):
        cur.execute(_DDL.format(t=qt(schema, t)), (mark,))
        b = _base(i, j)
        cur.execute(f"INSERT INTO {qt(schema, t)} VALUES " + ", ".join(["(%s, 'seed', %s)"] * ROWS),
                    [v for n in range(1, ROWS + 1) for v in (b + n, n)])

    _each_table(stack, count, create)
    return {"seeded": "created", "seconds": round(time.monotonic() - t0, 1)}


def _reset_downstream(stack: Stack) -> None:
    drop_schemas(stack.down, PREFIX + "_")
    full._settle(stack.down)


def upstream_sum(stack: Stack, count: int) -> tuple[int, int]:
    """(rows, summed CRC32) of the union of every table."""
    rows = crc = 0
    for i, names in enumerate(_names(count)):
        schema = SOURCES[i][1]
        for k in range(0, len(names), CHUNK):
            part = " UNION ALL ".join(_ROW_CRC.format(t=qt(schema, t)) for t in names[k:k + CHUNK])
            c, s = query(stack.ups[i], f"SELECT SUM(c), SUM(s) FROM ({part}) AS x")[0]
            rows, crc = rows + int(c or 0), crc + int(s or 0)
    return rows, crc


def downstream_sum(stack: Stack) -> tuple[int, int]:
    c, s = query(stack.down, _ROW_CRC.format(t=qt(TARGET_DB, "t")))[0]
    return int(c), int(s)


def _equal(stack: Stack, count: int, what: str) -> bool:
    up, down = upstream_sum(stack, count), downstream_sum(stack)
    if up != down:
        log.warning("WARNING: after %s the downstream holds (rows, crc) %s, the union of the tables %s", what, down, up)
    return up == down


def task_yaml(stack: Stack) -> str:
    import yaml

    from tests.integration.helpers import target_database

    return yaml.safe_dump({
        "name": TASK_NAME, "task-mode": "all", "shard-mode": "pessimistic",
        "target-database": target_database(stack.down),
        "mysql-instances": [{"source-id": sid, "block-allow-list": "ba", "route-rules": ["r-schema", "r-table"]}
                            for sid, _ in SOURCES],
        "block-allow-list": {"ba": {"do-dbs": [f"~^{PREFIX}_[0-9]+$"]}},
        "routes": {"r-schema": {"schema-pattern": f"{PREFIX}_*", "target-schema": TARGET_DB},
                   "r-table": {"schema-pattern": f"{PREFIX}_*", "table-pattern": "t_*",
                               "target-schema": TARGET_DB, "target-table": "t"}},
    }, sort_keys=False)


# ---- phases --------------------------------------------------------------------------------
def run_precheck(stack: Stack, task) -> dict:
    from dm_core.check.checker import run_prechecks

    t0 = time.monotonic()
    report = run_prechecks(task, {sid: ep for (sid, _), ep in zip(SOURCES, stack.ups)}, stack.down)
    seconds = time.monotonic() - t0
    states: dict[str, int] = {}
    for r in report.results:
        states[r.state] = states.get(r.state, 0) + 1
    failed = [f"{r.item}: {r.message}"[:200] for r in report.results if r.state == "fail"]
    return {"seconds": round(seconds, 3), "results": states, "failed": failed[:5],
            "how": "run_prechecks(task, both sources, downstream): every check item, as the precheck DAG runs it"}


def run_full(stack: Stack, task, count: int) -> dict:
    from dm_core.full.phase import finish as finish_phase, prepare
    from dm_core.state import StateStore

    _reset_downstream(stack)
    env = python_env()
    logf = work_dir() / "spark-fleet.log"
    logf.unlink(missing_ok=True)
    cmd = full.full_load_cmd(TASK_NAME, env)
    with StateStore(stack.state_dsn) as store, TreeRSS() as rss:
        t0 = time.monotonic()
        prepare(task, store)
        t1 = time.monotonic()
        finish(run_logged(cmd, logf, env=env, cwd=work_dir(), rss=rss, timeout=3600), "spark-submit full_load.py")
        t2 = time.monotonic()
        finish_phase(task, store)
        seconds = time.monotonic() - t0
    want = upstream_sum(stack, count)
    got = downstream_sum(stack)
    if got != want:
        log.warning("WARNING: the full phase left (rows, crc) %s downstream, the union of the tables is %s", got, want)
    return figures(got[0], None, seconds, rss.peak, prepare_seconds=round(t1 - t0, 3),
                   spark_seconds=round(t2 - t1, 3), finish_seconds=round(seconds - (t2 - t0), 3),
                   rows_ok=got == want, spark_log=str(logf),
                   how="prepare() + spark-submit --master local[2] spark_jobs/full_load.py + finish(), every table "
                       f"merged into {TARGET_DB}.t; peak RSS of spark-submit's process tree")


def run_mydumper(stack: Stack, count: int) -> dict:
    rows = upstream_sum(stack, count)[0]
    _reset_downstream(stack)
    try:
        return small_tables.mydumper_copy(stack, PREFIX, [s for _, s in SOURCES], rows)
    finally:
        drop_schemas(stack.down, PREFIX + "_")


# ---- sync -------------------------------------------------------------------------------------
def _positions(stack: Stack) -> list[Position]:
    out = []
    for ep in stack.ups:
        conn = connect(ep)
        try:
            f, p, _ = master_position(conn)
        finally:
            conn.close()
        out.append(Position(f, p))
    return out


def _serve(conn, text: str, source_id: str) -> None:
    """One source's sync process (spawned, as a sensor's task process is): one SyncSession for
    its whole life; each request ``(file, pos)`` steps it, without the poke pause while behind,
    until its checkpoint reaches there, and answers (seconds, steps) or the error."""
    logging.getLogger("shardflow").setLevel(logging.WARNING)
    from dm_core.config.task import parse_task
    from dm_core.state import StateStore
    from dm_core.sync.session import SyncSession

    task = parse_task(text, f"<bench {TASK_NAME}>")
    with StateStore() as store:
        sess = SyncSession(task, source_id, store)
        while True:
            end = conn.recv()
            if end is None:
                return
            try:
                conn.send(("ok", _step_to(sess, store, source_id, Position(*end))))
            except Exception as e:  # noqa: BLE001 - the parent raises it
                conn.send(("error", f"{type(e).__name__}: {e}"))


def _step_to(sess, store, source_id: str, end: Position) -> dict:
    t0, steps = time.monotonic(), 0
    while True:
        out = sess.step()
        steps += 1
        if out.state not in ("sync", "caught_up"):
            raise RuntimeError(f"source {source_id} is {out.state}: {out.messages}")
        st = store.source_state(TASK_NAME, source_id)
        if st["binlog_file"] and Position(st["binlog_file"], int(st["binlog_pos"])).key() >= end.key():
            return {"seconds": time.monotonic() - t0, "steps": steps}
        if time.monotonic() - t0 > SYNC_TIMEOUT_S:
            raise RuntimeError(f"source {source_id} did not reach {end} in {SYNC_TIMEOUT_S:.0f}s")


class _Sessions:
    """A sync process a source, started once, asked to catch up to given positions."""

    def __init__(self, text: str):
        ctx = multiprocessing.get_context("spawn")
        self.pipes, self.procs = [], []
        for sid, _ in SOURCES:
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=_serve, args=(theirs, text, sid), name=f"bench-sync-{sid}", daemon=True)
            p.start()
            self.pipes.append(mine)
            self.procs.append(p)

    def catch_up(self, ends: list[Position]) -> dict:
        t0 = time.monotonic()
        for pipe, e in zip(self.pipes, ends):
            pipe.send((e.file, e.pos))
        answers = [pipe.recv() for pipe in self.pipes]
        seconds = time.monotonic() - t0
        bad = [a[1] for a in answers if a[0] != "ok"]
        if bad:
            raise RuntimeError(f"a sync process failed: {bad[0]}")
        return {"seconds": seconds, "per_source_seconds": [round(a[1]["seconds"], 3) for a in answers],
                "steps": [a[1]["steps"] for a in answers]}

    def close(self) -> None:
        for pipe, p in zip(self.pipes, self.procs):
            try:
                pipe.send(None)
            except OSError:
                pass
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join()


class _BurstWriter(threading.Thread):
    """Single-row autocommit transactions on some tables of one source, as fast as it goes."""

    def __init__(self, ep: Endpoint, i: int, schema: str, tables: list[tuple[int, str]], txns: int, seed: int):
        super().__init__(daemon=True)
        self.ep, self.i, self.schema, self.tables, self.txns = ep, i, schema, tables, txns
        self.seed, self.error = seed, None
        self.ops = {"insert": 0, "update": 0, "delete": 0}

    def run(self) -> None:
        try:
            conn = connect(self.ep)
            try:
                with conn.cursor() as cur:
                    self._write(cur)
            finally:
                conn.close()
        except Exception as e:  # noqa: BLE001 - reported by the caller
            self.error = e

    def _write(self, cur) -> None:
        rnd = random.Random(self.seed * 1000 + self.i)
        added: dict[str, list[int]] = {t: [] for _, t in self.tables}
        next_n = {t: ROWS + 1 + self.seed * ID_BURST for _, t in self.tables}
        for k in range(self.txns):
            j, t = self.tables[k % len(self.tables)]
            qn, b, dice = qt(self.schema, t), _base(self.i, j), rnd.random()
            if dice < 0.6:
                cur.execute(f"INSERT INTO {qn} VALUES (%s, 'burst', %s)", (b + next_n[t], k))
                added[t].append(b + next_n[t])
                next_n[t] += 1
                self.ops["insert"] += 1
            elif dice < 0.9 or not added[t]:   # a table with no row of the burst yet: an update instead
                cur.execute(f"UPDATE {qn} SET amount = amount + 1 WHERE id = %s", (b + 1 + k % ROWS,))
                self.ops["update"] += 1
            else:
                cur.execute(f"DELETE FROM {qn} WHERE id = %s", (added[t].pop(),))
                self.ops["delete"] += 1


def write_burst(stack: Stack, count: int, txns: int, spread: int | None, seed: int) -> dict:
    """``txns`` transactions a source over its first ``spread`` tables (None: all of them)."""
    names = _names(count)
    writers = []
    for i, (ep, (_, schema)) in enumerate(zip(stack.ups, SOURCES)):
        tables = list(enumerate(names[i], 1))[:spread]
        share = [p for p in (tables[k::WRITERS] for k in range(WRITERS)) if p]
        writers += [_BurstWriter(ep, i, schema, part, txns // len(share) + (1 if k < txns % len(share) else 0), seed)
                    for k, part in enumerate(share)]
    t0 = time.monotonic()
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    errors = [w.error for w in writers if w.error]
    if errors:
        raise RuntimeError(f"a burst writer failed: {errors[0]!r}")
    ops = {k: sum(w.ops[k] for w in writers) for k in ("insert", "update", "delete")}
    return {"seconds": round(time.monotonic() - t0, 3), "transactions": sum(ops.values()), "ops": ops,
            "tables": min(spread or len(names[0]), len(names[0])) * len(SOURCES)}


def run_decode(stack: Stack, starts: list[Position], ends: list[Position]) -> dict:
    from tests.oracle_binlog import OracleBinlogWindow

    rows, t0 = 0, time.monotonic()
    for k, (ep, a, b) in enumerate(zip(stack.ups, starts, ends)):
        for txn in OracleBinlogWindow(ep, a, b, server_id=0x6F000000 + (os.getpid() % 0xFFFF) * 4 + k,
                                      budget_events=1 << 62, budget_seconds=1e9):
            rows += sum(1 for ch in txn.rows if ch.schema.startswith(PREFIX + "_"))
    seconds = time.monotonic() - t0
    return figures(rows, None, seconds, with_rss=False,
                   how="tests.oracle_binlog.OracleBinlogWindow (mysql-replication) over each source's burst, one "
                       "source after the other, rows counted, nothing applied")


def run_sync(stack: Stack, text: str, count: int, burst: int) -> dict:
    """The sessions' catch-up after the full phase, then after each burst."""
    out: dict = {}
    sessions = _Sessions(text)
    try:
        first = sessions.catch_up(_positions(stack))
        out["after_full"] = {**first, "rows_ok": _equal(stack, count, "the first catch-up")}
        for key, spread, seed in (("burst_2_tables", 2, 1), ("burst_all_tables", None, 2)):
            starts = _positions(stack)
            wrote = write_burst(stack, count, burst, spread, seed)
            ends = _positions(stack)
            got = sessions.catch_up(ends)
            out[key] = figures(wrote["transactions"], None, got["seconds"], with_rss=False, written=wrote,
                               per_source_seconds=got["per_source_seconds"], steps=got["steps"],
                               rows_ok=_equal(stack, count, key),
                               how=f"{burst:,} single-row transactions a source on {wrote['tables']:,} tables, written "
                                   "while no session ran; seconds from starting both sessions (a spawned process "
                                   "each) until both checkpoints passed the burst")
            out[key]["_range"] = (starts, ends)
    finally:
        sessions.close()
    starts, ends = out["burst_all_tables"].pop("_range")
    out["burst_2_tables"].pop("_range")
    out["decode_only"] = guarded("baseline: decode the all-tables burst", run_decode, stack, starts, ends)
    return out


# ---- the part ---------------------------------------------------------------------------------
def run(stack: Stack, count: int, burst: int) -> dict:
    from dm_core.config.task import parse_task
    from dm_core.state import StateStore
    from tests.integration.helpers import register

    data = seed(stack, count)
    log.info("fleet: %d tables of %d rows over 2 sources, data %s in %.0fs", count, ROWS, data["seeded"],
             data["seconds"])
    text = task_yaml(stack)
    task = parse_task(text, f"<bench {TASK_NAME}>")
    with StateStore(stack.state_dsn) as store:
        register(store, {sid: ep for (sid, _), ep in zip(SOURCES, stack.ups)}, TASK_NAME, text)
    res = {"precheck": guarded("shardflow: precheck", run_precheck, stack, task),
           "mydumper_myloader": guarded("baseline: mydumper + myloader", run_mydumper, stack, count)}
    res["full"] = guarded("shardflow: full phase (Spark)", run_full, stack, task, count)
    if res["full"].get("rows_ok"):
        res["sync"] = guarded("shardflow: sync catch-up", run_sync, stack, text, count, burst)
    else:
        res["sync"] = {"error": "the full phase did not finish with every row"}
    with StateStore(stack.state_dsn) as store:
        store.set_task_status(TASK_NAME, "stopped")
        for sid, _ in SOURCES:
            store.disable_source(sid)
    try:
        _reset_downstream(stack)
    except Exception as e:  # the figures are taken; leftovers are dropped by the next run
        log.warning("could not drop the downstream copies: %s", e)
    return {"data": {**data, "tables": count, "rows": count * ROWS, "burst_per_source": burst,
                     "layout": f"2 sources x 1 schema x {count // 2:,} tables of {ROWS} rows, one sharding group "
                               f"of {count:,} tables merged into {TARGET_DB}.t"},
            "results": res, "ratios": _ratios(res)}


def _ratios(res: dict) -> dict:
    base = res["mydumper_myloader"].get("seconds")
    pre, full = res["precheck"].get("seconds"), res["full"].get("seconds")
    sync = res.get("sync") or {}
    many, two = (sync.get(k) or {} for k in ("burst_all_tables", "burst_2_tables"))
    return {"full_vs_myloader": ratio(base, full),
            "precheck_plus_full_vs_myloader": ratio(base, pre + full) if pre and full else None,
            "sync_vs_decode": ratio(many.get("rows_per_s"), (sync.get("decode_only") or {}).get("rows_per_s")),
            "all_tables_vs_2_tables": ratio(many.get("rows_per_s"), two.get("rows_per_s"))}
