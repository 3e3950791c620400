"""DM's `shardddl4` case (pingcap/tiflow dm/tests/shardddl4/run.sh), with DM's own task and
source files (conf/, vendored unchanged) and our own statements for its scenarios, one pytest
parameter per (scenario, task file) as DM's ``run_case NAME TASK_FILE INIT CLEAN MODE``
(tests/dm_cases/shardddl_scene.py is DM's run_case and shardddl_lib.sh).

Every scenario has three shards (source 1's ``shardddl1.tb1``, source 2's ``shardddl1.tb1``
and ``shardddl1.tb2``) merged into ``shardddl.tb``; a DDL runs on one shard, then one row
goes into every shard, DDL after DDL (``_rounds``). Scenarios (DM's numbers):

* 119 / 121 (both modes): two shards add an index of one name over different columns
  (``idx(c1,c2)`` / ``idx(c1,c3)``; ``idx(c1)`` / ``idx(c1,c2)``), the third none: DM's
  sync-diff fails. Pessimistic: the lock waits for source 2 (its second shard never runs the
  DDL), source 1's rows past the DDL are held back, nothing pauses; optimistic: DM's join of
  the shards' schemas leaves an index out when its definitions differ (schemacmp deletes an
  incompatible index): nothing pauses, the rows are equal, and the downstream has neither
  definition of ``idx`` while the shards have theirs;
* 120 / 122 / 123 (both modes): several indexes added, dropped, or dropped and re-added over
  other columns, in one ALTER, shard by shard: synced, the merged table's indexes are the
  shards' own;
* 124 - 127 (optimistic): one shard changes its indexes and rolls the change back (added then
  dropped; dropped then added; re-defined then re-defined back; one added and one dropped,
  then back): synced, the downstream indexes as the shards', and no lock member waits
  (DM's ``"unsynced": []``);
* 128 (both modes): NULL to NOT NULL shard by shard; 129: NOT NULL to NULL with one default
  shard by shard: synced;
* 130: NOT NULL to NULL with a default that the second source sets otherwise. Pessimistic:
  source 2's DDL is not the lock's (DM's master logs "is different with"; shardflow pauses
  source 2 naming both statements, as in shardddl1's RestartMaster). Optimistic: source 2's
  DDL conflicts; query-status shows it as the lock's routed statement and its table; DM's
  ``shard-ddl-lock unlock LOCK -s SOURCE -d DB -t TABLE --action skip`` passes it, table by
  table; then rows land and the union is equal. Deviation: DM's worker blocks on the conflict
  and goes on after the unlock; shardflow's source pauses and goes on after ``resume-task``.

Not ported: DM's log greps ("finish to handle ddls in optimistic shard mode"): what they
wait for is the state the next step checks.
"""

from __future__ import annotations

import json
import re

import pytest

from .harness import dmctl
from .shardddl_scene import count

pytestmark = pytest.mark.integration

CASE = "shardddl4"
SHARDS = [(1, "tb1"), (2, "tb1"), (2, "tb2")]
LOCK_ID = "test-`shardddl`.`tb`"


# ---- helpers --------------------------------------------------------------------------------------
def three_shards(sc, create: str, shards=SHARDS) -> None:
    """DM's init command: ``create table shardddl1.tbN <create>`` on the three shards."""
    for source, tb in shards:
        sc.sql(source, f"create table shardddl1.{tb} {create}")


def rounds(sc, steps, first: int = 1, shards=SHARDS) -> int:
    """DM's pattern: for each step ``(shard index or None, ddl, widths)`` the DDL runs on that
    shard (``alter table shardddl1.tbN <ddl>``), then one row goes into every shard: numbers
    ``first``, ``first + 1`` ..., repeated over ``widths[i]`` columns (``None``: a DM insert
    naming only ``a``; a string: the row's VALUES with ``{n}``). Returns the next row number."""
    n = first
    for at, ddl, widths in steps:
        if ddl is not None:
            source, tb = shards[at]
            sc.sql(source, f"alter table shardddl1.{tb} {ddl}")
        for (source, tb), w in zip(shards, widths):
            if w is None:
                sc.sql(source, f"insert into shardddl1.{tb}(a) values({n})")
            elif isinstance(w, str):
                sc.sql(source, f"insert into shardddl1.{tb} values({w.format(n=n)})")
            else:
                sc.sql(source, f"insert into shardddl1.{tb} values({','.join([str(n)] * w)})")
            n += 1
    return n


def index_defs(ep, schema: str, table: str) -> dict[str, list[str]]:
    """Index name → its columns, in order."""
    from .harness import run_sql

    out: dict[str, list[str]] = {}
    for name, col in run_sql(ep, "SELECT index_name, column_name FROM information_schema.statistics WHERE "
                                 "table_schema = %s AND table_name = %s ORDER BY index_name, seq_in_index",
                             args=(schema, table)):
        out.setdefault(name, []).append(col)
    return out


def down_indexes(sc) -> dict[str, list[str]]:
    return index_defs(sc.down, "shardddl", "tb")


def shard_indexes(sc, shards=SHARDS) -> list[dict[str, list[str]]]:
    return [index_defs(sc.up[source], "shardddl1", tb) for source, tb in shards]


def assert_same_indexes(sc, shards=SHARDS) -> None:
    """DM's sync-diff compares the structure too: every shard's indexes are the merged table's."""
    down = down_indexes(sc)
    for (source, tb), got in zip(shards, shard_indexes(sc, shards)):
        assert got == down, f"indexes of source {source}'s {tb}: {got}, downstream: {down}"


def no_waiting_members(sc) -> None:
    """DM's ``shard-ddl-lock`` with ``"unsynced": []``: no lock has a member still to come."""
    locks = json.loads(sc.locks())["locks"]
    assert all(not lk["waiting_for"] and not lk["reported"] for lk in locks), locks


def unlock(*args: str) -> str:
    rc, out, err = dmctl("shard-ddl-lock", "unlock", *args)
    assert rc == 0, out + err
    assert '"result": true' in out, out
    return out


def resume(sc) -> None:
    rc, out, err = dmctl("resume-task", sc.files.name)
    assert rc == 0 or "Airflow could not be told" in err, out + err


# ---- 119 - 123: indexes -------------------------------------------------------------------------------
def _same_name_other_columns(create: str, first: str, second: str, width: int):
    def scenario(sc):
        three_shards(sc, create)
        sc.start()
        rounds(sc, [(None, None, (width,) * 3), (0, f"add index idx({first})", (width,) * 3),
                    (1, f"add index idx({second})", (width,) * 3)])
        if sc.task.shard_mode == "pessimistic":
            # source 2's tb2 never runs the DDL: the lock waits for source 2, and source 1's rows
            # past its DDL are held back (DM's sync-diff fails); nothing pauses
            states = sc.steps(8)
            assert "paused" not in states.values() and not sc.errors(), sc.errors()
            assert sc.diff(), "rows past the DDL are held back"
            locks = json.loads(sc.locks())["locks"]
            assert len(locks) == 1 and locks[0]["waiting_for"] == ["mysql-replica-02"], locks
            assert "idx" not in down_indexes(sc)
            return
        # optimistic: the two definitions of `idx` leave it out of the join (DM's schemacmp);
        # the rows flow, the structure differs from the shards' (DM's sync-diff fails)
        sc.assert_synced()
        assert not sc.errors()
        assert "idx" not in down_indexes(sc), down_indexes(sc)
        assert [ix.get("idx") for ix in shard_indexes(sc)] == [first.split(","), second.split(","), None]
    return scenario


dm_119 = _same_name_other_columns("(a int primary key, c1 int, c2 int, c3 int)", "c1,c2", "c1,c3", 4)
dm_121 = _same_name_other_columns("(a int primary key, c1 int, c2 int)", "c1", "c1,c2", 3)


def dm_120(sc):
    three_shards(sc, "(a int primary key, c1 int, c2 int)")
    sc.start()
    ddl = "add index idx1(c1), add index idx2(c2)"
    rounds(sc, [(None, None, (3,) * 3), (0, ddl, (3,) * 3), (1, ddl, (3,) * 3), (2, ddl, (3,) * 3)])
    sc.assert_synced()
    assert down_indexes(sc) == {"PRIMARY": ["a"], "idx1": ["c1"], "idx2": ["c2"]}
    assert_same_indexes(sc)


def dm_122(sc):
    three_shards(sc, "(a int primary key, c1 int, c2 int, index idx1(c1), index idx2(c2))")
    sc.start()
    ddl = "drop index idx1, drop index idx2"
    rounds(sc, [(None, None, (3,) * 3), (0, ddl, (3,) * 3), (1, ddl, (3,) * 3), (2, ddl, (3,) * 3)])
    sc.assert_synced()
    assert down_indexes(sc) == {"PRIMARY": ["a"]}
    assert_same_indexes(sc)


def dm_123(sc):
    three_shards(sc, "(a int primary key, c1 int, c2 int, c3 int, c4 int, index idx1(c1, c2), index idx2(c3, c4))")
    sc.start()
    ddl = "drop index idx1, add index idx1(c2,c1), drop index idx2, add index idx2(c4,c3)"
    rounds(sc, [(None, None, (5,) * 3), (0, ddl, (5,) * 3), (1, ddl, (5,) * 3), (2, ddl, (5,) * 3)])
    sc.assert_synced()
    assert down_indexes(sc) == {"PRIMARY": ["a"], "idx1": ["c2", "c1"], "idx2": ["c4", "c3"]}
    assert_same_indexes(sc)


# ---- 124 - 127: one shard changes its indexes and rolls back (optimistic) ------------------------------
def _rollback(create: str, width: int, there: str, back: str, final: dict):
    def scenario(sc):
        three_shards(sc, create)
        sc.start()
        rounds(sc, [(None, None, (width,) * 3), (0, there, (width,) * 3), (0, back, (width,) * 3)])
        sc.assert_synced()
        assert not sc.errors()
        assert down_indexes(sc) == final
        assert_same_indexes(sc)
        no_waiting_members(sc)
    return scenario


dm_124 = _rollback("(a int primary key, c1 int, c2 int)", 3, "add index idx1(c1), add index idx2(c2)",
                   "drop index idx1, drop index idx2", {"PRIMARY": ["a"]})
dm_125 = _rollback("(a int primary key, c1 int, c2 int, index idx1(c1), index idx2(c2))", 3,
                   "drop index idx1, drop index idx2", "add index idx1(c1), add index idx2(c2)",
                   {"PRIMARY": ["a"], "idx1": ["c1"], "idx2": ["c2"]})
dm_126 = _rollback("(a int primary key, c1 int, c2 int, c3 int, c4 int, index idx1(c1, c2), index idx2(c3, c4))", 5,
                   "drop index idx1, add index idx1(c2,c1), drop index idx2, add index idx2(c4,c3)",
                   "drop index idx1, add index idx1(c1,c2), drop index idx2, add index idx2(c3,c4)",
                   {"PRIMARY": ["a"], "idx1": ["c1", "c2"], "idx2": ["c3", "c4"]})
dm_127 = _rollback("(a int primary key, c1 int, c2 int, index idx1(c1))", 3, "add index idx2(c2), drop index idx1",
                   "add index idx1(c1), drop index idx2", {"PRIMARY": ["a"], "idx1": ["c1"]})


# ---- 128 - 130: nullability and defaults ------------------------------------------------------------------
def dm_128(sc):
    three_shards(sc, "(a int primary key, b int)")
    sc.start()
    ddl = "modify b int not null"
    rounds(sc, [(None, None, (2,) * 3), (0, ddl, (2,) * 3), (1, ddl, (2,) * 3), (2, ddl, (2,) * 3)])
    sc.assert_synced()
    assert not sc.errors()


def dm_129(sc):
    three_shards(sc, "(a int primary key, b int not null)")
    sc.start()
    ddl = "modify b int default 10"
    rounds(sc, [(None, None, (2,) * 3), (0, ddl, (None, 2, 2)), (1, ddl, (None, None, 2)),
                (2, ddl, (None, None, None))])
    sc.assert_synced()
    assert not sc.errors()
    assert sc.tidb("select count(*) from shardddl.tb where b = 10")[0][0] == 6


def dm_130(sc):
    three_shards(sc, "(a int primary key, b int not null)")
    sc.start()
    n = rounds(sc, [(None, None, (2,) * 3), (0, "modify b int default 0", (None, 2, 2))])
    if sc.task.shard_mode == "optimistic":
        sc.settle()  # DM: "finish to handle ddls in optimistic shard mode" on source 1
    else:
        sc.steps(4)  # the lock waits for source 2
    n = rounds(sc, [(1, "modify b int default -1", (None, None, 2)), (2, "modify b int default -1", (None, None, None))],
               first=n)
    sc.settle(paused_ok=True)
    sc.steps(3)
    errs = sc.errors()
    assert list(errs) == ["mysql-replica-02"], errs
    minus = "ALTER TABLE `shardddl`.`tb` MODIFY COLUMN `b` INT DEFAULT -1"
    if sc.task.shard_mode == "pessimistic":
        # DM's master: "sharding ddls in ddl lock ... is different with ..."
        zero = "ALTER TABLE `shardddl`.`tb` MODIFY COLUMN `b` INT DEFAULT 0"
        assert zero in errs["mysql-replica-02"] and minus in errs["mysql-replica-02"], errs
        return
    for tb in ("tb1", "tb2"):
        status = sc.status()
        assert count(status, re.escape(minus)) >= 1, status
        assert f"mysql-replica-02 `shardddl1`.`{tb}`" in errs["mysql-replica-02"], errs
        unlock(LOCK_ID, "-s", "mysql-replica-02", "-d", "shardddl1", "-t", tb, "--action", "skip")
        resume(sc)
        sc.settle(paused_ok=True)
        errs = sc.errors()
    assert not errs, errs
    st = sc.status_json()   # DM: "blockDDLOwner": "" on both sources
    assert all(s["status"] == "running" and not s["error"] for s in st["sources"]), st
    for source, tb in SHARDS:
        sc.sql(source, f"insert into shardddl1.{tb}(a) values({n})")
        n += 1
    sc.assert_synced()
    assert sc.columns(None, "shardddl", "tb") == ["a", "b"]


SCENARIOS = [
    pytest.param(dm_119, "double-source-pessimistic", id="119-pessimistic"),
    pytest.param(dm_119, "double-source-optimistic", id="119-optimistic"),
    pytest.param(dm_120, "double-source-pessimistic", id="120-pessimistic"),
    pytest.param(dm_120, "double-source-optimistic", id="120-optimistic"),
    pytest.param(dm_121, "double-source-pessimistic", id="121-pessimistic"),
    pytest.param(dm_121, "double-source-optimistic", id="121-optimistic"),
    pytest.param(dm_122, "double-source-pessimistic", id="122-pessimistic"),
    pytest.param(dm_122, "double-source-optimistic", id="122-optimistic"),
    pytest.param(dm_123, "double-source-pessimistic", id="123-pessimistic"),
    pytest.param(dm_123, "double-source-optimistic", id="123-optimistic"),
    pytest.param(dm_124, "double-source-optimistic", id="124-optimistic"),
    pytest.param(dm_125, "double-source-optimistic", id="125-optimistic"),
    pytest.param(dm_126, "double-source-optimistic", id="126-optimistic"),
    pytest.param(dm_127, "double-source-optimistic", id="127-optimistic"),
    pytest.param(dm_128, "double-source-pessimistic", id="128-pessimistic"),
    pytest.param(dm_128, "double-source-optimistic", id="128-optimistic"),
    pytest.param(dm_129, "double-source-pessimistic", id="129-pessimistic"),
    pytest.param(dm_129, "double-source-optimistic", id="129-optimistic"),
    pytest.param(dm_130, "double-source-pessimistic", id="130-pessimistic"),
    pytest.param(dm_130, "double-source-optimistic", id="130-optimistic"),
]


@pytest.mark.parametrize("scenario, conf", SCENARIOS)
def test_dm_shardddl4_up2_logs_no_column_names(scene_factory, scenario, conf):  # noqa: F811
    scenario(scene_factory(CASE, f"{conf}.yaml"))
