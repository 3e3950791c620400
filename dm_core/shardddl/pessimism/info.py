"""What a source reports to a pessimistic shard DDL lock (DM's ``pessimism.Info``).

A source reports once its whole first-level sharding group (``source_group``) has reached
the DDL: ``tables`` are all of its upstream tables in the group, ``ddls`` the normalised,
routed statements of that DDL (``ddl_norm``), ``position`` the end of the DDL event that
completed the group (the lock uses it to recognise a DDL met again after a restart).
"""

from __future__ import annotations

from dataclasses import dataclass

from dm_core.position import Position
from dm_core.shardddl.common import lock_id_of, pos_from_json, pos_to_json


@dataclass(frozen=True)
class Info:
    task: str
    source: str
    target: tuple[str, str]                  # routed (schema, table): the lock's key
    tables: tuple[tuple[str, str], ...]      # every upstream table of this source in the group
    ddls: tuple[str, ...]                    # normalised statements (NormalizedDDL.sql)
    position: Position                       # end of the DDL event that completed the source's group

    @property
    def lock_id(self) -> str:
        return lock_id_of(self.task, self.target)

    def to_dict(self) -> dict:
        return {"task": self.task, "source": self.source, "target": list(self.target),
                "tables": [list(t) for t in self.tables], "ddls": list(self.ddls),
                "position": pos_to_json(self.position)}

    @classmethod
    def from_dict(cls, d: dict) -> "Info":
        return cls(d["task"], d["source"], tuple(d["target"]), tuple(tuple(t) for t in d["tables"]),
                   tuple(d["ddls"]), pos_from_json(d["position"]))
