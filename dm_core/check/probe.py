"""Everything the check items need from one server, read in a handful of queries.

This is the only module of the precheck that talks to servers. A probe opens one
connection, reads variables, status, grants, the allowed tables with their columns and
keys (ONE information_schema query for the whole server, not one per table) and, when
asked, the binary log list; then closes the connection. The check items are pure
functions over the resulting ``ServerFacts``, so they can be tested without a server.

A query that fails leaves its fact as None and its error text in ``errors``: the items
that need the fact say they could not decide, the others still run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dm_core.check.grants import Grants
from dm_core import faults
from dm_core.db import Endpoint, connect, qt
from dm_core.errors import ShardflowError

SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")

VARIABLES = ("version", "version_comment", "server_id", "log_bin", "binlog_format", "binlog_row_image",
             "binlog_row_metadata", "max_connections", "gtid_mode", "lower_case_table_names",
             "log_bin_compress", "binlog_transaction_compression", "binlog_row_value_options",
             "tidb_enable_fast_create_table", "tidb_ddl_version")   # the last two: TiDB only

# Three queries joined here: MariaDB joins information_schema tables without indexes, and the
# one query that joined them took 85 s at 10,000 tables (these three: 0.6 s).
_SYSTEM = ", ".join(f"'{s}'" for s in SYSTEM_SCHEMAS)
_TABLES_SQL = ("SELECT table_schema, table_name, table_collation FROM information_schema.tables "
               f"WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ({_SYSTEM}) ORDER BY table_schema, table_name")
_COLUMNS_SQL = ("SELECT table_schema, table_name, column_name, column_type, is_nullable, extra, character_set_name "
                f"FROM information_schema.columns WHERE table_schema NOT IN ({_SYSTEM}) "
                "ORDER BY table_schema, table_name, ordinal_position")
_INDEXES_SQL = ("SELECT table_schema, table_name, column_name, index_name, non_unique, seq_in_index "
                f"FROM information_schema.statistics WHERE table_schema NOT IN ({_SYSTEM}) "
                "AND column_name IS NOT NULL")

_INT_WIDTH = re.compile(r"^(tinyint|smallint|mediumint|int|integer|bigint)\(\d+\)", re.I)


@dataclass
class Column:
    name: str
    type: str                  # information_schema COLUMN_TYPE, e.g. "varchar(64)", "int(11) unsigned"
    nullable: bool
    auto_increment: bool
    charset: str | None

    @property
    def norm_type(self) -> str:
        """The type without integer display width (MySQL 8.0.19+ stopped showing it)."""
        return _INT_WIDTH.sub(lambda m: m[1].lower(), self.type.strip()).lower()


@dataclass
class TableInfo:
    source_id: str
    schema: str
    table: str
    charset: str | None                                       # table default charset
    columns: list[Column] = field(default_factory=list)
    indexes: dict[str, tuple[bool, list[str]]] = field(default_factory=dict)  # name -> (unique, columns)
    # filled from the task's rules by the context
    target: tuple[str, str] = ("", "")
    extract_columns: list[str] = field(default_factory=list)
    mapped_columns: set[str] = field(default_factory=set)
    rule_error: str = ""                                      # the task's rules do not fit this table
    expr_unknown: list[tuple[str, str, str]] = field(default_factory=list)  # (filter, key, column it lacks)

    @property
    def name(self) -> str:
        return qt(self.schema, self.table)

    @property
    def qualified(self) -> str:
        return f"{self.source_id}:{self.name}"

    def column(self, name: str) -> Column | None:
        low = name.lower()
        return next((c for c in self.columns if c.name.lower() == low), None)

    @property
    def key(self) -> list[str]:
        """The primary key, else a unique key on NOT NULL columns, else []."""
        if "PRIMARY" in self.indexes:
            return self.indexes["PRIMARY"][1]
        for unique, cols in self.indexes.values():
            if unique and all(c is not None and not c.nullable for c in map(self.column, cols)):
                return cols
        return []

    def unique_keys(self) -> list[tuple[str, list[str]]]:
        return [(n, cols) for n, (u, cols) in self.indexes.items() if u]


@dataclass
class ServerFacts:
    label: str                                  # source-id, or "target"
    address: str                                # host:port (never the password)
    user: str = ""
    reachable: bool = False
    connect_error: str = ""
    variables: dict[str, str] = field(default_factory=dict)
    threads_connected: int | None = None
    grants: Grants | None = None
    tables: list[TableInfo] | None = None       # the block-allow list's tables (sources only)
    binary_logs: list[tuple[str, int]] | None = None
    gtid_start: object = None                   # Position the server resumes a GTID meta at (meta_position)
    errors: dict[str, str] = field(default_factory=dict)   # fact -> why it could not be read
    # online-ddl: (schema, shadow table, real table) of gh-ost / pt-osc shadow tables whose real
    # table the block-allow list selects (sources only; filled by CheckContext.gather)
    shadow_tables: list[tuple[str, str, str]] = field(default_factory=list)

    def var(self, name: str) -> str | None:
        return self.variables.get(name)


def probe(label: str, ep: Endpoint, *, downstream: bool = False, allow_table=None,
          want_binary_logs: bool = False, want_gtid: tuple[str, int] | None = None) -> ServerFacts:
    """Read a server's facts. ``allow_table(schema, table)`` selects tables (None: no tables);
    ``want_gtid``: (GTID state, binlog client server id): ask the server where it would resume
    a replica at that state (a non-blocking GTID dump, binlog/gtid.py)."""
    facts = ServerFacts(label=label, address=f"{ep.host}:{ep.port}", user=ep.user)
    try:
        conn = connect(ep, downstream=downstream, read_timeout=120)
    except ShardflowError as e:
        facts.connect_error = e.message
        return facts
    except Exception as e:  # noqa: BLE001 - anything else (DNS, socket) is "unreachable" as well
        facts.connect_error = f"cannot connect to {ep}: {_scrub(str(e), ep)}"
        return facts
    facts.reachable = True
    try:
        with conn.cursor() as cur:
            _read(facts, "variables", ep, lambda: _variables(cur, facts))
            _read(facts, "grants", ep, lambda: _grants(cur, facts))
            if allow_table is not None:
                _read(facts, "tables", ep, lambda: _tables(cur, facts, allow_table))
            if want_binary_logs:
                _read(facts, "binary_logs", ep, lambda: _binary_logs(cur, facts))
    finally:
        conn.close()
    if want_gtid is not None:
        _read(facts, "gtid_start", ep, lambda: _gtid_start(ep, facts, *want_gtid))
    return facts


def _gtid_start(ep: Endpoint, facts: ServerFacts, gtid: str, server_id: int) -> None:
    from dm_core.binlog.gtid import position_of_gtid
    from dm_core.errors import ShardflowError

    try:
        facts.gtid_start = position_of_gtid(ep, gtid, server_id=server_id)
    except ShardflowError as e:
        said = e.message.find("server error")   # the server's own words, not the sync's framing
        raise RuntimeError(e.message[said:] if said >= 0 else e.message) from None


def _read(facts: ServerFacts, what: str, ep: Endpoint, fn) -> None:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - recorded, reported by the items that need it
        msg = e.args[-1] if getattr(e, "args", None) else e
        facts.errors[what] = _scrub(str(msg), ep)


def _variables(cur, facts: ServerFacts) -> None:
    cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN ({})".format(", ".join(["%s"] * len(VARIABLES))),
                VARIABLES)
    facts.variables = {str(k).lower(): str(v) for k, v in cur.fetchall()}
    cur.execute("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
    row = cur.fetchone()
    facts.threads_connected = int(row[1]) if row else None


def _grants(cur, facts: ServerFacts) -> None:
    cur.execute("SHOW GRANTS")
    lctn = facts.var("lower_case_table_names") or "0"
    facts.grants = Grants.parse([r[0] for r in cur.fetchall()], case_sensitive=lctn == "0")


def _tables(cur, facts: ServerFacts, allow_table) -> None:
    faults.hit("upstream.list_tables")
    cur.execute(_TABLES_SQL)
    tables: dict[tuple[str, str], TableInfo] = {}
    for schema, table, collation in cur.fetchall():
        if allow_table(schema, table):
            tables[schema, table] = TableInfo(facts.label, schema, table, _charset_of(collation))
    cur.execute(_INDEXES_SQL)
    index_rows: dict[tuple[str, str, str], list[tuple[str, int, int]]] = {}   # (schema, table, column) -> its keys
    for schema, table, col, idx, non_unique, seq in cur.fetchall():
        if (schema, table) in tables:
            index_rows.setdefault((schema, table, col), []).append((idx, int(non_unique), int(seq)))
    cur.execute(_COLUMNS_SQL)
    index_parts: dict[tuple[str, str], dict[str, list[tuple[int, str]]]] = {key: {} for key in tables}
    for schema, table, col, ctype, nullable, extra, charset in cur.fetchall():
        t = tables.get((schema, table))
        if t is None:
            continue
        t.columns.append(Column(col, ctype, nullable == "YES", "auto_increment" in (extra or "").lower(), charset))
        for idx, non_unique, seq in index_rows.get((schema, table, col), ()):
            parts = index_parts[schema, table].setdefault(idx, [])
            parts.append((seq, col))
            if len(parts) == 1:
                t.indexes[idx] = (not non_unique, [])
    for key, idxs in index_parts.items():
        for name, parts in idxs.items():
            tables[key].indexes[name][1].extend(c for _, c in sorted(parts))
    facts.tables = [t for t in tables.values() if t.columns]


def _scrub(text: str, ep: Endpoint) -> str:
    return text.replace(ep.password, "***") if ep.password else text


def _charset_of(collation: str | None) -> str | None:
    """utf8mb4_general_ci -> utf8mb4; binary -> binary (every collation name starts with its charset)."""
    if not collation:
        return None
    return collation.split("_", 1)[0].lower()


def _binary_logs(cur, facts: ServerFacts) -> None:
    cur.execute("SHOW BINARY LOGS")
    facts.binary_logs = [(r[0], int(r[1])) for r in cur.fetchall()]
