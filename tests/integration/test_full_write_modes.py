"""The three write paths of the full load land the same rows, and how fast each is.

``load`` (default: Arrow batches streamed through LOAD DATA LOCAL INFILE), ``staging``
(Spark JDBC into a per-chunk staging table, merged server-side) and ``rows`` (pymysql
executemany from Python executors) must give identical targets. With
SHARDFLOW_FULL_BENCH_ROWS=N the same test loads N rows (6 columns, the bench's shape) with
each path, alternating, SHARDFLOW_FULL_BENCH_ROUNDS times (default 1), and prints rows/s:
``SHARDFLOW_FULL_BENCH_ROWS=500000`` reproduces the issue-4 figures (the earlier path's
figure came from a copy of the old job, not kept in the tree).
"""

import os

import pytest

from dm_core.full.phase import prepare
from dm_core.state import StateStore
from dm_core.validate.compare import compare_task, render

from .test_full_support import cleanup, drop, execute, read_report, register, run_load, task_yaml

pytestmark = pytest.mark.integration

ROWS = int(os.environ.get("SHARDFLOW_FULL_BENCH_ROWS", "3000"))
ROUNDS = int(os.environ.get("SHARDFLOW_FULL_BENCH_ROUNDS", "1"))
FILL = """INSERT INTO {t} SELECT seq, (seq * 7919) % 1000003, IF(seq % 5 = 0, NULL, CONCAT('name-', seq)),
  (seq % 100000) / 100, TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND, REPEAT(CHAR(97 + seq % 26), 20 + seq % 61)
  FROM {s}.seq_1_to_{n}"""


def test_load_staging_and_rows_paths_land_the_same_rows(stack, uniq, tmp_path, capsys):
    schema, tdb, name, sid = f"wm{uniq}", f"wmt{uniq}", f"wm{uniq}", f"wm-{uniq}"
    up, down = stack["up1"], stack["down"]
    execute(up, f"CREATE DATABASE {schema}",
            f"CREATE TABLE {schema}.t (id int NOT NULL PRIMARY KEY, k int NOT NULL, name varchar(64) NULL, "
            "amount decimal(12,2) NOT NULL, created_at datetime NOT NULL, note varchar(120) NOT NULL)",
            FILL.format(t=f"{schema}.t", s=schema, n=ROWS),
            # values LOAD DATA's text format must escape or mark: tab, newline, backslash, \N, NULL
            f"UPDATE {schema}.t SET note = CONCAT('a\tb\nc\\\\N', note) WHERE id % 7 = 0")
    text = task_yaml(name, down, [(sid, schema)], tdb)
    store = StateStore()
    figures = []
    try:
        for rnd in range(ROUNDS):
            for mode in ("load", "rows", "staging"):
                drop(down, tdb)
                task = register(store, name, text, {sid: up})
                prepare(task, store)
                report = tmp_path / f"{mode}-{rnd}.json"
                r = run_load(name, "--write-mode", mode, "--chunk-rows", str(max(1000, ROWS // 10)),
                             "--report", str(report))
                assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
                rep = read_report(report)
                assert rep["rows"] == ROWS
                figures.append((mode, rep["seconds"], ROWS / rep["seconds"]))
                diffs = compare_task(task, store)
                assert diffs and all(d.equal for d in diffs), render(diffs)
        with capsys.disabled():
            for mode, sec, rate in figures:
                print(f"\nfull load write path {mode:8s}: {ROWS} rows in {sec:.2f}s = {rate:,.0f} rows/s")
    finally:
        cleanup(store, name, text)
        store.close()
        drop(up, schema)
        drop(down, tdb)


def test_downstream_without_local_infile_loads_through_staging(stack, uniq, tmp_path):
    """MySQL 8 ships with local_infile OFF: the job says so, names the fix, and still loads
    every row (through staging tables) instead of failing."""
    schema, tdb, name, sid = f"wl{uniq}", f"wlt{uniq}", f"wl{uniq}", f"wl-{uniq}"
    up, down = stack["up1"], stack["down"]
    execute(up, f"CREATE DATABASE {schema}",
            f"CREATE TABLE {schema}.t (id int NOT NULL PRIMARY KEY, k int NOT NULL, name varchar(64) NULL, "
            "amount decimal(12,2) NOT NULL, created_at datetime NOT NULL, note varchar(120) NOT NULL)",
            FILL.format(t=f"{schema}.t", s=schema, n=2000))
    text = task_yaml(name, down, [(sid, schema)], tdb)
    store = StateStore()
    (was,) = execute(down, "SELECT @@GLOBAL.local_infile")[0]
    try:
        task = register(store, name, text, {sid: up})
        prepare(task, store)
        execute(down, "SET GLOBAL local_infile = OFF")
        r = run_load(name, "--chunk-rows", "500")
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
        log = r.stdout + r.stderr
        assert "refuses LOAD DATA LOCAL INFILE" in log and "SET GLOBAL local_infile = ON" in log, log[-3000:]
        assert "rows staged in" in log, "the chunks went through staging tables"
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
    finally:
        execute(down, f"SET GLOBAL local_infile = {int(was)}")
        cleanup(store, name, text)
        store.close()
        drop(up, schema)
        drop(down, tdb)


def test_shards_merged_into_an_auto_increment_table_take_turns(stack, uniq, tmp_path):
    """On MariaDB, concurrent loads into one AUTO_INCREMENT table contend on its root page, so
    a merged target takes at most two chunks at a time (the others spooled first), under
    downstream named locks: while another connection holds both turns nothing lands; once
    they are released every row of both shards does, and the report shows the time spent
    waiting."""
    import subprocess
    import time

    from dm_core.full.load_data import turn_names

    from .test_full_support import spark_env, submit_cmd

    a, b, tdb, name = f"ta{uniq}", f"tb{uniq}", f"tat{uniq}", f"ta{uniq}"
    up, down = stack["up1"], stack["down"]
    for schema, first in ((a, 0), (b, 5000)):
        execute(up, f"CREATE DATABASE {schema}",
                f"CREATE TABLE {schema}.t (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, k int NOT NULL, "
                "name varchar(64) NULL, amount decimal(12,2) NOT NULL, created_at datetime NOT NULL, "
                "note varchar(120) NOT NULL)",
                FILL.format(t=f"{schema}.t", s=schema, n=3000),
                f"UPDATE {schema}.t SET id = id + {first}")
    text = task_yaml(name, down, [(f"ta-{uniq}", a), (f"tb-{uniq}", b)], tdb)
    store = StateStore()
    holder = None
    try:
        task = register(store, name, text, {f"ta-{uniq}": up, f"tb-{uniq}": up})
        prepare(task, store)
        from dm_core.db import connect

        holder = connect(down)
        with holder.cursor() as cur:
            for turn in turn_names(tdb, "t"):
                cur.execute("SELECT GET_LOCK(%s, 5)", (turn,))
                assert cur.fetchone()[0] == 1
        report = tmp_path / "report.json"
        log = tmp_path / "spark.log"
        with open(log, "w") as out:
            job = subprocess.Popen(submit_cmd(name, "--chunk-rows", "1000", "--report", str(report)),
                                   env=spark_env(), stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            waiting = []
            while not waiting and time.monotonic() < deadline and job.poll() is None:
                # a GET_LOCK that waits: a chunk first tries each turn without waiting (", 0)"), and
                # catching that probe let the holder go before any chunk had waited (seen once in CI)
                waiting = execute(down, "SELECT id FROM information_schema.processlist WHERE info LIKE %s "
                                        "AND info NOT LIKE %s", args=("SELECT GET_LOCK(%", "%, 0)"))
                time.sleep(0.5)
            assert waiting, "no chunk asked for the table's turn:\n" + log.read_text()[-3000:]
            assert execute(down, f"SELECT COUNT(*) FROM {tdb}.t")[0][0] == 0, "rows landed without the turn"
            holder.close()
            holder = None
            assert job.wait(timeout=600) == 0, log.read_text()[-5000:]
        finally:
            if job.poll() is None:
                job.kill()
        text_log = log.read_text()
        assert f"{tdb}.t loads at most 2 chunk(s) at a time" in text_log, text_log[-3000:]
        rep = read_report(report)
        assert rep["rows"] == 6000 and rep["stages"]["wait"] > 0, rep
        assert rep["stages"]["spooled"] >= 1, f"the chunks that met the held turn spool first: {rep}"
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
    finally:
        if holder is not None:
            holder.close()
        cleanup(store, name, text)
        store.close()
        drop(up, a, b)
        drop(down, tdb)


def test_a_chunk_that_finds_the_turn_free_streams_under_it(stack, uniq, tmp_path):
    """A table with a turn does not spool a chunk when nothing else loads into it: the chunk
    that takes the free turn streams straight into LOAD DATA (no local file, the load starts
    at once). Chunks that meet a taken turn spool, so at least one of the table's concurrent
    chunks streamed and every row landed once."""
    schema, tdb, name = f"tf{uniq}", f"tft{uniq}", f"tf{uniq}"
    up, down = stack["up1"], stack["down"]
    execute(up, f"CREATE DATABASE {schema}",
            f"CREATE TABLE {schema}.t (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, k int NOT NULL, "
            "name varchar(64) NULL, amount decimal(12,2) NOT NULL, created_at datetime NOT NULL, "
            "note varchar(120) NOT NULL)",
            FILL.format(t=f"{schema}.t", s=schema, n=4000))
    text = task_yaml(name, down, [(f"tf-{uniq}", schema)], tdb)
    store = StateStore()
    try:
        task = register(store, name, text, {f"tf-{uniq}": up})
        prepare(task, store)
        report = tmp_path / "report.json"
        r = run_load(name, "--chunk-rows", "1000", "--write-turns", "on", "--report", str(report))
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
        rep = read_report(report)
        chunks = sum(len(t["loaded"]) for t in rep["tables"].values())
        assert rep["rows"] == 4000 and chunks == 4, rep
        assert rep["stages"].get("spooled", 0) < chunks, f"no chunk streamed under a free turn: {rep}"
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
    finally:
        cleanup(store, name, text)
        store.close()
        drop(up, schema)
        drop(down, tdb)


def test_a_chunk_takes_whichever_turn_is_free_and_waits_for_the_first_released(stack, uniq):
    """A table's turns are several named locks: a chunk takes any free one at once; with every
    one taken it gets none without waiting, and while waiting it takes the first one released,
    whichever that is (the wait rotates over them)."""
    import threading
    import time

    from dm_core.db import connect
    from dm_core.full.load_data import _take_turn, turn_names

    turns = turn_names(f"turns{uniq}", "t", 2)
    a, b, c = (connect(stack["down"]) for _ in range(3))
    try:
        assert _take_turn(a, turns, wait_s=0) == turns[0]
        assert _take_turn(b, turns, wait_s=0) == turns[1], "the second turn was free"
        assert _take_turn(c, turns, wait_s=0) is None, "both turns are held"
        release = threading.Timer(1.5, lambda: b.cursor().execute("SELECT RELEASE_LOCK(%s)", (turns[1],)))
        release.start()
        t0 = time.monotonic()
        assert _take_turn(c, turns, wait_s=30) == turns[1]
        assert time.monotonic() - t0 < 10, "the released turn was not taken while waiting"
        release.join()   # b's answer read by the timer's thread before this one uses b (was a race)
        assert _take_turn(b, turns, wait_s=1) is None, "a turn went to two connections"
    finally:
        for conn in (a, b, c):
            conn.close()
