"""state_fit.prune with the memo a ShardSync keeps per rules object: the same members dropped as
without it, window after window, and a memo of other rules never consulted."""

from dm_core.config.task import parse_task
from dm_core.shardddl import state_fit
from dm_core.shardddl.source_group import SourceGroup, SourceShardGroups

TASK = """
name: prune
task-mode: incremental
shard-mode: pessimistic
target-database: {host: 127.0.0.1, port: 4000, user: root}
mysql-instances:
  - source-id: s1
    block-allow-list: ba
    route-rules: [rt]
block-allow-list:
  ba: {do-dbs: [shard_1], ignore-tables: [{db-name: shard_1, tbl-name: t_3}]}
routes:
  rt: {schema-pattern: shard_1, table-pattern: "t_*", target-schema: merged, target-table: t}
"""

MEMBERS = [("shard_1", "t_1"), ("shard_1", "t_2"), ("shard_1", "t_3"), ("shard_1", "x_1"), ("other", "t_1")]
KEPT = [("shard_1", "t_1"), ("shard_1", "t_2")]   # t_3 ignored, x_1 routed elsewhere, other not allowed


def _groups():
    return SourceShardGroups([SourceGroup(("merged", "t"), MEMBERS)])


def test_prune_with_a_memo_drops_what_the_rules_no_longer_route_every_time():
    rules = parse_task(TASK, "prune.yaml").rules_for("s1")
    memo: dict = {}
    for _ in range(3):   # three windows: the memo filled by the first answers the others
        g = _groups()
        dropped = state_fit.prune(g, rules, memo)
        assert sorted(dropped) == sorted(set(MEMBERS) - set(KEPT))
        assert sorted(g.groups[("merged", "t")].members) == KEPT
    assert len(memo) == len(MEMBERS)
    assert sorted(state_fit.prune(_groups(), rules)) == sorted(set(MEMBERS) - set(KEPT))


def test_a_shard_sync_forgets_the_memo_when_its_rules_change():
    from dm_core.sync.shard_sync import ShardSync

    class NoNewMembers:   # the task's membership (the state store's) adds nothing here
        def tables_of(self, source_id):
            return {}

    first = parse_task(TASK, "prune.yaml")
    sync = ShardSync(first, "s1", store=None)
    sync._membership = NoNewMembers()
    sync._selected = (first.rules_for("s1"), {(("shard_1", "t_3"), ("merged", "t")): True})  # a stale answer
    second = parse_task(TASK, "prune.yaml")   # the task file read again: new rules
    sync.task = second
    sync.load({"shard_groups": _groups().to_json()})
    assert sorted(sync.groups.groups[("merged", "t")].members) == KEPT
    assert sync._selected[0] is second.rules_for("s1")
