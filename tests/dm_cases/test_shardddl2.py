"""DM's `shardddl2` case (pingcap/tiflow dm/tests/shardddl2/run.sh), with DM's own task and
source files (conf/, vendored unchanged) and our own statements for its scenarios, one pytest
parameter per (scenario, task file) as DM's ``run_case`` (tests/dm_cases/shardddl_scene.py).

Scenarios (DM's names; ``init_table 111 211 212``: source, database and table digits; three
shards over two sources, DDLs run shard after shard with a row into every shard between):

* 036 (optimistic): one column added at three positions (FIRST, AFTER a, AFTER b): rows of
  every shard land by column name (DM checks the count only);
* 037: the column added with two defaults (0, -1): the second source pauses naming both
  statements (pessimistic; DM's master logs "is different with") or the optimistic lock's
  conflict (the statement and the table in query-status);
* 038: a DATETIME column DEFAULT now() added shard by shard a second apart: nothing pauses,
  the rows arrive, and, as DM checks, the merged table differs from the shards (each shard's
  old rows were filled at its own ALTER's time, the merged table's once);
* 039: the column added with the same charset and collation on every shard: synced;
* 040: utf8/utf8_bin on one source, utf8mb4/utf8mb4_bin on the other: pessimistic pauses
  (two statements); optimistic goes on and the merged table equals the shards, as DM;
* 041: a generated column added shard by shard: synced; 043: two generation expressions:
  pessimistic pauses, optimistic names the conflicting GENERATED ALWAYS AS statement;
* INIT_SCHEMA (optimistic): one shard adds and drops a column (the others never have it),
  the coordinator restarts (DM-master), again: synced, nothing paused;
* DROP_COLUMN_EXEC_ERROR / DROP_COLUMN_ALL_DONE (optimistic): the last shard to drop a
  column fails to run the DROP downstream (DM's ExecDDLError failpoint; here the fault point
  ``shardddl.exec.before_downstream=fail:1`` on that source's steps): it pauses with the
  injected error; the coordinator restarts; a shard that dropped the column adds it back
  before the drop reached the downstream: DM's "add column b that wasn't fully dropped in
  downstream" conflict (DM: "because schema conflict detected"); the failing source
  restarts without the fault, runs the DROP; the conflicting source resumes (DM's worker
  resumes a task paused by a conflict by itself, shardflow retries nothing in silence:
  resume-task), its ADD is accepted now; the others add the column: synced;
* RECOVER_LOCK (optimistic): add / drop on two shards with two coordinator restarts
  between (DM recovers its lock from the infos); synced and no lock left;
* DropAddColumn #0-#5 (optimistic; #n restarts the coordinator at the n-th point): both
  shards drop c (fully dropped), one shard drops b (the other keeps it), adds c, and adds b
  back: the conflict "add column b that wasn't fully dropped in downstream" (its old values
  are still downstream); the merged table differs; `binlog skip` passes the ADD (source 2:
  "has no error"), pause-task, resume-task, the user sets b upstream again, source 2 adds c:
  synced;
* ADD_DROP_PARTITIONS (optimistic): ADD / DROP PARTITION on one shard run downstream
  (partitions counted in information_schema).

Not ported: DM's log greps and metrics (replaced by the state they report: pauses, lock
list, rows); 042, 044 and 045 are skipped by DM's run() too; 036 pessimistic is commented
out in DM. Deviation: a conflict paused here stays paused until `resume-task`, where DM's
worker resumes by itself (its ErrSyncerShardDDLConflict is resumable).
"""

from __future__ import annotations

import os
import re
import time

import pytest

from .harness import dmctl
from .shardddl_scene import count, init_table

pytestmark = pytest.mark.integration

CASE = "shardddl2"
S1, S2 = "mysql-replica-01", "mysql-replica-02"
THREE = [(1, "tb1"), (2, "tb1"), (2, "tb2")]


def _run(sc, *steps):
    """Statements per source, in order: ``(source, sql)``."""
    for source, sql in steps:
        sc.sql(source, sql)


def _three(sc, columns: str) -> None:
    sc.s1(f"create table shardddl1.tb1 ({columns})")
    sc.s2(f"create table shardddl1.tb1 ({columns})", f"create table shardddl1.tb2 ({columns})")


def _shard_by_shard(sc, ddls: list[str], rows: list[list[str]]) -> None:
    """DM's usual pattern: ``ddls[i]`` on the i-th shard (source 1's tb1, source 2's tb1, its
    tb2), after each one the i-th triple of ``rows`` (one VALUES list per shard)."""
    for (src, tb), ddl, triple in zip(THREE, ddls, rows):
        sc.sql(src, ddl.format(t=f"shardddl1.{tb}"))
        for (s, t), values in zip(THREE, triple):
            sc.sql(s, f"insert into shardddl1.{t} {values}")


def _ok(*args) -> str:
    rc, out, err = dmctl(*args)
    assert rc == 0, out + err
    return out + err


def _paused_on(sc, source: str) -> str:
    sc.settle(paused_ok=True)
    sc.steps(3)
    errs = sc.errors()
    assert list(errs) == [source], errs
    return errs[source]


def _running(sc) -> None:
    """DM's `query-status` with `"result": true` for the task and both sources: nothing paused."""
    st = sc.status_json()
    assert not sc.errors() and all(s["stage"] != "paused" for s in st["sources"]), st


def _pessimistic_different(sc, first: str, second: str) -> None:
    """DM's master: "is different with": the second source pauses naming both statements."""
    err = _paused_on(sc, S2)
    assert first in err and second in err, err
    assert "inconsistent" in err.lower(), err


# ---- 036 - 043 ----------------------------------------------------------------------------------
def dm_036(sc):
    _three(sc, "a int primary key, b varchar(10)")
    sc.start()
    _run(sc, (1, "alter table shardddl1.tb1 add column new_col1 int first"),
         (1, "insert into shardddl1.tb1 values(1,1,'aaa')"), (2, "insert into shardddl1.tb1 values(2,'bbb')"),
         (2, "insert into shardddl1.tb2 values(3,'ccc')"),
         (2, "alter table shardddl1.tb1 add column new_col1 int after a"),
         (1, "insert into shardddl1.tb1 values(4,4,'ddd')"), (2, "insert into shardddl1.tb1 values(5,5,'eee')"),
         (2, "insert into shardddl1.tb2 values(6,'fff')"),
         (2, "alter table shardddl1.tb2 add column new_col1 int after b"),
         (1, "insert into shardddl1.tb1 values(7,7,'ggg')"), (2, "insert into shardddl1.tb1 values(8,8,'hhh')"),
         (2, "insert into shardddl1.tb2 values(9,'iii',9)"))
    sc.settle()
    assert sc.count() == 9
    cols = ["a", "b", "new_col1"]   # each shard has them in its own order: compared by name
    assert sc.down_rows(cols) == sc.union(cols)


def dm_037(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    _run(sc, (1, "alter table shardddl1.tb1 add new_col1 int default 0"), (1, "insert into shardddl1.tb1 values(1,1)"),
         (2, "insert into shardddl1.tb1 values(2)"), (2, "alter table shardddl1.tb1 add new_col1 int default -1"),
         (1, "insert into shardddl1.tb1 values(3,3)"), (1, "insert into shardddl1.tb1 values(4,4)"),
         (2, "alter table shardddl1.tb2 add new_col1 int default -1"), (1, "insert into shardddl1.tb1 values(5,5)"),
         (1, "insert into shardddl1.tb1 values(6,6)"), (2, "insert into shardddl1.tb2 values(7,7)"))
    if sc.task.shard_mode == "pessimistic":
        _pessimistic_different(sc, "ADD COLUMN `new_col1` INT DEFAULT 0", "ADD COLUMN `new_col1` INT DEFAULT -1")
        return
    err = _paused_on(sc, S2)
    assert "`shardddl1`.`tb1`" in err, err
    assert count(sc.status(), re.escape("ALTER TABLE `shardddl`.`tb` ADD COLUMN `new_col1` INT DEFAULT")) >= 1


def dm_038(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1)")
    sc.s2("insert into shardddl1.tb1 values(2)", "insert into shardddl1.tb2 values(3)")
    for n, (src, tb) in enumerate(THREE, start=4):
        time.sleep(1)   # each shard's ALTER fills its old rows with its own time
        sc.sql(src, f"alter table shardddl1.{tb} add column col1 datetime default now()",
               f"insert into shardddl1.{tb} (id) values ({n})")
    sc.settle()
    _running(sc)
    assert sc.columns(None, "shardddl", "tb") == ["id", "col1"]
    assert sc.down_rows(["id"]) == sc.union(["id"])
    new = "where id > 3"   # rows written after the ALTERs carry their value in the binlog
    assert sc.tidb(f"select id, col1 from shardddl.tb {new} order by id") == sorted(
        r for n, db, tb in sc.shards() for r in sc.sql(n, f"select id, col1 from {db}.{tb} {new}"))
    assert sc.diff(), "DM's sync-diff fails: the old rows of the shards got their own ALTER's time"


def dm_039(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    ddl = "alter table {t} add column col1 varchar(10) character set utf8 collate utf8_bin"
    _shard_by_shard(sc, [ddl] * 3, [["values(1,'aaa')", "values(2)", "values(3)"],
                                    ["values(4,'bbb')", "values(5,'ccc')", "values(6)"],
                                    ["values(7,'ddd')", "values(8,'eee')", "values(9,'fff')"]])
    sc.assert_synced()
    coll = sc.tidb("select collation_name from information_schema.columns where table_schema = 'shardddl' "
                   "and table_name = 'tb' and column_name = 'col1'")[0][0]
    assert coll in ("utf8_bin", "utf8mb3_bin"), coll


def dm_040(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    utf8 = "alter table {t} add column col1 varchar(10) character set utf8 collate utf8_bin"
    utf8mb4 = "alter table {t} add column col1 varchar(10) character set utf8mb4 collate utf8mb4_bin"
    _shard_by_shard(sc, [utf8, utf8mb4, utf8mb4], [["values(1,'aaa')", "values(2)", "values(3)"],
                                                  ["values(4,'bbb')", "values(5,'ccc')", "values(6)"],
                                                  ["values(7,'ddd')", "values(8,'eee')", "values(9,'fff')"]])
    if sc.task.shard_mode == "pessimistic":
        _pessimistic_different(sc, "utf8_bin", "utf8mb4_bin")
        return
    sc.assert_synced()   # DM: "result": true 3 and sync-diff passes
    _running(sc)


def dm_041(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    ddl = "alter table {t} add column new_col1 int as (id+1)"
    rows = [[f"(id) values({n})" for n in range(k, k + 3)] for k in (1, 4, 7)]
    _shard_by_shard(sc, [ddl] * 3, rows)
    sc.assert_synced()


def dm_043(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    rows = [[f"(id) values({n})" for n in range(k, k + 3)] for k in (1, 4, 7)]
    _shard_by_shard(sc, ["alter table {t} add column new_col1 int as (id+1)"] +
                    ["alter table {t} add column new_col1 int as (id+2)"] * 2, rows)
    if sc.task.shard_mode == "pessimistic":
        _pessimistic_different(sc, "(`id` + 1)", "(`id` + 2)")
        return
    err = _paused_on(sc, S2)   # "can't make sure which MySQL comes first" (DM): here source 1's runs first
    assert "(id+1)" in err and "(id+2)" in err, err
    assert count(sc.status(), re.escape("ALTER TABLE `shardddl`.`tb` ADD COLUMN `new_col1` INT GENERATED ALWAYS AS")) \
        >= 1, err


# ---- INIT_SCHEMA, RECOVER_LOCK ---------------------------------------------------------------------
def dm_init_schema(sc):
    init_table(sc, "111", "211", "212")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1)")
    sc.s2("insert into shardddl1.tb1 values(2)", "insert into shardddl1.tb2 values(3)")
    for n in (4, 10):
        sc.s1("alter table shardddl1.tb1 add new_col1 int", f"insert into shardddl1.tb1 values({n},{n})")
        sc.s2(f"insert into shardddl1.tb1 values({n + 1})", f"insert into shardddl1.tb2 values({n + 2})")
        sc.s1("alter table shardddl1.tb1 drop new_col1", f"insert into shardddl1.tb1 values({n + 3})")
        sc.s2(f"insert into shardddl1.tb1 values({n + 4})", f"insert into shardddl1.tb2 values({n + 5})")
        sc.settle()
        assert sc.columns(None, "shardddl", "tb") == ["id"]   # DM: "finish to handle ddls ... DROP COLUMN"
        if n == 4:
            sc.restart_master()
    _running(sc)
    sc.assert_synced()


def dm_recover_lock(sc):
    table = "(a int primary key, b int) DEFAULT CHARSET=latin1 COLLATE=latin1_bin"
    sc.s1(f"create table shardddl1.tb1 {table}")
    sc.s2(f"create table shardddl1.tb2 {table}")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,1)")
    sc.s2("insert into shardddl1.tb2 values(2,2)")
    sc.s1("alter table shardddl1.tb1 add column c varchar(10)", "insert into shardddl1.tb1 values(3,3,'aaa')")
    sc.steps(4)
    sc.s2("alter table shardddl1.tb2 drop column b")
    sc.steps(4)
    sc.restart_master()
    sc.s1("alter table shardddl1.tb1 drop column b", "insert into shardddl1.tb1 values(4,'bbb')")
    sc.s2("insert into shardddl1.tb2 values(5)")
    sc.steps(4)
    sc.s2("alter table shardddl1.tb2 add column b int")
    sc.s1("insert into shardddl1.tb1 values(6,'ccc')")
    sc.s2("insert into shardddl1.tb2 values(7,7)")
    sc.steps(4)
    sc.restart_master()
    sc.s1("insert into shardddl1.tb1 values(8,'eee')")
    sc.s2("insert into shardddl1.tb2 values(9,9)")
    sc.s1("alter table shardddl1.tb1 add column b int")
    sc.s2("alter table shardddl1.tb2 add column c varchar(10) after a")
    sc.s1("insert into shardddl1.tb1 values(10,'fff',10)")
    sc.s2("insert into shardddl1.tb2 values(11,'ggg',11)")
    sc.assert_synced()
    assert '"locks": []' in sc.locks()   # DM: "no DDL lock exists"


# ---- a DROP COLUMN that fails downstream ------------------------------------------------------------
NOT_FULLY_DROPPED = "add column b that wasn't fully dropped in downstream"


def _failing_ddl(sc, source: str) -> None:
    """DM's ExecDDLError failpoint on the worker of ``source``: its every DDL sent downstream
    fails (the fault point, armed only while that source steps)."""
    sess = sc.sync.sessions[source]
    orig = sess.step

    def step():
        os.environ["SHARDFLOW_FAULTS"] = "shardddl.exec.before_downstream=fail:1"
        try:
            return orig()
        finally:
            os.environ.pop("SHARDFLOW_FAULTS", None)

    sess.step = step


def _healed(sc, source: str) -> None:
    """DM restarts that worker without the failpoint."""
    del sc.sync.sessions[source].step


def _exec_error_then_conflict(sc, dropper: str, tables: list[tuple[int, str]], last: tuple[int, str]) -> None:
    """``tables`` drop b first (skips: ``last`` still has it), then ``last`` drops it and fails to
    run the DROP downstream (the only exec); the coordinator restarts; the first of ``tables``
    adds b back: DM's not-fully-dropped conflict."""
    for src, tb in tables:
        sc.sql(src, f"alter table shardddl1.{tb} drop column b")
    sc.steps(4)
    assert "b" in sc.columns(None, "shardddl", "tb") and not sc.errors()
    sc.sql(last[0], f"alter table shardddl1.{last[1]} drop column b")
    err = _paused_on(sc, dropper)
    assert "fault point shardddl.exec.before_downstream" in err, err   # DM: "execute .* error"
    assert count(sc.status(), "shardddl.exec.before_downstream") >= 1
    assert "b" in sc.columns(None, "shardddl", "tb")
    sc.restart_master()


def dm_drop_column_exec_error(sc):
    _three(sc, "a int primary key, b varchar(10)")
    sc.start()
    _failing_ddl(sc, S1)
    sc.s1("insert into shardddl1.tb1 values(1,'aaa')")
    sc.s2("insert into shardddl1.tb1 values(2,'bbb')", "insert into shardddl1.tb2 values(3,'ccc')")
    _exec_error_then_conflict(sc, S1, [(2, "tb1"), (2, "tb2")], (1, "tb1"))
    sc.s1("insert into shardddl1.tb1 values(4)")
    sc.s2("insert into shardddl1.tb1 values(5)", "insert into shardddl1.tb2 values(6)")
    sc.s2("alter table shardddl1.tb1 add column b varchar(10)")
    sc.steps(4)
    errs = sc.errors()
    assert set(errs) == {S1, S2}, errs
    assert NOT_FULLY_DROPPED in errs[S2], errs
    assert count(sc.status(), "because schema conflict detected") >= 1
    # DM restarts source 1's worker without the failpoint: it runs the DROP
    _healed(sc, S1)
    _ok("resume-task", sc.files.name, "-s", S1)
    sc.steps(4)
    assert "b" not in sc.columns(None, "shardddl", "tb")
    _ok("resume-task", sc.files.name, "-s", S2)   # DM: its worker resumes the task by itself
    sc.s2("alter table shardddl1.tb2 add column b varchar(10)")
    sc.s1("alter table shardddl1.tb1 add column b varchar(10)")
    sc.s1("insert into shardddl1.tb1 values(7,'ddd')")
    sc.s2("insert into shardddl1.tb1 values(8,'eee')", "insert into shardddl1.tb2 values(9,'fff')")
    sc.assert_synced()
    _running(sc)


def dm_drop_column_all_done(sc):
    sc.s1("create table shardddl1.tb1 (a int primary key, b varchar(10))")
    sc.s2("create table shardddl1.tb1 (a int primary key, b varchar(10))")
    sc.start()
    _failing_ddl(sc, S2)
    sc.s1("insert into shardddl1.tb1 values(1,'aaa')")
    sc.s2("insert into shardddl1.tb1 values(2,'bbb')")
    _exec_error_then_conflict(sc, S2, [(1, "tb1")], (2, "tb1"))
    sc.s1("insert into shardddl1.tb1 values(4)")
    sc.s2("insert into shardddl1.tb1 values(5)")
    sc.s1("alter table shardddl1.tb1 add column b varchar(10)")
    sc.steps(4)
    errs = sc.errors()
    assert set(errs) == {S1, S2}, errs
    assert NOT_FULLY_DROPPED in errs[S1], errs
    assert count(sc.status(), "because schema conflict detected") >= 1
    _healed(sc, S2)
    _ok("resume-task", sc.files.name, "-s", S2)
    sc.steps(4)
    assert "b" not in sc.columns(None, "shardddl", "tb")
    _ok("resume-task", sc.files.name, "-s", S1)
    sc.s2("alter table shardddl1.tb1 add column b varchar(10)")
    sc.s1("insert into shardddl1.tb1 values(7,'ddd')")
    sc.s2("insert into shardddl1.tb1 values(8,'eee')")
    sc.assert_synced()
    _running(sc)


# ---- DropAddColumn ------------------------------------------------------------------------------------
def _drop_add_column(reset: int):
    def scenario(sc):
        def restart_at(n: int) -> None:
            sc.steps(4)
            if n == reset:
                sc.restart_master()

        sc.s1("create table shardddl1.tb1 (a int primary key, b int, c int)")
        sc.s2("create table shardddl1.tb1 (a int primary key, b int, c int)")
        sc.start()
        sc.s1("insert into shardddl1.tb1 values(1,1,1)")
        sc.s2("insert into shardddl1.tb1 values(2,2,2)")
        sc.assert_synced()
        sc.s1("alter table shardddl1.tb1 drop column c", "insert into shardddl1.tb1 values(3,3)")
        restart_at(1)
        sc.s2("alter table shardddl1.tb1 drop column c", "insert into shardddl1.tb1 values(4,4)")
        restart_at(2)
        sc.settle()
        assert sc.columns(None, "shardddl", "tb") == ["a", "b"]   # c fully dropped downstream
        assert '"locks": []' in sc.locks()
        sc.s1("alter table shardddl1.tb1 drop column b", "insert into shardddl1.tb1 values(5)")
        restart_at(3)
        sc.s1("alter table shardddl1.tb1 add column c int", "insert into shardddl1.tb1 values(6,6)")
        restart_at(4)
        sc.settle()
        _running(sc)
        sc.s1("alter table shardddl1.tb1 add column b int after a")
        restart_at(5)
        err = _paused_on(sc, S1)
        assert NOT_FULLY_DROPPED in err, err
        assert count(sc.status(), "because schema conflict detected") >= 1
        assert sc.diff(), "source 1's old values of b are still downstream"
        out = _ok("binlog", "skip", sc.files.name)
        assert "source 'mysql-replica-02' has no error" in out, out
        _ok("pause-task", sc.files.name)
        _ok("resume-task", sc.files.name)
        sc.s1(*[f"update shardddl1.tb1 set b={n} where a={n}" for n in (1, 3, 4, 6)])
        sc.s2("alter table shardddl1.tb1 add column c int", "insert into shardddl1.tb1 values(7,7,7)")
        sc.assert_synced()
        _running(sc)
    return scenario


# ---- ADD_DROP_PARTITIONS ------------------------------------------------------------------------------
def dm_add_drop_partitions(sc):
    part = "(a int) partition by range (a) (partition p0 values less than (100))"
    sc.s1(f"create table shardddl1.tb1 {part}")
    sc.s2(f"create table shardddl1.tb1 {part}")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1)")
    sc.s2("insert into shardddl1.tb1 values(2)")
    sc.s1("alter table shardddl1.tb1 add column new_col1 int", "insert into shardddl1.tb1 values(3,3)")
    sc.s2("insert into shardddl1.tb1 values(4)")

    def partitions() -> int:
        return sc.tidb("select count(1) from information_schema.partitions where table_schema = 'shardddl' and "
                       "table_name = 'tb' and partition_name is not null")[0][0]

    sc.s1("alter table shardddl1.tb1 add partition (partition p1 values less than (10000))")
    sc.settle()
    assert partitions() == 2
    sc.s1("alter table shardddl1.tb1 drop partition p1")
    sc.settle()
    assert partitions() == 1
    _running(sc)


SCENARIOS = [
    pytest.param(dm_drop_column_exec_error, "double-source-optimistic", id="DROP_COLUMN_EXEC_ERROR"),
    pytest.param(dm_init_schema, "double-source-optimistic", id="INIT_SCHEMA"),
    pytest.param(dm_drop_column_all_done, "double-source-optimistic", id="DROP_COLUMN_ALL_DONE"),
    pytest.param(dm_recover_lock, "double-source-optimistic", id="RECOVER_LOCK"),
    *[pytest.param(_drop_add_column(i), "double-source-optimistic", id=f"DropAddColumn-{i}") for i in range(6)],
    pytest.param(dm_add_drop_partitions, "double-source-optimistic", id="ADD_DROP_PARTITIONS"),
    pytest.param(dm_036, "double-source-optimistic", id="036-optimistic"),
    *[pytest.param(fn, f"double-source-{mode}", id=f"{name}-{mode}")
      for name, fn in (("037", dm_037), ("038", dm_038), ("039", dm_039), ("040", dm_040), ("041", dm_041),
                       ("043", dm_043))
      for mode in ("pessimistic", "optimistic")],
]


@pytest.mark.parametrize("scenario, conf", SCENARIOS)
def test_dm_shardddl2_up2_logs_no_column_names(scene_factory, scenario, conf):  # noqa: F811
    scenario(scene_factory(CASE, f"{conf}.yaml"))
