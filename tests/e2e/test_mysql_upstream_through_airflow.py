"""A MySQL upstream end to end, without a MySQL server: the test master (tests/mysql_master)
speaks MySQL 5.7, 8.0 or 8.4 and streams binlog files our encoder wrote, checked elsewhere
against mysql-replication. `dmctl start-task` (task-mode incremental, `meta` by file/position
or by GTID set) runs the precheck and the incremental DAG in Airflow; its sensor reads the
stream with the product's reader into the real downstream. What lands must be exactly what
the stream says: unsigned extremes, ENUM/SET, JSON, DECIMAL, text, across a DDL between rows
and (8.0, 8.4) compressed transactions and a table with a generated invisible primary key. 5.7 logs no column names at all and 8.0 logs the
default MINIMAL: their rows are named by the schema tracker, which follows the stream's DDL;
8.4 logs FULL names, checked against the tracker."""

from __future__ import annotations

import json
import subprocess
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest

from dm_core.db import connect, qi, qt
from tests.mysql_master import BinlogBuilder, MysqlMaster

from ..integration.helpers import drop_schemas, run_sql, target_database
from .conftest import airflow_env

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"

BEFORE = ["id INT UNSIGNED NOT NULL PRIMARY KEY", "big BIGINT UNSIGNED", "tiny TINYINT", "e ENUM('red','green','blue')",
          "s SET('a','b','c')", "price DECIMAL(30,10)", "name VARCHAR(32)", "doc JSON"]
AFTER = BEFORE[:1] + ["note VARCHAR(16)"] + BEFORE[1:]      # ALTER TABLE t ADD COLUMN note ... AFTER id
GIPK = ["my_row_id BIGINT UNSIGNED NOT NULL", "c VARCHAR(10)"]
DOC = {"id": 18446744073709551615, "name": "caf\u00e9 \u2603", "n": -1.5e300, "list": [1, None, True, "x"],
       "nested": {"k": [{"deep": "v"}]}}


def _rows_before():
    return [(4294967295, 18446744073709551615, -128, "blue", {"a", "c"}, Decimal("-99999999999999999999.9999999999"),
             "\u00fcber", DOC),
            (1, 0, 127, "red", set(), Decimal("0.0000000001"), "", {"empty": {}}),
            (2, 9223372036854775808, 0, "green", {"b"}, Decimal("12345.6789"), "to be changed", [1, 2, 3])]


def _expected():
    """The rows downstream, as the stream leaves them (id -> the AFTER columns)."""
    rows = {r[0]: (r[0], None) + r[1:] for r in _rows_before()}
    rows[2] = rows[2][:7] + ("changed",) + rows[2][8:]
    del rows[1]
    rows[3] = (3, "after", 5, 1, "red", {"a", "b", "c"}, Decimal("1.5"), "x", {"after": "ddl"})
    rows[4] = (4, "squeezed", 6, -1, "green", set(), Decimal("-2"), "zst", {"z": [1]})
    return [rows[k] for k in sorted(rows)]


def _stream(flavour: str, metadata: str | None, gtid: bool, db: str):
    b = BinlogBuilder(flavour, server_uuid=UUID, row_metadata=metadata, gtid_mode=gtid)
    b.ddl("", "CREATE DATABASE IF NOT EXISTS `ignored_before_meta`")
    start = b.marks[-1]                       # `meta` points here: nothing before it is read
    b.ddl("", f"CREATE DATABASE {qi(db)}")
    b.ddl(db, b.create_table_sql(db, "t", BEFORE))
    b.begin(db)
    b.insert(db, "t", BEFORE, _rows_before())
    b.commit()
    if flavour >= "8.0":   # a table 8.0.30+ gave a generated invisible primary key, logged as MySQL logs it
        b.ddl(db, f"CREATE TABLE {qi(db)}.`g` (`my_row_id` bigint unsigned NOT NULL AUTO_INCREMENT /*!80023 INVISIBLE */, "
                  "`c` varchar(10) DEFAULT NULL, PRIMARY KEY (`my_row_id`))")
        b.begin(db)
        b.insert(db, "g", GIPK, [(1, "a"), (2, "b")])
        b.commit()
    b.rotate()
    b.begin(db)
    before = _rows_before()[2]
    b.update(db, "t", BEFORE, [(before, before[:6] + ("changed",) + before[7:])])
    b.delete(db, "t", BEFORE, [_rows_before()[1]])
    b.commit()
    b.ddl(db, f"ALTER TABLE {qi(db)}.`t` ADD COLUMN `note` VARCHAR(16) AFTER `id`")
    b.begin(db)
    b.insert(db, "t", AFTER, [(3, "after", 5, 1, "red", {"a", "b", "c"}, Decimal("1.5"), "x", {"after": "ddl"})])
    b.commit()
    row = (4, "squeezed", 6, -1, "green", set(), Decimal("-2"), "zst", {"z": [1]})
    if flavour >= "8.0":
        b.compressed_transaction([("insert", db, "t", AFTER, [row])])
    else:
        b.begin(db)
        b.insert(db, "t", AFTER, [row])
        b.commit()
    return b, start


def _downstream(ep, tdb):
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT id, note, big, tiny, e, s, price, name, doc FROM {qt(tdb, 't')} ORDER BY id")
            out = []
            for r in cur.fetchall():
                r = list(r)
                r[5] = set(r[5].split(",")) if r[5] else set()
                r[8] = json.loads(r[8]) if r[8] is not None else None
                out.append(tuple(r))
            return out
    finally:
        conn.close()


def dmctl(stack, *args, check=True, timeout=600) -> subprocess.CompletedProcess:
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "dmctl"), *args], env=airflow_env(stack), capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        pytest.fail(f"dmctl {' '.join(args)} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


CASES = [
    # id, flavour, binlog_row_metadata, gtid_mode, meta by
    ("mysql57-no-names-meta-by-position", "5.7", None, False, "position"),
    ("mysql80-minimal-compressed-meta-by-gtid-set", "8.0", "MINIMAL", True, "gtid"),
    ("mysql84-full-names-compressed-meta-by-gtid-set", "8.4", "FULL", True, "gtid"),
]


@pytest.mark.parametrize("flavour,metadata,gtid,meta_by", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_mysql_stream_lands_exactly_through_start_task_and_the_sensor(stack, airflow, uniq, tmp_path, flavour,
                                                                        metadata, gtid, meta_by):
    db, tdb, name, sid = f"my{uniq}", f"tmy{uniq}", f"my{uniq}", f"my-{uniq}"
    b, start = _stream(flavour, metadata, gtid, db)
    run_sql(stack["up1"], f"CREATE DATABASE {qi(db)}",     # what the master relays information_schema to
            f"CREATE TABLE {qt(db, 't')} ({', '.join(c.replace('JSON', 'LONGTEXT') for c in AFTER)})",
            f"CREATE TABLE {qt(db, 'g')} (my_row_id bigint unsigned NOT NULL AUTO_INCREMENT INVISIBLE PRIMARY KEY, "
            "c varchar(10))")
    installed = ROOT / "config" / "tasks" / f"{name}.yaml"
    with MysqlMaster(flavour, binlog=b, backing=stack["up1"], compression=flavour >= "8.0") as master:
        ep = master.endpoint()
        src = tmp_path / f"{sid}.yaml"
        src.write_text(textwrap.dedent(f"""\
            source-id: {sid}
            enable-gtid: {'true' if meta_by == 'gtid' else 'false'}
            from: {{host: {ep.host}, port: {ep.port}, user: {ep.user}, password: "{ep.password}"}}
            """))
        meta = ({"binlog-gtid": start.gtid_set} if meta_by == "gtid" else
                {"binlog-name": start.file, "binlog-pos": start.pos})
        task = {"name": name, "task-mode": "incremental", "target-database": target_database(stack["down"]),
                "mysql-instances": [{"source-id": sid, "block-allow-list": "ba", "route-rules": ["r"], "meta": meta}],
                "routes": {"r": {"schema-pattern": db, "target-schema": tdb}},
                "block-allow-list": {"ba": {"do-dbs": [db]}}}
        task_file = tmp_path / f"{name}.yaml"
        task_file.write_text(json.dumps(task))
        try:
            dmctl(stack, "operate-source", "create", str(src))
            dmctl(stack, "start-task", str(task_file), "--remove-meta")
            r = dmctl(stack, "query-status", name, "--wait-synced", "300", check=False)
            assert r.returncode == 0, r.stdout + r.stderr + "\nunanswered: " + repr(master.unanswered)
            assert _downstream(stack["down"], tdb) == _expected()
            if flavour >= "8.0":   # the invisible key's values arrive, and every upstream session showed it
                conn = connect(stack["down"])
                with conn.cursor() as cur:
                    cur.execute(f"SELECT my_row_id, c FROM {qt(tdb, 'g')} ORDER BY 1")
                    assert cur.fetchall() == ((1, "a"), (2, "b"))
                conn.close()
                assert "show_gipk_in_create_table_and_information_schema=ON" in master.notes
            assert master.dumps, "the sensor read the stream from the master"
            assert not master.unanswered, master.unanswered
        finally:
            dmctl(stack, "stop-task", name, check=False)
            dmctl(stack, "operate-source", "stop", sid, check=False)
            installed.unlink(missing_ok=True)
            drop_schemas(stack["up1"], [db])
            drop_schemas(stack["down"], [tdb, "ignored_before_meta"])
