"""Target tables the user made before the full phase, recorded downstream in the meta schema.

Why it matters: a chunk whose upstream table differs from its target is written leniently when
the difference comes from a DDL that ran upstream after the full phase created the target
(extract.ChunkShape ``drifted``; phase.py says why the sync's replay repairs what that
truncates). A target the user made differs by design, and no replayed DDL repairs a value cut
to fit it: its chunks stay strict, so a value it cannot hold is refused (load_data.ValueChanged
names the row), never written changed.

Recorded once, by the first prepare of a task's full phase, before it creates any target: a
later prepare finds the targets it created itself and cannot tell them from the user's. "First"
is what is recorded here, not which sources have a low watermark: a first prepare that failed
after recording some (a source it could not list) is rerun with none of them fresh, and must
still record. ``record`` writes a row with an empty name for the task besides the targets
(``RECORDED``), so an empty record is told from none.
"""

from __future__ import annotations

from dm_core.db import ensure_table, qt

TABLE = "shardflow_user_target"
RECORDED = ("", "")   # the row saying the task's record was taken, whatever it holds


def _ensure(conn, meta_schema: str) -> None:
    ensure_table(conn, meta_schema, TABLE,
                 "(task varchar(255) NOT NULL, target_schema varchar(64) NOT NULL, target_table varchar(64) NOT NULL, "
                 "PRIMARY KEY (task, target_schema, target_table)) DEFAULT CHARSET=utf8mb4")


def record(conn, meta_schema: str, task: str, targets: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Record which of ``targets`` (schema, table) exist downstream now, in place of what was
    recorded for ``task``; returns them."""
    _ensure(conn, meta_schema)
    wanted = {(s.lower(), t.lower()) for s, t in targets}
    existing = []
    with conn.cursor() as cur:
        schemas = sorted({s for s, _ in wanted})
        for i in range(0, len(schemas), 200):
            part = schemas[i:i + 200]
            cur.execute("SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema IN ("
                        + ", ".join(["%s"] * len(part)) + ")", part)
            existing += [(s, t) for s, t in ((str(a).lower(), str(b).lower()) for a, b in cur.fetchall())
                         if (s, t) in wanted]
        cur.execute(f"DELETE FROM {qt(meta_schema, TABLE)} WHERE task = %s", (task,))
        cur.executemany(f"INSERT INTO {qt(meta_schema, TABLE)} VALUES (%s, %s, %s)",
                        [(task, s, t) for s, t in [RECORDED, *sorted(existing)]])
    return sorted(existing)


def recorded(conn, meta_schema: str, task: str) -> bool:
    """Whether ``task``'s record was taken (any row: ``RECORDED``, or a target an older record
    holds)."""
    _ensure(conn, meta_schema)
    with conn.cursor() as cur:
        cur.execute(f"SELECT 1 FROM {qt(meta_schema, TABLE)} WHERE task = %s LIMIT 1", (task,))
        return cur.fetchone() is not None


def of_task(conn, meta_schema: str, task: str) -> frozenset[tuple[str, str]]:
    """(schema, table), lower case, of the targets the user made for ``task``."""
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                    (meta_schema, TABLE))
        if not cur.fetchone()[0]:
            return frozenset()
        cur.execute(f"SELECT target_schema, target_table FROM {qt(meta_schema, TABLE)} WHERE task = %s", (task,))
        return frozenset((str(s).lower(), str(t).lower()) for s, t in cur.fetchall()) - {RECORDED}


def forget(conn, meta_schema: str, task: str) -> None:
    _ensure(conn, meta_schema)
    with conn.cursor() as cur:
        cur.execute(f"DELETE FROM {qt(meta_schema, TABLE)} WHERE task = %s", (task,))
