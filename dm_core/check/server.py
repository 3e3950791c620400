"""Server-level items of a source: version, server_id and the binlog settings.

Besides DM's binlog_enable / binlog_format / binlog_row_image items, binlog_row_metadata is
reported: with FULL the row events name their columns; without (MySQL 5.6/5.7, and the
default of MySQL 8.0 and MariaDB) the schema tracker names them (dm_core/schema_tracker).

    >>> parse_version("10.11.19-MariaDB-0+deb12u1")
    ('MariaDB', (10, 11, 19))
    >>> parse_version("5.5.5-10.4.32-MariaDB-log")
    ('MariaDB', (10, 4, 32))
    >>> parse_version("8.0.36")
    ('MySQL', (8, 0, 36))
"""

from __future__ import annotations

import re

from dm_core.check.context import REPLICATION, failed, item, passed, undetermined, warned
from dm_core.check.probe import ServerFacts

# Tested range of each flavor: [low, high). Outside it the item warns.
KNOWN_VERSIONS = {
    "MySQL": ((5, 6, 0), (9, 0, 0)),
    "MariaDB": ((10, 1, 0), (12, 0, 0)),
}
_ON = {"ON", "1", "YES", "TRUE"}


def parse_version(version: str, comment: str = "") -> tuple[str, tuple[int, ...] | None]:
    text = f"{version} {comment}".lower()
    flavor = "TiDB" if "tidb" in text else "MariaDB" if "mariadb" in text else "MySQL"
    v = version
    if flavor == "MariaDB" and v.startswith("5.5.5-"):  # the replication-protocol prefix
        v = v[len("5.5.5-"):]
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", v)
    return flavor, tuple(int(x) for x in m.groups()) if m else None


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v))


def _var(src: ServerFacts, name: str):
    """(value, None) or (None, a result saying why the variable could not be read)."""
    if "variables" in src.errors:
        return None, undetermined(src, name, "variables")
    return src.var(name), None


@item("version", scope="source")
def version(ctx, src: ServerFacts):
    raw, why = _var(src, "version")
    if why:
        return [why]
    flavor, ver = parse_version(raw or "", src.var("version_comment") or "")
    if flavor not in KNOWN_VERSIONS or ver is None:
        return [warned(f"{flavor} {raw} is not a known upstream (MySQL 5.6-8.x, MariaDB 10.1-11.x)",
                       "migrate at your own risk; report problems with the server's version")]
    low, high = KNOWN_VERSIONS[flavor]
    if not low <= ver < high:
        return [warned(f"{flavor} {raw} is outside the known range {flavor} {_fmt(low)} to before {_fmt(high)}",
                       "use a version in the known range, or go ahead at your own risk")]
    return [passed(f"{flavor} {raw}")]


@item("server_id", scope="source", phase=REPLICATION)
def server_id(ctx, src: ServerFacts):
    v, why = _var(src, "server_id")
    if why:
        return [why]
    if v in (None, "", "0"):
        return [failed(f"server_id is {v or 'unset'}: a server with server_id 0 refuses binlog clients",
                       "SET GLOBAL server_id = <a unique non-zero number>, and server-id in my.cnf")]
    return [passed(f"server_id is {v}")]


@item("binlog_enable", scope="source", phase=REPLICATION)
def binlog_enable(ctx, src: ServerFacts):
    v, why = _var(src, "log_bin")
    if why:
        return [why]
    if (v or "").upper() not in _ON:
        return [failed(f"binary logging is off (log_bin is {v or 'unset'})",
                       "restart the server with log-bin=mysql-bin (log_bin cannot be changed at runtime)")]
    return [passed("log_bin is ON")]


def _want(src: ServerFacts, name: str, wanted: str, extra_fix: str = ""):
    v, why = _var(src, name)
    if why:
        return [why]
    if v is None:
        return None
    if v.upper() != wanted:
        return [failed(f"{name} is {v}, shardflow needs {wanted}",
                       f"SET GLOBAL {name}='{wanted}' and {name}={wanted} in my.cnf; clients connected "
                       f"before keep the old value, so reconnect them{extra_fix}")]
    return [passed(f"{name} is {wanted}")]


@item("binlog_format", scope="source", phase=REPLICATION)
def binlog_format(ctx, src: ServerFacts):
    return _want(src, "binlog_format", "ROW") or [failed("binlog_format is unknown", "use a server with binlog_format=ROW")]


@item("binlog_row_image", scope="source", phase=REPLICATION)
def binlog_row_image(ctx, src: ServerFacts):
    # servers older than MySQL 5.6 / MariaDB 10.1.6 have no such variable and log full rows
    return _want(src, "binlog_row_image", "FULL") or [passed("no binlog_row_image on this server: rows are logged in full")]


# Settings that make the server write binlog events shardflow refuses (binlog/events.py
# UNSUPPORTED): the source would pause at the first such event. Absent: the server predates them.
# (MySQL's binlog_transaction_compression is not among them: its TRANSACTION_PAYLOAD events are
# read, binlog/payload.py.)
_UNREADABLE_WHEN = (
    ("log_bin_compress", "OFF", "MariaDB compresses QUERY and ROWS events"),
    ("binlog_row_value_options", "", "MySQL logs JSON updates as partial ones"),
)


@item("binlog_compression", scope="source", phase=REPLICATION)
def binlog_compression(ctx, src: ServerFacts):
    out = []
    for name, wanted, why in _UNREADABLE_WHEN:
        v, unreadable = _var(src, name)
        if unreadable:
            return [unreadable]
        if v is None or v.strip().upper() == wanted:
            continue
        out.append(failed(f"{name} is {v}: {why}, which shardflow cannot read",
                          f"SET GLOBAL {name}={wanted or chr(39) * 2} and the same in my.cnf"))
    return out or [passed("binlog events are neither compressed per event (MariaDB) nor partial (MySQL JSON)")]


@item("binlog_row_metadata", scope="source", phase=REPLICATION)
def binlog_row_metadata(ctx, src: ServerFacts):
    v, why = _var(src, "binlog_row_metadata")
    if why:
        return [why]
    if v is not None and v.upper() == "FULL":
        return [passed("binlog_row_metadata is FULL: row events name their columns, checked against the schema "
                       "tracker")]
    shown = f"binlog_row_metadata is {v}" if v is not None else \
        f"the server ({src.var('version') or 'unknown version'}) has no binlog_row_metadata"
    return [passed(f"{shown}: row events carry no column names, so the schema tracker names them by position "
                   "(FULL would let every row be checked against it)")]
