"""DDL as text, shared by the syncer, shard DDL coordination and the full phase's target
tables (none of them owns it):

    parsed.py   one statement parsed once (kind + table spans), the value every stage reads
    kind.py     statement → DM's event type (``create table``, ``add column`` ...) for the
                binlog event filter and the routing rules; ``strip_comments``
    text.py     the statement's tokens and the spans naming tables, so routing edits the
                upstream's own text
    replay.py   running a DDL again over a downstream that may already have it (safe-mode
                range only)
    upstream_session.py
                the upstream session a DDL ran in, around its replay: clock, time zone,
                sql_mode (as its QUERY event records them)
"""
