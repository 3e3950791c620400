"""The keyless ledger's decisions (dm_core/sync/keyless_ledger.py): which replayed rows of a
table without a key are downstream already, and what a worker's transaction records."""

import pytest

from dm_core.sync.job import RowJob
from dm_core.sync.keyless_ledger import KeylessLedger, replay_plan
from dm_core.target import TargetTable

K = TargetTable("d", "k", ("a", "b"), ("a", "b"), False)
T = TargetTable("d", "t", ("id", "v"), ("id",), True)


def kj(seq, pos, table, n, safe=True, op="insert"):
    return RowJob(op, K, None, {"a": n, "b": "x"}, safe, origin=(seq, pos, table, n))


def shape(jobs):
    return [(j.origin[1:] if j.origin else j.target.table, j.safe) for j in jobs]


CASES = [
    # (what, jobs, horizon, applied, expected (origin[1:] or table, safe))
    ("no horizon: everything as it is", [kj(1, 10, "u.k", 0)], None, {},
     [((10, "u.k", 0), True)]),
    ("before the horizon: legacy safe mode", [kj(1, 10, "u.k", 0)], (1, 20), {(1, 10, "u.k"): 1},
     [((10, "u.k", 0), True)]),
    ("at the horizon, nothing applied: plain writes", [kj(1, 20, "u.k", 0), kj(1, 20, "u.k", 1)], (1, 20), {},
     [((20, "u.k", 0), False), ((20, "u.k", 1), False)]),
    ("a prefix applied: the rest plain", [kj(1, 20, "u.k", i) for i in range(3)], (1, 20), {(1, 20, "u.k"): 2},
     [((20, "u.k", 2), False)]),
    ("all applied: nothing", [kj(1, 20, "u.k", i) for i in range(2)], (1, 20), {(1, 20, "u.k"): 2}, []),
    ("per upstream table", [kj(1, 20, "u.k", 0), kj(1, 20, "u.k2", 0)], (1, 20), {(1, 20, "u.k"): 1},
     [((20, "u.k2", 0), False)]),
    ("per transaction", [kj(1, 20, "u.k", 0), kj(2, 4, "u.k", 0)], (1, 20), {(2, 4, "u.k"): 1},
     [((20, "u.k", 0), False)]),
    ("not in safe mode: never sent before", [kj(1, 20, "u.k", 0, safe=False)], (1, 20), {(1, 20, "u.k"): 1},
     [((20, "u.k", 0), False)]),
    ("keyed rows pass", [RowJob("insert", T, None, {"id": 1, "v": 2}, True)], (1, 20), {},
     [("t", True)]),
    ("a later file is past the horizon", [kj(2, 4, "u.k", 0)], (1, 900), {}, [((4, "u.k", 0), False)]),
]


@pytest.mark.parametrize("what,jobs,horizon,applied,want", CASES, ids=[c[0] for c in CASES])
def test_replay_plan(what, jobs, horizon, applied, want):
    assert shape(replay_plan(jobs, horizon, applied)) == want


def test_a_worker_records_the_highest_ordinal_per_transaction_and_table():
    ledger = KeylessLedger("task", "src", "dm_meta", connect=None)
    jobs = [kj(1, 20, "u.k", 0), kj(1, 20, "u.k", 1), RowJob("insert", T, None, {"id": 1, "v": 2}, False),
            kj(1, 20, "u.k2", 4), kj(3, 8, "u.k", 0)]
    marks = ledger.marks(jobs)
    assert sorted(m.params for m in marks) == [("task", "src", 1, 20, "u.k", 2), ("task", "src", 1, 20, "u.k2", 5),
                                               ("task", "src", 3, 8, "u.k", 1)]
    head, row, tail = marks[0].shape
    assert "`dm_meta`.`shardflow_sync_keyless`" in head and "GREATEST(applied" in tail
    assert ledger.marks([RowJob("insert", T, None, {"id": 1, "v": 2}, False)]) == []


TASK = """name: kl
task-mode: incremental
target-database: {host: 127.0.0.1, port: 4000, user: root, password: ""}
mysql-instances:
  - source-id: s1
    block-allow-list: ba
block-allow-list:
  ba: {do-dbs: [u]}
"""


class _Catalog:
    """k has no key, t has one: no database needed."""

    def get(self, schema, table):
        if table == "k":
            return TargetTable(schema, table, ("a",), ("a",), False)
        return TargetTable(schema, table, ("id",), ("id",), True, True)

    def forget(self, schema, table):
        pass


@pytest.fixture
def row_path():
    from dm_core.config.task import parse_task
    from dm_core.sync.syncer import Syncer

    rows = Syncer(parse_task(TASK, "kl.yaml"), "s1", store=None).rows
    rows.use_catalog(_Catalog())
    return rows


def _txn(start, rows, piece=0, more=False):
    from dm_core.binlog.txn import RowChange, Txn
    from dm_core.position import Position

    t = Txn(Position("mysql-bin.000002", start if more else start + 500), start=Position("mysql-bin.000002", start))
    t.rows = [RowChange("insert", "u", table, None, {"a" if table == "k" else "id": v}) for table, v in rows]
    t.piece, t.more = piece, more
    return t


def test_ordinals_count_a_transactions_rows_per_table_across_its_pieces(row_path):
    first = row_path.jobs(_txn(100, [("t", 1), ("k", 1), ("k", 1)], more=True), True)
    second = row_path.jobs(_txn(100, [("k", 2)], piece=1), True)
    assert [j.origin for j in first] == [None, (2, 100, "u.k", 0), (2, 100, "u.k", 1)]
    assert [j.origin for j in second] == [(2, 100, "u.k", 2)]


def test_a_transaction_read_again_from_its_start_counts_from_0(row_path):
    """A later window of the same syncer reads it again (a resume after a pause): were the
    ordinals to go on, every row would pass the ledger's count and be written a second time.
    Also when its first piece has no row of a keyless table."""
    for _ in range(2):
        row_path.jobs(_txn(100, [("t", 1)], more=True), True)
        again = row_path.jobs(_txn(100, [("k", 5), ("k", 5)], piece=1), True)
        assert [j.origin[3] for j in again] == [0, 1]


# Tables the full phase read again after renames (dm_core/full/reread.py): "d.log" at (3, 500).
REREAD_CASES = [
    # (what, kind, tables as route_ddl gives them, end (file seq, pos), covered)
    ("a rotation before the snapshot", "rename table", [("d", "log"), ("d", "log_old"), ("d", "log_new"), ("d", "log")],
     (3, 400), True),
    ("ending at the snapshot", "rename table", [("d", "log"), ("d", "log_old")], (3, 500), True),
    ("after the snapshot", "rename table", [("d", "log"), ("d", "log_old")], (3, 501), False),
    ("a name not read again", "rename table", [("d", "log"), ("d", "elsewhere")], (3, 400), False),
    ("a name outside the block-allow list", "rename table", [("d", "log"), ("archive", "x")], (3, 400), True),
    ("CREATE ... LIKE a table not read again", "create table", [("d", "log_new"), ("d", "tpl")], (3, 400), True),
    ("CREATE ... LIKE a table read again", "create table", [("d", "other"), ("d", "log")], (3, 400), False),
    ("ALTER ... RENAME", "alter table", [("d", "log"), ("d", "log_old")], (2, 900), True),
    ("an ALTER before the snapshot: in the definition", "alter table", [("d", "log")], (3, 400), True),
    ("an ALTER after it", "alter table", [("d", "log")], (3, 600), False),
    ("TRUNCATE", "truncate table", [("d", "log")], (3, 1), True),
    ("DROP of one read again and one not", "drop table", [("d", "log"), ("d", "other")], (3, 1), False),
]


@pytest.mark.parametrize("what,kind,tables,end,covered", REREAD_CASES, ids=[c[0] for c in REREAD_CASES])
def test_statements_before_a_tables_reread_are_in_it(what, kind, tables, end, covered):
    from dm_core.position import Position

    led = KeylessLedger("t", "s", "meta", connect=None)
    led.reread = {"d.log": (3, 500), "d.log_old": (3, 500), "d.log_new": (3, 500)}
    at = Position(f"b.{end[0]:06d}", end[1])
    assert led.reread_covers(kind, tables, at, lambda s, t: s != "archive") is covered


def test_rows_before_a_tables_reread_are_in_it():
    from dm_core.position import Position

    led = KeylessLedger("t", "s", "meta", connect=None)
    assert led.reread_gate(Position("b.000003", 1)) is None   # nothing read again: no gate at all
    led.reread = {"d.log": (3, 500)}
    gate = led.reread_gate(Position("b.000003", 500))
    assert gate(("d", "log")) and not gate(("d", "other"))
    assert not led.reread_gate(Position("b.000003", 501))(("d", "log"))
