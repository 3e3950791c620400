"""query-status's per-source unresolved sharding groups (DM's ``unresolvedGroups``), from a
source's first-level groups and the task's active pessimistic locks."""

from dm_core.position import Position
from dm_core.shardddl.coordinator import NO_DDL_MET, unresolved_groups
from dm_core.shardddl.source_group import SourceShardGroups

DDL = ("ALTER TABLE `db`.`t` ADD COLUMN `d` INT",)


def _groups(*met):
    g = SourceShardGroups.build({("db", "t"): [("s", "t1"), ("s", "t2")]})
    for i, t in enumerate(met):
        g.on_ddl(("s", t), DDL, Position("mysql-bin.000001", 100 + i))
    return g.to_json()


def test_tables_that_met_the_ddl_and_those_still_to():
    assert unresolved_groups("a", _groups("t1"), []) == [
        {"target": "`db`.`t`", "ddls": list(DDL), "synced": ["`s`.`t1`"], "unsynced": ["`s`.`t2`"]}]


def test_an_idle_group_shows_nothing():
    assert unresolved_groups("a", _groups(), []) == []
    assert unresolved_groups("a", None, []) == []


def test_a_lock_waiting_for_a_source_that_met_nothing_says_so():
    lock = {"mode": "pessimistic", "target": ["db", "t"], "ddls": list(DDL), "unsynced": ["b"]}
    assert unresolved_groups("b", _groups(), [lock]) == [
        {"target": "`db`.`t`", "ddls": list(DDL), "synced": [], "unsynced": [NO_DDL_MET]}]
    assert unresolved_groups("a", _groups(), [lock]) == []       # a lock that does not wait for it
    assert len(unresolved_groups("b", _groups("t1"), [lock])) == 1  # its own group says more: shown once
