"""DM's `foreign_key_route_multi_worker` case (pingcap/tiflow dm/tests/foreign_key_route_multi_worker/
run.sh): DM's foreign_key_route_single_worker with 4 workers (conf/, vendored unchanged) and more
changes: besides the single-worker case's (test_foreign_key_route_single_worker.py), parents 5 and 6
inserted, child 50 inserted under 5, moved to 6, then parent 5 deleted. If the delete of parent 5
reached the downstream before the child's move (another worker), the downstream's own ON DELETE
CASCADE would delete child 50: it must be under 6 with 'c50_moved', no orphan, both tables equal.
"""

import pytest

from .harness import run_sql
from .test_foreign_key_route_single_worker import fk_down, full_then_increment, route_case  # noqa: F401
from .test_safe_mode_foreign_key import one

pytestmark = pytest.mark.integration

SRC, DST = "fk_route_src", "fk_route_dst"


def _interleaved(up) -> None:
    run_sql(up, f"USE {SRC}",
            "INSERT INTO parent (parent_id, payload, note) VALUES (5, 'p5', 'n5'), (6, 'p6', 'n6')",
            "INSERT INTO child (child_id, parent_id, child_data) VALUES (50, 5, 'c50')",
            "UPDATE child SET parent_id = 6, child_data = 'c50_moved' WHERE child_id = 50",
            "DELETE FROM parent WHERE parent_id = 5")


def test_dm_foreign_key_route_multi_worker_case(stack, tmp_path, fk_down):  # noqa: F811
    with route_case("foreign_key_route_multi_worker", stack, tmp_path) as (files, store):
        task, _ = full_then_increment(files, store, stack, _interleaved)
        assert task.instance("mysql-replica-01").syncer.worker_count == 4
        down = stack["down"]
        assert one(down, f"SELECT COUNT(*) FROM {DST}.parent_r WHERE parent_id = 5") == 0
        got = run_sql(down, f"SELECT parent_id, child_data FROM {DST}.child_r WHERE child_id = 50")
        assert [tuple(r) for r in got] == [(6, "c50_moved")]
