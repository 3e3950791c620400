"""The full load's pass over small tables (dm_core/full/small_tables.py): tables that fit in
one chunk are copied by a few Spark jobs instead of one job each, beside tables that load
chunk by chunk, and stay exactly once through kills, failures and a merge into one table."""


import pytest

from dm_core.faults import EXIT_CODE
from dm_core.full.phase import prepare
from dm_core.state import StateStore
from dm_core.validate.compare import compare_task, render

from .test_full_support import cleanup, drop, execute, read_report, register, run_load, task_yaml

pytestmark = pytest.mark.integration

SMALL = 40


@pytest.fixture
def fleet(stack, uniq):
    """``SMALL`` small tables (keyless ones among them, so a duplicate would show) and one
    table of 30 chunks, in one upstream schema; a task copying them into one target database."""
    schema, tdb, name, sid = f"sm{uniq}", f"smt{uniq}", f"sm{uniq}", f"sm-{uniq}"
    up, down = stack["up1"], stack["down"]
    stmts = [f"CREATE DATABASE {schema}"]
    for i in range(SMALL):
        key = "PRIMARY KEY" if i % 3 else ""  # every third table keyless
        stmts += [f"CREATE TABLE {schema}.s{i} (id int NOT NULL {key}, v varchar(20), t text)",
                  f"INSERT INTO {schema}.s{i} SELECT seq, CONCAT('v', seq), IF(seq % 4, 'it''s\\tx', NULL) "
                  f"FROM {schema}.seq_1_to_{5 + i}"]
    stmts += [f"CREATE TABLE {schema}.big (id int NOT NULL PRIMARY KEY, v varchar(20))",
              f"INSERT INTO {schema}.big SELECT seq, CONCAT('b', seq) FROM {schema}.seq_1_to_3000",
              f"ANALYZE TABLE {schema}.big"]
    execute(up, *stmts)
    text = task_yaml(name, down, [(sid, schema)], tdb)
    store = StateStore()
    task = register(store, name, text, {sid: up})
    prepare(task, store)
    yield task, store, tdb
    cleanup(store, name, text)
    store.close()
    drop(up, schema)
    drop(down, tdb)


def _equal(task, store):
    diffs = compare_task(task, store)
    assert len(diffs) == SMALL + 1 and all(d.equal for d in diffs), render(diffs)


def _log(r) -> str:
    return r.stdout + r.stderr


def test_small_tables_copied_in_one_pass_beside_a_chunked_table(fleet, tmp_path):
    task, store, tdb = fleet
    report = tmp_path / "report.json"
    r = run_load(task.name, "--chunk-rows", "100", "--report", str(report))
    assert r.returncode == 0, _log(r)[-5000:]
    assert f"{SMALL} small tables copied in one pass" in _log(r), _log(r)[-3000:]
    rep = read_report(report)
    big = [t for n, t in rep["tables"].items() if n.endswith(".big")][0]
    assert big["chunks"] == 30 and len(big["loaded"]) == 30, big
    small = [t for n, t in rep["tables"].items() if not n.endswith(".big")]
    assert len(small) == SMALL and all(t["chunks"] == 1 and t["loaded"] == [0] for t in small), small
    _equal(task, store)
    # a rerun finds every chunk recorded and copies nothing
    r = run_load(task.name, "--chunk-rows", "100", "--report", str(report))
    assert r.returncode == 0, _log(r)[-5000:]
    rep = read_report(report)
    assert rep["rows"] == 0 and all(t["skipped"] == list(range(t["chunks"])) for t in rep["tables"].values()), rep
    _equal(task, store)


def test_killed_mid_pass_then_rerun_copies_only_the_rest(fleet, tmp_path):
    """Killed (as after SIGKILL) after the batch committed downstream, before the driver
    recorded it: the rerun adopts those tables by their markers and copies none twice (keyless
    tables would show a duplicate)."""
    task, store, tdb = fleet
    r = run_load(task.name, "--chunk-rows", "100", env={"SHARDFLOW_FAULTS": "full.after_chunk_merge=7"})
    assert r.returncode == EXIT_CODE, _log(r)[-3000:]
    report = tmp_path / "rerun.json"
    r = run_load(task.name, "--chunk-rows", "100", "--report", str(report))
    assert r.returncode == 0, _log(r)[-5000:]
    rep = read_report(report)
    small = [t for n, t in rep["tables"].items() if not n.endswith(".big")]
    assert sum(len(t["adopted"]) for t in small) == SMALL, "the batch committed what the driver had not recorded"
    assert all(len(t["skipped"]) + len(t["adopted"]) + len(t["loaded"]) == 1 for t in small), small
    sid = next(iter(rep["tables"])).split(":", 1)[0]
    recorded = store.chunk_read_bys(task.name, sid)     # what a third run skips
    names = [n.split(":", 1)[1].split(".", 1) for n in rep["tables"] if not n.endswith(".big")]
    assert len(names) == SMALL and all(len(recorded[s, t]) == 1 for s, t in names), recorded
    _equal(task, store)


def test_a_table_failing_in_the_pass_loads_on_its_own(fleet, tmp_path):
    """The executor's 3rd table fails (an injected error): it is rolled back, reported, and
    loaded by the per-table path; every other table stays in the pass."""
    task, store, tdb = fleet
    r = run_load(task.name, "--chunk-rows", "100", env={"SHARDFLOW_FAULTS": "full.small_table=raise:3"})
    assert r.returncode == 0, _log(r)[-5000:]
    assert "failed for it" in _log(r) and "loading it on its own" in _log(r), _log(r)[-3000:]
    _equal(task, store)


def test_small_shards_merged_into_one_auto_increment_table(stack, uniq, tmp_path):
    """Twelve small shards routed into one AUTO_INCREMENT table: two executors copy them at
    once, each taking the table's write turn per shard (load_data.py), every row once."""
    up, down = stack["up1"], stack["down"]
    schemas = [f"ms{uniq}_{i}" for i in range(12)]
    tdb, name, sid = f"mst{uniq}", f"ms{uniq}", f"ms-{uniq}"
    for i, s in enumerate(schemas):
        execute(up, f"CREATE DATABASE {s}",
                f"CREATE TABLE {s}.t (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, v varchar(20))",
                f"INSERT INTO {s}.t SELECT seq + {i * 1000}, CONCAT('s{i}-', seq) FROM {s}.seq_1_to_50")
    text = (task_yaml(name, down, [(sid, f"ms{uniq}_*")], tdb)
            .replace(f'target-schema: "{tdb}"', f'target-schema: "{tdb}", table-pattern: "t", target-table: "t"'))
    store = StateStore()
    try:
        task = register(store, name, text, {sid: up})
        prepare(task, store)
        r = run_load(task.name, "--write-turns", "on")
        assert r.returncode == 0, _log(r)[-5000:]
        assert "12 small tables copied in one pass" in _log(r), _log(r)[-3000:]
        got = execute(down, f"SELECT COUNT(*), COUNT(DISTINCT id), SUM(id) FROM {tdb}.t")[0]
        assert tuple(map(int, got)) == (600, 600, sum(j + i * 1000 for i in range(12) for j in range(1, 51)))
    finally:
        cleanup(store, name, text)
        store.close()
        drop(up, *schemas)
        drop(down, tdb)
