"""The test MySQL master with a backing MariaDB (the stack's up1): the encoder's row images
are byte-identical to MariaDB's own for the types both servers store alike; ordinary
statements are relayed (schemas, data, errors), the MySQL-specific ones answered per
flavour; shardflow's precheck and position reads run against "MySQL" end to end.
"""

from __future__ import annotations

import datetime
from decimal import Decimal

import pymysql
import pytest
import yaml

from dm_core.binlog.dump import BinlogDump
from dm_core.db import connect, qi
from tests.mysql_master import BinlogBuilder, MysqlMaster
from tests.mysql_master import tablemap

from .helpers import drop_schemas, run_sql, target_database

pytestmark = pytest.mark.integration

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
# types MariaDB stores (and logs) as MySQL does; JSON is LONGTEXT on MariaDB, so not here
SHARED = ["a TIME(2)", "b TIME(4)", "c TIME(6)", "d TIME", "e DATETIME(3)", "f TIMESTAMP(6)", "g DECIMAL(20,5)",
          "h BIT(10)", "i SET('x','y','z')", "j ENUM('p','q')", "k YEAR", "l DATE", "m DECIMAL(5,0)",
          "n MEDIUMINT", "o FLOAT", "p VARCHAR(300)", "q CHAR(3)", "r BLOB", "s BIGINT UNSIGNED", "t DOUBLE",
          "u TINYINT", "v VARBINARY(4)", "w TEXT", "x SMALLINT UNSIGNED"]
SHARED_ROW = (datetime.timedelta(hours=-1, seconds=-1, microseconds=-10000),
              datetime.timedelta(seconds=-1, microseconds=-120000),
              datetime.timedelta(hours=-838, microseconds=-1), datetime.timedelta(hours=12, minutes=3),
              datetime.datetime(2024, 2, 29, 23, 59, 58, 999000), datetime.datetime(2021, 3, 4, 5, 6, 7, 890123),
              Decimal("-123456789012345.12345"), 0b1000000001, {"x", "z"}, "q", 1999, datetime.date(1000, 1, 1),
              Decimal("-99999"), -8388608, 0.25, "é" * 100, "ab", b"\x00\xff", 2**64 - 1, -1.5e300, -1, b"\x01",
              "naïve", 65535)
# the same row as SQL literals (pymysql writes negative timedeltas wrongly)
SHARED_SQL = ("'-01:00:01.01'", "'-00:00:01.12'", "'-838:00:00.000001'", "'12:03:00'",
              "'2024-02-29 23:59:58.999'", "'2021-03-04 05:06:07.890123'", "-123456789012345.12345", "b'1000000001'",
              "'x,z'", "'q'", "1999", "'1000-01-01'", "-99999", "-8388608", "0.25", "'" + "é" * 100 + "'", "'ab'",
              "X'00ff'", "18446744073709551615", "-1.5e300", "-1", "X'01'", "'naïve'", "65535")


@pytest.fixture
def schema(stack, uniq):
    name = f"mm{uniq}"
    run_sql(stack["up1"], f"CREATE DATABASE {qi(name)}")
    yield name
    drop_schemas(stack["up1"], [name])


def _mariadb_rows_body(ep, schema: str) -> bytes:
    """The WRITE_ROWS body MariaDB logs for SHARED_ROW, from the column count on (MariaDB writes
    v1 row events: an 8-byte post-header; v2 has 10)."""
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {qi(schema)}.t ({', '.join(SHARED)}) DEFAULT CHARSET utf8mb4")
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("SHOW MASTER STATUS")
            file = cur.fetchone()[0]
            cur.execute(f"INSERT INTO {qi(schema)}.t VALUES ({', '.join(SHARED_SQL)})")
    finally:
        conn.close()
    dump = BinlogDump(ep, file, 4, server_id=4711, heartbeat=None, non_block=True)
    try:
        for buf, s, e in dump.events():
            if buf[s + 4] in (23, 30):
                return bytes(buf[s + 19 + (8 if buf[s + 4] == 23 else 10):e - 4])
    finally:
        dump.close()
    raise AssertionError("no row event")


@pytest.mark.parametrize("flavour", ["5.7", "8.0"])
def test_row_images_are_byte_identical_to_mariadbs(stack, schema, flavour):
    body = _mariadb_rows_body(stack["up1"], schema)
    cols = BinlogBuilder(flavour).columns(SHARED)
    mine = tablemap.rows(1, cols, [SHARED_ROW], update=False, last=True)
    assert mine[10:] == body


def test_ordinary_statements_are_relayed(stack, schema):
    b = BinlogBuilder("8.0", server_uuid=UUID)
    run_sql(stack["up1"], f"CREATE TABLE {qi(schema)}.t (id INT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO {qi(schema)}.t VALUES (1, 'é'), (2, NULL)")
    with MysqlMaster("8.0", binlog=b, backing=stack["up1"]) as m:
        conn = pymysql.connect(host=m.host, port=m.port, user="shardflow", password="shardflow-local",
                               database=schema, autocommit=True)
        with conn.cursor() as cur:
            cur.execute("SELECT id, name FROM t ORDER BY id")
            assert cur.fetchall() == ((1, "é"), (2, None))
            cur.execute("SHOW CREATE TABLE t")
            assert "PRIMARY KEY (`id`)" in cur.fetchone()[1]
            cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                        "ORDER BY ORDINAL_POSITION", (schema,))
            assert cur.fetchall() == (("id",), ("name",))
            with pytest.raises(pymysql.MySQLError) as e:
                cur.execute("SELECT * FROM missing")            # MariaDB's error, as it sent it
            assert e.value.args[0] == 1146
            cur.execute("SHOW GLOBAL VARIABLES LIKE 'gtid%'")
            names = dict(cur.fetchall())
            assert names["gtid_mode"] == "ON" and names["gtid_executed"] == "" and "gtid_binlog_pos" not in names
            cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('version', 'lower_case_table_names')")
            assert cur.fetchall() == (("lower_case_table_names", "0"), ("version", "8.0.36"))
            cur.execute("SHOW SESSION STATUS WHERE Variable_name IN ('binlog_snapshot_file', "
                        "'binlog_snapshot_position')")
            assert cur.fetchall() == ()                          # MariaDB's own: none on MySQL
            cur.execute("SET SESSION sql_mode = 1168113696")     # MySQL 8's default, by its bit numbering
            cur.execute("SELECT @@SESSION.sql_mode, @@GLOBAL.sql_mode")
            session, glob = cur.fetchone()
            assert session == glob == ("ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
                                       "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION")
            cur.execute("SELECT @@GLOBAL.gtid_mode = 'ON', VERSION() LIKE '8.0%'")  # rewritten, then relayed
            assert cur.fetchone() == (1, 1)
        conn.close()
        assert m.unanswered == [] and m.forwarded


def _precheck_task(target, schema: str) -> str:
    doc = {"name": "mmchk", "task-mode": "all", "target-database": target_database(target),
           "mysql-instances": [{"source-id": "mysql-src", "block-allow-list": "bal"}],
           "block-allow-list": {"bal": {"do-dbs": [schema]}}}
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.mark.parametrize("flavour, metadata", [("5.7", None), ("8.0", "MINIMAL"), ("8.0", "FULL"), ("8.4", "FULL")])
def test_precheck_runs_against_mysql(stack, schema, flavour, metadata):
    from dm_core.check import run_prechecks
    from dm_core.config.task import parse_task

    run_sql(stack["up1"], f"CREATE TABLE {qi(schema)}.orders (id INT PRIMARY KEY, amount DECIMAL(10,2))")
    b = BinlogBuilder(flavour, row_metadata=metadata, server_uuid=UUID)
    with MysqlMaster(flavour, binlog=b, backing=stack["up1"],
                     privileges=["SELECT", "RELOAD", "LOCK TABLES", "REPLICATION SLAVE", "REPLICATION CLIENT"]) as m:
        task = parse_task(_precheck_task(stack["down"], schema), "mysql-master.yaml")
        report = run_prechecks(task, {"mysql-src": m.endpoint()}, stack["down"])
        assert m.unanswered == []
    by_item = {r.item: r for r in report.results if r.source == "mysql-src"}
    assert by_item["version"].state == "pass" and b.flavour.version in by_item["version"].message
    for item in ("server_id", "binlog_enable", "binlog_format", "binlog_row_image", "replication_privilege",
                 "dump_privilege", "table_schema"):
        assert by_item[item].state == "pass", report.render()
    assert not report.errors, report.render()


@pytest.mark.parametrize("flavour", ["5.7", "8.0"])
def test_session_helpers_read_mysql_answers(stack, schema, flavour):
    from dm_core.ddl.upstream_session import mode_names
    from dm_core.full import snapshot_read

    b = BinlogBuilder(flavour, server_uuid=UUID)
    run_sql(stack["up1"], f"CREATE TABLE {qi(schema)}.t (id INT PRIMARY KEY)")
    with MysqlMaster(flavour, binlog=b, backing=stack["up1"]) as m:
        conn = connect(m.endpoint())
        try:
            want = b.flavour.default_sql_mode
            assert mode_names(conn, sum(1 << bit for bit, n in b.flavour.sql_modes.items()
                                        if n in want.split(","))) == want
            assert snapshot_read.begin(conn) == {}               # MySQL has no binlog_snapshot_* status
            snapshot_read.end(conn)
        finally:
            conn.close()
        assert m.unanswered == []
