"""The QUERY events of a stretch of binlog, everything else skipped by its header.

For readers that only look at statements (renames during a full load, DDL between two
positions: dm_core/full/renames.py): no table maps, no row decoding, no transaction
bookkeeping. Positions follow the server's ROTATE events (an artificial one names the first
file, a real one the next) and each event's next-position field.
"""

from __future__ import annotations

import time
from typing import Iterator, NamedTuple

from dm_core.binlog import events as ev
from dm_core.binlog.dump import BinlogDump
from dm_core.position import Position


class Query(NamedTuple):
    start: Position      # where the event begins
    end: Position        # where the next one begins
    schema: str | None   # the session's current database
    text: str


class QueryScan:
    """Iterate the QUERY events from ``start`` to the binlog's end now; ``last`` is where the
    scan stopped (the binlog's end, or after the event the caller stopped at). ``deadline``
    (``time.monotonic()``): the scan stops there and says so in ``timed_out``."""

    def __init__(self, ep, start: Position, *, server_id: int, deadline: float | None = None):
        self.ep, self.last, self.server_id, self.deadline = ep, start, server_id, deadline
        self.timed_out = False

    def __iter__(self) -> Iterator[Query]:
        dump = BinlogDump(self.ep, self.last.file, self.last.pos, server_id=self.server_id, heartbeat=None,
                          non_block=True)
        cks = 4 if dump.checksum else 0
        file, pos, query_phl = self.last.file, self.last.pos, 13
        try:
            for n, (buf, s, e) in enumerate(dump.events()):
                if self.deadline is not None and n % 1024 == 0 and time.monotonic() > self.deadline:
                    self.timed_out = True
                    return
                _ts, typ, _sid, _size, logpos, _flags = ev.HEADER.unpack_from(buf, s)
                if typ == ev.ROTATE:
                    nxt = ev.parse_rotate(buf, s, e - cks)[1]
                    if nxt != file:
                        file, pos = nxt, 4
                        self.last = Position(file, pos)
                    continue
                start = Position(file, pos)
                if logpos:
                    pos = logpos
                self.last = Position(file, pos)
                if typ == ev.FORMAT_DESCRIPTION:
                    fde = ev.parse_format_description(buf, s, e, dump.checksum)
                    cks = 4 if fde.checksum else 0
                    query_phl = fde.post_header(ev.QUERY, query_phl)
                elif typ == ev.QUERY:
                    schema, text = ev.parse_query(buf, s, e - cks, query_phl)
                    yield Query(start, self.last, schema.decode("utf-8", "replace") or None, text)
        finally:
            dump.close()
