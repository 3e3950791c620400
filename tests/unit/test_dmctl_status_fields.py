"""How `dmctl query-status` shows a source's state row."""

import pytest

from dm_core.cli.dmctl import _fmt_state

BASE = {"source_id": "s1", "stage": "sync", "binlog_file": "mysql-bin.000002", "binlog_pos": 120,
        "low_file": None, "low_pos": None, "high_file": None, "high_pos": None, "applied_rows": 10,
        "lag_seconds": 0.5, "error": None, "error_stmt": None, "error_pos": None}


@pytest.mark.parametrize("stored, shown", [
    (None, None),      # no window has run yet: unknown
    (0.0, 0.0),        # the last window found nothing to apply: idle, not unknown
    (1234.56, 1234.6),
])
def test_rows_per_second(stored, shown):
    assert _fmt_state({**BASE, "rows_per_second": stored})["rows_per_second"] == shown


def test_checkpoint_reads_as_file_and_position():
    assert _fmt_state({**BASE, "rows_per_second": None})["checkpoint"] == "(mysql-bin.000002, 120)"
