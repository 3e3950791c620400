"""Items across sources: the sharding groups (upstream tables routed to one target table).

- ``schema_of_shard_tables``: members of a group must have the same columns (names and
  types, in order). Pessimistic shard DDL assumes it (one DDL is applied once for all
  shards): fail. Optimistic mode (or no shard mode) joins schemas as it goes: warn.
- ``auto_increment_ID``: a member whose primary/unique key holds an auto-increment column
  makes ids of different shards collide in the merged table, unless a column mapping
  rewrites that column (``partition id``) or the route adds extract columns (which join
  the target's primary key). A warning, not a failure: shards often keep disjoint id
  ranges (auto_increment_offset/increment per shard), which only the user knows; the
  message says what collides and how to fix it if they do overlap.
"""

from __future__ import annotations

from dm_core.check.context import failed, item, passed, warned
from dm_core.check.probe import TableInfo
from dm_core.db import qt


def _difference(a: TableInfo, b: TableInfo) -> str | None:
    """The first difference of two tables' column lists, in words; None if identical."""
    ca = {c.name.lower(): c for c in a.columns}
    cb = {c.name.lower(): c for c in b.columns}
    for c in a.columns:
        if c.name.lower() not in cb:
            return f"column `{c.name}` exists in {a.qualified} but not in {b.qualified}"
    for c in b.columns:
        if c.name.lower() not in ca:
            return f"column `{c.name}` exists in {b.qualified} but not in {a.qualified}"
    for c in a.columns:
        d = cb[c.name.lower()]
        if c.norm_type != d.norm_type:
            return f"column `{c.name}` is {c.type} in {a.qualified} but {d.type} in {b.qualified}"
    for i, (c, d) in enumerate(zip(a.columns, b.columns)):
        if c.name.lower() != d.name.lower():
            return (f"column #{i + 1} is `{c.name}` in {a.qualified} but `{d.name}` in {b.qualified} "
                    "(same columns in another order)")
    return None


@item("schema_of_shard_tables", scope="task")
def schema_of_shard_tables(ctx):
    groups = ctx.groups
    if not groups:
        return [passed("no sharding group (no target table is fed by more than one upstream table)")]
    pessimistic = ctx.task.shard_mode == "pessimistic"
    out = []
    for (ts, tt), members in sorted(groups.items()):
        target = qt(*members[0].target)
        ref = members[0]
        for m in members[1:]:
            diff = _difference(ref, m)
            if diff is None:
                continue
            msg = f"shard tables {ref.qualified} and {m.qualified} of {target} differ: {diff}"
            if pessimistic:
                out.append(failed(msg, "give every shard table the same columns before starting (pessimistic "
                                       "shard DDL applies one DDL for all shards), or use shard-mode: optimistic",
                                  table=m.qualified))
            else:
                out.append(warned(msg, "make sure the columns are compatible: the merged table gets the "
                                       "union of the shards' columns", table=m.qualified))
    n = sum(len(v) for v in groups.values())
    return out or [passed(f"{len(groups)} sharding group(s), {n} tables: identical columns")]


def _auto_increment_keys(t: TableInfo) -> list[str]:
    """Auto-increment columns that are part of the primary key or of a unique key."""
    keyed = {c.lower() for _, cols in t.unique_keys() for c in cols}
    return [c.name for c in t.columns if c.auto_increment and c.name.lower() in keyed]


@item("auto_increment_ID", scope="task")
def auto_increment_ID(ctx):  # noqa: N802 - DM's item name
    out = []
    for (ts, tt), members in sorted(ctx.groups.items()):
        target = qt(*members[0].target)
        for m in members:
            if m.extract_columns:
                continue  # extract columns join the target's primary key: shards stay apart
            bad = [c for c in _auto_increment_keys(m) if c.lower() not in m.mapped_columns]
            if bad:
                cols = ", ".join(f"`{c}`" for c in bad)
                out.append(warned(
                    f"{m.qualified} has auto-increment key column {cols} and is merged with "
                    f"{len(members) - 1} other table(s) into {target}: ids of different shards would collide",
                    "add a partition id column mapping or an extract-table column in the PK",
                    table=m.qualified))
    return out or [passed("no merged table keyed by an unmapped auto-increment column")]
