"""A replayed DDL sees the upstream's clock: the time its event was logged and the session
time zone it ran in.

Why: ``ALTER TABLE t ADD c DATETIME DEFAULT CURRENT_TIMESTAMP`` fills every existing row with
"now" in the session's zone. Run downstream as it stands it would write the replay's time, in
the downstream session's zone (shardflow's sessions use '+00:00'), so every old row would
differ from upstream. DM sets the same two things around each DDL (``SET TIMESTAMP`` to the
event's time, ``SET SESSION TIME_ZONE`` to the zone the event records, else the upstream's).
"""

from __future__ import annotations

from contextlib import contextmanager


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


@contextmanager
def event_clock(conn, timestamp: int, zone: str | None, fallback_zone: str | None):
    """Run the block's statements as of ``timestamp`` (unix seconds; 0: now) in ``zone`` (the
    event's, else ``fallback_zone``, the upstream's); the session's own zone and clock after."""
    want = zone if zone and zone.upper() != "SYSTEM" else fallback_zone
    with conn.cursor() as cur:
        cur.execute("SELECT @@session.time_zone")
        (before,) = cur.fetchone()
        before = before.decode() if isinstance(before, bytes) else before
        if timestamp:
            cur.execute("SET TIMESTAMP = %s", (int(timestamp),))
        if want:
            try:
                cur.execute("SET SESSION time_zone = %s", (want,))
            except Exception:   # a named zone the downstream has no table for: the upstream's offset
                if not fallback_zone or fallback_zone == want:
                    raise
                cur.execute("SET SESSION time_zone = %s", (fallback_zone,))
    try:
        yield
    finally:
        with conn.cursor() as cur:
            cur.execute("SET TIMESTAMP = DEFAULT")
            cur.execute("SET SESSION time_zone = %s", (before,))
