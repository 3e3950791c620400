"""Running a DDL again over a downstream that may already have it.

Where that happens -- only inside the safe-mode range, and only there is this module used:

1. the full phase's catch-up: target tables are created from the upstream's definitions
   as they are when the full phase prepares, after its low watermark; sync then replays
   the binlog from the low watermark, so a DDL run upstream in between is already in the
   target (dm_core/full/phase.py gives the whole argument for why this converges);
2. a crash after a DDL ran downstream and before the checkpoint moved past it.

Rule (what DM's schema tracker gives DM): the statement runs first on an empty copy of the
downstream table (``dm_core.ddl.dry_run``): if the copy ends as the table is, the statement is
in effect and nothing runs; if it changes the copy, the table is before it and it runs as it
is (an unnamed ADD INDEX whose index the table has excepted: it would add a second one). If
the copy refuses it with "already there", part of it is in effect (a user added an index by
hand): its changes are compared with the downstream table (``dm_core.shardddl.downstream``: a
column added / dropped / renamed / of the same definition, an index added / dropped), those
in effect are left out and only the rest run. The statement as it is runs when nothing can
be told, and a server error that says the change is already there (duplicate column or key
name, can't drop a missing column or key, table exists, partition exists; a table that a
later DDL renames or drops is gone already) counts as applied.

Outside the safe-mode range the same holds for the errors DM ignores on every DDL it runs
(``IGNORABLE``: its ``IsIgnorableMySQLDDLError``): database / table / column / index
exists, database / table / column / key does not, duplicate partition, dropping a missing
partition, a second primary key. They are logged as a warning and the source goes on, as in
DM: e.g. two tables merged into one target without shard coordination both ADD the same
column (DM's shardddl1 case, 001), or a RENAME TABLE of a shard onto the name its target
already has. Other errors pause the source.

    >>> sorted(ALREADY_APPLIED)[:4]
    [1007, 1008, 1050, 1051]
"""

from __future__ import annotations

import logging

from dm_core.ddl import dry_run

log = logging.getLogger("shardflow.sync.ddl")

# MySQL/MariaDB errors meaning "the downstream is already in the state this DDL produces".
ALREADY_APPLIED = {
    1007,  # database exists
    1008,  # database does not exist (DROP DATABASE)
    1050,  # table already exists
    1051,  # unknown table (DROP TABLE)
    1060,  # duplicate column name
    1061,  # duplicate key name
    1068,  # multiple primary key defined
    1091,  # can't DROP column/key; check that it exists
    1146,  # table doesn't exist: renamed or dropped later in the binlog (created after it, the target
           # never had this name; its rows are skipped in the same range, see RowPath.jobs in sync/row_path.py)
    1505,  # partition management on a not partitioned table (REMOVE PARTITIONING twice)
    1507,  # error in list of partitions to DROP (already dropped)
    1517,  # duplicate partition name
    1826,  # duplicate foreign key constraint name
}

# DM's IsIgnorableMySQLDDLError (tiflow pkg/errorutil/util.go), ignored on every DDL DM executes
IGNORABLE = {
    1007,  # database exists
    1008,  # database does not exist (DROP DATABASE)
    1050,  # table already exists
    1051,  # unknown table (DROP TABLE)
    1054,  # unknown column
    1060,  # duplicate column name
    1061,  # duplicate key name
    1068,  # multiple primary key defined
    1091,  # can't DROP column/key; check that it exists
    1176,  # key does not exist
    1507,  # error in list of partitions to DROP
    1517,  # duplicate partition name
}

_STRUCTURAL = ("alter table", "create index", "drop index")


def pending_parts(conn, sql: str, kind: str) -> list[str]:
    """The statements to run for routed ``sql`` now: ``[]`` when every change is in effect
    downstream, ``[sql]`` when none is (or it cannot be told), else one statement per
    change not yet in effect."""
    from dm_core.shardddl.ddl_norm import normalize, statement_changes
    from dm_core.shardddl.errors import ShardDDLUnsupported
    from dm_core.shardddl.downstream import change_applied, read_table_schema

    if kind == "rename table":
        return [] if _renamed_already(conn, sql) else [sql]
    if kind not in _STRUCTURAL:
        return [sql]
    try:
        n = normalize(sql, None)
        changes = statement_changes(n.sql)
    except ShardDDLUnsupported:
        return [sql]
    cur = read_table_schema(conn, *n.target)
    if cur is None:
        return [sql]
    got = [change_applied(ch, cur) for ch in changes]
    if not changes and "AUTO_INCREMENT" in sql.upper():
        return [sql]   # a counter no definition compared here shows; running it again is harmless
    dropped = {ch.name.lower() for ch in changes if ch.op == "drop_column"}
    if any(ch.op == "add_column" and ch.column.name.lower() in dropped for ch in changes):
        # a column dropped and added again: its values reset, which no definition shows; running
        # it again is right either way, since the replay writes every row change after it again
        return [sql]
    verdict, _ = dry_run.outcome(conn, sql, *n.target)
    if verdict == dry_run.SAME:
        return []
    if verdict == dry_run.CHANGES:
        if changes and all(g is True for g in got) and all(ch.op == "add_index" and ch.index.implicit
                                                           for ch in changes):
            return []   # an unnamed index the table has: run again it would add a second copy
        return [sql]
    # refused on the copy ("already there": some of it is in effect), or not tried
    if not changes:
        return [sql]
    if all(g is True for g in got):
        return []
    if not any(g is True for g in got):
        return [sql]
    out: list[str] = []
    for ch, g in zip(changes, got):
        if g is not True and ch.sql not in out:
            out.append(ch.sql)
    return out


def _renamed_already(conn, sql: str) -> bool:
    from dm_core.ddl.text import table_spans

    spans = table_spans(sql, None)
    pairs = list(zip(spans[0::2], spans[1::2]))
    if not pairs:
        return False
    with conn.cursor() as cur:
        for old, new in pairs:
            cur.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                        (old.schema, old.table))
            old_there = cur.fetchone()[0]
            cur.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                        (new.schema, new.table))
            if old_there or not cur.fetchone()[0]:
                return False
    return True


def error_code(e: BaseException) -> int | None:
    args = getattr(e, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def run(conn, sql: str, kind: str, *, replay: bool) -> list[str]:
    """Run routed ``sql`` downstream; with ``replay`` only what is not in effect yet (see
    the module docstring). Returns what was done, one line per statement, for the log.
    Server errors propagate, except "already applied" ones with ``replay`` and DM's
    ``IGNORABLE`` ones always."""
    todo = pending_parts(conn, sql, kind) if replay else [sql]
    if not todo:
        log.info("DDL already in effect downstream, not run again: %s", sql)
        return [f"already in effect downstream: {sql}"]
    done = []
    for stmt in todo:
        try:
            with conn.cursor() as cur:
                cur.execute(stmt)
            done.append(stmt)
        except Exception as e:
            code = error_code(e)
            if replay and code in ALREADY_APPLIED:
                log.info("DDL replay: the downstream already has the effect of %s (%s)", stmt, e)
                done.append(f"already in effect downstream: {stmt}")
            elif code in IGNORABLE:
                log.warning("downstream error ignored, as DM does, running %s: %s", stmt, e)
                done.append(f"ignored downstream error {code} ({e.args[1] if len(e.args) > 1 else e}): {stmt}")
            else:
                raise
    return done
