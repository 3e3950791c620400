"""The test MySQL master speaks MySQL: logins with both default auth plugins (pymysql is the
client), the statements MySQL answers differently from MariaDB (per flavour), the session
commands, and the binlog dump (file/position and GTID) read by a raw client here."""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pymysql
import pytest

from tests.mysql_master import BinlogBuilder, MysqlMaster
from tests.mysql_master.gtidset import GtidSet

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
PW = "shardflow-local"


def connect(m, user="shardflow", password=PW, **kw):
    return pymysql.connect(host=m.host, port=m.port, user=user, password=password, connect_timeout=5,
                           read_timeout=5, **kw)


def query(m, sql, **kw):
    conn = connect(m, **kw)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return [d[0] for d in cur.description] if cur.description else [], list(cur.fetchall())
    finally:
        conn.close()


def errno(m, sql, **kw) -> int:
    with pytest.raises(pymysql.MySQLError) as e:
        query(m, sql, **kw)
    return e.value.args[0]


def until(pred, timeout=5.0):
    """Poll ``pred`` until true (no fixed sleeps)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(0.005)
    raise AssertionError("condition not reached")


def sample(flavour="8.0", **kw) -> BinlogBuilder:
    b = BinlogBuilder(flavour, server_uuid=UUID, **kw)
    b.ddl("shop", "CREATE TABLE t (id INT PRIMARY KEY)")
    for i in range(3):
        b.insert("shop", "t", ["id INT PRIMARY KEY"], [(i,)])
        b.commit()
    return b


# ---- logins ------------------------------------------------------------------------------------
@pytest.mark.parametrize("flavour", ["8.0", "8.4"])
def test_caching_sha2_full_then_fast_then_full_after_flush(flavour):
    with MysqlMaster(flavour) as m:
        for _ in range(2):
            connect(m).close()
        m.flush_auth_cache()
        connect(m).close()
        assert m.logins == [("shardflow", "caching_sha2_password", s) for s in ("full", "fast", "full")]
        assert errno(m, "SELECT 1", password="wrong") == 1045                      # cached: fast path refuses
        m.flush_auth_cache()
        assert errno(m, "SELECT 1", password="wrong") == 1045                      # full path refuses
        assert query(m, "SELECT 1") == (["1"], [(1,)])


def test_mysql_native_password_is_57s_default():
    with MysqlMaster("5.7") as m:
        assert query(m, "SELECT 1") == (["1"], [(1,)])
        assert m.logins == [("shardflow", "mysql_native_password", "ok")]
        assert errno(m, "SELECT 1", password="nope") == 1045


@pytest.mark.parametrize("flavour, plugin", [("8.0", "mysql_native_password"), ("5.7", "caching_sha2_password")])
def test_a_user_of_the_other_plugin_is_switched(flavour, plugin):
    with MysqlMaster(flavour) as m:
        m.add_user("other", "pw2", plugin)
        assert query(m, "SELECT 2", user="other", password="pw2") == (["2"], [(2,)])
        assert m.logins[-1][:2] == ("other", plugin)
        assert errno(m, "SELECT 2", user="other", password="bad") == 1045
        m.add_user("empty", "", plugin)
        assert query(m, "SELECT 3", user="empty", password="")[1] == [(3,)]
        assert errno(m, "SELECT 1", user="nobody") == 1045


# ---- what MySQL answers ----------------------------------------------------------------------
END = object()   # the binlog's end position, known once built
ANSWERS = [  # (statement, {flavour: rows or error number})
    ("SELECT VERSION()", {"5.7": [("5.7.44-log",)], "8.0": [("8.0.36",)], "8.4": [("8.4.3",)]}),
    ("SELECT @@version_comment", {"5.7": [("MySQL Community Server (GPL)",)],
                                  "8.0": [("MySQL Community Server - GPL",)]}),
    ("SELECT @@GLOBAL.gtid_mode, @@global.server_uuid, @@binlog_format, @@binlog_row_image, @@binlog_checksum",
     {f: [("ON", UUID, "ROW", "FULL", "CRC32")] for f in ("5.7", "8.0", "8.4")}),
    ("SELECT @@GLOBAL.gtid_executed", {f: [(f"{UUID}:1-4",)] for f in ("5.7", "8.4")}),
    ("SELECT @@GLOBAL.binlog_row_metadata", {"5.7": 1193, "8.0": [("MINIMAL",)], "8.4": [("MINIMAL",)]}),
    ("SELECT @@binlog_transaction_compression", {"5.7": 1193, "8.0": [(0,)]}),
    ("SELECT @@GLOBAL.gtid_binlog_pos", {f: 1193 for f in ("5.7", "8.0", "8.4")}),
    ("SELECT @@global.log_bin_compress", {"8.0": 1193}),
    ("SELECT @@GLOBAL.server_id", {"8.0": [(1,)]}),
    ("SHOW MASTER STATUS", {"5.7": [("mysql-bin.000001", END, "", "", f"{UUID}:1-4")], "8.4": 1064}),
    ("SHOW BINARY LOG STATUS", {"5.7": 1064, "8.0": 1064, "8.4": [("binlog.000001", END, "", "", f"{UUID}:1-4")]}),
    ("SHOW BINARY LOGS", {"5.7": [("mysql-bin.000001", END)], "8.0": [("binlog.000001", END, "No")]}),
    ("SHOW MASTER LOGS", {"8.0": [("binlog.000001", END, "No")], "8.4": 1064}),
    ("SHOW SLAVE HOSTS", {"5.7": [], "8.0": [], "8.4": 1064}),
    ("SHOW REPLICAS", {"5.7": 1064, "8.4": []}),
    ("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('version', 'gtid_mode', 'binlog_row_metadata', "
     "'log_bin_compress', 'gtid_binlog_pos')",
     {"5.7": [("gtid_mode", "ON"), ("version", "5.7.44-log")],
      "8.0": [("binlog_row_metadata", "MINIMAL"), ("gtid_mode", "ON"), ("version", "8.0.36")]}),
    ("SHOW VARIABLES LIKE 'BINLOG_CHECKSUM';", {"8.0": [("binlog_checksum", "CRC32")]}),
    ("SHOW GRANTS", {"5.7": [("GRANT ALL PRIVILEGES ON *.* TO 'shardflow'@'%' WITH GRANT OPTION",)]}),
    ("SELECT BINLOG_GTID_POS('binlog.000001', 4)", {"8.0": 1046}),
    ("SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY", {"8.0": 1054}),
]


@pytest.mark.parametrize("flavour", ["5.7", "8.0", "8.4"])
def test_statements_answered_as_the_flavour_does(flavour):
    b = sample(flavour)
    with MysqlMaster(flavour, binlog=b) as m:
        conn = connect(m)
        for sql, per in ANSWERS:
            if flavour not in per:
                continue
            want = per[flavour]
            if isinstance(want, list):
                want = [tuple(b.position[1] if v is END else v for v in row) for row in want]
            with conn.cursor() as cur:
                if isinstance(want, int):
                    with pytest.raises(pymysql.MySQLError) as e:
                        cur.execute(sql)
                    assert e.value.args[0] == want, sql
                else:
                    cur.execute(sql)
                    assert list(cur.fetchall()) == want, sql
        conn.close()
        assert m.unanswered == []


def test_show_binlog_events():
    b = sample("8.0")
    b.compressed_transaction([("insert", "shop", "t", ["id INT PRIMARY KEY"], [(9,)])])
    with MysqlMaster("8.0", binlog=b) as m:
        cols, rows = query(m, "SHOW BINLOG EVENTS IN 'binlog.000001' FROM 4 LIMIT 1, 100")
        assert cols == ["Log_name", "Pos", "Event_type", "Server_id", "End_log_pos", "Info"]
        assert [r[2] for r in rows[:9]] == ["Previous_gtids", "Gtid", "Query", "Gtid", "Query", "Table_map",
                                            "Write_rows", "Xid", "Gtid"]
        assert rows[1][5] == f"SET @@SESSION.GTID_NEXT= '{UUID}:1'"
        assert rows[2][5] == "use `shop`; CREATE TABLE t (id INT PRIMARY KEY)"
        assert rows[5][5] == "table_id: 101 (shop.t)" and rows[6][5] == "table_id: 101 flags: STMT_END_F"
        assert rows[7][5] == "COMMIT /* xid=1 */"
        assert rows[-1][2] == "Transaction_payload" and rows[-1][5].startswith("compression='ZSTD'")
        assert all(r[4] == n[1] for r, n in zip(rows, rows[1:]))       # each ends where the next begins
        assert errno(m, "SHOW BINLOG EVENTS IN 'nope.000001'") == 1220


@pytest.mark.parametrize("flavour", ["8.0", "8.4"])
def test_grants_name_mysql_8_privileges(flavour):
    with MysqlMaster(flavour, privileges=["SELECT", "RELOAD", "REPLICATION SLAVE", "REPLICATION CLIENT",
                                          "BACKUP_ADMIN"]) as m:
        cols, rows = query(m, "SHOW GRANTS FOR CURRENT_USER()")
    assert cols == ["Grants for shardflow@%"]
    assert rows == [("GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `shardflow`@`%`",),
                    ("GRANT BACKUP_ADMIN ON *.* TO `shardflow`@`%`",)]
    with MysqlMaster(flavour) as m:
        rows = query(m, "SHOW GRANTS")[1]
    assert "DROP ROLE ON *.*" in rows[0][0] and "XA_RECOVER_ADMIN" in rows[1][0]
    assert ("FLUSH_PRIVILEGES" in rows[1][0]) == (flavour == "8.4")


def test_collations_are_mysqls():
    with MysqlMaster("8.0") as m:
        got = dict(query(m, "SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")[1])
    assert got[255] == "utf8mb4" and got[45] == "utf8mb4" and got[8] == "latin1" and got[309] == "utf8mb4"
    with MysqlMaster("5.7") as m:
        got = dict(query(m, "SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATIONS")[1])
    assert got[33] == "utf8" and 255 not in got


def test_session_commands_and_user_variables():
    with MysqlMaster("8.0", binlog=sample()) as m:
        conn = connect(m, database="shop")
        with conn.cursor() as cur:
            cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum, @source_binlog_checksum = 'x'")
            cur.execute("SET @master_heartbeat_period = 1000000000")
            with pytest.raises(pymysql.MySQLError) as e:
                cur.execute("SELECT BINLOG_GTID_POS('binlog.000001', 4)")
            assert e.value.args == (1305, "FUNCTION shop.BINLOG_GTID_POS does not exist")
            conn.ping()
            conn.select_db("other")
            with pytest.raises(pymysql.MySQLError) as e:
                cur.execute("SELECT BINLOG_GTID_POS('binlog.000001', 4)")
            assert "other.BINLOG_GTID_POS" in e.value.args[1]
            with pytest.raises(pymysql.MySQLError) as e:
                cur.execute("SELECT a FROM t")       # no backing server: an error, and logged
            assert e.value.args[0] == 1105
        conn.close()
        assert m.unanswered == ["SELECT a FROM t"]
        assert "SET AUTOCOMMIT = 0" in m.ignored


def test_kill_ends_another_session():
    with MysqlMaster("8.0") as m:
        victim, killer = connect(m), connect(m)
        vid = victim.thread_id()
        with killer.cursor() as cur:
            cur.execute(f"KILL CONNECTION {vid}")
            with pytest.raises(pymysql.MySQLError) as e:
                cur.execute("KILL 999999")
            assert e.value.args[0] == 1094
        with pytest.raises(pymysql.MySQLError):
            with victim.cursor() as cur:
                cur.execute("SELECT 1")
        killer.close()


def test_register_slave_is_listed_while_connected():
    with MysqlMaster("8.0") as m:
        conn = connect(m)
        with conn.cursor() as cur:
            cur.execute("SET @replica_uuid = 'aaaaaaaa-0000-0000-0000-000000000001'")
        host = b"replica-1"
        payload = (b"\x15" + struct.pack("<I", 77) + bytes([len(host)]) + host + b"\x00\x00"
                   + struct.pack("<HII", 3307, 0, 0))
        conn._write_bytes(struct.pack("<I", len(payload))[:3] + b"\x00" + payload)
        conn._next_seq_id = 1
        assert conn._read_packet().is_ok_packet()
        assert query(m, "SHOW REPLICAS")[1] == [(77, "replica-1", 3307, 1, "aaaaaaaa-0000-0000-0000-000000000001")]
        assert query(m, "SHOW SLAVE HOSTS")[0] == ["Server_id", "Host", "Port", "Master_id", "Slave_UUID"]
        conn.close()
        until(lambda: query(m, "SHOW REPLICAS")[1] == [])


# ---- the binlog dump ---------------------------------------------------------------------------
class RawDump:
    """A replica's side of COM_BINLOG_DUMP[_GTID], packet by packet."""

    def __init__(self, m, command: bytes, *, checksum="CRC32", heartbeat_ns=None):
        self.conn = connect(m)
        with self.conn.cursor() as cur:
            if checksum:
                cur.execute(f"SET @master_binlog_checksum = '{checksum}'")
            if heartbeat_ns:
                cur.execute(f"SET @master_heartbeat_period = {heartbeat_ns}")
        self.conn._write_bytes(struct.pack("<I", len(command))[:3] + b"\x00" + command)
        self.conn._next_seq_id = 1

    def next(self):
        """An event (bytes), "EOF", or the (errno, message) of an error packet."""
        try:
            pkt = self.conn._read_packet()
        except pymysql.MySQLError as e:
            return e.args
        if pkt.is_eof_packet():
            return "EOF"
        return pkt.get_all_data()[1:]

    def all(self):
        out = []
        while True:
            got = self.next()
            out.append(got)
            if not isinstance(got, bytes):
                return out

    def close(self):
        self.conn._force_close() if hasattr(self.conn, "_force_close") else self.conn.close()


def dump_cmd(file: str, pos: int, *, server_id=501, non_block=True) -> bytes:
    return struct.pack("<BIHI", 0x12, pos, 1 if non_block else 0, server_id) + file.encode()


def dump_gtid_cmd(gtids: str, *, server_id=502, non_block=True, file="", pos=4) -> bytes:
    data = GtidSet(gtids).encode()
    return (struct.pack("<BHII", 0x1E, 4 | (1 if non_block else 0), server_id, len(file)) + file.encode()
            + struct.pack("<QI", pos, len(data)) + data)


def header(ev: bytes):
    ts, typ, sid, size, logpos, flags = struct.unpack_from("<IBIIIH", ev, 0)
    return {"ts": ts, "type": typ, "size": size, "log_pos": logpos, "flags": flags}


def test_non_blocking_dump_from_a_position():
    b = sample()
    start = b.marks[1].pos                         # after the DDL and the first insert
    with MysqlMaster("8.0", binlog=b) as m:
        d = RawDump(m, dump_cmd(b.file, start))
        got = d.all()
        d.close()
    assert got[-1] == "EOF"
    rotate, fde, *events = [header(e) | {"raw": e} for e in got[:-1]]
    assert (rotate["type"], rotate["ts"], rotate["log_pos"], rotate["flags"]) == (4, 0, 0, 0x20)
    assert rotate["raw"][19:27] == struct.pack("<Q", start) and rotate["raw"][27:-4] == b"binlog.000001"
    assert fde["type"] == 15 and fde["log_pos"] == 0          # started past the file's head: cleared
    assert [e["type"] for e in events] == [33, 2, 19, 30, 16] * 2
    assert events[0]["log_pos"] - events[0]["size"] == start and events[-1]["log_pos"] == b.position[1]
    data = b.files[b.file]
    assert b"".join(e["raw"] for e in events) == data[start:]


def test_dump_errors_are_1236():
    b = sample()
    with MysqlMaster("8.0", binlog=b) as m:
        cases = {dump_cmd("binlog.000009", 4): "Could not find first log file name",
                 dump_cmd(b.file, 3): "position < 4",
                 dump_cmd(b.file, 999_999): "position > file size",
                 dump_cmd(b.file, 130): "bogus data in log event"}
        for cmd, words in cases.items():
            d = RawDump(m, cmd)
            errno_, message = d.next()
            d.close()
            assert errno_ == 1236 and words in message
        d = RawDump(m, dump_cmd(b.file, 4), checksum=None)     # CRC32 binlog, replica did not say it reads it
        assert header(d.next())["type"] == 4                   # the fake ROTATE goes first, as on MySQL
        assert d.next()[0] == 1236
        d.close()


def test_blocking_dump_waits_sends_heartbeats_and_new_events():
    b = sample()
    with MysqlMaster("8.0", binlog=b) as m:
        end = b.position[1]
        d = RawDump(m, dump_cmd(b.file, end, non_block=False), heartbeat_ns=20_000_000)
        d.conn._sock.settimeout(5)
        assert header(d.next())["type"] == 4 and header(d.next())["type"] == 15
        beat = header(d.next())                                # idle: a heartbeat at the end
        assert (beat["type"], beat["log_pos"]) == (27, end)
        b.insert("shop", "t", ["id INT PRIMARY KEY"], [(9,)])
        mark = b.commit()
        m.publish()
        types = []
        while not types or types[-1] != 16:
            ev = header(d.next())
            if ev["type"] != 27:
                types.append(ev["type"])
        assert types == [33, 2, 19, 30, 16] and ev["log_pos"] == mark.pos
        d.close()


def test_gtid_dump_skips_what_the_replica_has():
    b = sample()
    nxt = b.rotate()
    b.insert("shop", "t", ["id INT PRIMARY KEY"], [(5,)])
    b.commit()
    with MysqlMaster("8.0", binlog=b) as m:
        d = RawDump(m, dump_gtid_cmd(f"{UUID}:1-2"))
        got = [header(e) | {"raw": e} for e in d.all()[:-1]]
        d.close()
        kinds = [e["type"] for e in got]
        # file 1 from its start: rotate, FDE, PREVIOUS_GTIDS, transactions 1-2 skipped (one heartbeat to
        # where they end), 3 and 4, its ROTATE; file 2: rotate, FDE, PREVIOUS_GTIDS, transaction 5
        assert kinds == [4, 15, 35, 27, 33, 2, 19, 30, 16, 33, 2, 19, 30, 16, 4, 4, 15, 35, 33, 2, 19, 30, 16]
        assert got[3]["log_pos"] == b.marks[1].pos and got[3]["raw"][19:-4] == b"binlog.000001"
        assert got[1]["log_pos"] == 0                          # its first transaction was skipped
        sid, gno = uuid.UUID(bytes=got[4]["raw"][20:36]), struct.unpack_from("<q", got[4]["raw"], 36)[0]
        assert (str(sid), gno) == (UUID, 3)
        d = RawDump(m, dump_gtid_cmd(f"{UUID}:1-4"))           # starts in the last file it needs
        rotate = d.next()
        d.close()
        assert rotate[27:-4] == nxt.encode()
        for gtids, words in ((f"{UUID}:1-9", "more GTIDs than the master"),):
            d = RawDump(m, dump_gtid_cmd(gtids))
            got = d.next()
            d.close()
            assert got[0] == 1236 and words in got[1]
    b = sample(purged=f"{UUID}:1-100")
    with MysqlMaster("8.0", binlog=b) as m:
        d = RawDump(m, dump_gtid_cmd(f"{UUID}:1-50"))
        assert d.next()[0] == 1236
        d.close()
    with MysqlMaster("8.0", binlog=sample(gtid_mode=False)) as m:
        d = RawDump(m, dump_gtid_cmd(""))
        assert "GTID_MODE" in d.next()[1]
        d.close()


def test_a_newer_dump_with_the_same_server_id_ends_the_older():
    b = sample()
    with MysqlMaster("8.0", binlog=b) as m:
        old = RawDump(m, dump_cmd(b.file, b.position[1], server_id=7, non_block=False))
        assert header(old.next())["type"] == 4
        until(lambda: m.dumps)
        new = RawDump(m, dump_cmd(b.file, b.position[1], server_id=7, non_block=False))
        assert header(new.next())["type"] == 4
        old.conn._sock.settimeout(5)
        assert header(old.next())["type"] == 15
        with pytest.raises((pymysql.MySQLError, OSError, socket.timeout)):
            while True:
                if not isinstance(old.next(), bytes):
                    raise pymysql.err.OperationalError(2013, "ended")
        new.close()
