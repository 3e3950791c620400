"""``online_ddl`` (DM's "online ddl checking item"): with ``online-ddl: true``, no gh-ost or
pt-osc run may be under way on a table the task replicates when the task starts.

The tools record the change they make by their shadow table's ALTER; a task that starts after
that ALTER never sees it, and the tool's final RENAME would swap in a table whose change the
sync cannot make downstream (it pauses: dm_core/sync/online_ddl.py). DM fails the precheck
("your ddl is in pt/ghost online-ddl") when a shadow table of a selected table exists; so does
shardflow. Shadow tables whose real table the task does not select are not its business.
"""

from __future__ import annotations

from dm_core.check.context import REPLICATION, failed, item, passed
from dm_core.check.probe import ServerFacts
from dm_core.db import qt


@item("online_ddl", scope="source", phase=REPLICATION)
def online_ddl(ctx, src: ServerFacts):
    if not getattr(ctx.task, "online_ddl", False):
        return []
    if not src.shadow_tables:
        return [passed("no gh-ost / pt-osc shadow table of a selected table: no online DDL under way")]
    named = ", ".join(f"{qt(s, shadow)} (of {qt(s, real)})" for s, shadow, real in sorted(src.shadow_tables))
    return [failed(f"your ddl is in pt/ghost online-ddl: shadow table(s) {named} exist, so a gh-ost / pt-osc run "
                   "is under way and its change would be lost",
                   "please wait the online-ddl over (or drop shadow tables a finished or aborted run left "
                   "behind), then check the task again")]
