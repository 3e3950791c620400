"""DM's `shardddl4_1` case (pingcap/tiflow dm/tests/shardddl4_1/run.sh), with DM's own task
and source files (conf/, vendored unchanged) and our own statements for its scenarios, one
pytest parameter per (scenario, task file), in DM's order (its run(): the named scenarios, then
131-155). The shape is shardddl4's (tests/dm_cases/test_shardddl4.py: three shards, a DDL on one
shard then a row into each, DDL after DDL).

* TABLE_CHECKPOINT_BACKWARD, RESYNC_NOT_FLUSHED, RESYNC_TXN_INTERRUPT, 155 (optimistic): column
  renames (`change b c int`) shard by shard with rows between, thousands of rows, workers
  restarted (DM's ReSyncExit / SleepInTxn / FakeRedirect failpoints, random restarts; here
  each step is a new window): held back and replayed (DM's ConflictSkipWaitRedirect); 155 in
  full: tb1 of both sources runs four DDLs (renames, a NOT NULL column) held one after another
  until tb2 runs each;
* STRICT_OPTIMISTIC_SINGLE_SOURCE / _DOUBLE_SOURCE (`strict-optimistic-shard-mode: true`): a
  column added with two types on two tables of one source; a NOT NULL column without default on
  one source: the source pauses with DM's "because schema conflict detected";
* 131 (optimistic): NULL → NOT NULL and back on one shard, then on all and back on one;
* 132 - 134 (both modes): the primary key widened, shrunk, moved to another column shard by
  shard, the downstream table made by the user beforehand (DM's `nonclustered` is TiDB's; ours
  is a plain primary key); 135: an upstream refuses to drop the key of its AUTO_INCREMENT column
  ("there can be only one auto column"), nothing else happens;
* 136 / 137 (optimistic): a unique key widened, shrunk; 138 / 139 (both): one added, dropped;
* 142 / 143 (pessimistic): a RANGE partition added, dropped (rows in it deleted first);
* 145 (both): `engine=innodb` on every shard; 146 (both): `ROW_FORMAT=COMPACT` on one shard. DM's
  TiDB refuses it ("This type of ALTER TABLE is currently unsupported", a TiDB-only error); our
  MariaDB downstream takes it: pessimistic, the lock waits for the shards that did not run it;
  optimistic, it runs downstream and the rows go on;
* 147 / 153 / 154 (optimistic): one shard adds a column and drops `c`, then adds `c` back and
  drops the other: DM pauses with "add column c that wasn't fully dropped in downstream" (the
  downstream `c` still holds the shard's old values). DM's fixes: `binlog-schema update` (its
  schema tracker's copy; shardflow's lock tracks the shard's schema from its DDLs, and the
  tracker's version already has what the binlog says, so that step is left out) then `binlog replace ... "alter table ... drop column b"` (147, 153),
  or the user's `alter table ... drop column b` downstream then `binlog skip` (154); then the
  stale value is set to NULL downstream: the union is equal. DM also names the source without an
  error ("source 'mysql-replica-02' has no error"); shardflow's binlog command only speaks of
  the paused sources. `b` leaves the downstream too: a source that has reported no DDL counts
  as the schema the lock began with, as in DM (it was taken to have the downstream's, which
  kept `b` for good);
* 148 (both): two columns added at given places (`after id`, `after b`) shard by shard;
* 149 / 150 / 151 (both): a VARCHAR widened, narrowed, an INT made DOUBLE on one shard first:
  pessimistic, query-status and shard-ddl-lock show the routed statement while the lock waits,
  then the other shards follow and it resolves; optimistic, widening runs at once, narrowing is
  skipped (DM: a normal DDL, the source keeps running), INT → DOUBLE is held back until the
  other shards convert too (DM skips and redirects it);
* 152 (optimistic): every shard runs the same DDL back to back: columns, a unique key and an
  index, an index swapped, a column swapped, all indexes dropped, all columns dropped.

Not ported: DM's log greps (what they wait for is the state the next step checks), DM's
binlog-schema commands (nothing to set, see 147).
"""

from __future__ import annotations

import json
import re

import pytest

from .harness import dmctl, table_rows, union_rows
from .shardddl_scene import count
from .test_shardddl1 import _goes_on
from .test_shardddl4 import assert_same_indexes, down_indexes, no_waiting_members, rounds, three_shards

pytestmark = pytest.mark.integration

CASE = "shardddl4_1"
TWO = [(1, "tb1"), (2, "tb1")]
CONFLICT = "because schema conflict detected"


def _binlog(*args: str) -> str:
    rc, out, err = dmctl("binlog", *args)
    assert rc == 0, out + err
    return out + err


def _down_has(sc, table: str, shards) -> None:
    """sync-diff of another target: ``shardddl.<table>`` holds the union of ``shards``."""
    cols = sc.columns(None, "shardddl", table)
    got = table_rows(sc.down, "shardddl", table, cols)
    assert got == union_rows([(sc.up[s], db, t) for s, db, t in shards], cols)


# ---- the column renames (DM's ConflictSkipWaitRedirect) ------------------------------------------------
def dm_table_checkpoint_backward(sc):
    for n in (1, 2):
        sc.sql(n, "create table shardddl1.tb1 (a int primary key, b int)", "create table shardddl1.t_1 (a int primary key, b int)")
    sc.start()
    sc.s1("alter table shardddl1.tb1 change b c int", *[f"insert into shardddl1.tb1(a,c) values({i},{i})"
                                                        for i in range(1, 1001)])
    sc.s1("alter table shardddl1.t_1 change b c int", *[f"insert into shardddl1.tb1(a,c) values({i},{i})"
                                                        for i in range(1001, 2001)],
          *[f"insert into shardddl1.t_1(a,c) values({i},{i})" for i in range(2001, 3001)])
    sc.s2("alter table shardddl1.tb1 change b c int")
    sc.s1(*[f"insert into shardddl1.tb1(a,c) values({i},{i})" for i in range(3001, 3101)])
    sc.s2("alter table shardddl1.t_1 change b c int")
    sc.s1(*[f"insert into shardddl1.tb1(a,c) values({i},{i})" for i in range(3101, 3201)])
    _goes_on(sc, "`change b c int`")
    sc.assert_synced()
    _down_has(sc, "t_1", [(1, "shardddl1", "t_1"), (2, "shardddl1", "t_1")])


def dm_resync_not_flushed(sc):
    for n in (1, 2):
        sc.sql(n, "create table shardddl1.tb1 (a int primary key, b int)", "create table shardddl1.tb2 (a int primary key, b int)")
    sc.start()
    four = [(1, "tb1"), (1, "tb2"), (2, "tb1"), (2, "tb2")]
    n = rounds(sc, [(None, None, (2, 2, 2, 2)), (0, "change b c int", (2, 2, 2, 2)),
                    (0, "add column d int not null", (3, 2, 2, 2)), (1, "change b c int", (3, 2, 2, 2)),
                    (1, "add column d int not null", (3, 3, 2, 2)), (2, "change b c int", (3, 3, 2, 2)),
                    (2, "add column d int not null", (3, 3, 3, 2)), (3, "change b c int", (3, 3, 3, 2))], shards=four)
    _goes_on(sc, "`change b c int`")    # DM: ReSyncExit ends both workers at the redirect
    rounds(sc, [(3, "add column d int not null", (3, 3, 3, 3))], first=n, shards=four)
    sc.assert_synced()


def dm_resync_txn_interrupt(sc):
    sc.s1("create table shardddl1.tb1 (a int primary key, b int)")
    sc.s2("create table shardddl1.t_1 (a int primary key, b int)", "create table shardddl1.tb2 (a int primary key, b int)")
    sc.start()
    sc.s2("alter table shardddl1.tb2 change b c int", "begin",
          *[f"insert into shardddl1.tb2 values({i},{i})" for i in range(1, 11)], "commit")
    sc.s1("alter table shardddl1.tb1 change b c int")
    _goes_on(sc, "`change b c int`")
    sc.assert_synced()


def dm_155(sc):
    create = "(a int primary key, c int, d int) engine=innodb default charset=latin1 collate=latin1_bin"
    three_shards(sc, create)
    sc.start()
    # DM restarts the master or a worker at random after each DDL; here every step is a new window
    n = rounds(sc, [(None, None, (3,) * 3), (0, "change c b int", (3,) * 3), (0, "add column g int", (4, 3, 3)),
                    (0, "change d f int", (4, 3, 3)), (0, "add column e int not null after f", (5, 3, 3)),
                    (1, "change c b int", (5, 3, 3)), (1, "change d f int", (5, 3, 3)),
                    (1, "add column g int", (5, 4, 3))])
    sc.s2("alter table shardddl1.tb1 add column e int not null after f")
    _goes_on(sc, "`change c b int`")    # both sources hold tb1 back at its rename
    # tb2 catches up one DDL at a time: each releases the held tables up to their next such DDL
    for ddl, width in [("change c b int", 3), ("change d f int", 3), ("add column e int not null after f", 4)]:
        sc.s2(f"alter table shardddl1.tb2 {ddl}")
        sc.steps(2)
        n = rounds(sc, [(None, None, (5, 5, width))] * 2, first=n)
        _goes_on(sc, f"`{ddl}` on tb2")
    n = rounds(sc, [(2, "add column g int", (5, 5, 5))] + [(None, None, (5, 5, 5))] * 15, first=n)
    sc.assert_synced()
    assert sc.count() == n - 1


# ---- strict optimistic mode ------------------------------------------------------------------------------
def dm_strict_single_source(sc):
    sc.s1("create table shardddl1.tb1 (a int primary key, b int)", "create table shardddl1.tb2 (a int primary key, b int)")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,1)", "insert into shardddl1.tb2 values(2,2)",
          "alter table shardddl1.tb1 add c int not null default 10",
          "insert into shardddl1.tb1 values(3,3,3)", "insert into shardddl1.tb2 values(4,4)",
          "alter table shardddl1.tb2 add c varchar(30) not null default '10'")
    _assert_conflict(sc, ["mysql-replica-01"], "column `c` has conflicting definitions")


def dm_strict_double_source(sc):
    for n in (1, 2):
        sc.sql(n, "create table shardddl1.tb1 (a int primary key, b int)")
    sc.start()
    sc.s1("insert into shardddl1.tb1 values(1,1)")
    sc.s2("insert into shardddl1.tb1 values(2,2)")
    sc.s1("alter table shardddl1.tb1 add c int", "insert into shardddl1.tb1 values(3,3,3)")
    sc.s2("insert into shardddl1.tb1 values(4,4)")
    sc.s1("alter table shardddl1.tb1 add d int not null")
    _assert_conflict(sc, ["mysql-replica-01"], "column `d` is NOT NULL without a default")


def _assert_conflict(sc, sources: list[str], why: str) -> None:
    sc.settle(paused_ok=True)
    sc.steps(2)
    errs = sc.errors()
    assert sorted(errs) == sources, errs
    status = sc.status()
    assert count(status, CONFLICT) >= 1 and why in status, status
    assert all(s["status"] == "paused" for s in sc.status_json()["sources"] if s["source"] in sources)


# ---- 131 - 139: nullability, primary and unique keys -------------------------------------------------------
def dm_131(sc):
    three_shards(sc, "(a int primary key, b int)")
    sc.start()
    n = rounds(sc, [(None, None, (2,) * 3), (0, "modify b int not null", (2,) * 3), (0, "modify b int", (2,) * 3)])
    sc.assert_synced()
    for source, tb in [(1, "tb1"), (2, "tb1"), (2, "tb2")]:
        sc.sql(source, f"alter table shardddl1.{tb} modify b int not null")
    rounds(sc, [(None, None, (2,) * 3), (0, "modify b int", (2,) * 3), (0, "modify b int not null", (2,) * 3)], first=n)
    sc.assert_synced()
    assert not sc.errors()


def _primary_key(down_key: str, shard_key: str, ddl: str, final: list[str]):
    def scenario(sc):
        sc.tidb("create database if not exists shardddl",   # DM: `primary key(...) nonclustered` (TiDB)
                f"create table shardddl.tb (a int, b int, primary key({down_key}))")
        three_shards(sc, f"(a int, b int, primary key({shard_key}))")
        sc.start()
        rounds(sc, [(None, None, (2,) * 3), (0, ddl, (2,) * 3), (1, ddl, (2,) * 3), (2, ddl, (2,) * 3)])
        sc.assert_synced()
        assert not sc.errors()
        assert down_indexes(sc) == {"PRIMARY": final}
        assert_same_indexes(sc)
    return scenario


dm_132 = _primary_key("a", "a", "drop primary key, add primary key(a, b)", ["a", "b"])
dm_133 = _primary_key("a,b", "a,b", "drop primary key, add primary key(a)", ["a"])
dm_134 = _primary_key("a", "a", "drop primary key, add primary key(b)", ["b"])


def dm_135(sc):
    sc.tidb("create database if not exists shardddl",
            "create table shardddl.tb (a int auto_increment, b int, primary key(a))")
    three_shards(sc, "(a int auto_increment primary key, b int)")
    sc.start()
    rounds(sc, [(None, None, (2,) * 3)])
    with pytest.raises(Exception, match="there can be only one auto column and it must be defined as a key"):
        sc.s1("alter table shardddl1.tb1 drop primary key, add primary key(b)")
    sc.assert_synced()
    assert not sc.errors() and down_indexes(sc) == {"PRIMARY": ["a"]}


def _key_shard_by_shard(create: str, ddl: str, width: int, final: dict):
    def scenario(sc):
        three_shards(sc, create)
        sc.start()
        rounds(sc, [(None, None, (width,) * 3), (0, ddl, (width,) * 3), (1, ddl, (width,) * 3),
                    (2, ddl, (width,) * 3)])
        sc.assert_synced()
        assert not sc.errors()
        assert down_indexes(sc) == final
        assert_same_indexes(sc)
    return scenario


dm_136 = _key_shard_by_shard("(id int primary key, a int, b int, unique key uk(a))",
                             "drop index uk, add unique key uk(a, b)", 3, {"PRIMARY": ["id"], "uk": ["a", "b"]})
dm_137 = _key_shard_by_shard("(id int primary key, a int, b int, unique key uk(a, b))",
                             "drop index uk, add unique key uk(a)", 3, {"PRIMARY": ["id"], "uk": ["a"]})
dm_138 = _key_shard_by_shard("(id int primary key, a int)", "add unique key uk(a)", 2,
                             {"PRIMARY": ["id"], "uk": ["a"]})
dm_139 = _key_shard_by_shard("(id int primary key, a int, unique key uk(a))", "drop index uk", 2, {"PRIMARY": ["id"]})


# ---- 142 - 146: partitions, table options ---------------------------------------------------------------
SHARDS = [(1, "tb1"), (2, "tb1"), (2, "tb2")]


def _values(base: int, k: int = 6) -> str:
    return ",".join(f"({base + i})" for i in range(k))


def dm_142(sc):
    three_shards(sc, "(id int primary key) partition by range(id) (partition p0 values less than (100))")
    sc.start()
    for i, (source, tb) in enumerate(SHARDS, 1):
        sc.sql(source, f"insert into shardddl1.{tb} values{_values(10 * i)}")
    for i, (source, tb) in enumerate(SHARDS, 1):
        sc.sql(source, f"alter table shardddl1.{tb} add partition (partition p1 values less than (200))",
               f"insert into shardddl1.{tb} values{_values(100 + 10 * i)}")
    sc.assert_synced()


def dm_143(sc):
    three_shards(sc, "(id int primary key) partition by range(id) "
                     "(partition p0 values less than (100), partition p1 values less than (200))")
    sc.start()
    for i, (source, tb) in enumerate(SHARDS, 1):
        sc.sql(source, f"insert into shardddl1.{tb} values{_values(10 * i)},{_values(100 + 10 * i)[0:]}")
    for source, tb in SHARDS:
        sc.sql(source, f"delete from shardddl1.{tb} where id >= 100")
    for source, tb in SHARDS:
        sc.sql(source, f"alter table shardddl1.{tb} drop partition p1")
    sc.assert_synced()
    assert sc.count() == 18


def dm_145(sc):
    three_shards(sc, "(id int primary key)")
    sc.start()
    for i, (source, tb) in enumerate(SHARDS, 1):
        sc.sql(source, f"insert into shardddl1.{tb} values{_values(100 * i)}")
    for source, tb in SHARDS:
        sc.sql(source, f"alter table shardddl1.{tb} engine=innodb")
    for i, (source, tb) in enumerate(SHARDS, 4):
        sc.sql(source, f"insert into shardddl1.{tb} values{_values(100 * i)}")
    sc.assert_synced()
    assert not sc.errors() and sc.count() == 36


def dm_146(sc):
    three_shards(sc, "(id int primary key)")
    sc.start()
    for i, (source, tb) in enumerate(SHARDS, 1):
        sc.sql(source, f"insert into shardddl1.{tb} values{_values(100 * i)}")
    sc.s1("alter table shardddl1.tb1 ROW_FORMAT=COMPACT")
    # DM: TiDB refuses the statement ("This type of ALTER TABLE is currently unsupported", TiDB only)
    if sc.task.shard_mode == "pessimistic":
        states = sc.steps(8)
        assert "paused" not in states.values() and not sc.errors()
        locks = json.loads(sc.locks())["locks"]
        assert len(locks) == 1 and "ROW_FORMAT=COMPACT" in locks[0]["ddls"][0] and \
            locks[0]["waiting_for"] == ["mysql-replica-02"], locks
        assert sc.count() == 18
        return
    sc.s1("insert into shardddl1.tb1 values(1000)")
    sc.assert_synced()
    assert not sc.errors()
    row_format = sc.tidb("select row_format from information_schema.tables where table_schema = 'shardddl' "
                         "and table_name = 'tb'")[0][0]
    assert row_format.lower() == "compact"


# ---- 147 / 153 / 154: a column added back before the other shards dropped it -----------------------------
def _not_fully_dropped(shards, fix: str):
    def scenario(sc):
        three_shards(sc, "(a int primary key, c int) engine=innodb default charset=latin1 collate=latin1_bin", shards)
        sc.start()
        two = (2,) * len(shards)
        rounds(sc, [(None, None, two), (0, "add column b int, drop column c", two),
                    (0, "add column c int, drop column b", two)], shards=shards)
        sc.settle(paused_ok=True)
        sc.steps(2)
        errs = sc.errors()
        assert list(errs) == ["mysql-replica-01"], errs
        status = sc.status()
        assert count(status, CONFLICT) >= 1, status
        assert count(status, "add column c that wasn't fully dropped in downstream") >= 1, status
        # DM first sets its schema tracker (`binlog-schema update`): ours already follows the binlog
        if fix == "replace":
            out = _binlog("replace", sc.files.name, "alter table shardddl1.tb1 drop column b")
        else:
            sc.tidb("alter table shardddl.tb drop column b")
            out = _binlog("skip", sc.files.name)
        assert "mysql-replica-01" in out, out
        sc.settle()
        sc.tidb("update shardddl.tb set c=null where a=1")   # the value the shard's table lost with `c`
        assert not sc.errors()
        no_waiting_members(sc)
        assert sc.down_rows(["a", "c"]) == sc.union(["a", "c"])
        sc.assert_synced()
        assert sc.columns(None, "shardddl", "tb") == ["a", "c"]
    return scenario


dm_147 = _not_fully_dropped(SHARDS, "replace")
dm_153 = _not_fully_dropped(TWO, "replace")
dm_154 = _not_fully_dropped(TWO, "skip")


# ---- 148 - 152: columns ---------------------------------------------------------------------------------------
def dm_148(sc):
    three_shards(sc, "(id int primary key, a int)")
    sc.start()
    ddl = "add column b int after id, add column c int after b"
    rounds(sc, [(None, None, (2,) * 3), (0, ddl, (4, 2, 2)), (1, ddl, (4, 4, 2)), (2, ddl, (4, 4, 4))])
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["id", "b", "c", "a"]


def _strings(*words: str) -> tuple[str, ...]:
    return tuple(f"{{n}},'{w}'" for w in words)


def dm_149(sc):
    three_shards(sc, "(id int primary key, a varchar(10))")
    sc.start()
    short, long_ = "aaaaaaa", "aaaaaaaaaaaaaa"
    ddl = "modify column a varchar(20)"
    rounds(sc, [(None, None, _strings(short, short, short)), (0, ddl, _strings(long_, short, short)),
                (1, ddl, _strings(long_, long_, short)), (2, ddl, _strings(long_, long_, long_))])
    sc.assert_synced()
    assert sc.tidb("select data_type, character_maximum_length from information_schema.columns where "
                   "table_schema = 'shardddl' and table_name = 'tb' and column_name = 'a'")[0] == ("varchar", 20)


def _lock_shows(sc, stmt: str) -> None:
    """DM's checks while the pessimistic lock waits: query-status names the routed statement
    (twice: the source's blocking DDL and its unresolved group), shard-ddl-lock once."""
    states = sc.steps(6)
    assert "paused" not in states.values() and not sc.errors(), sc.errors()
    assert count(sc.status(), re.escape(f'"{stmt}"')) >= 2, sc.status()
    assert count(sc.locks(), re.escape(f'"{stmt}"')) >= 1, sc.locks()


def dm_150(sc):
    three_shards(sc, "(id int primary key, a varchar(20))")
    sc.start()
    rounds(sc, [(None, None, _strings("aaaaaaa", "bbbbbbb", "ccccccc")),
                (0, "modify column a varchar(10)", _strings("aaaaaaa", "bbbbbbb", "ccccccc"))])
    if sc.task.shard_mode == "pessimistic":
        _lock_shows(sc, "ALTER TABLE `shardddl`.`tb` MODIFY COLUMN `a` VARCHAR(10)")
        sc.s2("alter table shardddl1.tb1 modify column a varchar(10)", "alter table shardddl1.tb2 modify column a varchar(10)")
        sc.assert_synced()
        return
    # DM: every source stays Running; the narrower definition is skipped while others are wider
    sc.assert_synced()
    st = sc.status_json()
    assert all(s["status"] == "running" and not s["error"] for s in st["sources"]), st


def dm_151(sc):
    three_shards(sc, "(id int primary key, a int)")
    sc.start()
    rounds(sc, [(None, None, (2,) * 3), (0, "modify column a double", ("{n},{n}.0", "{n},{n}", "{n},{n}"))])
    if sc.task.shard_mode == "pessimistic":
        _lock_shows(sc, "ALTER TABLE `shardddl`.`tb` MODIFY COLUMN `a` DOUBLE")
    else:
        _goes_on(sc, "`modify column a double`")   # DM: Running (the DDL skipped and redirected)
    sc.s2("alter table shardddl1.tb1 modify column a double", "alter table shardddl1.tb2 modify column a double")
    rounds(sc, [(None, None, ("{n},{n}.0",) * 3)], first=7)
    sc.assert_synced()


def dm_152(sc):
    three_shards(sc, "(id int primary key)")
    sc.start()
    n = rounds(sc, [(None, None, (1,) * 3)])

    def everywhere(ddl: str, values: str) -> None:
        nonlocal n
        for source, tb in SHARDS:
            sc.sql(source, f"alter table shardddl1.{tb} {ddl}")
        n = rounds(sc, [(None, None, (values,) * 3)], first=n)

    everywhere("add column a int, add column b varchar(20), add column c double", "{n},{n},'x{n}',{n}.0")
    sc.assert_synced()
    everywhere("add unique index uni_a(a), add index idx_b(b)", "{n},{n},'x{n}',{n}.0")
    sc.assert_synced()
    everywhere("drop index idx_b, add index idx_c(c)", "{n},{n},'x{n}',{n}.0")
    sc.assert_synced()
    everywhere("drop column b, add column d int", "{n},{n},{n}.0,{n}")
    sc.assert_synced()
    everywhere("drop index uni_a, drop index idx_c", "{n},{n},{n}.0,{n}")
    everywhere("drop column a, drop column c, drop column d", "{n}")
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["id"] and down_indexes(sc) == {"PRIMARY": ["id"]}
    assert not sc.errors()


SCENARIOS = [
    pytest.param(dm_table_checkpoint_backward, "double-source-optimistic", id="TABLE_CHECKPOINT_BACKWARD"),
    pytest.param(dm_resync_not_flushed, "double-source-optimistic", id="RESYNC_NOT_FLUSHED"),
    pytest.param(dm_resync_txn_interrupt, "double-source-optimistic", id="RESYNC_TXN_INTERRUPT"),
    pytest.param(dm_strict_single_source, "single-source-strict-optimistic", id="STRICT_OPTIMISTIC_SINGLE_SOURCE"),
    pytest.param(dm_strict_double_source, "double-source-strict-optimistic", id="STRICT_OPTIMISTIC_DOUBLE_SOURCE"),
    pytest.param(dm_131, "double-source-optimistic", id="131-optimistic"),
    pytest.param(dm_132, "double-source-pessimistic", id="132-pessimistic"),
    pytest.param(dm_132, "double-source-optimistic", id="132-optimistic"),
    pytest.param(dm_133, "double-source-pessimistic", id="133-pessimistic"),
    pytest.param(dm_133, "double-source-optimistic", id="133-optimistic"),
    pytest.param(dm_134, "double-source-pessimistic", id="134-pessimistic"),
    pytest.param(dm_134, "double-source-optimistic", id="134-optimistic"),
    pytest.param(dm_135, "double-source-pessimistic", id="135-pessimistic"),
    pytest.param(dm_135, "double-source-optimistic", id="135-optimistic"),
    pytest.param(dm_136, "double-source-optimistic", id="136-optimistic"),
    pytest.param(dm_137, "double-source-optimistic", id="137-optimistic"),
    pytest.param(dm_138, "double-source-pessimistic", id="138-pessimistic"),
    pytest.param(dm_138, "double-source-optimistic", id="138-optimistic"),
    pytest.param(dm_139, "double-source-pessimistic", id="139-pessimistic"),
    pytest.param(dm_139, "double-source-optimistic", id="139-optimistic"),
    pytest.param(dm_142, "double-source-pessimistic", id="142-pessimistic"),
    pytest.param(dm_143, "double-source-pessimistic", id="143-pessimistic"),
    pytest.param(dm_145, "double-source-pessimistic", id="145-pessimistic"),
    pytest.param(dm_145, "double-source-optimistic", id="145-optimistic"),
    pytest.param(dm_146, "double-source-pessimistic", id="146-pessimistic"),
    pytest.param(dm_146, "double-source-optimistic", id="146-optimistic"),
    pytest.param(dm_147, "double-source-optimistic", id="147-optimistic"),
    pytest.param(dm_148, "double-source-pessimistic", id="148-pessimistic"),
    pytest.param(dm_148, "double-source-optimistic", id="148-optimistic"),
    pytest.param(dm_149, "double-source-pessimistic", id="149-pessimistic"),
    pytest.param(dm_149, "double-source-optimistic", id="149-optimistic"),
    pytest.param(dm_150, "double-source-pessimistic", id="150-pessimistic"),
    pytest.param(dm_150, "double-source-optimistic", id="150-optimistic"),
    pytest.param(dm_151, "double-source-pessimistic", id="151-pessimistic"),
    pytest.param(dm_151, "double-source-optimistic", id="151-optimistic"),
    pytest.param(dm_152, "double-source-optimistic", id="152-optimistic"),
    pytest.param(dm_153, "double-source-optimistic", id="153-optimistic"),
    pytest.param(dm_154, "double-source-optimistic", id="154-optimistic"),
    pytest.param(dm_155, "double-source-optimistic", id="155-optimistic"),
]


@pytest.mark.parametrize("scenario, conf", SCENARIOS)
def test_dm_shardddl4_1_up2_logs_no_column_names(scene_factory, scenario, conf):  # noqa: F811
    scenario(scene_factory(CASE, f"{conf}.yaml"))
