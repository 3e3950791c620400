"""DM's `shardddl3` case (pingcap/tiflow dm/tests/shardddl3/run.sh), with DM's own task and source
files (conf/, vendored unchanged) and our own statements for its scenarios, one pytest parameter
per (scenario, task file) as DM's ``run_case`` (tests/dm_cases/shardddl_scene.py).

Scenarios (DM's numbers; tables ``(a int primary key, b varchar(10))`` unless said):

* 071 / 073 (both modes): table options changed shard by shard, rows between: ``DEFAULT
  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`` (071) and ``CONVERT TO CHARACTER SET ...`` (073)
  on utf8_bin tables; the union is equal, and once every shard ran it the merged table (071) or
  its column (073) has the new collation;
* 076 / 078 (single source, both modes): ADD PRIMARY KEY on a table keyed by a unique column,
  rows before and after;
* 077 / 079 (single source, both modes): DROP PRIMARY KEY (077: of a target the user made;
  079: then two rows with the same former key). DM's TiDB refuses it ("Unsupported drop primary
  key": a clustered or integer handle key); MySQL and MariaDB drop it, and so does the local
  downstream: the test checks the key is gone and the rows equal (TiDB-only refusal);
* 080 / 081 / 082 (pessimistic): three UNIQUE keys added shard by shard with rows between that
  break them (080), the same keys dropped shard by shard (081), RENAME INDEX shard by shard
  (082). 080 deviates: DM ends with three rows because its task's first minute runs in safe
  mode (REPLACE: each row deletes the other shards' rows holding its a or b); shardflow starts
  sync at the full phase's exact high watermark, outside safe mode, and the source pauses on
  the first duplicate (1062) instead. With ``safe-mode: true`` (080-pessimistic-safe-mode) it
  ends with DM's three rows;
* 085 / 086 (one source, three shards, both modes): an index made visible on every shard (085);
  made invisible on one of them (086: pessimistic pauses with "detect inconsistent DDL
  sequence", optimistic goes on: the schema comparison does not see visibility). MySQL 8's
  ``ALTER INDEX a VISIBLE | INVISIBLE`` is MariaDB's ``ALTER INDEX a NOT IGNORED | IGNORED``;
* 094 / 095 / 096 / 097 (both modes): four shards on two sources add a column; once both tb1s
  added ``new_col1``, the task is stopped (094), paused (095, 096: DM's update-task is
  commented out in its case, so 096 is 095 again: one parameter here), or DM-master dies (097: no coordinator round); the tb2s add it
  meanwhile; start / resume / the coordinator back: the union is equal, every source runs;
* 098 (pessimistic): source 1's sync dies after its tb1 added the column; source 2's tb1 and
  source 1's tb2 add it meanwhile; source 1 starts again, source 2's tb2 adds it: equal.

Not ported: 072, 074, 075, 083, 084, 087-093 are skipped by DM's run() too; DM's log greps.
"""

from __future__ import annotations

import pytest
import yaml

from .shardddl_scene import count, init_table
from .harness import dmctl, run_sql

pytestmark = pytest.mark.integration

CASE = "shardddl3"
VB = "(a int primary key, b varchar(10))"


def _three(sc, table: str) -> None:
    sc.s1(f"create table shardddl1.tb1 {table}")
    sc.s2(f"create table shardddl1.tb1 {table}", f"create table shardddl1.tb2 {table}")


def _shard_rows(sc, ddl: str, values=("aaa", "bbb", "ccc", "ddd", "eee", "fff", "ggg", "hhh", "iii")) -> None:
    """DM's pattern: ``ddl`` on source 1's tb1, source 2's tb1, source 2's tb2 in turn, one row into
    every shard after each (``{t}`` is the table)."""
    n = 0
    for source, table in [(1, "tb1"), (2, "tb1"), (2, "tb2")]:
        sc.sql(source, ddl.format(t=f"shardddl1.{table}"))
        for src, tb in [(1, "tb1"), (2, "tb1"), (2, "tb2")]:
            sc.sql(src, f"insert into shardddl1.{tb} values({n + 1},'{values[n]}')")
            n += 1


def _table_collation(ep, schema: str, table: str) -> str:
    return run_sql(ep, "SELECT table_collation FROM information_schema.tables WHERE table_schema = %s "
                       "AND table_name = %s", args=(schema, table))[0][0]


def _column_collation(ep, schema: str, table: str, column: str) -> str:
    return run_sql(ep, "SELECT collation_name FROM information_schema.columns WHERE table_schema = %s "
                       "AND table_name = %s AND column_name = %s", args=(schema, table, column))[0][0]


def _primary(sc) -> list[str]:
    return [r[0] for r in sc.tidb("SELECT column_name FROM information_schema.statistics WHERE table_schema = "
                                  "'shardddl' AND table_name = 'tb' AND index_name = 'PRIMARY' ORDER BY seq_in_index")]


# ---- 071, 073: table options -----------------------------------------------------------------------
def dm_071(sc):
    _three(sc, f"{VB} default character set utf8 collate utf8_bin")
    sc.start()
    _shard_rows(sc, "alter table {t} default character set utf8mb4 collate utf8mb4_bin")
    sc.assert_synced()
    assert _table_collation(sc.down, "shardddl", "tb") == "utf8mb4_bin"


def dm_073(sc):
    _three(sc, f"{VB} default character set utf8 collate utf8_bin")
    sc.start()
    _shard_rows(sc, "alter table {t} convert to character set utf8mb4 collate utf8mb4_bin")
    sc.assert_synced()
    assert _column_collation(sc.down, "shardddl", "tb", "b") == "utf8mb4_bin"
    assert _table_collation(sc.down, "shardddl", "tb") == "utf8mb4_bin"


# ---- 076 - 079: primary keys ------------------------------------------------------------------------
def dm_076(sc):
    sc.s1("create table shardddl1.tb1 (a int unique, id int)")
    sc.start()
    sc.s1("alter table shardddl1.tb1 add primary key(id)", "insert into shardddl1.tb1 values(1,1)")
    sc.assert_synced()
    assert _primary(sc) == ["id"]


def dm_077(sc):
    # DM: a target the user made with TiDB's clustered primary key, which TiDB refuses to drop
    sc.tidb("create database if not exists shardddl", "create table shardddl.tb (id int, primary key(id))")
    sc.s1("create table shardddl1.tb1 (id int primary key)")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1)", "alter table shardddl1.tb1 drop primary key",
          "insert into shardddl1.tb1 values(1)")
    sc.assert_synced()
    assert not sc.errors() and _primary(sc) == []   # TiDB: "Unsupported drop primary key"; MariaDB drops it


def dm_078(sc):
    sc.s1("create table shardddl1.tb1 (id int unique, a int, b varchar(10))")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values (1, 1, 'wer'), (2, 2, NULL)", "alter table shardddl1.tb1 add primary key(a)",
          "insert into shardddl1.tb1 values (3, 3, 'wer'), (4, 4, NULL)")
    sc.assert_synced()
    assert _primary(sc) == ["a"]


def dm_079(sc):
    sc.s1(f"create table shardddl1.tb1 {VB}")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values (1, 'wer'), (2, NULL)", "alter table shardddl1.tb1 drop primary key",
          "insert into shardddl1.tb1 values (0, 'wer'), (0, NULL)")
    sc.assert_synced()                                # TiDB: "Unsupported drop primary key"; MariaDB drops it
    assert not sc.errors() and _primary(sc) == [] and sc.count() == 4


# ---- 080 - 082: unique keys and index names, pessimistic ------------------------------------------------
UNIQUES = ["add unique key idx_a(a)", "add unique key idx_b(b)", "add unique key idx_ab(a,b)"]


def _safe_mode(sc) -> None:
    """``safe-mode: true`` in the task's syncer config (what DM's first minute runs in, below)."""
    doc = yaml.safe_load(sc.files.task_file.read_text())
    doc["syncers"]["global"]["safe-mode"] = True
    sc.files.task_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def _080(safe_mode: bool):
    def scenario(sc):
        if safe_mode:
            _safe_mode(sc)
        dm_080(sc, safe_mode)
    return scenario


def dm_080(sc, safe_mode: bool):
    _three(sc, "(id int primary key, a int, b varchar(10))")
    sc.start()

    def keys(source, table):
        for k in UNIQUES:
            sc.sql(source, f"alter table shardddl1.{table} {k}")

    keys(1, "tb1")
    sc.s1("insert into shardddl1.tb1 values(1,1,'aaa')")
    sc.s2("insert into shardddl1.tb1 values(2,1,'aaa')")
    keys(2, "tb1")
    sc.s1("insert into shardddl1.tb1 values(3,2,'bbb')")
    sc.s2("insert into shardddl1.tb1 values(4,2,'bbb')", "insert into shardddl1.tb2 values(5,2,'bbb')")
    keys(2, "tb2")
    sc.s1("insert into shardddl1.tb1 values(6,3,'ccc')")
    sc.s2("insert into shardddl1.tb1 values(7,3,'ccc')", "insert into shardddl1.tb2 values(8,3,'ccc')")
    if not safe_mode:
        # DM's run ends with three rows: its task runs its first minute in safe mode (no exit point
        # after a dump: "enable safe-mode because of task initialization"), so each row REPLACEs the
        # rows holding its a or b, from whichever shard. shardflow's sync starts at the full phase's
        # exact high watermark, outside safe mode: the first row whose a another shard's row holds
        # is refused (1062), and the source pauses naming it rather than deleting that row
        sc.settle(paused_ok=True)
        sc.steps(2)
        errs = sc.errors()
        assert errs and all("1062" in e and "Duplicate entry" in e for e in errs.values()), errs
        assert count(sc.status(), "Duplicate entry") >= 1
        return
    sc.settle()
    # DM: count(1) = 3 -- each new row overwrites the ones holding its a or b
    assert sc.count() == 3
    assert sc.indexes() == ["PRIMARY", "idx_a", "idx_ab", "idx_b"]


def dm_081(sc):
    _three(sc, "(id int primary key, a int, b varchar(10))")
    sc.start()
    for source, table in [(1, "tb1"), (2, "tb1"), (2, "tb2")]:
        for k in UNIQUES:
            sc.sql(source, f"alter table shardddl1.{table} {k}")
    drops = ["drop index idx_a", "drop index idx_b", "drop index idx_ab"]

    def drop(source, table):
        for d in drops:
            sc.sql(source, f"alter table shardddl1.{table} {d}")

    drop(1, "tb1")
    sc.s1("insert into shardddl1.tb1 values(1,1,'aaa')")
    sc.s2("insert into shardddl1.tb1 values(2,1,'aaa')")
    drop(2, "tb1")
    sc.s1("insert into shardddl1.tb1 values(3,2,'bbb')")
    sc.s2("insert into shardddl1.tb1 values(4,2,'bbb')", "insert into shardddl1.tb2 values(5,2,'bbb')")
    drop(2, "tb2")
    sc.s1("insert into shardddl1.tb1 values(6,3,'ccc')")
    sc.s2("insert into shardddl1.tb1 values(7,3,'ccc')", "insert into shardddl1.tb2 values(8,3,'ccc')")
    sc.assert_synced()
    assert sc.count() == 8 and sc.indexes() == ["PRIMARY"]


def dm_082(sc):
    _three(sc, "(a int unique key, b varchar(10))")
    sc.start()
    _shard_rows(sc, "alter table {t} rename index a to c")
    sc.assert_synced()
    assert sc.indexes() == ["c"]


# ---- 085, 086: index visibility (MariaDB: IGNORED) --------------------------------------------------------
def _visibility(second: str):
    def scenario(sc):
        for t in ("tb1", "tb2", "tb3"):
            sc.s2(f"create table shardddl1.{t} (a int unique key, b varchar(10))")
        sc.start()
        vals = iter(["aaa", "bbb", "ccc", "ddd", "eee", "fff", "ggg", "hhh", "iii"])
        for n, (table, how) in enumerate([("tb1", "not ignored"), ("tb2", second), ("tb3", "not ignored")]):
            sc.s2(f"alter table shardddl1.{table} alter index a {how}")
            for k, t in enumerate(("tb1", "tb2", "tb3")):
                sc.s2(f"insert into shardddl1.{t} values({3 * n + k + 1},'{next(vals)}')")
        if second == "not ignored" or sc.task.shard_mode == "optimistic":
            sc.assert_synced()
            return
        # DM: "detect inconsistent DDL sequence from source" -- tb2's statement differs from tb1's
        sc.settle(paused_ok=True)
        sc.steps(2)
        errs = sc.errors()
        assert list(errs) == ["mysql-replica-02"], errs
        assert "inconsistent DDL sequence" in errs["mysql-replica-02"], errs
        assert count(sc.status(), "inconsistent DDL sequence") >= 1
    return scenario


# ---- 094 - 098: the task stopped, paused, DM-master or a worker gone while a lock waits ------------------
def _before_lock(sc) -> None:
    """DM's prologue: ``col`` on every shard (the checkpoint moves past the full phase), a row
    into every shard, then ``new_col1`` on both tb1s: the lock waits for the tb2s."""
    init_table(sc, "111", "112", "211", "212")
    sc.start()
    for src in (1, 2):
        sc.sql(src, "alter table shardddl1.tb1 add column col int", "alter table shardddl1.tb2 add column col int")
    sc.assert_synced()
    sc.s1("insert into shardddl1.tb1 values(1,1)")
    sc.s2("insert into shardddl1.tb1 values(2,2)", "insert into shardddl1.tb2 values(3,3)")
    sc.s1("insert into shardddl1.tb2 values(4,4)")


def _running(sc) -> None:
    st = sc.status_json()
    assert not sc.errors() and {s["status"] for s in st["sources"]} == {"running"}, st


def dm_094(sc):
    _before_lock(sc)
    sc.s1("alter table shardddl1.tb1 add column new_col1 int")
    sc.s2("alter table shardddl1.tb1 add column new_col1 int")
    sc.steps(4)
    sc.stop_task()
    sc.s1("alter table shardddl1.tb2 add column new_col1 int")
    sc.s2("alter table shardddl1.tb2 add column new_col1 int")
    sc.start_again(sc.files.task_file.read_text())
    sc.assert_synced()
    _running(sc)


def _pause_resume(sc):
    _before_lock(sc)
    sc.s1("alter table shardddl1.tb1 add column new_col1 int")
    sc.s2("alter table shardddl1.tb1 add column new_col1 int")
    sc.steps(4)
    rc, out, err = dmctl("pause-task", sc.files.name)
    assert rc == 0, out + err
    assert set(sc.steps(2).values()) == {"paused"}
    sc.s1("alter table shardddl1.tb2 add column new_col1 int")
    sc.s2("alter table shardddl1.tb2 add column new_col1 int")
    sc.steps(2)
    assert "new_col1" not in sc.columns(None, "shardddl", "tb") or sc.task.shard_mode == "optimistic"
    rc, out, err = dmctl("resume-task", sc.files.name)
    assert rc == 0, out + err
    sc.assert_synced()
    _running(sc)


def dm_097(sc):
    _before_lock(sc)
    sc.s1("alter table shardddl1.tb1 add column new_col1 int")
    sc.s2("alter table shardddl1.tb1 add column new_col1 int")
    sc.steps(4)
    # DM-master killed: the sources go on, no coordinator round
    sc.s1("alter table shardddl1.tb2 add column new_col1 int")
    sc.s2("alter table shardddl1.tb2 add column new_col1 int")
    sc.sources_only(6)
    sc.restart_master()
    rc, out, err = dmctl("resume-task", sc.files.name)   # DM: the task may have paused while the master was gone
    assert rc == 0, out + err
    sc.assert_synced()
    _running(sc)


def _step_only(sc, sources: list[str], n: int = 6) -> None:
    """Rounds in which only ``sources`` sync (the others' workers are down), with the coordinator's."""
    from dm_core.shardddl.coordinator import coordinate

    for _ in range(n):
        for sid in sources:
            sc.sync.sessions[sid].step()
        coordinate(sc.task, sc.store)


def dm_098(sc):
    _before_lock(sc)
    sc.s1("alter table shardddl1.tb1 add column new_col1 int")
    sc.steps(4)
    # dm-worker1 killed: source 1 syncs no more until it starts again from its checkpoint
    sc.s2("alter table shardddl1.tb1 add column new_col1 int")
    sc.s1("alter table shardddl1.tb2 add column new_col1 int")
    _step_only(sc, ["mysql-replica-02"])
    sc.sync.restart("mysql-replica-01")
    sc.steps(4)
    sc.s2("alter table shardddl1.tb2 add column new_col1 int")
    sc.assert_synced()
    _running(sc)


SCENARIOS = [
    pytest.param(dm_071, "double-source-pessimistic", id="071-pessimistic"),
    pytest.param(dm_071, "double-source-optimistic", id="071-optimistic"),
    pytest.param(dm_073, "double-source-pessimistic", id="073-pessimistic"),
    pytest.param(dm_073, "double-source-optimistic", id="073-optimistic"),
    pytest.param(dm_076, "single-source-pessimistic", id="076-pessimistic"),
    pytest.param(dm_076, "single-source-optimistic", id="076-optimistic"),
    pytest.param(dm_077, "single-source-pessimistic", id="077-pessimistic"),
    pytest.param(dm_077, "single-source-optimistic", id="077-optimistic"),
    pytest.param(dm_078, "single-source-pessimistic", id="078-pessimistic"),
    pytest.param(dm_078, "single-source-optimistic", id="078-optimistic"),
    pytest.param(dm_079, "single-source-pessimistic", id="079-pessimistic"),
    pytest.param(dm_079, "single-source-optimistic", id="079-optimistic"),
    pytest.param(_080(False), "double-source-pessimistic", id="080-pessimistic"),
    pytest.param(_080(True), "double-source-pessimistic", id="080-pessimistic-safe-mode"),
    pytest.param(dm_081, "double-source-pessimistic", id="081-pessimistic"),
    pytest.param(dm_082, "double-source-pessimistic", id="082-pessimistic"),
    pytest.param(_visibility("not ignored"), "single-source-pessimistic-2", id="085-pessimistic"),
    pytest.param(_visibility("not ignored"), "single-source-optimistic-2", id="085-optimistic"),
    pytest.param(_visibility("ignored"), "single-source-pessimistic-2", id="086-pessimistic"),
    pytest.param(_visibility("ignored"), "single-source-optimistic-2", id="086-optimistic"),
    pytest.param(dm_094, "double-source-pessimistic", id="094-pessimistic"),
    pytest.param(dm_094, "double-source-optimistic", id="094-optimistic"),
    pytest.param(_pause_resume, "double-source-pessimistic", id="095-096-pessimistic"),
    pytest.param(_pause_resume, "double-source-optimistic", id="095-096-optimistic"),
    pytest.param(dm_097, "double-source-pessimistic", id="097-pessimistic"),
    pytest.param(dm_097, "double-source-optimistic", id="097-optimistic"),
    pytest.param(dm_098, "double-source-pessimistic", id="098-pessimistic"),
]


@pytest.mark.parametrize("scenario, conf", SCENARIOS)
def test_dm_shardddl3_up2_logs_no_column_names(scene_factory, scenario, conf):  # noqa: F811
    scenario(scene_factory(CASE, f"{conf}.yaml"))
