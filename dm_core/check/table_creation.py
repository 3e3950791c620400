"""``target_table_creation``: how a TiDB downstream will create the tables the full phase makes.

Why: the full phase's prepare step creates every target table the user did not make (on 4
connections, dm_core/full/target_schema.py). On MySQL or MariaDB each CREATE TABLE is a
file or two. TiDB runs each one as a DDL job, and its DDL owner runs the jobs one after
another, unless accelerated table creation is on: then the TiDB node that receives a CREATE
TABLE runs it itself and merges those arriving together into one batch (TiDB 7.6 as
``tidb_ddl_version = 2``; 8.0+ as ``tidb_enable_fast_create_table``, ON by default in clusters
created at 8.5+). A fleet of thousands of tables is where the difference shows.

TiDB-only: on any other downstream the item reports nothing. TiDB cannot run on the machines
shardflow is tested on, so the item is tested on the facts a TiDB reports (its version text
and variables; tests/unit/test_check_table_creation.py), not on a TiDB.
"""

from __future__ import annotations

import re

from dm_core.check.context import DUMP, item, passed, warned
from dm_core.check.probe import ServerFacts

# target tables to create from which a TiDB's way of creating them is worth a word
MANY_TABLES = 1000

_TIDB_VERSION = re.compile(r"TiDB-v(\d+)\.(\d+)\.(\d+)", re.I)
_ON = {"ON", "1", "TRUE"}


def tidb_version(version: str | None) -> tuple[int, ...] | None:
    """TiDB's own version in its ``version()`` text (the first part is the MySQL it speaks).

    >>> tidb_version("8.0.11-TiDB-v8.5.0"), tidb_version("10.11.6-MariaDB")
    ((8, 5, 0), None)
    """
    m = _TIDB_VERSION.search(version or "")
    return tuple(int(x) for x in m.groups()) if m else None


def to_create(ctx) -> int:
    """Target tables the full phase will create: every target no table downstream has yet."""
    have = {(t.schema.lower(), t.table.lower()) for t in ctx.target.tables or ()}
    return sum(1 for key in ctx.targets if key not in have)


@item("target_table_creation", scope="target", phase=DUMP)
def target_table_creation(ctx, down: ServerFacts):
    ver = tidb_version(down.var("version"))
    if ver is None:
        return []   # MySQL, MariaDB: a CREATE TABLE is cheap whatever the count
    count = to_create(ctx)
    if count < MANY_TABLES:
        return []
    shown = "TiDB v" + ".".join(map(str, ver))
    fast, ddl_version = down.var("tidb_enable_fast_create_table"), down.var("tidb_ddl_version")
    if (fast or "").upper() in _ON or ddl_version == "2":
        return [passed(f"{shown} creates the {count} target tables with accelerated table creation")]
    caveat = ("it does not apply to tables with foreign keys; a TiCDC before v8.3 that replicates this "
              "TiDB does not replicate tables created so")
    if fast is not None:
        return [warned(f"{shown} will create {count} target tables one DDL job after another on its DDL owner: "
                       "tidb_enable_fast_create_table is OFF",
                       f"SET GLOBAL tidb_enable_fast_create_table = ON before the full phase ({caveat})")]
    if ddl_version is not None:
        return [warned(f"{shown} will create {count} target tables one DDL job after another on its DDL owner: "
                       f"tidb_ddl_version is {ddl_version}",
                       f"SET GLOBAL tidb_ddl_version = 2 before the full phase ({caveat})")]
    return [warned(f"{shown} will create {count} target tables one DDL job after another on its DDL owner "
                   "(accelerated table creation came with TiDB v7.6)",
                   "expect the full phase's prepare step to take a while (a rerun creates only the tables "
                   "still missing), or upgrade TiDB to v7.6 or later and turn accelerated table creation on")]
