"""Where a source keeps the changes of DDLs its downstream did not get, and the event type the
binlog event filter judges a DDL by (dm_core/ddl/incompatible.py says why both are needed).

DM's schema tracker reads every DDL, also one ``dmctl binlog skip`` skips or a filter ignores,
and judges the next ALTER against that: after a skipped ``MODIFY c DECIMAL(7,1)`` the next
``MODIFY c DECIMAL(7,2)`` is a ``precision decrease``, though the downstream never left
``DECIMAL(7,2)``. shardflow judges against the target table downstream with those skipped
changes laid over it (``Overlay``), one per (task, source, upstream table), in the state store
(table ``schema_overlay``). Written before the checkpoint moves past the DDL; a DDL met again
after a restart writes the same definitions again. A DDL that runs downstream hands the columns
and indexes it names back to the downstream. ``dmctl start-task --remove-meta`` forgets them
(dm_core/reset.py).
"""

from __future__ import annotations

import json
import logging

from dm_core.ddl.incompatible import Overlay, alter_event, read_table, server_names
from dm_core.state import schema as _schema

log = logging.getLogger("shardflow.sync")

_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.schema_overlay (
    task        text NOT NULL,
    source_id   text NOT NULL,
    schema_name text NOT NULL,           -- the upstream table
    table_name  text NOT NULL,
    overlay     jsonb NOT NULL,          -- Overlay.to_dict()
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, source_id, schema_name, table_name)
);
"""

# The DDL event types whose DM event depends on the statement's clauses (and the table before it).
_REFINED = ("alter table", "add table partition", "split table partition")


_TABLES = _schema.PartTables("schema_overlay", _DDL, newest=("schema_overlay", "overlay"))
# create the table if missing (before ``delete_task`` in a wider transaction)
ensure = _TABLES.ensure
# forget a task's overlays (its positions are being forgotten), inside the caller's transaction
delete_task = _TABLES.delete_task


class SchemaOverlays:
    """The overlays of one (task, source), read once and written through."""

    def __init__(self, task_name: str, source_id: str, store):
        self.task, self.source_id, self.store = task_name, source_id, store
        self._cache: dict[tuple[str, str], Overlay] | None = None

    def _all(self) -> dict[tuple[str, str], Overlay]:
        if self._cache is None:
            ensure(self.store)
            with self.store.tx() as cur:
                cur.execute(f"SELECT schema_name, table_name, overlay FROM {_schema.SCHEMA}.schema_overlay "
                            "WHERE task = %s AND source_id = %s", (self.task, self.source_id))
                rows = cur.fetchall()
            self._cache = {(s, t): Overlay.from_dict(o if isinstance(o, dict) else json.loads(o)) for s, t, o in rows}
        return self._cache

    def get(self, schema: str, table: str) -> Overlay:
        return self._all().get((schema, table)) or Overlay()

    def put(self, schema: str, table: str, overlay: Overlay) -> None:
        ensure(self.store)
        with self.store.tx() as cur:
            if overlay:
                cur.execute(f"INSERT INTO {_schema.SCHEMA}.schema_overlay (task, source_id, schema_name, table_name, "
                            "overlay) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (task, source_id, schema_name, table_name) "
                            "DO UPDATE SET overlay = EXCLUDED.overlay, updated_at = now()",
                            (self.task, self.source_id, schema, table, json.dumps(overlay.to_dict())))
            else:
                cur.execute(f"DELETE FROM {_schema.SCHEMA}.schema_overlay WHERE task = %s AND source_id = %s "
                            "AND schema_name = %s AND table_name = %s", (self.task, self.source_id, schema, table))
        self._all()[(schema, table)] = overlay


class FilterEvents:
    """The event type the binlog event filter judges one DDL by, as DM's syncer gives it, and
    the bookkeeping of DDLs the downstream does not get (``skipped``) or gets (``executed``)."""

    def __init__(self, overlays: SchemaOverlays, route):
        self.overlays, self.route = overlays, route

    def before(self, conn, schema: str, table: str):
        """The upstream table as DM's tracker would have it: its target downstream, the overlay on top."""
        return self.overlays.get(schema, table).apply(read_table(conn, *self.route(schema, table)))

    def event(self, conn, kind: str, sql: str, schema: str, table: str) -> str:
        """``kind`` (dm_core/ddl/kind.py) refined: an ALTER TABLE's incompatible change, if any."""
        if kind not in _REFINED or not table:
            return kind
        charset_of, default_collation = server_names(conn)
        return alter_event(sql, self.before(conn, schema, table), charset_of=charset_of,
                           default_collation=default_collation)

    def skipped(self, conn, kind: str, sql: str, schema: str, table: str) -> None:
        """A DDL the downstream does not get (``binlog skip``, a filter's Ignore): DM's tracker has it."""
        if not table or kind not in _REFINED + ("create index", "drop index"):
            return
        ov = self.overlays.get(schema, table)
        before = ov.apply(read_table(conn, *self.route(schema, table)))
        charset_of, default_collation = server_names(conn)
        ov = Overlay.from_dict(json.loads(json.dumps(ov.to_dict())))
        ov.skipped(sql, before, charset_of=charset_of, default_collation=default_collation)
        self.overlays.put(schema, table, ov)
        log.info("source %s: `%s`.`%s` differs downstream by a DDL not run there: %s",
                 self.overlays.source_id, schema, table, sql)

    def executed(self, sql: str, schema: str, table: str, kind: str = "alter table") -> None:
        """A DDL that runs downstream: the names it touches are the downstream's again (all of
        them when the table is dropped or created)."""
        if not table:
            return
        ov = self.overlays.get(schema, table)
        if not ov:
            return
        if kind in ("drop table", "create table"):
            ov = Overlay()
        else:
            ov = Overlay.from_dict(json.loads(json.dumps(ov.to_dict())))
            ov.executed(sql)
        self.overlays.put(schema, table, ov)

