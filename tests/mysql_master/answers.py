"""The statements the master answers itself, because MySQL answers them differently from the
backing MariaDB. Everything else is relayed to the backing server (``Session.forward``).

Every query shardflow sends upstream (dm_core/db.py, binlog/, check/probe.py, sync/, full/,
schema_tracker/, ddl/) was looked at; those below are the ones whose answer depends on the
server being MySQL:

| statement (pattern)                          | 5.7                 | 8.0                  | 8.4                  |
|----------------------------------------------|---------------------|----------------------|----------------------|
| SELECT VERSION() / @@version[_comment]       | 5.7.44-log          | 8.0.36               | 8.4.3                |
| SELECT @@var (gtid_mode, gtid_executed,      | overlay (variables.py); MariaDB-only (gtid_binlog_pos,     |
|   server_uuid, binlog_*, server_id ...)      | log_bin_compress ...) and binlog_row_metadata on 5.7: 1193 |
| SHOW [GLOBAL] VARIABLES [LIKE / WHERE]       | MariaDB's rows less MariaDB-only ones, overlay values,     |
|                                              | MySQL-only variables added                                 |
| SHOW [GLOBAL|SESSION] STATUS ...             | MariaDB's rows less binlog_snapshot_* and other MariaDB-only|
| SHOW MASTER STATUS                           | File, Position, Binlog_Do_DB, Binlog_Ignore_DB,  | 1064      |
|                                              | Executed_Gtid_Set                                |           |
| SHOW BINARY LOG STATUS                       | 1064                | 1064                 | as above             |
| SHOW BINARY LOGS                             | Log_name, File_size | + Encrypted          | + Encrypted          |
| SHOW MASTER LOGS                             | = SHOW BINARY LOGS  | = SHOW BINARY LOGS   | 1064                 |
| SHOW SLAVE HOSTS                             | Server_id, Host, Port, Master_id, Slave_UUID | 1064          |
| SHOW REPLICAS                                | 1064                | Server_Id, Host, Port, Source_Id, Replica_UUID |
| SHOW GRANTS [FOR ...]                        | 'u'@'%', ALL        | `u`@`%`, static privileges listed, then the |
|                                              | PRIVILEGES          | dynamic ones (8.4: FLUSH_PRIVILEGES ...)    |
| SHOW BINLOG EVENTS [IN f] [FROM p] [LIMIT]   | from the master's own binlog files                         |
| SET @user_var = ... (@master_binlog_checksum,| OK; kept in the session (the dump reads them)              |
|   @master_heartbeat_period, @slave_uuid ...) |                                                            |
| SET NAMES cs [COLLATE utf8mb4_0900_*]        | relayed; MySQL 8 collations become utf8mb4_general_ci      |
| SET SESSION show_gipk_in_create_table_and_  | 1193                | OK (noted)           | OK (noted)           |
|   information_schema = ON                    |                     |                      |                      |
| SET [SESSION] sql_mode = <int> / names       | bits read in MySQL's numbering, relayed as names; names    |
|                                              | MariaDB lacks (TIME_TRUNCATE_FRACTIONAL) left out          |
| SELECT @@[SESSION.]sql_mode                  | relayed; names the flavour lacks left out                  |
| SELECT ID, CHARACTER_SET_NAME FROM           | MySQL's collation ids (pymysql's table; 8.x adds the      |
|   information_schema.COLLATIONS              | utf8mb4_*_0900_* ids 255-323; 5.7 calls utf8mb3 utf8)       |
| ... COLLATION_CHARACTER_SET_APPLICABILITY    | 1054 Unknown column 'ID' (MySQL's table has no ID)         |
|   selecting ID                               |                                                            |
| SELECT BINLOG_GTID_POS(...)                  | 1046 No database selected / 1305 FUNCTION db.X does not exist|
| KILL [CONNECTION|QUERY] n                    | ends the master's session n (a dump too); 1094 if unknown  |
| USE db                                       | relayed; the session's database follows                    |

Relayed unchanged (same answer on MySQL): information_schema queries, SHOW CREATE TABLE,
SELECTs of data, XA RECOVER, START TRANSACTION WITH CONSISTENT SNAPSHOT, SET SESSION ...,
SELECT CONNECTION_ID()/TIMESTAMPDIFF(...)/GET_LOCK(...), SHOW WARNINGS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from tests.mysql_master import showevents
from tests.mysql_master import variables as var
from tests.mysql_master.flavours import MARIADB_ONLY_STATUS

_STRING = r"'(?:[^'\\]|\\.|'')*'"


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern
    handler: Callable
    what: str


def parse_error(near: str) -> tuple[int, str, str]:
    return (1064, "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server "
            f"version for the right syntax to use near '{near}' at line 1", "42000")


# ---- replication status ------------------------------------------------------------------
def show_status(sess, m):
    fl = sess.fl
    binary = m[1].upper().startswith("BINARY")
    if (binary and not fl.has_binary_log_status) or (not binary and not fl.has_master_status):
        return sess.err(*parse_error(m[0][5:].strip() if not binary else m[0][12:].strip()))
    master = sess.master
    file, size = master.last_file()
    cols = [("File", "str"), ("Position", "int"), ("Binlog_Do_DB", "str"), ("Binlog_Ignore_DB", "str"),
            ("Executed_Gtid_Set", "str")]
    return sess.result(cols, [(file, size, "", "", str(master.gtid_executed) if master.gtid_mode else "")])


def show_logs(sess, m):
    fl = sess.fl
    if m[1].upper() == "MASTER" and not fl.has_master_status:
        return sess.err(*parse_error(m[0][5:].strip()))
    cols = [("Log_name", "str"), ("File_size", "int")] + ([("Encrypted", "str")] if fl.v >= (8, 0) else [])
    rows = [(name, len(data)) + (("No",) if fl.v >= (8, 0) else ()) for name, data in sess.master.snapshot()[0]]
    return sess.result(cols, rows)


def show_replicas(sess, m):
    fl = sess.fl
    replicas = m[1].upper() == "REPLICAS"
    if (replicas and not fl.has_replicas) or (not replicas and not fl.has_slave_hosts):
        return sess.err(*parse_error(m[0][5:].strip()))
    names = (["Server_Id", "Host", "Port", "Source_Id", "Replica_UUID"] if replicas
             else ["Server_id", "Host", "Port", "Master_id", "Slave_UUID"])
    kinds = ["int", "str", "int", "int", "str"]
    return sess.result(list(zip(names, kinds)), sess.master.registered_replicas())


def show_binlog_events(sess, m):
    rest = m[1] or ""
    files = sess.master.snapshot()[0]
    f = re.search(rf"\bIN\s+({_STRING})", rest, re.I)
    name = var.sql_string(f[1]) if f else (files[0][0] if files else "")
    data = dict(files).get(name)
    if data is None:
        return sess.err(1220, "Error when executing command SHOW BINLOG EVENTS: Could not find target log")
    f = re.search(r"\bFROM\s+(\d+)", rest, re.I)
    start = int(f[1]) if f else 4
    rows = list(showevents.rows(name, data, start, sess.master.checksum))
    f = re.search(r"\bLIMIT\s+(\d+)(?:\s*,\s*(\d+))?", rest, re.I)
    if f:
        offset, count = (int(f[1]), int(f[2])) if f[2] else (0, int(f[1]))
        rows = rows[offset:offset + count]
    cols = [("Log_name", "str"), ("Pos", "int"), ("Event_type", "str"), ("Server_id", "int"),
            ("End_log_pos", "int"), ("Info", "str")]
    return sess.result(cols, rows)


# ---- variables ---------------------------------------------------------------------------
def show_variables(sess, m):
    fl, ov = sess.fl, var.overlay(sess.master)
    pred = var.name_filter(m[2])
    rows, resp = {}, None
    if sess.backing is not None:
        resp = sess.forward(m[0])
        if resp.is_error:
            return resp.payloads
        for name, value in resp.values():
            rows[name.decode()] = value
    elif pred is None:
        return sess.unanswered(m[0])
    rows = {n: v for n, v in rows.items() if fl.has_variable(n)}
    for name, value in ov.items():
        if name in rows or (pred is not None and pred(name)):
            rows[name] = var.show_value(value)
    if pred is None:
        sess.master.note(f"SHOW VARIABLES clause not understood, MySQL-only variables not added: {m[0]}")
    out = sorted(rows.items())
    if resp is not None:
        return resp.with_rows([list(r) for r in out])
    return sess.result([("Variable_name", "str"), ("Value", "str")], out)


def show_status_vars(sess, m):
    if sess.backing is None:
        return sess.unanswered(m[0])
    resp = sess.forward(m[0])
    if resp.is_error or len(resp.columns) != 2:
        return resp.payloads
    keep = [r for r in resp.values() if not r[0].decode().lower().startswith(MARIADB_ONLY_STATUS)]
    return resp.with_rows(keep)


def select(sess, m):
    """SELECTs naming @@variables or VERSION(): answered from the overlay when every item is
    one; otherwise the overlay's values are written into the statement, which is relayed."""
    sql = m[0]
    refs = var.var_refs(sql)
    bare = re.sub(_STRING, "''", sql)
    if not refs and not re.search(r"\bVERSION\s*\(\s*\)", bare, re.I):
        return sess.forward_payloads(sql) if sess.backing is not None else _literals(sess, sql)
    fl, ov = sess.fl, var.overlay(sess.master)
    for _, name in refs:
        if not fl.has_variable(name):
            return sess.err(1193, f"Unknown system variable '{name}'")

    def lookup(scope, name):
        if name in ov:
            return True, var.select_value(ov[name])
        if name == "sql_mode" and scope == "global":
            return True, fl.default_sql_mode
        return False, None

    items = var.split_top(sql[m.start(1):])
    local = []
    for item in items:
        got = _simple(item, lookup, fl)
        if got is None:
            local = None
            break
        local.append(got)
    if local is not None:
        return sess.result([(label, "int" if isinstance(v, int) else "str") for label, v in local],
                           [tuple(v for _, v in local)])
    if sess.backing is None:
        return sess.unanswered(sql)
    resp = sess.forward(_substitute(sql, lookup, fl, items))
    modes = [i for i, n in enumerate(resp.names) if re.fullmatch(r"@@(session\.|local\.)?sql_mode", n, re.I)]
    if resp.is_error or not modes:
        return resp.payloads
    rows = resp.values()
    for r in rows:
        for i in modes:
            if r[i] is not None:
                r[i] = var.mysql_modes(fl, r[i].decode())
    return resp.with_rows(rows)


def _simple(item: str, lookup, fl):
    """(label, value) of a select item the master can answer alone, else None."""
    m = re.fullmatch(r"(.+?)(?:\s+(?:AS\s+)?(`[^`]+`|\w+))?", item.strip(), re.I | re.S)
    expr, alias = m[1].strip(), m[2]
    label = alias.strip("`") if alias else expr
    if re.fullmatch(r"VERSION\s*\(\s*\)", expr, re.I):
        return label, fl.version
    v = var.VAR_REF.fullmatch(expr)
    if v:
        found, value = lookup(v[1].lower() if v[1] else None, v[2].lower())
        return (label, value) if found else None
    if re.fullmatch(r"-?\d+", expr):
        return label, int(expr)
    if re.fullmatch(_STRING, expr):
        return label, var.sql_string(expr)
    return None


def _substitute(sql: str, lookup, fl, items: list[str]) -> str:
    """``sql`` with overlay variables and VERSION() as literals; a select item that was exactly
    one of them keeps its text as the column name (an alias)."""
    def lit(v):
        return str(v) if isinstance(v, int) else "'" + str(v).replace("'", "''") + "'"

    def sub(text: str) -> str:
        parts = re.split(rf"({_STRING})", text)
        for i in range(0, len(parts), 2):
            parts[i] = re.sub(r"\bVERSION\s*\(\s*\)", lit(fl.version), parts[i], flags=re.I)
            parts[i] = var.VAR_REF.sub(lambda v: (lambda f: lit(f[1]) if f[0] else v[0])(
                lookup(v[1].lower() if v[1] else None, v[2].lower())), parts[i])
        return "".join(parts)

    head = sql[:sql.upper().index("SELECT") + 6]
    out = []
    for item in items:
        plain = item.strip()
        new = sub(plain)
        if new != plain and (var.VAR_REF.fullmatch(plain) or re.fullmatch(r"VERSION\s*\(\s*\)", plain, re.I)):
            new += " AS `" + plain.replace("`", "``") + "`"
        out.append(new)
    return head + " " + ", ".join(out)


def _literals(sess, sql: str):
    """SELECT of literals without a backing server (SELECT 1): answered, anything else logged."""
    m = re.fullmatch(r"SELECT\s+(.*)", sql, re.I | re.S)
    items = [_simple(i, lambda s, n: (False, None), sess.fl) for i in var.split_top(m[1])]
    if not items or any(i is None for i in items):
        return sess.unanswered(sql)
    return sess.result([(label, "int" if isinstance(v, int) else "str") for label, v in items],
                       [tuple(v for _, v in items)])


# ---- session statements ------------------------------------------------------------------
def set_user_vars(sess, m):
    """SET @a = 1, @b = 'x', @c = @@global.binlog_checksum: kept in the session."""
    ov = var.overlay(sess.master)
    assigned = {}
    for part in var.split_top(m[1]):
        a = re.fullmatch(rf"@(`[^`]+`|\w+)\s*:?=\s*(-?\d+|{_STRING}|NULL|@@(?:global\.|session\.)?\w+)", part,
                         re.I | re.S)
        if not a:
            return sess.forward_payloads(m[0]) if sess.backing is not None else sess.unanswered(m[0])
        value = a[2]
        if value.upper() == "NULL":
            v = None
        elif value.startswith("@@"):
            r = var.VAR_REF.fullmatch(value)
            if not sess.fl.has_variable(r[2]):
                return sess.err(1193, f"Unknown system variable '{r[2].lower()}'")
            v = var.select_value(ov.get(r[2].lower()))
        elif value.startswith("'"):
            v = var.sql_string(value)
        else:
            v = int(value)
        assigned[a[1].strip("`").lower()] = v
    sess.user_vars.update(assigned)
    return [sess.ok_packet()]


def set_names(sess, m):
    sql = re.sub(r"\butf8mb4_0900_\w+", "utf8mb4_general_ci", m[0], flags=re.I)
    if sess.backing is None:
        return [sess.ok_packet()]
    return sess.forward_payloads(sql)


def set_sql_mode(sess, m):
    fl = sess.fl

    def names(bits: re.Match) -> str:
        kept = [n for n in fl.mode_names(int(bits[1])) if n != "TIME_TRUNCATE_FRACTIONAL"]
        return "sql_mode = '" + ",".join(kept) + "'"

    sql = re.sub(r"\bsql_mode\s*=\s*(\d+)", names, m[0], flags=re.I)
    sql = re.sub(r",?TIME_TRUNCATE_FRACTIONAL", "", sql, flags=re.I)
    if sess.backing is None:
        sess.master.ignored.append(m[0])
        return [sess.ok_packet()]
    return sess.forward_payloads(sql)


def set_session(sess, m):
    """Other SET statements: relayed; without a backing server acknowledged (``master.ignored``)."""
    if sess.backing is not None:
        return sess.forward_payloads(m[0])
    sess.master.ignored.append(m[0])
    return [sess.ok_packet()]


def set_show_gipk(sess, m):
    """MySQL 8.0.30+'s session switch that shows generated invisible primary keys: OK there
    (and remembered, for tests), unknown before; MariaDB has no such variable to relay it to."""
    if sess.fl.v < (8, 0):
        return sess.err(1193, "Unknown system variable 'show_gipk_in_create_table_and_information_schema'")
    sess.master.notes.append("show_gipk_in_create_table_and_information_schema=ON")
    return [sess.ok_packet()]


def kill(sess, m):
    target = int(m[2])
    if not sess.master.kill(target, query_only=(m[1] or "").upper() == "QUERY"):
        return sess.err(1094, f"Unknown thread id: {target}")
    return [sess.ok_packet()]


def use_db(sess, m):
    if sess.backing is None:
        sess.db = m[1].strip("` ")
        return [sess.ok_packet()]
    resp = sess.forward(m[0])
    if not resp.is_error:
        sess.db = m[1].strip("` ")
    return resp.payloads


# ---- functions and information_schema ------------------------------------------------------
def binlog_gtid_pos(sess, m):
    if not sess.db:
        return sess.err(1046, "No database selected", "3D000")
    name = re.search(r"\b(BINLOG_GTID_POS)\s*\(", m[0], re.I)[1]
    return sess.err(1305, f"FUNCTION {sess.db}.{name} does not exist", "42000")


def collations(sess, m):
    from pymysql.charset import _charsets

    fl = sess.fl
    ids = {c.id: c.name for c in _charsets._by_id.values() if fl.v >= (8, 0) or c.id <= 250}
    if fl.v >= (8, 0):
        ids.update({i: "utf8mb4" for i in range(255, 324)})
    else:
        ids = {i: ("utf8" if n == "utf8mb3" else n) for i, n in ids.items()}
    return sess.result([("ID", "int"), ("CHARACTER_SET_NAME", "str")], sorted(ids.items()))


def applicability(sess, m):
    if re.search(r"SELECT\s+(.*\b)?ID\b", m[0], re.I):
        return sess.err(1054, "Unknown column 'ID' in 'field list'", "42S22")
    return sess.forward_payloads(m[0]) if sess.backing is not None else sess.unanswered(m[0])


def show_grants(sess, m):
    who = (m[1] or "").strip()
    master = sess.master
    if who and not re.fullmatch(r"CURRENT_USER(\s*\(\s*\))?", who, re.I):
        user = re.match(r"[`'\"]?([^`'\"@]+)", who)[1]
        if user not in master.users:
            host = (who.split("@", 1)[1] if "@" in who else "%").strip("`'\" ")
            return sess.err(1141, f"There is no such grant defined for user '{user}' on host '{host}'", "42000")
    else:
        user = sess.user
    lines = master.grants_of(user)
    return sess.result([(f"Grants for {user}@%", "str")], [(line,) for line in lines])


def _rule(pattern: str, handler, what: str) -> Rule:
    return Rule(re.compile(pattern, re.I | re.S), handler, what)


ANSWERS = [
    _rule(r"SHOW\s+(MASTER|BINARY\s+LOG)\s+STATUS", show_status, "binlog position and executed GTIDs"),
    _rule(r"SHOW\s+(BINARY|MASTER)\s+LOGS", show_logs, "the master's binlog files"),
    _rule(r"SHOW\s+(SLAVE\s+HOSTS|REPLICAS)", show_replicas, "replicas registered by COM_REGISTER_SLAVE"),
    _rule(r"SHOW\s+(?:(GLOBAL|SESSION|LOCAL)\s+)?VARIABLES(?:\s+(.*))?", show_variables, "variables overlay"),
    _rule(r"SHOW\s+(?:(GLOBAL|SESSION|LOCAL)\s+)?STATUS(?:\s+(.*))?", show_status_vars, "status less MariaDB's"),
    _rule(r"SHOW\s+GRANTS(?:\s+FOR\s+(.*))?", show_grants, "MySQL's privilege names"),
    _rule(r"SHOW\s+BINLOG\s+EVENTS(.*)", show_binlog_events, "the master's own events"),
    _rule(r"SET\s+NAMES\s+(.*)", set_names, "MySQL 8 collations mapped"),
    _rule(r"SET\s+(@[^@].*)", set_user_vars, "replication user variables"),
    _rule(r"SET\s+(?:SESSION\s+)?show_gipk_in_create_table_and_information_schema\s*=.*", set_show_gipk,
          "8.0.30+: generated invisible primary keys shown"),
    _rule(r"SET\s+.*\bsql_mode\s*=.*", set_sql_mode, "sql_mode in MySQL's bit numbering"),
    _rule(r"SET\s+.*", set_session, "session settings (relayed)"),
    _rule(r"KILL\s+(?:(CONNECTION|QUERY)\s+)?(\d+)", kill, "the master's own sessions"),
    _rule(r"USE\s+(.+)", use_db, "the session's database"),
    _rule(r"SELECT\s+.*\bBINLOG_GTID_POS\s*\(.*", binlog_gtid_pos, "no such function on MySQL"),
    _rule(r"SELECT\s+ID\s*,\s*CHARACTER_SET_NAME\s+FROM\s+information_schema\.COLLATIONS(\s+WHERE\s+ID\s+IS\s+NOT"
          r"\s+NULL)?", collations, "MySQL's collation ids"),
    _rule(r"SELECT\s+.*\bFROM\s+information_schema\.COLLATION_CHARACTER_SET_APPLICABILITY\b.*", applicability,
          "no ID column on MySQL"),
    _rule(r"SELECT\s+(.*)", select, "@@variables and VERSION()"),
]


def answer(sess, sql: str):
    """The response payloads for ``sql``; None when no rule takes it (relay it)."""
    text = sql.strip().rstrip(";").strip()
    for rule in ANSWERS:
        m = rule.pattern.fullmatch(text)
        if m:
            return rule.handler(sess, m)
    return None
