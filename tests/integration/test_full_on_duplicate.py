"""loaders.on-duplicate-logical (replace | ignore | error), loaders.pool-size and mydumper.rows
in the Spark full load.

Three sources (one upstream server, one schema each) land in one target schema whose tables
already hold rows with ids 1-10 (value 'down'); upstream has ids 1-200 (value 'up'):
replace → upstream wins; ignore → the downstream rows stay; error → the job fails naming the
table and the chunk, that chunk is not recorded, and the other sources are still loaded.
"""

import pytest

from dm_core.db import qt
from dm_core.full.phase import prepare
from dm_core.state import StateStore

from .test_full_support import cleanup, drop, execute, read_report, register, run_load, staging_leftovers, task_yaml

pytestmark = pytest.mark.integration


def test_on_duplicate_modes_and_pool_size(stack, uniq, tmp_path):
    up, down = stack["up1"], stack["down"]
    tdb, name = f"odt{uniq}", f"od{uniq}"
    layout = {  # source id → (schema, tables, loader)
        f"odr-{uniq}": (f"od{uniq}_r", ["t_r1", "t_r2", "t_r3"], "{pool-size: 1, on-duplicate-logical: replace}"),
        f"odi-{uniq}": (f"od{uniq}_i", ["t_i"], "{pool-size: 2, on-duplicate-logical: ignore}"),
        f"ode-{uniq}": (f"od{uniq}_e", ["t_e"], "{on-duplicate-logical: error}"),
    }
    for schema, tables, _ in layout.values():
        execute(up, f"CREATE DATABASE {schema}", *[
            s for t in tables for s in (f"CREATE TABLE {qt(schema, t)} (id int NOT NULL PRIMARY KEY, v varchar(10))",
                                        f"INSERT INTO {qt(schema, t)} SELECT seq, 'up' FROM {schema}.seq_1_to_200")])
    text = task_yaml(name, down, [(sid, s, ld) for sid, (s, _, ld) in layout.items()], tdb, mydumper="{rows: 50}")
    store = StateStore()
    try:
        task = register(store, name, text, {sid: up for sid in layout})
        prepare(task, store)
        execute(down, *[f"INSERT INTO {qt(tdb, t)} SELECT seq, 'down' FROM {tdb}.seq_1_to_10" for t in ("t_r1", "t_i", "t_e")])
        rep = tmp_path / "report.json"
        r = run_load(name, "--report", str(rep))
        report = read_report(rep)
        assert r.returncode == 1, r.stderr[-3000:]

        def values(t):
            return dict(execute(down, f"SELECT id, v FROM {qt(tdb, t)}"))

        got = values("t_r1")
        assert len(got) == 200 and set(got.values()) == {"up"}, "replace: upstream rows win"
        got = values("t_i")
        assert len(got) == 200 and all(v == ("down" if i <= 10 else "up") for i, v in got.items()), "ignore keeps"
        err = report["tables"][f"ode-{uniq}:od{uniq}_e.t_e"]
        assert "od" + uniq + "_e.t_e chunk 0 of 4" in err["error"] and "Duplicate entry" in err["error"], err
        assert 0 not in err["loaded"]
        assert "t_e chunk 0 of 4" in r.stdout + r.stderr  # the job log names table and chunk too
        assert values("t_e")[1] == "down", "a failed chunk leaves nothing behind"
        assert not staging_leftovers(down, task.meta_schema, [err["plan_id"]]), "nor a staging table"
        for t in report["tables"].values():
            assert t["chunks"] == 4, "mydumper.rows: 50 splits 200 rows into 4 chunks"
        assert report["pool_peak"][f"odr-{uniq}"] == 1, "pool-size 1: one table at a time"
        assert report["pool_peak"][f"odi-{uniq}"] <= 2
    finally:
        cleanup(store, name, text)
        store.close()
        drop(up, *[s for s, _, _ in layout.values()])
        drop(down, tdb)
