"""Who belongs to which sharding group: every upstream table the task replicates, by
the target table its routes send it to (DM: "all tables routed to one target table").

Read from the upstreams' information_schema, so it reflects the tables that exist now;
tables created later join their group when their CREATE TABLE is replicated
(``source_group.add_member``). A target is *sharded* when the task routes two or more
upstream tables into it (from one source or several) and the task has a ``shard-mode``;
only DDLs of sharded targets are coordinated, the others run downstream directly.
"""

from __future__ import annotations

from dataclasses import dataclass

from dm_core.db import as_str, connect

Table = tuple[str, str]

_SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")


def source_tables(conn, rules) -> dict[Table, list[Table]]:
    """``{target: [upstream tables of this source routed there]}`` for one source."""
    out: dict[Table, list[Table]] = {}
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                    "WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN (%s, %s, %s, %s) "
                    "ORDER BY TABLE_SCHEMA, TABLE_NAME", _SYSTEM_SCHEMAS)
        for s, t in cur.fetchall():
            s, t = as_str(s), as_str(t)
            if rules.block_allow.allow_table(s, t):
                out.setdefault(tuple(rules.router.route(s, t)), []).append((s, t))
    return out


@dataclass
class Membership:
    """``by_target[target][source_id]`` = that source's upstream tables routed to ``target``."""

    by_target: dict[Table, dict[str, list[Table]]]
    shard_mode: str | None

    def sharded(self, target: Table) -> bool:
        if not self.shard_mode:
            return False
        return sum(len(v) for v in self.by_target.get(tuple(target), {}).values()) >= 2

    def sources(self, target: Table) -> list[str]:
        return sorted(self.by_target.get(tuple(target), {}))

    def sources_by_target(self) -> dict[Table, list[str]]:
        return {t: sorted(v) for t, v in self.by_target.items()}

    def tables_of(self, source_id: str) -> dict[Table, list[Table]]:
        return {t: list(v[source_id]) for t, v in self.by_target.items() if source_id in v}


def task_membership(task, store) -> Membership:
    """Ask every source of ``task`` which of its tables the task replicates, and where to."""
    from dm_core.sources import source_endpoint

    by_target: dict[Table, dict[str, list[Table]]] = {}
    for inst in task.mysql_instances:
        conn = connect(source_endpoint(store, inst.source_id))
        try:
            for target, tables in source_tables(conn, task.rules_for(inst.source_id)).items():
                by_target.setdefault(target, {})[inst.source_id] = tables
        finally:
            conn.close()
    return Membership(by_target, task.shard_mode)
