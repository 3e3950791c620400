"""RENAME TABLE while the full phase loads, on real servers and a real Spark load
(dm_core/full/renames.py, dm_core/full/reread.py).

* A daily rotation (``RENAME TABLE log TO log_old, log_new TO log``) while ``log`` is being
  read: its later chunks read ``log_new``'s rows into ``log``'s target and the catch-up
  renamed that mixture to ``log_old`` (448 of 600 rows lost). ``finish`` reads the tables the
  rotation tied together again at a consistent snapshot, the catch-up takes them from there:
  every table equal, ``log_new`` gone downstream too. A failure after the targets were dropped
  and before they were read again, or after one of them was: the rerun of ``finish`` does it
  all again.
* The same inside a merged target: the renamed shard cannot be read again alone, so the full
  phase does not hand over (FULL_LOAD_RENAMED names the statement, its position and the table
  in the DAG's error and in query-status, no high watermark); the way out the error gives (drop
  the downstream tables, start over with --remove-meta) then loads and syncs every row.
* Renames that harm nothing pass untouched: one between the low watermark and the targets'
  creation (the load reads the table under its new name) and one of a table the load had read
  completely (the catch-up renames the loaded rows with it).
"""

import subprocess
import threading
import time

import psycopg2
import pytest

from dm_core import faults
from dm_core.config.task import parse_task
from dm_core.db import connect, master_position, qi, qt
from dm_core.errors import ErrorCode, ShardflowError
from dm_core.full import chunk_writer
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.state.schema import SCHEMA

from .helpers import register, shard_task_yaml
from .shard_helpers import assert_settled, assert_union, columns, drive, make_tables, run
from .test_full_support import job_lines, spark_env, submit_cmd

pytestmark = pytest.mark.integration

ROWS = 600   # chunks of 50: 12 per table, 0.3 s each


def _chunks(dsn, task, table) -> int:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {SCHEMA}.full_chunk WHERE task = %s AND table_name = %s", (task, table))
        return int(cur.fetchone()[0])


def _tables(ep, schema) -> set[str]:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))
            return {r[0] for r in cur.fetchall()}
    finally:
        conn.close()


class _Load:
    """The task's low watermark, targets and a Spark load in the background."""

    def __init__(self, stack, uniq, tmp_path, name, shard_mode=""):
        self.stack, self.tmp, self.name = stack, tmp_path, name
        self.prefix, self.tdb = f"rn{uniq}", f"trn{uniq}"
        self.schema = f"{self.prefix}_1"
        self.sid = f"a-{uniq}"
        text = shard_task_yaml(name, stack["down"], [(self.sid, 1)], self.prefix, self.tdb, shard_mode=shard_mode,
                               do_dbs={self.sid: [self.schema]})
        self.task = parse_task(text, "rn.yaml")
        self.store = StateStore()
        self.text = text
        self.proc = None

    def begin(self, tables, rows=ROWS, *setup):
        """The shard's tables with ``rows`` rows each, ``setup`` statements, the task, the low watermark."""
        make_tables(self.stack["up1"], self.schema, tables, rows)
        run(self.stack["up1"], *setup)
        self.register()
        self.low_watermark()

    def register(self):
        register(self.store, {self.sid: self.stack["up1"]}, self.name, self.text)

    def low_watermark(self):
        conn = connect(self.stack["up1"])
        f, p, g = master_position(conn)
        conn.close()
        self.store.update_source_state(self.name, self.sid, low_file=f, low_pos=p, low_gtid=g, stage="full")

    def start(self, sleep="0.3"):
        prepare(self.task, self.store)
        self.proc = subprocess.Popen(submit_cmd(self.name, "--chunk-rows", "50"), start_new_session=True,
                                     env=spark_env({"SHARDFLOW_FAULTS": f"full.before_chunk_merge=sleep:{sleep}"}),
                                     stdout=open(self.tmp / "load.out", "w"), stderr=open(self.tmp / "load.err", "w"))

    def wait_chunks(self, table, n):
        deadline = time.monotonic() + 300
        while _chunks(self.stack["state_dsn"], self.name, table) < n:
            assert self.proc.poll() is None, job_lines(self.tmp / "load.err")
            assert time.monotonic() < deadline, f"no {n} chunks of {table} within 300 s"
            time.sleep(0.05)

    def wait(self):
        rc = self.proc.wait(timeout=600)
        assert rc == 0, job_lines(self.tmp / "load.err")

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        reset_task(self.store, self.name)
        self.store.close()
        run(self.stack["up1"], f"DROP DATABASE IF EXISTS {qi(self.schema)}")
        run(self.stack["down"], f"DROP DATABASE IF EXISTS {qi(self.tdb)}")


@pytest.fixture
def new_load(stack, uniq, tmp_path):
    """``new_load(prefix, shard_mode="")``: a _Load, closed (task reset, schemas dropped) after the test."""
    made = []

    def make(prefix, shard_mode=""):
        made.append(_Load(stack, uniq, tmp_path, f"{prefix}{uniq}", shard_mode))
        return made[-1]

    yield make
    for ld in made:
        ld.close()


def _rotate_while_loading(ld, up, table, rotation_to, new_rows):
    """``table`` loads and is written; meanwhile a new table is made and filled and swapped in
    for it (the old table's changes before the swap must not reach the new one downstream)."""
    s = ld.schema
    ld.start()
    ld.wait_chunks(table, 3)
    run(up, f"UPDATE {qt(s, table)} SET amount = amount + 1 WHERE id % 9 = 0",
        f"INSERT INTO {qt(s, table)} (name, amount) VALUES ('old day, late', 4)",
        f"DELETE FROM {qt(s, table)} WHERE id = 5",
        f"CREATE TABLE {qt(s, table + '_new')} LIKE {qt(s, table)}",
        f"ALTER TABLE {qt(s, table + '_new')} ADD COLUMN tag varchar(8) NOT NULL DEFAULT 'new'",
        f"INSERT INTO {qt(s, table + '_new')} (id, name, amount) VALUES {new_rows}",
        f"RENAME TABLE {qt(s, table)} TO {qt(s, rotation_to)}, {qt(s, table + '_new')} TO {qt(s, table)}")
    assert _chunks(ld.stack["state_dsn"], ld.name, table) < 12, f"the rotation must land while {table} still loads"


def test_a_rotation_while_the_table_loads_is_read_again(stack, new_load, monkeypatch):
    ld = new_load("rn")
    up, s = stack["up1"], ld.schema
    ld.begin(["log", "other"])
    # the new day's table, written before the swap (its ids overlap the old table's)
    _rotate_while_loading(ld, up, "log", "log_old", "(1, 'new day 1', 1), (2, 'new day 2', 2), (700, 'n', 7)")
    run(up, f"INSERT INTO {qt(s, 'log')} (name, amount) VALUES ('new day, after the swap', 9)",
        f"UPDATE {qt(s, 'log_old')} SET amount = amount + 1000 WHERE id % 7 = 0")
    ld.wait()

    # a failure once the targets are emptied, before they are read again: the rerun does it again
    monkeypatch.setenv("SHARDFLOW_FAULTS", "full.reread.after_empty=raise:1")
    faults._hits.clear()
    with pytest.raises(faults.FaultInjected):
        finish(ld.task, ld.store)
    assert not ld.store.source_state(ld.name, ld.sid)["high_file"]
    # and once the first table of the three is read again, not the second: all again next time
    monkeypatch.setenv("SHARDFLOW_FAULTS", "full.small_table=raise:2")
    faults._hits.clear()
    with pytest.raises(ShardflowError) as got:
        finish(ld.task, ld.store)
    assert got.value.code is ErrorCode.FULL_LOAD_FAILED and "log_old" in str(got.value), str(got.value)
    monkeypatch.delenv("SHARDFLOW_FAULTS")
    finish(ld.task, ld.store)

    # the first transaction after the re-read's snapshot, large enough to come in pieces (the
    # pieces before its last carry its start, which is the snapshot's position)
    run(up, f"INSERT INTO {qt(s, 'log')} (name, amount) SELECT REPEAT('x', 60), seq "
            f"FROM {qi(s)}.seq_1_to_40000",
        f"INSERT INTO {qt(s, 'log_old')} (name, amount) VALUES ('late to the old day', 3)",
        f"DELETE FROM {qt(s, 'log')} WHERE id = 2")
    assert_settled(drive(ld.task, ld.store, [ld.sid]))
    assert_union(ld.task, ld.store)
    down = _tables(stack["down"], ld.tdb)
    assert {"log", "log_old", "other"} <= down and "log_new" not in down, down
    assert [c for c, _ in columns(stack["down"], ld.tdb, "log")] == [c for c, _ in columns(up, s, "log")]


# Other statements that move a table's rows while it loads: (what, setup before the load,
# statements mid-load, tables downstream afterwards, tables not downstream)
MOVES = [
    ("RENAME TABLE: the rest of log lives on as log_2", [],
     ["RENAME TABLE {log} TO {s}.`log_2`", "INSERT INTO {s}.`log_2` (name, amount) VALUES ('after', 1)"],
     {"log_2", "other"}, {"log"}),
    ("ALTER TABLE ... RENAME", [],
     ["ALTER TABLE {log} ADD COLUMN note varchar(10) NULL, RENAME TO {s}.`log_3`",
      "UPDATE {s}.`log_3` SET note = 'n' WHERE id % 4 = 0"],
     {"log_3", "other"}, {"log"}),
    ("EXCHANGE PARTITION with a loaded table", [
        "ALTER TABLE {log} PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (1000), "
        "PARTITION p1 VALUES LESS THAN MAXVALUE)",
        "CREATE TABLE {s}.`swap` LIKE {log}", "ALTER TABLE {s}.`swap` REMOVE PARTITIONING",
        "INSERT INTO {s}.`swap` (id, name, amount) VALUES (1, 'swapped in', 1), (999, 'swapped in', 2)"],
     ["ALTER TABLE {log} EXCHANGE PARTITION p0 WITH TABLE {s}.`swap`"],
     {"log", "swap", "other"}, set()),
]


@pytest.mark.parametrize("what,setup,moves,present,absent", MOVES, ids=[m[0] for m in MOVES])
def test_rows_moved_away_while_a_table_loads_are_read_again(stack, new_load, what, setup, moves, present, absent):
    ld = new_load("rv")
    up, s = stack["up1"], ld.schema
    names = {"log": qt(s, "log"), "s": qi(s)}
    ld.begin(["log", "other"], ROWS, *[q.format(**names) for q in setup])
    ld.start()
    ld.wait_chunks("log", 3)
    run(up, f"UPDATE {names['log']} SET amount = amount + 1 WHERE id % 9 = 0", *[q.format(**names) for q in moves])
    assert _chunks(stack["state_dsn"], ld.name, "log") < 12, "the statement must land while log still loads"
    ld.wait()
    finish(ld.task, ld.store)
    assert_settled(drive(ld.task, ld.store, [ld.sid]))
    assert_union(ld.task, ld.store)
    down = _tables(stack["down"], ld.tdb)
    assert present <= down and not absent & down, down


def test_a_rotation_inside_a_merged_target_stops_the_handover(stack, new_load):
    ld = new_load("ro")
    up, s = stack["up1"], ld.schema
    ld.begin(["t_1", "t_2"])   # both merge into `t`, ids told apart by the partition id
    _rotate_while_loading(ld, up, "t_1", "t_3", "(1, 'new 1', 1), (700, 'new 700', 7)")
    ld.wait()

    with pytest.raises(ShardflowError) as got:
        finish(ld.task, ld.store)
    assert got.value.code is ErrorCode.FULL_LOAD_RENAMED
    text = str(got.value)
    assert f"`{s}`.`t_1`" in text and "RENAME TABLE" in text and "merged" in text, text
    assert "--remove-meta" in text, text   # the workaround comes with it
    st = ld.store.source_state(ld.name, ld.sid)
    assert st["error_code"] == ErrorCode.FULL_LOAD_RENAMED.number and f"`{s}`.`t_1`" in st["error"]
    assert not st["high_file"] and st["stage"] == "full", "nothing may hand over to the sync"

    # the way out the error gives: drop the downstream tables, start over from a new low watermark
    run(stack["down"], f"DROP DATABASE IF EXISTS {qi(ld.tdb)}")
    ld.register()            # reset_task + the task again: start-task --remove-meta
    ld.low_watermark()
    ld.start(sleep="0")
    ld.wait()
    finish(ld.task, ld.store)
    run(up, f"INSERT INTO {qt(s, 't_3')} (name, amount) VALUES ('late', 3)")
    assert_settled(drive(ld.task, ld.store, [ld.sid]))
    assert_union(ld.task, ld.store)


def test_renames_that_harm_nothing_pass(stack, new_load):
    ld = new_load("rm")
    up, s = stack["up1"], ld.schema
    ld.begin(["big", "small", "early"], 0,
             f"INSERT INTO {qt(s, 'big')} (name, amount) SELECT CONCAT('b', seq), seq FROM {qi(s)}.seq_1_to_{ROWS}",
             f"INSERT INTO {qt(s, 'small')} (name, amount) SELECT CONCAT('s', seq), seq FROM {qi(s)}.seq_1_to_20",
             f"INSERT INTO {qt(s, 'early')} (name, amount) SELECT CONCAT('e', seq), seq FROM {qi(s)}.seq_1_to_20")
    # after the low watermark, before the targets: the load plans and reads `early_2`
    run(up, f"INSERT INTO {qt(s, 'early')} (name, amount) VALUES ('before the rename', 1)",
        f"RENAME TABLE {qt(s, 'early')} TO {qt(s, 'early_2')}")
    ld.start()
    ld.wait_chunks("small", 1)    # the small tables' pass has read `small` whole
    ld.wait_chunks("big", 2)
    run(up, f"RENAME TABLE {qt(s, 'small')} TO {qt(s, 'small_2')}",
        f"INSERT INTO {qt(s, 'small_2')} (name, amount) VALUES ('after the rename', 2)",
        f"UPDATE {qt(s, 'small_2')} SET amount = amount + 100 WHERE id % 3 = 0")
    assert _chunks(stack["state_dsn"], ld.name, "big") < 12, "the rename must land while the load runs"
    ld.wait()
    finish(ld.task, ld.store)     # no FULL_LOAD_RENAMED, and nothing read again
    conn = connect(stack["down"])
    assert chunk_writer.rereads_of(conn, ld.task.meta_schema, ld.name, ld.sid) == {}
    conn.close()
    run(up, f"INSERT INTO {qt(s, 'early_2')} (name, amount) VALUES ('after the load', 3)")
    assert_settled(drive(ld.task, ld.store, [ld.sid]))
    assert_union(ld.task, ld.store)
    down = _tables(stack["down"], ld.tdb)
    assert {"big", "small_2", "early_2"} <= down and not {"small", "early"} & down, down


def test_a_ddl_while_a_table_is_read_again_reads_it_once_more(stack, new_load, monkeypatch):
    """An ALTER lands between the moment a re-read table's target is made and its snapshot:
    the copy was read against the older definition, so the table is read once more (else the
    new column, skipped with every DDL before the snapshot, would be missing downstream)."""
    ld = new_load("rd")
    up, s = stack["up1"], ld.schema
    ld.begin(["log", "other"])
    ld.start()
    ld.wait_chunks("log", 3)
    run(up, f"RENAME TABLE {qt(s, 'log')} TO {qt(s, 'log_2')}")
    ld.wait()

    def alter_meanwhile():
        time.sleep(0.5)
        run(up, f"ALTER TABLE {qt(s, 'log_2')} ADD COLUMN z int NOT NULL DEFAULT 5",
            f"UPDATE {qt(s, 'log_2')} SET z = 7 WHERE id % 2 = 0")

    monkeypatch.setenv("SHARDFLOW_FAULTS", "full.reread.after_empty=sleep:2")
    faults._hits.clear()
    t = threading.Thread(target=alter_meanwhile)
    t.start()
    try:
        finish(ld.task, ld.store)
    finally:
        t.join()
    monkeypatch.delenv("SHARDFLOW_FAULTS")
    assert_settled(drive(ld.task, ld.store, [ld.sid]))
    assert_union(ld.task, ld.store)
    assert columns(stack["down"], ld.tdb, "log_2") == columns(up, s, "log_2")
