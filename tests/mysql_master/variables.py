"""System variables as the impersonated MySQL has them.

The master's own variables (version, server_id, GTID and binlog settings: what replication
and precheck read) are an overlay on the backing MariaDB's; variables only MariaDB has are
hidden (error 1193 when selected, absent from SHOW VARIABLES), and so are those the
flavour's version lacks (binlog_row_metadata on 5.7). Everything else — session variables,
time_zone, lower_case_table_names — is the backing server's, read through the relay.

Booleans are shown as MySQL does: ON/OFF by SHOW VARIABLES, 1/0 by SELECT @@var.
"""

from __future__ import annotations

import re

def overlay(master) -> dict[str, object]:
    """Global variables the master answers itself (lower-case names)."""
    fl = master.flavour
    out: dict[str, object] = {
        "version": fl.version, "version_comment": fl.version_comment, "server_id": master.server_id,
        "server_uuid": master.server_uuid, "log_bin": True, "log_bin_basename": f"/var/lib/mysql/{master.prefix}",
        "log_bin_index": f"/var/lib/mysql/{master.prefix}.index", "binlog_format": "ROW",
        "binlog_row_image": "FULL", "binlog_checksum": "CRC32" if master.checksum else "NONE",
        "gtid_mode": "ON" if master.gtid_mode else "OFF",
        "enforce_gtid_consistency": "ON" if master.gtid_mode else "OFF",
        "gtid_executed": str(master.gtid_executed) if master.gtid_mode else "",
        "gtid_purged": str(master.gtid_purged) if master.gtid_mode else "", "gtid_owned": "",
        "max_allowed_packet": fl.max_allowed_packet, "binlog_rows_query_log_events": False,
        "log_slave_updates": True, "binlog_expire_logs_seconds": 2592000,
    }
    if fl.v >= (8, 0):
        out.update(binlog_row_metadata=master.row_metadata, binlog_transaction_compression=master.compression,
                   binlog_row_value_options="", log_replica_updates=True)
    if fl.v < (8, 4):
        out["default_authentication_plugin"] = fl.auth_plugin
    else:
        out["authentication_policy"] = "*,,"
    return out


def show_value(v) -> str:
    if isinstance(v, bool):
        return "ON" if v else "OFF"
    return str(v)


def select_value(v):
    if isinstance(v, bool):
        return int(v)
    return v


def like_regex(pattern: str) -> re.Pattern:
    """A SQL LIKE pattern (case-insensitive, ``\\`` escapes) as a regex."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("^" + "".join(out) + "$", re.I | re.S)


def sql_string(text: str) -> str:
    """A quoted SQL string literal's value."""
    q = text[0]
    return re.sub(r"\\(.)", r"\1", text[1:-1].replace(q + q, q))


_STRING = r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\""


def name_filter(clause: str | None):
    """The predicate on Variable_name of ``LIKE 'p'`` / ``WHERE Variable_name IN (...)`` /
    ``= '...'`` / ``LIKE '...'``; None when the clause is something else."""
    if not clause:
        return lambda n: True
    clause = clause.strip()
    m = re.fullmatch(rf"LIKE\s+({_STRING})", clause, re.I | re.S)
    if m:
        rx = like_regex(sql_string(m[1]))
        return lambda n: bool(rx.match(n))
    m = re.fullmatch(r"WHERE\s+`?Variable_name`?\s+(.*)", clause, re.I | re.S)
    if not m:
        return None
    cond = m[1].strip()
    m2 = re.fullmatch(r"IN\s*\((.*)\)", cond, re.I | re.S)
    if m2:
        names = {sql_string(s).lower() for s in re.findall(_STRING, m2[1])}
        return lambda n: n.lower() in names
    m2 = re.fullmatch(rf"=\s*({_STRING})", cond, re.S)
    if m2:
        want = sql_string(m2[1]).lower()
        return lambda n: n.lower() == want
    m2 = re.fullmatch(rf"LIKE\s+({_STRING})", cond, re.I | re.S)
    if m2:
        rx = like_regex(sql_string(m2[1]))
        return lambda n: bool(rx.match(n))
    return None


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside quotes and parentheses."""
    out, cur, depth, quote = [], [], 0, None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            cur.append(ch)
            if ch == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
            cur.append(ch)
        elif ch == "(":
            depth += 1
            cur.append(ch)
        elif ch == ")":
            depth -= 1
            cur.append(ch)
        elif ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur).strip())
    return [o for o in out if o]


VAR_REF = re.compile(r"@@(?:(global|session|local)\.)?([A-Za-z_][A-Za-z0-9_]*)", re.I)


def var_refs(sql: str) -> list[tuple[str | None, str]]:
    """(scope, name) of every @@variable outside string literals."""
    bare = re.sub(_STRING, "''", sql)
    return [(m[1].lower() if m[1] else None, m[2].lower()) for m in VAR_REF.finditer(bare)]


def mysql_modes(fl, names: str) -> str:
    """A sql_mode name list from MariaDB, less the names the flavour does not have
    (NO_AUTO_CREATE_USER on 8.x, MariaDB's own modes)."""
    known = set(fl.sql_modes.values())
    return ",".join(n for n in names.split(",") if n in known)
