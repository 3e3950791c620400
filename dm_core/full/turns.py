"""Write turns, decided on the driver: which target tables take at most a few chunks at a
time (``--write-turns``; load_data.py says why concurrent loads into one table contend and
how a chunk waits for its turn)."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("shardflow.full_load")


class Turns:
    """Which target tables take at most ``writers`` chunks at a time: under ``auto``, those
    that can have several chunks in flight (several source tables routed into them, or
    several chunks of one table at once) on a MariaDB downstream, with an AUTO_INCREMENT
    column -- asked downstream once per table. Any other table streams its chunks without
    spooling."""

    def __init__(self, setting: str, mariadb: bool, shared: set, writers: int | None = None):
        from dm_core.full.load_data import TABLE_WRITERS

        self.setting, self.mariadb, self.shared = setting, mariadb, shared
        self.writers = max(1, writers or TABLE_WRITERS)
        self.lock, self.known = threading.Lock(), {}

    def of(self, target_ep, schema: str, table: str) -> tuple[str, ...] | None:
        from dm_core.full.load_data import turn_names

        if self.setting == "off" or (self.setting == "auto" and (not self.mariadb or (schema, table) not in self.shared)):
            return None
        with self.lock:
            if (schema, table) not in self.known:
                self.known[schema, table] = self.setting == "on" or _has_auto_increment(target_ep, schema, table)
                if self.known[schema, table]:
                    log.info("%s.%s loads at most %d chunk(s) at a time, the others spooled first (%s)", schema, table,
                             self.writers, "--write-turns on" if self.setting == "on"
                             else "MariaDB and an AUTO_INCREMENT column: concurrent loads into it contend")
            return turn_names(schema, table, self.writers) if self.known[schema, table] else None


def _has_auto_increment(target_ep, schema: str, table: str) -> bool:
    from dm_core.db import connect

    down = connect(target_ep, downstream=True)
    try:
        with down.cursor() as cur:
            cur.execute("SELECT 1 FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
                        "AND extra LIKE %s LIMIT 1", (schema, table, "%auto_increment%"))
            return cur.fetchone() is not None
    finally:
        down.close()
