"""The precheck's ``target_table_creation`` item (dm_core/check/table_creation.py) on the facts
a downstream reports. TiDB cannot run here: its answers (version text, variables) are written
out as TiDB gives them; MySQL's and MariaDB's are the local stack's."""

from types import SimpleNamespace

import pytest

from dm_core.check import IGNORABLE
from dm_core.check.probe import ServerFacts, TableInfo
from dm_core.check.result import PASS, WARN
from dm_core.check.table_creation import MANY_TABLES, target_table_creation

TIDB_85, TIDB_76, TIDB_71 = "8.0.11-TiDB-v8.5.0", "8.0.11-TiDB-v7.6.0", "8.0.11-TiDB-v7.1.5"


def _ctx(targets: int, existing: int, variables: dict):
    tables = {("db", f"t{i}"): [] for i in range(targets)}
    down = ServerFacts("target", "h:4000", variables=variables,
                       tables=[TableInfo("target", "DB", f"T{i}", None) for i in range(existing)])
    return SimpleNamespace(targets=tables, target=down), down


@pytest.mark.parametrize("version, variables, targets, existing, want, says", [
    ("10.11.6-MariaDB", {}, 10_000, 0, None, None),                     # not TiDB: nothing to say
    ("8.0.36", {}, 10_000, 0, None, None),
    (TIDB_85, {"tidb_enable_fast_create_table": "OFF"}, MANY_TABLES - 1, 0, None, None),   # few tables
    (TIDB_85, {"tidb_enable_fast_create_table": "OFF"}, MANY_TABLES + 500, 600, None, None),  # most exist already
    (TIDB_85, {"tidb_enable_fast_create_table": "ON"}, 10_000, 0, PASS, "accelerated table creation"),
    (TIDB_76, {"tidb_ddl_version": "2"}, 10_000, 0, PASS, "accelerated table creation"),
    (TIDB_85, {"tidb_enable_fast_create_table": "OFF"}, 10_000, 0, WARN,
     "SET GLOBAL tidb_enable_fast_create_table = ON"),
    (TIDB_76, {"tidb_ddl_version": "1"}, 10_000, 0, WARN, "SET GLOBAL tidb_ddl_version = 2"),
    (TIDB_71, {}, 10_000, 0, WARN, "upgrade TiDB to v7.6"),
])
def test_a_tidb_that_will_create_many_tables_one_ddl_job_at_a_time_is_named(version, variables, targets, existing,
                                                                           want, says):
    ctx, down = _ctx(targets, existing, {"version": version, **variables})
    got = target_table_creation(ctx, down)
    if want is None:
        assert got == []
        return
    assert [r.state for r in got] == [want]
    assert f"{targets - existing} target tables" in got[0].message
    assert says in got[0].message + got[0].fix


def test_the_item_can_be_ignored_by_name():
    assert "target_table_creation" in IGNORABLE
