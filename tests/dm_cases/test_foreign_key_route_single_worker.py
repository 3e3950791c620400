"""DM's `foreign_key_route_single_worker` case (pingcap/tiflow dm/tests/foreign_key_route_single_worker/
run.sh), with DM's own task and source files (conf/, vendored unchanged: `session: {foreign_key_checks:
1}`, one worker, safe mode off, routes `fk_route_src`.`parent` → `fk_route_dst`.`parent_r` and `child` →
`child_r`) and our own statements of its data's shape:

1. the downstream's global foreign_key_checks on; the user created the routed targets downstream with
   their own foreign key (`child_r` → `parent_r`, ON DELETE CASCADE); full phase: 3 parents, 4
   children, no orphan;
2. through the binlog: a parent's non-key column updated twice, a child updated, a parent deleted
   (the downstream's own foreign key cascades to its child), a child inserted and the same insert
   replayed as INSERT ... ON DUPLICATE KEY UPDATE: DM's assertions, no orphan, both tables equal
   upstream, the source running.
"""

import json

import pytest

from .harness import dm_case, dmctl, register_sources, run_sql, start_task, table_rows
from .test_safe_mode_foreign_key import increment, one, orphans, prepare

pytestmark = pytest.mark.integration

SRC, DST = "fk_route_src", "fk_route_dst"
ROUTED = {"parent": ("parent_r", ["parent_id", "payload", "note"]),
          "child": ("child_r", ["child_id", "parent_id", "child_data"])}


def route_case(case: str, stack, tmp_path):
    return dm_case(case, tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [SRC], "down": [DST, "dm_meta"]},
                   flavor="mariadb")


@pytest.fixture
def fk_down(stack):
    old = run_sql(stack["down"], "SELECT @@GLOBAL.foreign_key_checks")[0][0]
    run_sql(stack["down"], "SET GLOBAL foreign_key_checks = 1")
    yield
    run_sql(stack["down"], "SET GLOBAL foreign_key_checks = %s", args=(old,))


def prepare_targets(down) -> None:
    run_sql(down, "SET SESSION foreign_key_checks = 1", f"CREATE DATABASE {DST}", f"USE {DST}",
            "CREATE TABLE parent_r (parent_id INT PRIMARY KEY, payload VARCHAR(100) NOT NULL, note VARCHAR(100) NOT NULL, "
            "UNIQUE KEY uk_payload (payload)) ENGINE=InnoDB",
            "CREATE TABLE child_r (child_id INT PRIMARY KEY, parent_id INT NOT NULL, child_data VARCHAR(100) NOT NULL, "
            "CONSTRAINT fk_child_parent FOREIGN KEY (parent_id) REFERENCES parent_r (parent_id) ON DELETE CASCADE) "
            "ENGINE=InnoDB")


def equal(up, down) -> None:
    for t, (r, cols) in ROUTED.items():
        assert table_rows(down, DST, r, cols) == table_rows(up, SRC, t, cols), t


def running(name: str) -> None:
    rc, out, err = dmctl("query-status", name)
    assert rc == 0, out + err
    st = json.loads(out)["tasks"][0]["sources"][0]
    assert st["error"] is None and st["status"] != "paused", st


def full_then_increment(files, store, stack, sync_hook=None):
    up, down = stack["up1"], stack["down"]
    prepare(up, SRC)
    prepare_targets(down)
    register_sources(files)
    task, sync = start_task(files.task_file, store, remove_meta=True)
    running(task.name)
    assert one(down, f"SELECT COUNT(*) FROM {DST}.parent_r") == 3
    assert one(down, f"SELECT COUNT(*) FROM {DST}.child_r") == 4
    assert orphans(down, DST, "parent_r", "child_r") == 0
    increment(up, SRC)
    if sync_hook:
        sync_hook(up)
    sync.settle()
    running(task.name)
    assert one(down, f"SELECT note FROM {DST}.parent_r WHERE parent_id = 1") == "n1_v2"
    assert one(down, f"SELECT child_data FROM {DST}.child_r WHERE child_id = 20") == "c20_v2"
    assert one(down, f"SELECT COUNT(*) FROM {DST}.parent_r WHERE parent_id = 3") == 0
    assert one(down, f"SELECT COUNT(*) FROM {DST}.child_r WHERE parent_id = 3") == 0
    assert one(down, f"SELECT COUNT(*) FROM {DST}.child_r WHERE child_id = 21") == 1
    assert orphans(down, DST, "parent_r", "child_r") == 0
    equal(up, down)
    return task, sync


def test_dm_foreign_key_route_single_worker_case(stack, tmp_path, fk_down):
    with route_case("foreign_key_route_single_worker", stack, tmp_path) as (files, store):
        task, _ = full_then_increment(files, store, stack)
        assert task.instance("mysql-replica-01").syncer.worker_count == 1
