"""MySQL-protocol connections (upstream sources and the downstream target).

One place that opens connections, so timeouts, charset, TLS and error wrapping are the same
everywhere, and a password can never leak into an error message.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from dataclasses import dataclass, field

from dm_core import faults
from dm_core.classify import TRANSIENT, TRANSIENT_ERRNOS, classify, errno_of
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.tls import TLS, mysqlclient_ssl, pymysql_ssl


@dataclass(frozen=True)
class Endpoint:
    """Where a MySQL-protocol server is and how to log in. ``password`` never prints."""

    host: str
    port: int
    user: str
    password: str = field(default="", repr=False)
    name: str = ""  # a label for messages: "source mysql-01", "target"
    session: tuple[tuple[str, str], ...] = ()
    tls: TLS | None = field(default=None, repr=False)   # DM's `security` section (dm_core.tls)

    def __str__(self) -> str:
        label = f"{self.name} " if self.name else ""
        return f"{label}{self.user}@{self.host}:{self.port}"


log = logging.getLogger("shardflow.db")


def _tidb_only(ep: Endpoint, e: Exception) -> Endpoint | None:
    """The endpoint without its TiDB session variables (``tidb_*``), when the server refused one
    as unknown (error 1193): the downstream is not TiDB, and a task file written for TiDB
    (DM's files set tidb_txn_mode, tidb_retry_limit ...) works on MySQL / MariaDB as well.
    None when that is not the error (on TiDB a bad value of its own variable stays an error)."""
    args = getattr(e, "args", ())
    if not args or args[0] != 1193 or "'tidb_" not in str(args[-1]).lower():
        return None
    rest = tuple((k, v) for k, v in ep.session if not k.lower().startswith("tidb_"))
    if len(rest) == len(ep.session):
        return None
    if ep not in _TIDB_WARNED:
        _TIDB_WARNED.add(ep)
        log.warning("%s is not TiDB (%s): its session variables %s are left out", ep, args[-1],
                    ", ".join(k for k, _ in ep.session if k.lower().startswith("tidb_")))
    return dataclasses.replace(ep, session=rest)


_TIDB_WARNED: set = set()


def connect(ep: Endpoint, *, database: str | None = None, autocommit: bool = True,
            read_timeout: int | None = 3600, downstream: bool = False, connect_timeout: int = 10):
    """Open a pymysql connection; failures become a Transient error naming the server."""
    import pymysql

    init = _init_command(ep)
    try:
        conn = pymysql.connect(
            host=ep.host, port=int(ep.port), user=ep.user, password=ep.password, database=database,
            charset="utf8mb4", autocommit=autocommit, connect_timeout=connect_timeout, read_timeout=read_timeout,
            write_timeout=read_timeout, init_command=init, local_infile=False, ssl=pymysql_ssl(ep.tls),
        )
        if not downstream:
            show_generated_primary_keys(conn)
        return conn
    except pymysql.err.OperationalError as e:
        plain = _tidb_only(ep, e)
        if plain is not None:
            return connect(plain, database=database, autocommit=autocommit, read_timeout=read_timeout,
                           downstream=downstream, connect_timeout=connect_timeout)
        raise _unreachable(ep, e, downstream) from None


def connect_native(ep: Endpoint, *, read_timeout: int = 3600, downstream: bool = True, local_infile: bool = False,
                   multi_statements: bool = False):
    """Open a mysqlclient (MySQLdb) connection, for the DML executors.

    Why a second driver: the executors run beside the binlog reader in one process, and
    pymysql escapes every value and does its socket I/O in Python under the GIL, which
    the reader needs. mysqlclient escapes in C and releases the GIL while the server
    works. Same charset, timeouts, session variables and error wrapping as ``connect``;
    bytes go as ``_binary'...'`` literals like pymysql's. Its errors are
    ``MySQLdb.MySQLError`` (``args[0]`` is the server's error code, as with pymysql).
    ``local_infile``: allow ``LOAD DATA LOCAL INFILE`` (the full load's write path,
    dm_core/full/load_data.py); it lets the server ask for any client file, so only
    connections that run that statement enable it. ``multi_statements``: the server takes
    several statements separated by ``;`` in one round trip (the DML executors,
    sync/applier.py; the caller must read every result).
    """
    import MySQLdb
    from MySQLdb.constants import CLIENT

    kw = {"init_command": _init_command(ep)}
    if multi_statements:
        kw["client_flag"] = CLIENT.MULTI_STATEMENTS | CLIENT.MULTI_RESULTS
    try:
        return MySQLdb.connect(
            host=ep.host, port=int(ep.port), user=ep.user, password=ep.password, charset="utf8mb4",
            autocommit=True, connect_timeout=10, read_timeout=read_timeout, write_timeout=read_timeout,
            local_infile=local_infile, binary_prefix=True, **kw, **mysqlclient_ssl(ep.tls))
    except MySQLdb.OperationalError as e:
        plain = _tidb_only(ep, e)
        if plain is not None:
            return connect_native(plain, read_timeout=read_timeout, downstream=downstream, local_infile=local_infile,
                                  multi_statements=multi_statements)
        raise _unreachable(ep, e, downstream) from None


def _init_command(ep: Endpoint) -> str:
    """The session's first statement: the endpoint's session variables, time_zone '+00:00' and
    the sql_mode flags below.

    Every shardflow session runs in UTC: the binlog carries TIMESTAMP values as UTC instants and
    the reader decodes them to UTC datetimes, the full load and validation read and write at
    '+00:00' too, so a TIMESTAMP lands as the same instant whatever zone either server runs in
    (a `time_zone` in `target-database.session` is overridden: any other zone would shift them).
    One statement: neither driver runs init_command with multi-statement support.

    >>> _init_command(Endpoint("h", 1, "u", session=(("foreign_key_checks", "0"),)))[:66]
    "SET SESSION foreign_key_checks = 0, SESSION time_zone = '+00:00', "
    """
    pairs = [(k, v) for k, v in ep.session if k.lower() not in ("time_zone", "sql_mode")]
    pairs.append(("time_zone", "+00:00"))
    # A sql_mode of the endpoint's is the base the flags below adjust; the server's otherwise.
    # (One SET evaluates every right-hand side before it assigns, so it cannot read its own.)
    mode = next((_literal(str(v)) for k, v in ep.session if k.lower() == "sql_mode"), "@@SESSION.sql_mode")
    return "SET " + ", ".join([f"SESSION {_quote_var(k)} = %s" % _literal(v) for k, v in pairs]
                              + [_SQL_MODE % mode])


# Values the upstream holds are written back as they are, as DM's sessions do: zero and invalid
# dates (the binlog reader hands them over as text), and 0 in an AUTO_INCREMENT column (which
# would otherwise draw a new id). A value the target cannot hold is refused, never truncated or
# clamped: every session is strict (STRICT_ALL_TABLES), whatever the server's own sql_mode (a
# MySQL server configured with sql_mode='' would otherwise cut a long string short in silence).
# The full load's drifted tables take the strictness off on purpose (full/extract.lenient).
# Every other mode of the session stays.
_SQL_MODE = ("SESSION sql_mode = CONCAT_WS(',', REPLACE(REPLACE(%s, 'NO_ZERO_IN_DATE', ''), "
             "'NO_ZERO_DATE', ''), 'ALLOW_INVALID_DATES', 'NO_AUTO_VALUE_ON_ZERO', 'STRICT_ALL_TABLES')")


def _unreachable(ep: Endpoint, e: Exception, downstream: bool) -> ShardflowError:
    """Either driver's connect failure as a Transient error naming the server, password scrubbed."""
    code = ErrorCode.DOWNSTREAM_UNREACHABLE if downstream else ErrorCode.UPSTREAM_UNREACHABLE
    err = code.error(f"cannot connect to {ep}: {_scrub(str(e.args[-1]) if e.args else str(e), ep)}")
    err.errno = e.args[0] if e.args and isinstance(e.args[0], int) else None   # a refusal (1045) or the server away
    return err


def _literal(v) -> str:
    import pymysql

    if isinstance(v, str) and v.lstrip("-").isdigit():
        return v  # boolean/numeric variables reject quoted numbers (foreign_key_checks = '0')
    return pymysql.converters.escape_item(v, "utf8mb4")


def _quote_var(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ShardflowError(f"invalid session variable name {name!r}")
    return name


def _scrub(text: str, ep: Endpoint) -> str:
    return text.replace(ep.password, "***") if ep.password else text


def as_str(v) -> str:
    """An information_schema value as text (pymysql returns some of them as bytes)."""
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def qi(name: str) -> str:
    """Quote a MySQL identifier.

    >>> qi("a`b")
    '`a``b`'
    """
    return "`" + name.replace("`", "``") + "`"


def qt(schema: str, table: str) -> str:
    return f"{qi(schema)}.{qi(table)}"


def ensure_table(conn, schema: str, table: str, body: str) -> None:
    """Create ``schema`` and ``schema.table`` (columns and keys: ``body``, then its table
    options) if they are missing: shardflow's own tables downstream (the meta schema)."""
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {qi(schema)}")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {qt(schema, table)} {body}")


@functools.lru_cache(maxsize=1)
def database_errors() -> tuple[type[BaseException], ...]:
    """The client libraries' own error classes (those installed): a database's failure, as
    distinct from a shardflow bug. A function, so importing dm_core.db imports no client
    library: an ``except database_errors()`` clause is evaluated only when something raised."""
    out = []
    for mod, attr in (("pymysql.err", "MySQLError"), ("MySQLdb", "MySQLError"), ("psycopg2", "Error")):
        try:
            out.append(getattr(__import__(mod, fromlist=[attr]), attr))
        except ImportError:
            continue
    return tuple(out)


def server_identity(conn) -> str:
    """Which server this is, as replication tells servers apart: its ``server_id`` (unique in a
    replication topology, so a failover to a replica or a moved address gives another one)."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.server_id")
        return f"server_id={cur.fetchone()[0]}"


def show_generated_primary_keys(conn) -> None:
    """MySQL 8.0.30+ may add a generated invisible primary key (``my_row_id``) to a table
    created without one (sql_generate_invisible_primary_key=ON). Its row events carry that
    column, and a session with show_gipk_in_create_table_and_information_schema=OFF would hide
    it from SHOW CREATE TABLE and information_schema: the target would lack it and the schema
    tracker would count one column less than the rows. So every upstream session shows it.
    Other servers have no such variable; nothing is sent to them."""
    if is_mariadb(conn) or mysql_version(conn) < (8, 0, 30):
        return
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION show_gipk_in_create_table_and_information_schema = ON")
    except Exception:   # noqa: BLE001 - a server that lacks it (a fork) hides nothing
        pass


def is_mariadb(conn) -> bool:
    """Whether a connection's server is MariaDB (its version string says so; MySQL's does not),
    from the handshake: no query. Where the flavours differ, code branches once per connection."""
    return "MariaDB" in as_str(conn.get_server_info())


def mysql_version(conn) -> tuple[int, ...]:
    """A MySQL server's version from the handshake ("8.0.36-28", "5.7.44-log", "8.4.0" → (8, 4, 0)).

    >>> class C:
    ...     def get_server_info(self): return "8.0.36-28.1"
    >>> mysql_version(C())
    (8, 0, 36)
    """
    head = as_str(conn.get_server_info()).split("-", 1)[0]
    return tuple(int(p) for p in head.split(".") if p.isdigit())


def binlog_status_sql(conn) -> str:
    """The statement that shows the server's binlog position: SHOW BINARY LOG STATUS on MySQL
    8.2+ (8.4 removed SHOW MASTER STATUS), SHOW MASTER STATUS on older MySQL and on every
    MariaDB (whose SHOW BINLOG STATUS exists only from 10.5.2; MySQL has no such spelling)."""
    if is_mariadb(conn) or mysql_version(conn) < (8, 2):
        return "SHOW MASTER STATUS"
    return "SHOW BINARY LOG STATUS"


def master_position(conn) -> tuple[str, int, str | None]:
    """(file, pos, gtid) the server has written up to now. ``gtid``: MariaDB's gtid_binlog_pos, or
    MySQL's Executed_Gtid_Set (the fifth column, on one line: the server breaks it after each
    comma), "" for an empty set."""
    sql = binlog_status_sql(conn)
    mariadb = is_mariadb(conn)
    with conn.cursor() as cur:
        try:
            faults.hit("upstream.master_status")
            cur.execute(sql)
        except Exception as e:  # noqa: BLE001 - a missing privilege and a lost connection are said
            n = errno_of(e)
            if n in (1227, 1044, 1045):
                raise ErrorCode.BINLOG_PRIVILEGE.error(
                    f"cannot read the upstream's binlog position ({sql}): {e.args[-1]}") from None
            if n is not None and classify(n) == TRANSIENT:   # retried by the source, then said
                raise ErrorCode.UPSTREAM_UNREACHABLE.error(
                    f"cannot read the upstream's binlog position ({sql}): server error "
                    f"{n} ({TRANSIENT_ERRNOS[n]}): {e.args[-1]}") from e
            raise
        row = cur.fetchone()
        if not row:
            raise ErrorCode.BINLOG_OFF.error(f"binary logging is off on the upstream ({sql} is empty)")
        if not mariadb:
            return as_str(row[0]), int(row[1]), _executed_set(row[4]) if len(row) > 4 else None
        gtid = None
        try:
            cur.execute("SELECT @@GLOBAL.gtid_binlog_pos")
            gtid = cur.fetchone()[0] or None
        except Exception:  # noqa: BLE001 - a MariaDB before 10.0 has no GTIDs
            gtid = None
        return row[0], int(row[1]), gtid


def _executed_set(value) -> str | None:
    """MySQL's Executed_Gtid_Set as a checkpoint keeps it: canonical, on one line. A set this
    reader cannot parse (tagged GTIDs) is kept as the server printed it, without its line
    breaks: positions are still read; only a start by that GTID set fails, saying why."""
    if value is None:
        return None
    from dm_core.binlog.mysql_gtid import normalize

    text = as_str(value)
    try:
        return normalize(text)
    except ShardflowError:
        return "".join(text.split())
