"""What a source reports to an optimistic shard DDL lock (DM's ``optimism.Info``).

Optimistic mode has no first-level group: each upstream table reports its own DDLs as
it meets them. ``schema_before`` is the target table's schema as the downstream has it
(``downstream.read_table_schema``); the lock uses it once, when it is created, as the
schema of every member it has not heard from (DM's restriction: all shards have the same
schema when the task starts).
"""

from __future__ import annotations

from dataclasses import dataclass

from dm_core.position import Position
from dm_core.shardddl.common import lock_id_of, pos_from_json, pos_to_json
from dm_core.shardddl.schema import TableSchema


@dataclass(frozen=True)
class Info:
    task: str
    source: str
    target: tuple[str, str]                  # routed (schema, table): the lock's key
    table: tuple[str, str]                   # the upstream table that ran the DDL
    ddls: tuple[str, ...]                    # normalised statements (NormalizedDDL.sql), or one CREATE TABLE
    position: Position                       # end of the DDL event
    tables: tuple[tuple[str, str], ...] = () # every upstream table of this source in the group (default: table)
    schema_before: TableSchema | None = None # the target's schema downstream (used when the lock is created)
    replay: bool = False                     # the DDL lies in the source's safe-mode range (see Lock.report)
    strict: bool = False                     # strict-optimistic-shard-mode: a change to hold pauses instead

    @property
    def lock_id(self) -> str:
        return lock_id_of(self.task, self.target)

    def to_dict(self) -> dict:
        return {"task": self.task, "source": self.source, "target": list(self.target), "table": list(self.table),
                "ddls": list(self.ddls), "position": pos_to_json(self.position),
                "tables": [list(t) for t in self.tables],
                "schema_before": self.schema_before.to_dict() if self.schema_before else None,
                "replay": self.replay, "strict": self.strict}

    @classmethod
    def from_dict(cls, d: dict) -> "Info":
        return cls(d["task"], d["source"], tuple(d["target"]), tuple(d["table"]), tuple(d["ddls"]),
                   pos_from_json(d["position"]), tuple(tuple(t) for t in d.get("tables", ())),
                   TableSchema.from_dict(d["schema_before"]) if d.get("schema_before") else None,
                   bool(d.get("replay", False)), bool(d.get("strict", False)))
