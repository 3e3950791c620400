"""The validation job on real Spark (local[2], spark-submit as the DAG runs it): key chunks of
every shard and of the downstream read in parallel, bucket checksums compared, differing rows
named by key -- the same answer as the in-process engine."""

import subprocess

import pytest

from dm_core.validate.compare import validate_task
from dm_core.validate.result import from_dict, render
from tests.integration.shard_helpers import SourceSpec, query, run, setup_shards, teardown
from tests.integration.test_full_support import JAR, PY, ROOT, spark_env

pytestmark = pytest.mark.e2e


def submit(task_name: str, run_id: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [str(ROOT / ".venv/bin/spark-submit"), "--master", "local[2]", "--jars", JAR, "--conf", "spark.ui.enabled=false",
           "--conf", f"spark.pyspark.python={PY}", str(ROOT / "spark_jobs/validate.py"), "--task", task_name,
           "--run-id", run_id, *args]
    return subprocess.run(cmd, env=spark_env(), capture_output=True, text=True, timeout=900)


@pytest.fixture
def merged(stack, uniq, tmp_path):
    p = f"vs{uniq}"
    specs = [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1", f"{p}_2"], ["t_1", "t_2"], 1),
             SourceSpec(f"b-{uniq}", stack["up2"], [f"{p}_1"], ["t_1"], 2)]
    setup = setup_shards(uniq, specs, stack["down"], tmp_path, prefix=p, rows=40)
    setup.store.set_task_status(setup.name, "stopped")   # nothing replicates: differences are final
    yield setup
    teardown(setup)


def test_spark_job_names_a_corrupted_and_a_deleted_row_in_chunks(merged):
    r = submit(merged.name, "equal-run", "--chunk-rows", "15")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    res = from_dict(merged.store.validation(merged.name, "equal-run"))
    assert res.status == "equal" and res.engine == "spark", render(res)
    t = res.tables[0]
    assert t.upstream_rows == t.downstream_rows == 5 * 40
    assert t.chunks >= 5 * 3 + 1, f"each 40-row shard is read in 15-row chunks: {t.chunks}"

    rows = query(merged.down, f"SELECT id FROM `{merged.tdb}`.`t` ORDER BY id")
    bad, gone = rows[10][0], rows[150][0]
    run(merged.down, f"UPDATE `{merged.tdb}`.`t` SET name = 'corrupted' WHERE id = {bad}",
        f"DELETE FROM `{merged.tdb}`.`t` WHERE id = {gone}")
    r = submit(merged.name, "damaged-run", "--chunk-rows", "15")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    res = from_dict(merged.store.validation(merged.name, "damaged-run"))
    t = res.tables[0]
    assert res.status == "different", render(res)
    assert sorted((d.kind, int(d.key["id"])) for d in t.differences) == sorted([("changed", bad), ("missing", gone)])
    changed = next(d for d in t.differences if d.kind == "changed")
    assert changed.downstream["name"] == "corrupted" and changed.upstream["name"] != "corrupted"
    assert 1 <= t.differing_buckets <= 2 and t.seconds > 0
    # the in-process engine agrees
    mine = validate_task(merged.task, merged.store).tables[0]
    assert sorted((d.kind, d.key["id"]) for d in mine.differences) == sorted((d.kind, d.key["id"]) for d in t.differences)


def test_resync_of_named_tables_compares_them_on_spark_then_rewrites_what_differs(merged):
    """dm_<task>_resync with what=tables: spark_compare (the validation job, those tables
    only), then repair of the rows it named; the next comparison is EQUAL."""
    from dm_core.resync.choose import keys_of
    from dm_core.resync.run import run_resync

    target = f"{merged.tdb}.t"
    r = submit(merged.name, "bad-tables", "--tables", "nope.t")
    assert r.returncode == 1
    assert "--tables: nope.t not a target table" in merged.store.validation(merged.name, "bad-tables")["error"]

    rows = query(merged.down, f"SELECT id FROM `{merged.tdb}`.`t` ORDER BY id")
    run(merged.down, f"UPDATE `{merged.tdb}`.`t` SET amount = amount + 1 WHERE id IN ({rows[3][0]}, {rows[99][0]})",
        f"DELETE FROM `{merged.tdb}`.`t` WHERE id = {rows[120][0]}")
    r = submit(merged.name, "resync-compare", "--tables", target, "--chunk-rows", "15")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    compared = merged.store.validation(merged.name, "resync-compare")
    keys, again = keys_of(compared, {target})
    assert again == [] and len(keys[target]) == 3, render(from_dict(compared))
    res = run_resync(merged.task, merged.store, "resync-run", keys)
    assert res.ok and res.held == {} and res.tables[0].written == 3, res.render()   # task stopped: no live sync
    r = submit(merged.name, "after-resync", "--tables", target)
    assert r.returncode == 0
    assert from_dict(merged.store.validation(merged.name, "after-resync")).status == "equal"
