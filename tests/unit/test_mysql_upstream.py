"""What shardflow sends a MySQL upstream (5.7, 8.0, 8.4) and what it makes of the answers,
without a server: the dump request (COM_BINLOG_DUMP / COM_BINLOG_DUMP_GTID, the session
variables before it), GTID positions found by a GTID dump and the GTID set at a position, the
binlog status statement (8.4 has no SHOW MASTER STATUS), and the precheck's privilege and
compression items. MariaDB's side is held unchanged next to each."""

import struct

import pytest

from dm_core import db
from dm_core.binlog import dump as dump_mod
from dm_core.binlog import events as ev
from dm_core.binlog import gtid as gtid_mod
from dm_core.binlog.dump import BinlogDump, dump_gtid_request
from dm_core.check.grants import Grants
from dm_core.check.privileges import replication_privilege
from dm_core.check.probe import ServerFacts
from dm_core.check.server import binlog_compression
from dm_core.db import Endpoint
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.position import Position
from tests.mysql_binlog import UUID_A, UUID_B, MysqlBinlog, gtid_set_bytes

MARIADB, MYSQL57, MYSQL80, MYSQL84 = "5.5.5-10.11.6-MariaDB-0+deb12u1", "5.7.44-log", "8.0.36", "8.4.3"


class FakeCursor:
    def __init__(self, conn):
        self.conn, self.connection, self.rows = conn, conn, []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args=None):
        self.conn.sent.append(sql if args is None else (sql, args))
        answer = self.conn.answers.get(sql.split(" %s")[0], [])
        if isinstance(answer, Exception):
            raise answer
        self.rows = list(answer)

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self):
        return self.rows

    def close(self):
        pass


class FakeConn:
    def __init__(self, version, answers=None):
        self.version, self.answers, self.sent, self.written = version, answers or {}, [], b""

        class Sock:
            def settimeout(self, _):
                pass
        self._sock = Sock()

    def get_server_info(self):
        return self.version

    def cursor(self):
        return FakeCursor(self)

    def _write_bytes(self, data):
        self.written += data

    def thread_id(self):
        return 0

    def _force_close(self):
        pass

    def close(self):
        pass


CHECKSUM = {"SELECT @@global.binlog_checksum": [("CRC32",)]}


@pytest.mark.parametrize("version, gtid, statements, packet", [
    (MARIADB, None, ["SELECT @@global.binlog_checksum", "SET @master_binlog_checksum = @@global.binlog_checksum",
                     "SET @mariadb_slave_capability = 4", ("SET @master_heartbeat_period = %s", (1_000_000_000,))],
     struct.pack("<BIHI", 0x12, 1234, 0, 9) + b"binlog.000003"),
    (MARIADB, "0-1-5", ["SELECT @@global.binlog_checksum", "SET @master_binlog_checksum = @@global.binlog_checksum",
                        "SET @mariadb_slave_capability = 4", ("SET @slave_connect_state = %s", ("0-1-5",)),
                        "SET @slave_gtid_strict_mode = 0", "SET @slave_gtid_ignore_duplicates = 0",
                        ("SET @master_heartbeat_period = %s", (1_000_000_000,))],
     struct.pack("<BIHI", 0x12, 4, 0, 9)),
    (MYSQL84, None, ["SELECT @@global.binlog_checksum",
                     "SET @master_binlog_checksum = @@global.binlog_checksum, "
                     "@source_binlog_checksum = @@global.binlog_checksum",
                     ("SET @master_heartbeat_period = %s, @source_heartbeat_period = %s",
                      (1_000_000_000, 1_000_000_000))],
     struct.pack("<BIHI", 0x12, 1234, 0, 9) + b"binlog.000003"),
    (MYSQL57, f"{UUID_B}:1-3,\n{UUID_A}:1-5:7", [
        "SELECT @@global.binlog_checksum",
        "SET @master_binlog_checksum = @@global.binlog_checksum, @source_binlog_checksum = @@global.binlog_checksum",
        ("SET @master_heartbeat_period = %s, @source_heartbeat_period = %s", (1_000_000_000, 1_000_000_000))],
     # 0x1e, flags (THROUGH_GTID), server id, name length 0, position 4 (u64), data length, data
     struct.pack("<BHIIQI", 0x1E, 4, 9, 0, 4, 8 + 2 * 24 + 3 * 16)
     + gtid_set_bytes({UUID_A: [(1, 5), (7, 7)], UUID_B: [(1, 3)]})),
])
def test_the_dump_request_and_what_is_set_before_it(monkeypatch, version, gtid, statements, packet):
    conn = FakeConn(version, CHECKSUM)
    monkeypatch.setattr(dump_mod, "connect", lambda *a, **k: conn)
    monkeypatch.setitem(dump_mod._CHARSETS, ("h", 1), {})   # the collation table, read once per server
    d = BinlogDump(Endpoint("h", 1, "u"), "binlog.000003", 1234, server_id=9, gtid=gtid)
    assert conn.sent == statements
    assert conn.written == struct.pack("<I", len(packet))[:3] + b"\x00" + packet
    assert d.mariadb == (version == MARIADB) and d.checksum


def test_the_gtid_dump_request_for_a_non_blocking_read():
    got = dump_gtid_request(f"{UUID_A}:1-5", 77, non_block=True)
    assert got == struct.pack("<BHIIQI", 0x1E, 5, 77, 0, 4, 48) + struct.pack("<Q", 1) \
        + bytes.fromhex(UUID_A.replace("-", "")) + struct.pack("<QQQ", 1, 1, 6)


class FakeDump:
    """A non-blocking dump's stream (the events of a MysqlBinlog), as binlog/gtid.py reads it."""

    def __init__(self, binlog, mariadb=False):
        self.binlog, self.mariadb, self.checksum, self.closed = binlog, mariadb, binlog.checksum, False

    def events(self):
        for data in self.binlog.events:
            yield data, 0, len(data)

    def close(self):
        self.closed = True


def _heartbeat(b, log_pos):
    b.add(ev.HEARTBEAT, b.file.encode(), log_pos=log_pos, ts=0)
    b.pos -= len(b.events[-1])   # sent by the server, not in the file


def _no_master_position(*a, **k):
    raise AssertionError("the stream's own end is the answer: no SHOW ... STATUS after the dump")


def test_a_mysql_gtid_dump_finds_the_first_transaction_not_in_the_set(monkeypatch):
    """The server skips the set's transactions and says where the skipped run ended with a
    HEARTBEAT; the first transaction it sends starts at its GTID event."""
    b = MysqlBinlog(file="binlog.000004")
    b.file_start({UUID_A: [(1, 5)]})
    _heartbeat(b, 900)                # A:6..A:9 were skipped, up to 900
    b.pos = 900
    first = b.pos
    b.gtid(UUID_A, 10)
    b.query("BEGIN")
    d = FakeDump(b)
    monkeypatch.setattr(gtid_mod, "BinlogDump", lambda *a, **k: d)
    monkeypatch.setattr(gtid_mod, "connect", _no_master_position)
    got = gtid_mod.position_of_gtid(Endpoint("h", 1, "u"), f"{UUID_A}:1-9,\n{UUID_B}:1", server_id=9)
    assert (got.file, got.pos, got.gtid) == ("binlog.000004", first, f"{UUID_A}:1-9,{UUID_B}:1") and d.closed


def test_a_mysql_gtid_dump_that_skips_everything_ends_where_the_stream_ends(monkeypatch):
    b = MysqlBinlog(file="binlog.000004")
    b.file_start({UUID_A: [(1, 5)]})
    _heartbeat(b, 2000)
    b.pos = 2000
    prev_end = b.rotate("binlog.000005", {UUID_A: [(1, 20)]})   # nothing in the newest file yet
    monkeypatch.setattr(gtid_mod, "BinlogDump", lambda *a, **k: FakeDump(b))
    monkeypatch.setattr(gtid_mod, "connect", _no_master_position)
    got = gtid_mod.position_of_gtid(Endpoint("h", 1, "u"), f"{UUID_A}:1-20", server_id=9)
    assert (got.file, got.pos, got.gtid) == ("binlog.000005", prev_end, f"{UUID_A}:1-20")


def _file_with_transactions():
    b = MysqlBinlog(file="binlog.000009")
    b.file_start({UUID_A: [(1, 5)]})
    starts = [b.pos]
    for uuid, gno in ((UUID_A, 6), (UUID_B, 1), (None, 0), (UUID_A, 7)):
        b.gtid(uuid, gno) if uuid else b.anonymous()
        b.query("BEGIN")
        starts.append(b.xid())
    return b, starts


@pytest.mark.parametrize("at, want", [
    (0, f"{UUID_A}:1-5"),                       # before any transaction: the file's PREVIOUS_GTIDS
    (1, f"{UUID_A}:1-6"),
    (2, f"{UUID_A}:1-6,{UUID_B}:1"),
    (3, f"{UUID_A}:1-6,{UUID_B}:1"),           # after an anonymous transaction: no GTID of its own
    (4, f"{UUID_A}:1-7,{UUID_B}:1"),           # the end of the file
])
def test_the_gtid_set_at_a_position_is_previous_gtids_and_the_gtids_before_it(monkeypatch, at, want):
    b, starts = _file_with_transactions()
    monkeypatch.setattr(gtid_mod, "BinlogDump", lambda *a, **k: FakeDump(b))
    assert gtid_mod.mysql_gtid_at(Endpoint("h", 1, "u"), b.file, starts[at], server_id=9) == want


def test_the_gtid_set_at_a_position_of_a_file_without_previous_gtids_is_unknown(monkeypatch):
    b = MysqlBinlog(file="binlog.000001")
    b.start_stream()
    b.anonymous()
    b.query("BEGIN")
    end = b.xid()
    monkeypatch.setattr(gtid_mod, "BinlogDump", lambda *a, **k: FakeDump(b))
    assert gtid_mod.mysql_gtid_at(Endpoint("h", 1, "u"), b.file, end, server_id=9) is None


def test_the_checkpoint_gets_the_gtid_set_of_its_position_from_a_mysql_server(monkeypatch):
    """A start by file/position without a GTID set (`enable-gtid` turned on later): MariaDB
    answers BINLOG_GTID_POS(); MySQL has no such function: its binlog is read."""
    from dm_core.sync import checkpoint

    class Task:
        name = "t"

    seen = {}
    monkeypatch.setattr(db, "connect", lambda ep: FakeConn(MYSQL80))
    monkeypatch.setattr(gtid_mod, "mysql_gtid_at",
                        lambda ep, f, p, server_id: seen.setdefault("args", (f, p)) and f"{UUID_A}:1-7")
    positions = checkpoint.SourcePositions(Task(), "s1", None)
    pos = positions._adjust_gtid(Endpoint("h", 1, "u"), Position("binlog.000009", 700))
    assert (pos.file, pos.pos, pos.gtid) == ("binlog.000009", 700, f"{UUID_A}:1-7")
    assert seen["args"] == ("binlog.000009", 700)
    maria = FakeConn(MARIADB, {"SELECT BINLOG_GTID_POS(%s,": [("0-1-42",)]})
    monkeypatch.setattr(db, "connect", lambda ep: maria)
    pos = checkpoint.SourcePositions(Task(), "s1", None)._adjust_gtid(Endpoint("h", 1, "u"), Position("b.000001", 700))
    assert pos.gtid == "0-1-42" and maria.sent == [("SELECT BINLOG_GTID_POS(%s, %s)", ("b.000001", 700))]


# ---- the binlog status statement ------------------------------------------------------------
ROW = ("binlog.000003", 157, "", "")


@pytest.mark.parametrize("version, sql, row, gtid", [
    (MARIADB, "SHOW MASTER STATUS", ROW, "0-1-42"),
    (MYSQL57, "SHOW MASTER STATUS", ROW + (f"{UUID_A}:1-5",), f"{UUID_A}:1-5"),
    ("8.0.36-28", "SHOW MASTER STATUS", ROW + (f"{UUID_B}:1-3,\n{UUID_A}:1-5",), f"{UUID_A}:1-5,{UUID_B}:1-3"),
    ("8.2.0", "SHOW BINARY LOG STATUS", ROW + ("",), ""),            # gtid_mode OFF, or nothing executed yet
    (MYSQL84, "SHOW BINARY LOG STATUS", ROW + (f"{UUID_A}:1-5:7",), f"{UUID_A}:1-5:7"),
    (MYSQL84, "SHOW BINARY LOG STATUS", ROW + (f"{UUID_A}:tag:1-5,\n{UUID_B}:1",), f"{UUID_A}:tag:1-5,{UUID_B}:1"),
])
def test_the_binlog_position_is_asked_as_each_server_spells_it(version, sql, row, gtid):
    conn = FakeConn(version, {sql: [row], "SELECT @@GLOBAL.gtid_binlog_pos": [("0-1-42",)]})
    assert db.binlog_status_sql(conn) == sql
    assert db.master_position(conn) == ("binlog.000003", 157, gtid)
    assert conn.sent[0] == sql and ("SHOW MASTER STATUS" not in conn.sent) == (sql != "SHOW MASTER STATUS")


def test_a_missing_privilege_names_the_statement_sent():
    import pymysql

    conn = FakeConn(MYSQL84, {"SHOW BINARY LOG STATUS": pymysql.err.OperationalError(1227, "Access denied; you need "
                                                                                        "REPLICATION CLIENT")})
    with pytest.raises(ShardflowError) as exc:
        db.master_position(conn)
    assert exc.value.code is ErrorCode.BINLOG_PRIVILEGE and "(SHOW BINARY LOG STATUS)" in str(exc.value)


# ---- the precheck ---------------------------------------------------------------------------
@pytest.mark.parametrize("lines, state", [
    # MySQL 8.4 (static privileges keep their names; dynamic ones come on a line of their own)
    (["GRANT RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `dm`@`%`",
      "GRANT BACKUP_ADMIN,REPLICATION_SLAVE_ADMIN ON *.* TO `dm`@`%`",
      "GRANT SELECT ON `shop`.* TO `dm`@`%`"], "pass"),
    (["GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, RELOAD, SHUTDOWN, PROCESS, FILE, REFERENCES, INDEX, ALTER, "
      "SHOW DATABASES, SUPER, CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, REPLICATION SLAVE, REPLICATION CLIENT, "
      "CREATE VIEW, SHOW VIEW, CREATE ROUTINE, ALTER ROUTINE, CREATE USER, EVENT, TRIGGER, CREATE TABLESPACE, "
      "CREATE ROLE, DROP ROLE ON *.* TO `root`@`localhost` WITH GRANT OPTION",
      "GRANT APPLICATION_PASSWORD_ADMIN,AUDIT_ABORT_EXEMPT,BINLOG_ADMIN,FLUSH_PRIVILEGES,REPLICATION_APPLIER,"
      "XA_RECOVER_ADMIN ON *.* TO `root`@`localhost` WITH GRANT OPTION",
      "GRANT PROXY ON ``@`` TO `root`@`localhost` WITH GRANT OPTION"], "pass"),
    (["GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'dm'@'%'"], "pass"),              # MySQL 5.7
    (["GRANT BINLOG MONITOR, REPLICATION SLAVE ON *.* TO `dm`@`%`"], "pass"),                 # MariaDB 10.5+
    (["GRANT REPLICATION REPLICA, BINLOG MONITOR ON *.* TO `dm`@`%`"], "pass"),               # MariaDB's new word
    (["GRANT REPLICATION SLAVE, REPLICATION_SLAVE_ADMIN ON *.* TO `dm`@`%`"], "fail"),       # the _ADMIN is another
    (["GRANT ALL PRIVILEGES ON *.* TO `dm`@`%`"], "pass"),
])
def test_the_replication_privileges_of_each_server(lines, state):
    src = ServerFacts("s1", "h:1", user="dm", grants=Grants.parse(lines))
    (got,) = replication_privilege(None, src)
    assert got.state == state, got


@pytest.mark.parametrize("variables, state", [
    ({"binlog_transaction_compression": "ON", "binlog_row_value_options": ""}, "pass"),   # read: binlog/payload.py
    ({"binlog_transaction_compression": "OFF", "binlog_row_value_options": "PARTIAL_JSON"}, "fail"),
    ({"log_bin_compress": "ON"}, "fail"),
    ({}, "pass"),
])
def test_compressed_mysql_transactions_pass_the_precheck(variables, state):
    got = binlog_compression(None, ServerFacts("s1", "h:1", variables=variables))
    assert [r.state for r in got] == [state], got
