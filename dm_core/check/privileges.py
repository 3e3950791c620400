"""Privilege items, read from SHOW GRANTS of the user the task logs in as.

- ``dump_privilege`` (full phase): SELECT on every allowed table is required (fail);
  RELOAD and LOCK TABLES only allow a locked snapshot, which shardflow's lock-free
  handoff does not need (warn).
- ``replication_privilege`` (incremental phase): REPLICATION SLAVE (read the binlog) and
  REPLICATION CLIENT (SHOW BINARY LOG STATUS, SHOW MASTER STATUS before MySQL 8.2, SHOW BINARY LOGS;
  BINLOG MONITOR on MariaDB >= 10.5). MySQL 8.4 still shows both under these names (its
  REPLICATION_SLAVE_ADMIN is another privilege); MariaDB's REPLICATION REPLICA is an alias.
- ``target_privilege``: SELECT, CREATE, INSERT, UPDATE, DELETE, DROP, ALTER, INDEX on every
  target schema; a warning when one lacks (as DM: the statements to come are not known).

Privileges that reach the user through roles are not resolved: when the user has roles
and something seems to be missing, the item warns instead of failing.
"""

from __future__ import annotations

from dm_core.check.context import DUMP, REPLICATION, failed, item, passed, undetermined, warned
from dm_core.check.probe import ServerFacts
from dm_core.db import qi

TARGET_PRIVILEGES = ("SELECT", "CREATE", "INSERT", "UPDATE", "DELETE", "DROP", "ALTER", "INDEX")
REPLICATION_PRIVILEGES = ("REPLICATION SLAVE", "REPLICATION CLIENT")
_SHOWN = 5  # tables named in a message before "and N more"


def _grant_fix(privs, on: str, facts: ServerFacts) -> str:
    return f"GRANT {', '.join(privs)} ON {on} TO '{facts.user}'@'<client host>'"


def _missing(facts: ServerFacts, message: str, fix: str, **kw):
    """A failure, or a warning when roles may hold what looks missing."""
    if facts.grants.roles:
        return warned(f"{message} (the user also has roles {', '.join(facts.grants.roles)}, "
                      "whose privileges were not checked)", fix, **kw)
    return failed(message, fix, **kw)


def _names(tables: list[str]) -> str:
    more = f" and {len(tables) - _SHOWN} more" if len(tables) > _SHOWN else ""
    return ", ".join(tables[:_SHOWN]) + more


@item("dump_privilege", scope="source", phase=DUMP)
def dump_privilege(ctx, src: ServerFacts):
    if src.grants is None:
        return [undetermined(src, "the user's privileges", "grants")]
    g = src.grants
    out = []
    tables = src.tables or []
    if src.tables is not None and not tables:
        out.append(warned(f"no allowed table is visible to user '{src.user}', so SELECT could not be checked "
                          "(a user sees only the tables it has privileges on)",
                          _grant_fix(["SELECT"], "<schema>.*", src)))
    no_select = [t for t in tables if not g.has("SELECT", t.schema, t.table)]
    if no_select:
        schemas = sorted({t.schema for t in no_select})
        out.append(_missing(src, f"user '{src.user}' has no SELECT on {len(no_select)} allowed "
                                 f"table(s): {_names([t.name for t in no_select])}",
                            "; ".join(_grant_fix(["SELECT"], f"{qi(s)}.*", src) for s in schemas[:_SHOWN])))
    missing = []
    if not g.has("RELOAD"):
        missing.append("RELOAD")
    schemas = sorted({t.schema for t in tables})
    if any(not g.has("LOCK TABLES", s) for s in schemas):
        missing.append("LOCK TABLES")
    if missing:
        out.append(warned(f"user '{src.user}' lacks {' and '.join(missing)}: no locked consistent snapshot is "
                          "possible (shardflow's lock-free snapshot does not need one)",
                          _grant_fix(missing, "*.*", src)))
    return out or [passed(f"SELECT on {len(tables)} allowed table(s), RELOAD, LOCK TABLES")]


@item("replication_privilege", scope="source", phase=REPLICATION)
def replication_privilege(ctx, src: ServerFacts):
    if src.grants is None:
        return [undetermined(src, "the user's privileges", "grants")]
    missing = src.grants.missing(REPLICATION_PRIVILEGES)
    if missing:
        return [_missing(src, f"user '{src.user}' lacks {', '.join(missing)}: the binlog cannot be read",
                         _grant_fix(missing, "*.*", src))]
    return [passed(", ".join(REPLICATION_PRIVILEGES))]


@item("target_privilege", scope="target")
def target_privilege(ctx, tgt: ServerFacts):
    if tgt.grants is None:
        return [undetermined(tgt, "the target user's privileges", "grants")]
    schemas = ctx.target_schemas()
    if not schemas:
        return [passed("no target schema to check (no allowed upstream table was found)")]
    out = []
    for s in schemas:
        missing = tgt.grants.missing(TARGET_PRIVILEGES, s)
        if missing:   # a warning, as DM's: which tables the binlog will write cannot be known in advance
            out.append(warned(f"lack of {', '.join(missing)} privilege on target schema {qi(s)}: user "
                              f"'{tgt.user}' cannot write every statement there",
                              _grant_fix(TARGET_PRIVILEGES, f"{qi(s)}.*", tgt)))
    return out or [passed(f"{', '.join(TARGET_PRIVILEGES)} on {', '.join(map(qi, schemas))}")]
