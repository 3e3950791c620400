"""start-task's refusals of a changed task file (dm_core/state/progress_fit.py), table-driven:
what the old and new file say, the sources' recorded progress, and what must be named."""

import pytest
import yaml

from dm_core.state.progress_fit import refusals

BASE = {"name": "t", "task-mode": "all", "target-database": {"host": "db1", "port": 4000},
        "mysql-instances": [{"source-id": "s1", "route-rules": ["r"], "column-mapping-rules": ["c"]}],
        "routes": {"r": {"schema-pattern": "a*", "target-schema": "b"}},
        "column-mappings": {"c": {"schema-pattern": "a*", "expression": "partition id", "source-column": "id",
                                  "target-column": "id", "arguments": ["1"]}}}
LOADING = [{"source_id": "s1", "low_file": "mysql-bin.000001", "low_pos": 4, "binlog_file": None}]
SYNCED = [{"source_id": "s1", "low_file": "mysql-bin.000001", "high_file": "mysql-bin.000001",
           "binlog_file": "mysql-bin.000002"}]
FULL_RAN = [{"source_id": "s1", "low_file": "snapshot", "low_pos": 1795866190, "binlog_file": None}]


def edit(**changes):
    """BASE with top-level keys replaced."""
    return yaml.safe_dump({**BASE, **changes})


CASES = [  # (id, new file, states, resuming, words expected; [] = not refused)
    ("same file", edit(), LOADING, "full", []),
    ("fresh start ignores everything", edit(**{"target-database": {"host": "x"}}), [], "fresh", []),
    ("route changed mid-load", edit(routes={"r": {"schema-pattern": "a*", "target-schema": "z"}}), LOADING, "full",
     ["routes changed while its full phase is part loaded"]),
    ("column mapping changed mid-load", edit(**{"column-mappings": {}}), LOADING, "full", ["column mappings"]),
    ("where added mid-load", edit(**{"mysql-instances": [{**BASE["mysql-instances"][0], "mydumper": {"where": "id>1"}}]}),
     LOADING, "full", ["mydumpers.where"]),
    ("route changed after the load: the sync's business", edit(routes={"r": {"schema-pattern": "a*",
                                                                             "target-schema": "z"}}),
     SYNCED, "incremental", []),
    ("downstream moved", edit(**{"target-database": {"host": "db2", "port": 4000}}), SYNCED, "incremental",
     ["target-database moved from db1:4000 to db2:4000"]),
    ("downstream's user changed only", edit(**{"target-database": {"host": "DB1", "port": 4000, "user": "u2"}}),
     SYNCED, "incremental", []),
    ("full then all", edit(), FULL_RAN, "full", ["ran task-mode full"]),
    ("full then full", edit(**{"task-mode": "full"}), FULL_RAN, "full", []),
    ("a route rule added mid-load", edit(**{"mysql-instances": [{**BASE["mysql-instances"][0],
                                                                     "route-rules": ["r", "r2"]}],
                                              "routes": {**BASE["routes"], "r2": {"schema-pattern": "c*",
                                                                                  "target-schema": "d"}}}),
     LOADING, "full", ["routes changed"]),
    ("case-sensitive: false spelled out", edit(**{"case-sensitive": False}), LOADING, "full", []),
    ("a source whose load finished", edit(routes={"r": {"schema-pattern": "a*", "target-schema": "z"}}),
     [{**LOADING[0], "high_file": "mysql-bin.000001"}], "full", []),
    ("meta-schema changed", edit(**{"meta-schema": "other_meta"}), SYNCED, "incremental", ["meta-schema changed"]),
]


@pytest.mark.parametrize("new, states, resuming, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refusals(new, states, resuming, words):
    got = "\n".join(refusals(yaml.safe_dump(BASE), new, states, resuming))
    if not words:
        assert got == ""
    for w in words:
        assert w in got, got


def test_route_rules_in_another_order_are_the_same_file():
    two = {**BASE, "routes": {**BASE["routes"], "r2": {"schema-pattern": "c*", "target-schema": "d"}}}
    old = {**two, "mysql-instances": [{**BASE["mysql-instances"][0], "route-rules": ["r", "r2"]}]}
    new = {**two, "mysql-instances": [{**BASE["mysql-instances"][0], "route-rules": ["r2", "r"]}]}
    assert refusals(yaml.safe_dump(old), yaml.safe_dump(new), LOADING, "full") == []
