"""MySQL-protocol connections (upstream sources and the downstream target).

One place that opens connections, so timeouts, charset and error wrapping are the same
everywhere, and a password can never leak into an error message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.errors import ErrorCode, ShardflowError


@dataclass(frozen=True)
class Endpoint:
    """Where a MySQL-protocol server is and how to log in. ``password`` never prints."""

    host: str
    port: int
    user: str
    password: str = field(default="", repr=False)
    name: str = ""  # a label for messages: "source mysql-01", "target"
    session: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        label = f"{self.name} " if self.name else ""
        return f"{label}{self.user}@{self.host}:{self.port}"


def connect(ep: Endpoint, *, database: str | None = None, autocommit: bool = True,
            read_timeout: int | None = 3600, downstream: bool = False, connect_timeout: int = 10):
    """Open a pymysql connection; failures become a Transient error naming the server."""
    import pymysql

    init = ";".join(f"SET SESSION {_quote_var(k)} = %s" % _literal(v) for k, v in ep.session) or None
    try:
        return pymysql.connect(
            host=ep.host, port=int(ep.port), user=ep.user, password=ep.password, database=database,
            charset="utf8mb4", autocommit=autocommit, connect_timeout=connect_timeout, read_timeout=read_timeout,
            write_timeout=read_timeout, init_command=init, local_infile=False,
        )
    except pymysql.err.OperationalError as e:
        raise _unreachable(ep, e, downstream) from None


def connect_native(ep: Endpoint, *, read_timeout: int = 3600, downstream: bool = True):
    """Open a mysqlclient (MySQLdb) connection, for the DML executors.

    Why a second driver: the executors run beside the binlog reader in one process, and
    pymysql escapes every value and does its socket I/O in Python under the GIL, which
    the reader needs. mysqlclient escapes in C and releases the GIL while the server
    works. Same charset, timeouts, session variables and error wrapping as ``connect``;
    bytes go as ``_binary'...'`` literals like pymysql's. Its errors are
    ``MySQLdb.MySQLError`` (``args[0]`` is the server's error code, as with pymysql).
    """
    import MySQLdb

    # one statement: mysqlclient runs init_command without multi-statement support
    init = ", ".join(f"SESSION {_quote_var(k)} = %s" % _literal(v) for k, v in ep.session)
    kw = {"init_command": "SET " + init} if init else {}
    try:
        return MySQLdb.connect(
            host=ep.host, port=int(ep.port), user=ep.user, password=ep.password, charset="utf8mb4",
            autocommit=True, connect_timeout=10, read_timeout=read_timeout, write_timeout=read_timeout,
            local_infile=False, binary_prefix=True, **kw)
    except MySQLdb.OperationalError as e:
        raise _unreachable(ep, e, downstream) from None


def _unreachable(ep: Endpoint, e: Exception, downstream: bool) -> ShardflowError:
    """Either driver's connect failure as a Transient error naming the server, password scrubbed."""
    code = ErrorCode.DOWNSTREAM_UNREACHABLE if downstream else ErrorCode.UPSTREAM_UNREACHABLE
    return code.error(f"cannot connect to {ep}: {_scrub(str(e.args[-1]) if e.args else str(e), ep)}")


def _literal(v) -> str:
    import pymysql

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


def master_position(conn) -> tuple[str, int, str | None]:
    """(file, pos, gtid) the server has written up to now."""
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
        if not row:
            raise ErrorCode.SCHEMA_UNKNOWN.error(
                "binary logging is off on the upstream (SHOW MASTER STATUS is empty)",
                workaround="start the server with --log-bin --binlog-format=ROW --binlog-row-image=FULL --binlog-row-metadata=FULL",
            )
        gtid = None
        try:
            cur.execute("SELECT @@GLOBAL.gtid_binlog_pos")
            gtid = cur.fetchone()[0] or None
        except Exception:  # MySQL: Executed_Gtid_Set is in SHOW MASTER STATUS
            gtid = row[4] if len(row) > 4 else None
        return row[0], int(row[1]), gtid
