"""A fleet task's state, as a real run leaves it in the state store, for the Migrations page.

``seed`` writes one sharded task over ``sources`` upstreams with ``tables`` tables each through
the same store calls the product makes (no upstream server is needed: only the page's inputs
are written): sources registered, the task started, each source's checkpoint, watermarks and
sync windows, every table's chunk plan and loaded chunks of the full phase, pessimistic shard
DDL reports on some target tables, and a finished validation of every target table. The shards
of one table name on every source merge into one target table (no route), as a sharded schema
spread over many servers does.

What it writes is returned as ``Fleet``: the test checks the page against it; the bench part
(``run``) times the page's data and HTML at 2 tables and at 10,000.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field

import yaml

from bench.common import ROOT

PLUGINS = ROOT / "plugins"
PASSWORD = "fleet-page-secret"     # every source's and the target's: the page must never show it


@dataclass
class Fleet:
    task: str
    sources: list[str]
    tables: list[tuple[str, str]]                   # (schema, table) of every source
    paused: str = ""                                # the source paused on an error
    loading: str = ""                               # the source still in its full phase
    late: list[str] = field(default_factory=list)  # the sources the shard DDL locks wait for
    loaded_tables: dict[str, int] = field(default_factory=dict)     # source → tables whose chunks all loaded
    chunks: dict[str, int] = field(default_factory=dict)            # source → chunks planned
    lag: dict[str, float] = field(default_factory=dict)             # syncing source → its lag
    locks_waiting: list[str] = field(default_factory=list)          # lock ids waiting for a source
    lock_conflict: str = ""                                         # the lock id with a conflicting report
    validation: dict[str, list[str]] = field(default_factory=dict)  # status → target tables


def _layout(tables: int) -> list[tuple[str, str]]:
    """``tables`` (schema, table) names: 25 tables a schema."""
    per = min(25, tables)
    return [(f"shop_{i // per + 1:03d}", f"t_{i % per + 1:02d}") for i in range(tables)]


def task_yaml(name: str, sources: list[str], schemas: list[str]) -> str:
    task = {"name": name, "task-mode": "all", "shard-mode": "pessimistic",
            "target-database": {"host": "127.0.0.1", "port": 4000, "user": "root", "password": PASSWORD},
            "mysql-instances": [{"source-id": s, "block-allow-list": "ba"} for s in sources],
            "block-allow-list": {"ba": {"do-dbs": sorted(set(schemas))}}}
    return yaml.safe_dump(task, sort_keys=False)


def seed(store, name: str, sources: int = 16, tables: int = 625, dsn: str | None = None) -> Fleet:
    """Write the task ``name`` (forgetting whatever the store had of it) and return what was written."""
    from dm_core.full.plan_store import PlanStore
    from dm_core.reset import reset_task

    names = [f"{name}-s{i + 1:02d}" for i in range(sources)]
    layout = _layout(tables)
    fleet = Fleet(name, names, layout)
    for i, sid in enumerate(names):
        store.put_source(sid, {"source-id": sid, "host": "127.0.0.1", "port": 3306 + i, "user": "dm"}, PASSWORD)
    reset_task(store, name)
    store.start_task(name, task_yaml(name, names, [s for s, _ in layout]))
    fleet.paused = names[0] if sources > 2 else ""
    fleet.loading = names[1] if sources > 2 else ""
    with PlanStore(dsn or store.dsn) as plans:
        for i, sid in enumerate(names):
            _source(store, plans, fleet, i, sid)
    if sources > 2:
        _locks(store, fleet)
    _validation(store, fleet)
    return fleet


def _source(store, plans, fleet: Fleet, i: int, sid: str) -> None:
    """One source's full phase (its plans and loaded chunks), checkpoint and recent windows."""
    from dm_core.full.chunking import Chunk
    from dm_core.full.discover import SourceTable
    from dm_core.full.plan_store import epoch_of
    from dm_core.position import Position

    low = {"low_file": "mysql-bin.000001", "low_pos": 4000 + i}
    store.update_source_state(fleet.task, sid, stage="full", **low)
    sts = [SourceTable(sid, s, t, s, t, ["id", "v"], ["id"], ["bigint"]) for s, t in fleet.tables]
    # every 10th table is big enough for 3 chunks, the others are small (one chunk)
    n_chunks = {(st.schema, st.table): 3 if k % 10 == 0 else 1 for k, st in enumerate(sts)}
    got = plans.get_or_create_many(
        fleet.task, sid, sts, epoch_of(low),
        lambda many: [[Chunk(c, f"id % 3 = {c}" if n_chunks[st.schema, st.table] > 1 else "1=1")
                       for c in range(n_chunks[st.schema, st.table])] for st in many],
        lambda st: False)
    loading = sid == fleet.loading
    done, loaded = 0, []
    for k, st in enumerate(sts):
        _, chunks = got[st.schema, st.table]
        # the loading source is a third through, one of its 3-chunk tables has two chunks to go
        upto = len(chunks) if not loading or k < len(sts) // 3 else 0
        if loading and k == len(sts) // 30 * 10:
            upto = 1
        loaded += [(st.schema, st.table, c.chunk_id, 2) for c in chunks[:upto]]
        done += upto == len(chunks)
    # as the one pass of small tables lands them: a batch of tables a transaction
    for b in range(0, len(loaded), 200):
        store.mark_chunks_done(fleet.task, sid, loaded[b:b + 200], read_by=Position("mysql-bin.000001", 5000 + i))
    fleet.loaded_tables[sid] = done
    fleet.chunks[sid] = sum(n_chunks.values())
    if loading:
        return
    high = {"high_file": "mysql-bin.000001", "high_pos": 6000 + i}
    if sid == fleet.paused:
        store.update_source_state(fleet.task, sid, stage="paused", binlog_file="mysql-bin.000002", binlog_pos=777,
                                  lag_seconds=95.0, rows_per_second=0.0, error_code=36066,
                                  error=f"Duplicate entry '7' for key 'PRIMARY' on {fleet.tables[0][0]}.t_01",
                                  error_stmt="INSERT INTO t_01 (id, v) VALUES (7, 'x')", **high)
        return
    lag = round(0.3 + (i * 7 % 13) * 0.4, 1)
    fleet.lag[sid] = lag
    store.add_applied(fleet.task, sid, 1000 * (i + 1), 500 * (i + 1), stage="sync", binlog_file="mysql-bin.000002",
                      binlog_pos=100_000 + i, lag_seconds=lag, rows_per_second=100.0 + i, **high)
    for w in range(5):
        store.record_window(fleet.task, sid, 200 + w * 10, 2.0, lag + w * 0.1)


def _locks(store, fleet: Fleet) -> None:
    """An ADD COLUMN on the first 24 target tables, reported by half the syncing sources (each
    lock waits for the others), and a conflicting ALTER from two sources on one more."""
    from dm_core.position import Position
    from dm_core.shardddl.errors import ShardDDLInconsistent
    from dm_core.shardddl.lock_ops import PESSIMISTIC
    from dm_core.shardddl.pessimism.info import Info

    syncing = [s for s in fleet.sources if s not in (fleet.paused, fleet.loading)]
    reporters = syncing[:len(syncing) // 2]
    fleet.late = [s for s in fleet.sources if s not in reporters]
    late = fleet.late[-1]
    targets = fleet.tables[:24]
    for target in targets:
        for sid in reporters:
            info = Info(fleet.task, sid, target, (target,), (f"ALTER TABLE `{target[0]}`.`{target[1]}` ADD COLUMN "
                                                            "`note` varchar(20) NULL",), Position("mysql-bin.000002", 900))
            PESSIMISTIC.put_info(store, info, fleet.sources)
        fleet.locks_waiting.append(info.lock_id)
    target = fleet.tables[24]
    for sid, ddl in ((reporters[0], "ADD COLUMN `a` int NULL"), (late, "ADD COLUMN `b` int NULL")):
        info = Info(fleet.task, sid, target, (target,), (f"ALTER TABLE `{target[0]}`.`{target[1]}` {ddl}",),
                    Position("mysql-bin.000002", 950))
        try:
            PESSIMISTIC.put_info(store, info, fleet.sources)
        except ShardDDLInconsistent:
            pass        # recorded on the lock: the page shows the conflict
    fleet.lock_conflict = info.lock_id


def _validation(store, fleet: Fleet) -> None:
    """A finished validation of every target table: a few different, pending or failed, the rest equal."""
    from dm_core.validate.result import RowDiff, TableResult, ValidationResult

    n = len(fleet.sources)
    tables = []
    for k, (s, t) in enumerate(fleet.tables):
        tr = TableResult(f"{s}.{t}", shards=[f"{sid}:{s}.{t}" for sid in fleet.sources], upstream_rows=2 * n,
                         downstream_rows=2 * n, chunks=2, seconds=0.01)
        if k % 97 == 5:
            tr.differences = [RowDiff("missing", {"id": str(k)}, {"id": str(k)}, None, f"{fleet.sources[0]}:{s}.{t}")]
            tr.downstream_rows -= 1
        elif k % 211 == 7:
            tr.pending = [RowDiff("changed", {"id": str(k)}, reason="sync had not caught up")]
        elif k % 313 == 9:
            tr.error = "Lost connection to server during query"
        fleet.validation.setdefault(tr.status, []).append(tr.target)
        tables.append(tr)
    r = ValidationResult(fleet.task, "scheduled__fleet", started_at="2026-01-01T00:00:00",
                         finished_at="2026-01-01T00:05:00", tables=tables)
    store.put_validation(fleet.task, r.run_id, r.status, r.to_dict(), finished=True)


def page(store, name: str) -> tuple[dict, str]:
    """The task's overview and the Migrations page's HTML of it, as the plugin makes them."""
    from dm_core.overview import task_overview

    if str(PLUGINS) not in sys.path:   # Airflow puts plugins/ on the path; `make bench` sets the root only
        sys.path.insert(0, str(PLUGINS))
    from shardflow_airflow.ui.migrations_app import render_page

    runs = {"precheck": "success", "full": "success", "incremental": "running"}
    ov = task_overview(store, name, runs)
    return ov, render_page([ov], "admin")


def _time(store, name: str, rounds: int, browser) -> dict:
    """Medians over ``rounds``: the page's HTML made (data + template), the /api/tasks body made,
    and the HTML laid out by headless Chromium (None without a browser)."""
    import json

    from fastapi.encoders import jsonable_encoder

    made, api, shown = [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        ov, html = page(store, name)
        made.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        body = json.dumps(jsonable_encoder({"tasks": [ov]}))
        api.append(time.perf_counter() - t0 + made[-1])
        if browser is not None:
            tab = browser.new_page()
            t0 = time.perf_counter()
            tab.set_content(html, wait_until="load")
            tab.evaluate("document.body.offsetHeight")     # forces layout
            shown.append(time.perf_counter() - t0)
            tab.close()
    med = statistics.median
    return {"page_seconds": med(made), "api_seconds": med(api), "browser_seconds": med(shown) if shown else None,
            "seconds": med(made) + (med(shown) if shown else 0.0), "rounds_seconds": made,
            "html_bytes": len(html.encode()), "api_bytes": len(body)}


def _browser():
    """Headless Chromium through Playwright, as the end-to-end page test drives it; None (with
    the reason) when it cannot start here."""
    try:
        from playwright.sync_api import sync_playwright

        pw = sync_playwright().start()
        return pw, pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]), ""
    except Exception as e:  # noqa: BLE001 - reported, the other figures stand
        return None, None, str(e).splitlines()[0]


def run(stack, rounds: int = 5) -> dict:
    """The page for a 2-table task (2 sources x 1 table) and a 10,000-table one (16 sources x 625
    tables) in the same run, against the stack's state store: its data and HTML made by the
    plugin's code in this process, the /api/tasks body, and the HTML laid out by headless
    Chromium. ``seconds`` = made + laid out; the ratio is 10,000 tables ÷ 2 tables."""
    from dm_core.state.store import StateStore

    pw, browser, why = _browser()
    out: dict = {"data": {"tables_2": "2 sources x 1 table", "tables_10000": "16 sources x 625 tables",
                          "rounds": rounds, "browser": "chromium" if browser else f"none: {why}"}, "results": {}}
    try:
        with StateStore(stack.state_dsn) as store:
            for key, name, n, t in (("tables_2", "bench_page_2", 2, 1), ("tables_10000", "bench_page_10k", 16, 625)):
                t0 = time.perf_counter()
                fleet = seed(store, name, n, t)
                seeded = time.perf_counter() - t0
                try:
                    out["results"][key] = {**_time(store, name, rounds, browser), "seed_seconds": seeded}
                finally:
                    forget(store, fleet)
    finally:
        if browser is not None:
            browser.close()
            pw.stop()
    small, big = out["results"]["tables_2"]["seconds"], out["results"]["tables_10000"]["seconds"]
    out["ratios"] = {"10000_tables_vs_2": big / small if small else None}
    return out


def forget(store, fleet: Fleet) -> None:
    """Remove what ``seed`` wrote of the task (its sources stay registered, disabled)."""
    from dm_core.full.plan_store import PlanStore
    from dm_core.reset import reset_task

    reset_task(store, fleet.task)
    with PlanStore(store.dsn) as plans:
        plans.forget(fleet.task)
    store.stop_task(fleet.task)
    for sid in fleet.sources:
        store.disable_source(sid)
