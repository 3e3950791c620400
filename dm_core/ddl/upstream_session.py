"""A replayed DDL runs in the upstream session it ran in: its clock, its time zone and its
sql_mode, as its QUERY event records them.

Why: a DDL's text means what it meant in that session.
- ``ALTER TABLE t ADD c DATETIME DEFAULT CURRENT_TIMESTAMP`` fills every existing row with
  "now" in the session's zone. Run downstream as it stands it would write the replay's time, in
  the downstream session's zone (shardflow's sessions use '+00:00'), so every old row would
  differ from upstream. DM sets the same two things around each DDL (``SET TIMESTAMP`` to the
  event's time, ``SET SESSION TIME_ZONE`` to the zone the event records, else the upstream's).
- the sql_mode decides how the text reads: ``'a\\b'`` holds two backslashes under
  NO_BACKSLASH_ESCAPES, ``REAL`` is FLOAT under REAL_AS_FLOAT, ``a || b`` concatenates under
  PIPES_AS_CONCAT, ``"x"`` names a column under ANSI_QUOTES. A generated column's expression
  or a default replayed in another mode differs downstream, silently (DM's sql_mode case).
  The event records the mode as the upstream's own bitmap; the upstream turns it into names
  (``mode_names``), which the downstream understands whatever its flavor numbers them.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

log = logging.getLogger("shardflow.sync")

# Modes that change how a statement's text is read rather than what it means: a statement
# re-rendered in standard MySQL syntax (the shard DDL normaliser's, by sqlglot) must run without them.
LEXICAL_MODES = frozenset({"ANSI_QUOTES", "NO_BACKSLASH_ESCAPES", "ANSI", "ORACLE", "MSSQL", "DB2", "POSTGRESQL",
                           "MAXDB"})


def upstream_time_zone(conn) -> str:
    """The upstream's global zone as an offset the downstream understands (``SYSTEM`` and named
    zones become ``+HH:MM`` at this moment: the downstream may have no zone tables)."""
    with conn.cursor() as cur:
        cur.execute("SELECT TIMESTAMPDIFF(MINUTE, UTC_TIMESTAMP(), CONVERT_TZ(UTC_TIMESTAMP(), '+00:00', "
                    "@@global.time_zone))")
        (minutes,) = cur.fetchone()
    if minutes is None:          # a named zone the upstream itself cannot convert: its clock is UTC
        return "+00:00"
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(int(minutes)) // 60:02d}:{abs(int(minutes)) % 60:02d}"


def mode_names(conn, bitmap: int) -> str:
    """The upstream's names for an sql_mode bitmap from one of its binlog events (its own
    numbering: MariaDB and MySQL differ above bit 30)."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@SESSION.sql_mode")
        (before,) = cur.fetchone()
        cur.execute("SET SESSION sql_mode = %s", (int(bitmap),))
        cur.execute("SELECT @@SESSION.sql_mode")
        (names,) = cur.fetchone()
        cur.execute("SET SESSION sql_mode = %s", (before,))
    return names.decode() if isinstance(names, bytes) else names


def without_lexical(names: str | None) -> str | None:
    """``names`` less the modes that change how text reads (for re-rendered statements).

    >>> without_lexical("REAL_AS_FLOAT,NO_BACKSLASH_ESCAPES,ANSI_QUOTES,PIPES_AS_CONCAT")
    'REAL_AS_FLOAT,PIPES_AS_CONCAT'
    """
    if names is None:
        return None
    return ",".join(n for n in names.split(",") if n and n.upper() not in LEXICAL_MODES)


@contextmanager
def event_session(conn, timestamp: int, zone: str | None, fallback_zone: str | None, sql_mode: str | None = None):
    """Run the block's statements as of ``timestamp`` (unix seconds; 0: now) in ``zone`` (the
    event's, else ``fallback_zone``, the upstream's) under ``sql_mode`` (names; None: leave the
    session's); the session's own clock, zone and mode after."""
    want = zone if zone and zone.upper() != "SYSTEM" else fallback_zone
    with conn.cursor() as cur:
        cur.execute("SELECT @@session.time_zone, @@session.sql_mode")
        before, before_mode = (v.decode() if isinstance(v, bytes) else v for v in cur.fetchone())
        if timestamp:
            cur.execute("SET TIMESTAMP = %s", (int(timestamp),))
        if want:
            try:
                cur.execute("SET SESSION time_zone = %s", (want,))
            except Exception:   # a named zone the downstream has no table for: the upstream's offset
                if not fallback_zone or fallback_zone == want:
                    raise
                cur.execute("SET SESSION time_zone = %s", (fallback_zone,))
        if sql_mode is not None:
            _set_mode(cur, sql_mode)
    try:
        yield
    finally:
        with conn.cursor() as cur:
            cur.execute("SET TIMESTAMP = DEFAULT")
            cur.execute("SET SESSION time_zone = %s", (before,))
            if sql_mode is not None:
                cur.execute("SET SESSION sql_mode = %s", (before_mode,))


def _set_mode(cur, names: str) -> None:
    """The upstream's mode names; a name this downstream does not know (a MariaDB-only mode on
    TiDB or MySQL) is left out, with a warning naming it."""
    try:
        cur.execute("SET SESSION sql_mode = %s", (names,))
        return
    except Exception as first:
        kept = []
        for n in (x for x in names.split(",") if x):
            try:
                cur.execute("SET SESSION sql_mode = %s", (",".join([*kept, n]),))
                kept.append(n)
            except Exception:
                log.warning("the downstream does not know sql_mode %s (%s); the DDL runs without it", n, first)
        cur.execute("SET SESSION sql_mode = %s", (",".join(kept),))
