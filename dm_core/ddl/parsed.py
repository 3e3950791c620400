"""One DDL statement, parsed once: its DM event type and the tables it names.

Every reader of a binlog DDL (the syncer's plain path, the router ``sync/ddl.py``, the binlog
event filter through the syncer, online DDL, shard DDL normalisation's textual fallback) asks
``parse_ddl(sql, schema)`` and gets the same value: the statement is tokenised and classified
once, however many stages look at it. The shard-DDL normaliser still builds its own sqlglot
tree, because it renders a canonical statement from it (shardddl/ddl_norm.py); nothing else
needs a tree.

    >>> d = parse_ddl("alter table t1 add column c int /* why */", "db")
    >>> d.kind, d.tables
    ('alter table', [('db', 't1')])
    >>> parse_ddl("alter table t1 add column c int /* why */", "db") is d
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

from dm_core.ddl.kind import ddl_event_type
from dm_core.ddl.text import Span, table_spans


@dataclass(eq=False)
class ParsedDDL:
    sql: str               # as the upstream ran it
    schema: str | None     # the session's default schema when it ran
    mode: str | None = None  # the session's sql_mode names (how the text reads: ANSI_QUOTES ...)

    @cached_property
    def kind(self) -> str:
        """DM's event type (``create table``, ``alter table``, ``add table partition`` ...)."""
        return ddl_event_type(self.sql)

    @cached_property
    def spans(self) -> tuple[Span, ...]:
        """Where the statement names tables (ddl/text.py), in order."""
        return tuple(table_spans(self.sql, self.schema, self.mode))

    @property
    def tables(self) -> list[tuple[str, str]]:
        return [(s.schema, s.table) for s in self.spans]


@lru_cache(maxsize=256)
def parse_ddl(sql: str, schema: str | None, mode: str | None = None) -> ParsedDDL:
    """The shared value of one statement; a window's stages ask for it in turn, so a small
    cache keyed by the statement is what makes it parsed once."""
    return ParsedDDL(sql, schema, mode)
