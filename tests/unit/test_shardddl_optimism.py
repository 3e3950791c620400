"""The optimistic lock: schema join, add/drop at different times, widening, conflicts,
exec order, unlock. Scenarios run on one Lock and with a rows round-trip after every call."""

import pytest

from dm_core.position import Position
from dm_core.shardddl.common import DONE, EXEC, HOLD, SKIP, WAIT
from dm_core.shardddl.ddl_norm import normalize, schema_from_create
from dm_core.shardddl.errors import ShardDDLConflict, ShardDDLLockError
from dm_core.shardddl.keeper import Keeper
from dm_core.shardddl.optimism import Info, Lock

TASK, TARGET = "task", ("db", "t")
BASE = schema_from_create("CREATE TABLE t (id INT NOT NULL, name VARCHAR(20) NULL, qty INT NOT NULL DEFAULT 0, "
                          "PRIMARY KEY (id))")


def route(schema, table):
    return TARGET


class Harness:
    def __init__(self, sources, persist, tables=None):
        self.lock = Lock(f"{TASK}-`db`.`t`", TASK, TARGET, sources)
        self.persist = persist
        self.tables = tables or {}
        self.pos = {}

    def call(self, fn):
        try:
            return fn(self.lock)
        finally:
            if self.persist:
                self.lock = Lock.from_rows(*self.lock.to_rows())

    def report(self, source, table, sql, strict=False):
        key = (source, table)
        self.pos[key] = self.pos.get(key, 0) + 100
        n = normalize(sql, "up", route)
        info = Info(TASK, source, TARGET, ("up", table), (n.sql,), Position("bin.000001", self.pos[key]),
                    tables=tuple(("up", t) for t in self.tables.get(source, [table])), schema_before=BASE,
                    strict=strict)
        return self.call(lambda lk: lk.report(info))

    def op(self, source, table=None):
        return self.lock.operation_for(source, ("up", table) if table else None)

    def finish(self, source, table=None):
        """Run the member's op to the end (exec: mark statements; skip: ack) and return it."""
        op = self.op(source, table)
        assert op is not None and op.action in (EXEC, SKIP), op
        if op.action == EXEC:
            for i in range(len(op.ddls)):
                self.call(lambda lk: lk.mark_executing(source, op.step, i))
                self.call(lambda lk: lk.mark_executed(source, op.step, i))
        self.call(lambda lk: lk.ack(source, op.step))
        return op

    def joined(self):
        return [c.definition() for c in self.lock.joined.columns]


@pytest.fixture(params=[False, True], ids=["memory", "persisted"])
def persist(request):
    return request.param


def test_add_nullable_column_at_different_times(persist):
    h = Harness(["s1", "s2"], persist)
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT NULL AFTER name")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` ADD COLUMN `c` INT NULL AFTER `name`",)
    h.finish("s1")
    assert "`c` INT" in h.joined()
    op = h.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT")
    assert op.action == SKIP and "already has" in op.message
    h.finish("s2")
    assert h.lock.status == "idle"


def test_skip_waits_for_an_earlier_exec(persist):
    h = Harness(["s1", "s2"], persist)
    h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT")
    op = h.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT")
    assert op.action == WAIT and "s1" in op.message           # s1 has not executed yet
    with pytest.raises(ShardDDLLockError, match="before s1"):
        h.call(lambda lk: lk.ack("s2", h.lock.operation_for("s2").step))
    h.finish("s1")
    assert h.op("s2").action == SKIP


def test_widening_by_a_later_shard_modifies_the_column(persist):
    h = Harness(["s1", "s2"], persist)
    h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT")
    h.finish("s1")
    op = h.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN c BIGINT")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` MODIFY COLUMN `c` BIGINT",)
    h.finish("s2")
    op = h.report("s1", "t_1", "ALTER TABLE t_1 MODIFY COLUMN name VARCHAR(50)")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` MODIFY COLUMN `name` VARCHAR(50)",)
    h.finish("s1")
    assert h.report("s2", "t_1", "ALTER TABLE t_1 MODIFY COLUMN name VARCHAR(30)").action == SKIP


def test_drop_column_runs_when_the_last_shard_drops_it(persist):
    h = Harness(["s1", "s2", "s3"], persist)
    assert h.report("s1", "t_1", "ALTER TABLE t_1 DROP COLUMN name").action == SKIP
    h.finish("s1")
    assert h.report("s3", "t_1", "ALTER TABLE t_1 DROP COLUMN name").action == SKIP
    h.finish("s3")
    assert "`name` VARCHAR(20)" in h.joined()
    op = h.report("s2", "t_1", "ALTER TABLE t_1 DROP COLUMN name")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` DROP COLUMN `name`",)
    h.finish("s2")
    assert all("`name`" not in c for c in h.joined())


def test_unreported_sources_and_tables_keep_the_old_schema(persist):
    h = Harness(["s1", "s2"], persist, tables={"s1": ["t_1", "t_2"]})
    # s1's two tables and s2 (not heard from) still have `name`
    assert h.report("s1", "t_1", "ALTER TABLE t_1 DROP COLUMN name").action == SKIP
    h.finish("s1", "t_1")
    assert h.report("s1", "t_2", "ALTER TABLE t_2 DROP COLUMN name").action == SKIP
    h.finish("s1", "t_2")
    assert h.report("s2", "t_1", "ALTER TABLE t_1 DROP COLUMN name").action == EXEC


def test_a_column_one_shard_added_and_dropped_leaves_the_downstream_before_others_report(persist):
    """DM's INIT_SCHEMA: s1 adds and drops c while s2 reports nothing; s2 has the schema the
    lock was made with, so the DROP runs at once (before, s2 counted as the downstream's
    schema and c stayed downstream for good). Were s2 behind and add c later, c comes back
    and goes again with its DROP: each statement reaches the downstream in binlog order."""
    h = Harness(["s1", "s2"], persist)
    assert h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT NULL").action == EXEC
    h.finish("s1")
    op = h.report("s1", "t_1", "ALTER TABLE t_1 DROP COLUMN c")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` DROP COLUMN `c`",)
    # the owner's log says why, naming the source that counts with the first schema
    assert "s2 reported no DDL of this table yet" in op.message and "`c` leaves the downstream" in op.message
    h.finish("s1")
    assert all("`c`" not in c for c in h.joined()) and h.lock.status == "idle"
    assert h.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT NULL").action == EXEC
    h.finish("s2")
    assert "`c` INT" in h.joined()
    op = h.report("s2", "t_1", "ALTER TABLE t_1 DROP COLUMN c")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` DROP COLUMN `c`",)
    assert op.message == "execute the DDL downstream"   # every source has reported: nothing to explain
    h.finish("s2")
    assert all("`c`" not in c for c in h.joined()) and h.lock.status == "idle"


def test_not_null_without_default_is_held_until_every_shard_has_it(persist):
    h = Harness(["s1", "s2"], persist)
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN d INT NOT NULL")
    assert op.action == HOLD and not op.conflict
    assert "`d`" in op.message and "s1 `up`.`t_1`" in op.message and "s2" in op.message
    assert h.lock.status == "waiting"
    op = h.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN d INT NOT NULL")
    # now both have it: the source waiting at its DDL executes it, once; the held one replays
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` ADD COLUMN `d` INT NOT NULL",)
    assert h.op("s1").action == WAIT and not h.op("s1").conflict
    h.finish("s2")
    h.finish("s1")
    assert h.lock.status == "idle"


def test_strict_mode_pauses_on_a_not_null_column_the_others_lack(persist):
    h = Harness(["s1", "s2"], persist)
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN d INT NOT NULL", strict=True)
    assert op.action == WAIT and "`d`" in op.conflict and "s2" in op.conflict
    assert h.lock.status == "conflict"


def test_drop_of_not_null_column_waits_for_every_shard(persist):
    h = Harness(["s1", "s2"], persist)
    op = h.report("s1", "t_1", "ALTER TABLE t_1 DROP COLUMN qty")      # NOT NULL DEFAULT 0: fine to keep
    assert op.action == SKIP
    h.finish("s1")
    h2 = Harness(["s1", "s2"], persist)
    h2.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN e INT NULL")
    h2.finish("s1")
    h2.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN e INT NULL")
    h2.finish("s2")
    # a default joins with no default (DM's schemacmp): the first shard's MODIFY runs at once ...
    h2.report("s1", "t_1", "ALTER TABLE t_1 MODIFY COLUMN e INT NULL DEFAULT 3")
    assert h2.op("s1").action == EXEC and h2.op("s1").ddls == ("ALTER TABLE `db`.`t` MODIFY COLUMN `e` INT NULL DEFAULT 3",)
    h2.finish("s1")
    # ... the second's changes nothing any more; a different default conflicts
    assert h2.report("s2", "t_1", "ALTER TABLE t_1 MODIFY COLUMN e INT NULL DEFAULT 3").action == SKIP
    h2.finish("s2")
    h2.report("s2", "t_1", "ALTER TABLE t_1 MODIFY COLUMN e INT NULL DEFAULT 4")
    assert h2.op("s2").conflict and "conflicting definitions" in h2.op("s2").conflict


# (statement, words of the conflict)
HARD_CONFLICTS = [
    ("ALTER TABLE t_1 ADD CONSTRAINT ck CHECK (qty > 0)", ["not supported in optimistic mode"]),
    ("ALTER TABLE t_1 DROP COLUMN nosuch", ["does not fit", "`nosuch`"]),
]


@pytest.mark.parametrize("sql,words", HARD_CONFLICTS)
def test_hard_conflicts_wait_for_the_operator(sql, words, persist):
    h = Harness(["s1", "s2"], persist)
    op = h.report("s1", "t_1", sql)
    assert op.action == WAIT and op.conflict
    assert isinstance(op.error(), ShardDDLConflict)
    for w in words:
        assert w in op.conflict, (w, op.conflict)
    assert "s1 `up`.`t_1`" in op.conflict
    assert h.lock.status == "conflict"
    # other shards' compatible DDLs still go on meanwhile
    assert h.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN z INT").action == EXEC
    h.finish("s2")
    assert h.lock.status == "conflict"
    # the operator fixed the downstream by hand and accepts s1's change
    h.call(lambda lk: lk.unlock(owner="s1", action=SKIP))
    assert h.op("s1").action == SKIP
    h.finish("s1")
    assert h.lock.status == "idle"


def test_conflicting_definitions_name_columns_and_members(persist):
    h = Harness(["s1", "s2"], persist)
    h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT")
    h.finish("s1")
    op = h.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN c VARCHAR(10)")
    assert op.action == WAIT
    assert "column `c` has conflicting definitions" in op.conflict
    assert "INT in s1 `up`.`t_1`" in op.conflict and "VARCHAR(10) in s2 `up`.`t_1`" in op.conflict
    with pytest.raises(ShardDDLLockError, match="no conflicting DDL of source s1"):
        h.call(lambda lk: lk.unlock(owner="s1"))
    h.call(lambda lk: lk.unlock(owner="s2", action=EXEC))    # force it: s2 runs its own statement
    op = h.op("s2")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` ADD COLUMN `c` VARCHAR(10)",)


def test_unique_key_only_when_every_shard_has_it(persist):
    h = Harness(["s1", "s2"], persist)
    assert h.report("s1", "t_1", "ALTER TABLE t_1 ADD UNIQUE KEY uk (name)").action == SKIP
    h.finish("s1")
    op = h.report("s2", "t_1", "ALTER TABLE t_1 ADD UNIQUE KEY uk (name)")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` ADD UNIQUE `uk` (`name`)",)
    h.finish("s2")
    op = h.report("s1", "t_1", "ALTER TABLE t_1 DROP INDEX uk")      # one shard stops enforcing it
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` DROP INDEX `uk`",)


@pytest.mark.parametrize("sql", ["ALTER TABLE t_1 MODIFY COLUMN name VARCHAR(5)",
                                 "ALTER TABLE t_1 MODIFY COLUMN name VARCHAR(20) NOT NULL"])
def test_narrowing_or_not_null_is_skipped_while_another_shard_is_wider(sql, persist):
    """DM's shardddl4 128 / shardddl4_1 150: a narrower type of the same family, or NOT NULL,
    is no conflict (DM: a "normal" DDL): nothing runs while another shard keeps the wider
    definition, and the downstream keeps it after the last shard too (``widen_only``)."""
    h = Harness(["s1", "s2"], persist)
    op = h.report("s1", "t_1", sql)
    assert op.action == SKIP and not op.conflict
    h.finish("s1")
    op = h.report("s2", "t_1", sql)
    assert op.action == SKIP and not op.conflict
    h.finish("s2")
    assert "`name` VARCHAR(20)" in h.joined() and h.lock.status == "idle"


def _index_defs(h):
    return {i.name: i.columns for i in h.lock.joined.indexes}


def test_an_index_defined_differently_by_two_shards_leaves_the_join(persist):
    """DM's shardddl4 119 / 123: one index name over other columns on two shards is no
    conflict (DM's schemacmp leaves an incompatible index out): the downstream drops it until
    every shard defines it alike, then gets that definition."""
    h = Harness(["s1", "s2"], persist)
    assert h.report("s1", "t_1", "ALTER TABLE t_1 ADD INDEX k (qty)").action == EXEC
    h.finish("s1")
    op = h.report("s2", "t_1", "ALTER TABLE t_1 ADD INDEX k (qty, name)")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` DROP INDEX `k`",) and not op.conflict
    h.finish("s2")
    assert "k" not in _index_defs(h)
    op = h.report("s1", "t_1", "ALTER TABLE t_1 DROP INDEX k, ADD INDEX k (qty, name)")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` ADD INDEX `k` (`qty`, `name`)",)
    h.finish("s1")
    assert _index_defs(h)["k"] == ("qty", "name")


def test_an_index_one_shard_adds_and_drops_again_goes_before_others_report(persist):
    """DM's shardddl4 124 / 125: a source that has not reported has the indexes it had when the
    lock began, not the ones another shard added since."""
    h = Harness(["s1", "s2"], persist)
    h.report("s1", "t_1", "ALTER TABLE t_1 ADD INDEX k (qty)")
    h.finish("s1")
    op = h.report("s1", "t_1", "ALTER TABLE t_1 DROP INDEX k")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` DROP INDEX `k`",)
    h.finish("s1")
    assert "k" not in _index_defs(h)


def test_a_column_added_back_before_every_shard_dropped_it_conflicts(persist):
    """DM's shardddl4_1 147: s1 drops `name` (the downstream keeps it for s2), then adds it
    back: its old rows' values are still downstream, so DM stops ("add column ... that wasn't
    fully dropped in downstream"); once the downstream dropped it, adding it back is fine."""
    h = Harness(["s1", "s2"], persist)
    assert h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT, DROP COLUMN name").action == EXEC
    h.finish("s1")
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN name VARCHAR(20), DROP COLUMN c")
    assert op.action == WAIT and "add column name that wasn't fully dropped in downstream" in op.conflict
    assert "because schema conflict detected" in op.conflict and op.conflict.startswith("fail to handle shard ddl")
    h.call(lambda lk: lk.unlock(owner="s1", action=SKIP, table=("up", "t_1")))   # the operator fixed the rows
    h.finish("s1")
    assert h.lock.dropped == {}
    h2 = Harness(["s1", "s2"], persist)
    for src in ("s1", "s2"):
        h2.report(src, "t_1", "ALTER TABLE t_1 DROP COLUMN name")
        h2.finish(src)
    assert h2.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN name VARCHAR(20)").action == EXEC


def test_a_table_option_runs_downstream_as_it_comes(persist):
    """DM's shardddl4_1 145: `engine=innodb` changes no column or index; DM runs it downstream
    for each shard (its schemas before and after are equal), no conflict."""
    h = Harness(["s1", "s2"], persist)
    for src in ("s1", "s2"):
        op = h.report(src, "t_1", "ALTER TABLE t_1 ENGINE=InnoDB")
        assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` ENGINE=InnoDB",) and not op.conflict
        h.finish(src)
    assert h.lock.status == "idle"


def test_plain_index_as_soon_as_one_shard_has_it(persist):
    h = Harness(["s1", "s2"], persist)
    assert h.report("s1", "t_1", "CREATE INDEX k ON t_1 (qty)").action == EXEC
    h.finish("s1")
    assert h.report("s2", "t_1", "CREATE INDEX k ON t_1 (qty)").action == SKIP


def test_replay_and_idempotent_report(persist):
    h = Harness(["s1"], persist)
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT")
    h.pos[("s1", "t_1")] -= 100
    again = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT")   # same position: same op
    assert again.step == op.step and again.action == EXEC
    h.finish("s1")
    h.pos[("s1", "t_1")] -= 100
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT")      # met again after a restart
    assert (op.action, op.state, op.replayed) == (SKIP, DONE, True)


def test_new_shard_created_with_an_extra_column(persist):
    h = Harness(["s1"], persist)
    h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT")
    h.finish("s1")
    op = h.report("s1", "t_9", "CREATE TABLE t_9 (id INT NOT NULL, name VARCHAR(20), qty INT NOT NULL DEFAULT 0, "
                               "c INT, note TEXT, PRIMARY KEY (id))")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` ADD COLUMN `note` TEXT",)


def test_three_sources_mixed_timing(persist):
    h = Harness(["s1", "s2", "s3"], persist)
    log = []
    for s in ("s1", "s2", "s3"):
        h.report(s, "t_1", "ALTER TABLE t_1 ADD COLUMN c INT")
        log.append(h.finish(s).action)
    for s in ("s3", "s1", "s2"):
        h.report(s, "t_1", "ALTER TABLE t_1 DROP COLUMN c")
        log.append(h.finish(s).action)
    assert log == [EXEC, SKIP, SKIP, SKIP, SKIP, EXEC]
    assert h.lock.status == "idle"


def test_keeper_and_new_lock_needs_schema():
    k = Keeper(Lock)
    n = normalize("ALTER TABLE t_1 ADD COLUMN c INT", "up", route)
    with pytest.raises(ShardDDLLockError, match="schema_before"):
        k.report(Info(TASK, "s1", TARGET, ("up", "t_1"), (n.sql,), Position("b.1", 1)), ["s1"])
    op = k.report(Info(TASK, "s1", TARGET, ("up", "t_1"), (n.sql,), Position("b.1", 1), schema_before=BASE), ["s1"])
    assert op.action == EXEC and k.operation(TASK, "s1").action == EXEC


def test_no_decision_before_the_sources_are_known(persist):
    h = Harness([], persist)
    op = h.report("s1", "t_1", "ALTER TABLE t_1 DROP COLUMN name")
    assert op.action == WAIT and "coordinator" in op.message
    h.call(lambda lk: (lk.set_sources(["s1", "s2"]), lk.settle()))     # the coordinator's resolve
    assert h.op("s1").action == SKIP                                    # s2 still has `name`


def test_unlock_force_remove_settles_an_exec_that_failed_downstream(persist):
    """`binlog skip` of a source whose run of the lock's statement failed (and `shard-ddl-lock
    unlock --force-remove`): the unfinished op is done with nothing run, and the lock goes idle."""
    h = Harness(["s1", "s2"], persist)
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT NULL")
    assert op.action == EXEC
    h.call(lambda lk: lk.mark_executing("s1", op.step, 0))   # then the downstream refused the statement
    h.call(lambda lk: lk.unlock(force_remove=True))
    assert h.op("s1") is None or h.op("s1").state == DONE
    assert "`c` INT" in h.joined()      # the operator answers for the downstream: the new schema stands
    op2 = h.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT NULL")
    assert op2.action == SKIP
    h.finish("s2")
    assert h.lock.status == "idle"


# ---- DM's shardddl3 / shardddl_optimistic cases ---------------------------------------------------
HARD_CONFLICTS_CHARSET = [
    ("ALTER TABLE t_1 DEFAULT CHARACTER SET latin1", ["character set to latin1", "utf8mb4"]),
    ("ALTER TABLE t_1 CONVERT TO CHARACTER SET latin1", ["character set to latin1"]),
]


@pytest.mark.parametrize("sql,words", HARD_CONFLICTS_CHARSET)
def test_a_charset_other_than_utf8mb4_is_a_conflict(sql, words, persist):
    op = Harness(["s1", "s2"], persist).report("s1", "t_1", sql)
    assert op.action == WAIT and all(w in op.conflict for w in words), op.conflict


@pytest.mark.parametrize("sql,routed", [
    ("ALTER TABLE t_1 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
     "ALTER TABLE `db`.`t` DEFAULT CHARACTER SET=utf8mb4, COLLATE=utf8mb4_bin"),
    ("ALTER TABLE t_1 CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
     "ALTER TABLE `db`.`t` CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"),
    ("ALTER TABLE t_1 ALTER INDEX name_idx NOT IGNORED", "ALTER TABLE `db`.`t` ALTER INDEX name_idx NOT IGNORED"),
    ("ALTER TABLE t_1 ALTER INDEX name_idx INVISIBLE", "ALTER TABLE `db`.`t` ALTER INDEX `name_idx` INVISIBLE"),
])
def test_utf8mb4_and_index_visibility_run_as_each_shard_runs_them(sql, routed, persist):
    """DM: a charset widened to utf8mb4 widens its join at once (CHANGE_UTF_CHARSET: the merged
    table is utf8mb4 while a shard is not yet); index visibility is not in its comparison, so
    each shard's statement runs as it comes (shardddl3's 085 / 086)."""
    h = Harness(["s1", "s2"], persist)
    for src in ("s1", "s2"):
        op = h.report(src, "t_1", sql)
        assert op.action == EXEC and op.ddls == (routed,), op
        h.finish(src)
    assert h.lock.status == "idle" and h.joined() == [c.definition() for c in BASE.columns]


def test_seeded_members_of_different_shapes(persist):
    """DM's DIFFERENT_SCHEMA_FULL: the target has every column; each shard only some. A column is
    dropped downstream once no shard has it, a column a shard adds that others have is a skip."""
    target = schema_from_create("CREATE TABLE t (a INT NOT NULL, b VARCHAR(10), c TEXT, PRIMARY KEY (a))")
    shape = {("s1", "up", "t_1"): "a INT NOT NULL, PRIMARY KEY (a)",
             ("s1", "up", "t_2"): "a INT NOT NULL, b VARCHAR(10), PRIMARY KEY (a)",
             ("s2", "up", "t_1"): "a INT NOT NULL, c TEXT, PRIMARY KEY (a)",
             ("s2", "up", "t_2"): "a INT NOT NULL, b VARCHAR(10), c TEXT, PRIMARY KEY (a)"}
    h = Harness(["s1", "s2"], persist, tables={"s1": ["t_1", "t_2"], "s2": ["t_1", "t_2"]})
    h.call(lambda lk: lk.seed(target, {k: schema_from_create(f"CREATE TABLE x ({v})") for k, v in shape.items()}))
    assert h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c TEXT").action == SKIP   # fits its own shape
    h.finish("s1", "t_1")
    assert h.report("s2", "t_2", "ALTER TABLE t_2 DROP COLUMN b").action == SKIP       # s1's t_2 has b
    h.finish("s2", "t_2")
    op = h.report("s1", "t_2", "ALTER TABLE t_2 DROP COLUMN b")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` DROP COLUMN `b`",)
    h.finish("s1", "t_2")
    assert h.report("s1", "t_2", "ALTER TABLE t_2 ADD COLUMN c TEXT").action == SKIP
    h.finish("s1", "t_2")
    assert h.joined() == ["`a` INT NOT NULL", "`c` TEXT"]


def test_a_dropped_shard_leaves_the_lock(persist):
    """DM's CREATE_DROP_TABLE: a column only a dropped shard still had is dropped downstream at
    the next DDL that changes the join."""
    h = Harness(["s1", "s2"], persist, tables={"s1": ["t_1", "t_2"], "s2": ["t_1"]})
    for src, t in (("s1", "t_1"), ("s1", "t_2"), ("s2", "t_1")):
        h.report(src, t, "ALTER TABLE x ADD COLUMN c INT")
        h.finish(src, t)
    assert h.report("s2", "t_1", "ALTER TABLE t_1 DROP COLUMN c").action == SKIP
    h.finish("s2", "t_1")
    assert h.call(lambda lk: lk.remove_member(("s1", "up", "t_1")))
    assert not h.call(lambda lk: lk.remove_member(("s1", "up", "t_9")))
    op = h.report("s1", "t_2", "ALTER TABLE t_2 DROP COLUMN c")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` DROP COLUMN `c`",)


def test_an_index_redefined_shard_by_shard_leaves_and_comes_back(persist):
    """DM's 118: `DROP INDEX idx, ADD INDEX idx (other order)` shard by shard: the merged table
    drops idx at the first shard (the shards disagree) and adds the new one at the last."""
    base = schema_from_create("CREATE TABLE t (a INT NOT NULL, c1 INT, c2 INT, PRIMARY KEY (a), INDEX idx (c1, c2))")
    h = Harness(["s1", "s2"], persist)
    h.lock.initial = h.lock.joined = base
    sql = "ALTER TABLE x DROP INDEX idx, ADD INDEX idx (c2, c1)"
    op = h.report("s1", "t_1", sql)
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` DROP INDEX `idx`",)
    h.finish("s1")
    op = h.report("s2", "t_1", sql)
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` ADD INDEX `idx` (`c2`, `c1`)",)
    h.finish("s2")
    assert [i.definition() for i in h.lock.joined.indexes] == ["PRIMARY KEY (`a`)", "INDEX `idx` (`c2`, `c1`)"]


def test_a_column_a_shard_dropped_cannot_come_back_before_the_downstream_dropped_it(persist):
    """DM's shardddl2 DropAddColumn: s1 drops `name` (s2 keeps it, so the downstream keeps it
    with s1's old values) and adds it back: a conflict until the downstream dropped it, judged
    again when s1 reports the DDL again; s2's drop runs it, then s1's ADD runs."""
    h = Harness(["s1", "s2"], persist)
    assert h.report("s1", "t_1", "ALTER TABLE t_1 DROP COLUMN name").action == SKIP
    h.finish("s1")
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN name VARCHAR(20)")
    assert op.action == WAIT and "add column name that wasn't fully dropped in downstream" in op.conflict
    assert "because schema conflict detected" in op.conflict
    h.pos[("s1", "t_1")] -= 100   # resume-task: the same event read again is judged again
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN name VARCHAR(20)")
    assert op.action == WAIT and "wasn't fully dropped" in op.conflict
    op = h.report("s2", "t_1", "ALTER TABLE t_1 DROP COLUMN name")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` DROP COLUMN `name`",)
    h.finish("s2")
    assert not h.lock.dropped
    h.pos[("s1", "t_1")] -= 100
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN name VARCHAR(20)")
    assert op.action == EXEC and not op.conflict and op.ddls == ("ALTER TABLE `db`.`t` ADD COLUMN `name` VARCHAR(20)",)


def test_a_column_dropped_everywhere_may_be_added_again(persist):
    h = Harness(["s1", "s2"], persist)
    assert h.report("s1", "t_1", "ALTER TABLE t_1 DROP COLUMN name").action == SKIP
    h.finish("s1")
    assert h.report("s2", "t_1", "ALTER TABLE t_1 DROP COLUMN name").action == EXEC
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN name VARCHAR(20)")
    assert op.conflict, "s2's DROP is not downstream yet"
    h.finish("s2")
    h.pos[("s1", "t_1")] -= 100
    assert h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN name VARCHAR(20)").action == EXEC


def test_partition_maintenance_runs_as_written(persist):
    """DM's ADD_DROP_PARTITIONS: the tracked schema stays, the shard's statement runs."""
    h = Harness(["s1", "s2"], persist)
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD PARTITION (PARTITION p1 VALUES LESS THAN (10000))")
    assert op.action == EXEC and not op.conflict
    assert op.ddls == ("ALTER TABLE `db`.`t` ADD PARTITION (PARTITION p1 VALUES LESS THAN (10000))",)
    h.finish("s1")
    op = h.report("s1", "t_1", "ALTER TABLE t_1 DROP PARTITION p1")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` DROP PARTITION p1",)
    h.finish("s1")
    assert h.lock.status == "idle"


def test_two_generation_expressions_conflict(persist):
    """DM's shardddl2 043: one generated column, two expressions (schemacmp compares them)."""
    h = Harness(["s1", "s2"], persist)
    assert h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN g INT AS (qty + 1)").action == EXEC
    h.finish("s1")
    op = h.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN g INT AS (qty + 2)")
    assert op.action == WAIT and "(qty+1)" in op.conflict and "(qty+2)" in op.conflict
    h2 = Harness(["s1", "s2"], persist)
    assert h2.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN g INT AS (qty + 1)").action == EXEC
    h2.finish("s1")
    assert h2.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN g INT GENERATED ALWAYS AS (`qty`+1) VIRTUAL").action \
        == SKIP


def test_zerofill_is_unsigned(persist):
    """DM's 111: INT ZEROFILL on one shard (MySQL makes it UNSIGNED) and INT on another do not merge."""
    h = Harness(["s1", "s2"], persist)
    assert h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT(11) ZEROFILL").action == EXEC
    h.finish("s1")
    op = h.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT(11)")
    assert op.action == WAIT and "INT UNSIGNED" in op.conflict, op.conflict


def test_a_source_no_longer_expected_leaves_the_join(persist):
    """DM's STOP_TASK_FOR_A_SOURCE: with s2 stopped (the coordinator names s1 only), s1's DROP
    COLUMN runs downstream although s2's tables still have the column."""
    h = Harness(["s1", "s2"], persist)
    for src in ("s1", "s2"):
        h.report(src, "t_1", "ALTER TABLE t_1 ADD COLUMN c INT")
        h.finish(src)
    h.call(lambda lk: lk.set_sources(["s1"]))
    op = h.report("s1", "t_1", "ALTER TABLE t_1 DROP COLUMN c")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` DROP COLUMN `c`",)
    h.finish("s1")
    h.call(lambda lk: lk.set_sources(["s1", "s2"]))
    assert h.report("s2", "t_1", "ALTER TABLE t_1 DROP COLUMN c").action == SKIP


# (statement, words of the hold, the statement run downstream once every shard has run it)
HELD = [
    ("ALTER TABLE {t} RENAME COLUMN name TO title", ["renaming column `name` to `title`"],
     "ALTER TABLE `db`.`t` RENAME COLUMN `name` TO `title`"),
    ("ALTER TABLE {t} CHANGE name title VARCHAR(20)", ["renaming column `name` to `title`"],
     "ALTER TABLE `db`.`t` CHANGE COLUMN `name` `title` VARCHAR(20)"),
    ("ALTER TABLE {t} MODIFY COLUMN qty VARCHAR(10) NOT NULL DEFAULT '0'", ["`qty`", "INT to VARCHAR(10)"],
     "ALTER TABLE `db`.`t` MODIFY COLUMN `qty` VARCHAR(10) NOT NULL DEFAULT '0'"),
    ("ALTER TABLE {t} MODIFY COLUMN name TEXT", ["`name`", "VARCHAR(20) to TEXT"],
     "ALTER TABLE `db`.`t` MODIFY COLUMN `name` TEXT"),
]


@pytest.mark.parametrize("sql,words,downstream", HELD)
def test_a_change_every_shard_must_run_is_held_until_the_last_one_runs_it(sql, words, downstream, persist):
    """DM's ConflictSkipWaitRedirect: nobody pauses; the last shard's statement runs downstream;
    the held tables get skip (their sources replay them)."""
    h = Harness(["s1", "s2"], persist, tables={"s2": ["t_1", "t_2"]})
    op = h.report("s1", "t_1", sql.format(t="t_1"))
    assert op.action == HOLD and not op.conflict and op.error() is None
    for w in words + ["held until", "s2"]:
        assert w in op.message, (w, op.message)
    assert h.lock.status == "waiting" and not h.lock.conflict
    assert h.report("s2", "t_1", sql.format(t="t_1")).action == HOLD
    assert "s2 `up`.`t_2`" in h.op("s2", "t_1").message and "s1" not in h.op("s2", "t_1").message
    assert h.op("s1", "t_1").action == HOLD           # still: s2's t_2 has not run it
    assert [m["held"] != "" for m in h.lock.describe()["members"]] == [True, True, False]
    op = h.report("s2", "t_2", sql.format(t="t_2"))
    assert op.action == EXEC and op.ddls == (downstream,)
    # released: their replay waits for the statement downstream, then skips the DDL
    assert h.op("s1", "t_1").action == WAIT and "waiting for s2" in h.op("s1", "t_1").message
    h.finish("s2", "t_2")
    assert h.op("s1", "t_1").action == SKIP and h.op("s2", "t_1").action == SKIP
    h.finish("s1", "t_1")
    h.finish("s2", "t_1")
    assert h.lock.status == "idle"
    # the replayed DDL met again later is known as done
    again = Info(TASK, "s1", TARGET, ("up", "t_1"), (normalize(sql.format(t="t_1"), "up", route).sql,),
                 Position("bin.000001", 100), tables=(("up", "t_1"),), schema_before=BASE)
    assert h.call(lambda lk: lk.report(again)).done


def test_a_source_that_never_reported_keeps_a_change_held(persist):
    h = Harness(["s1", "s2", "s3"], persist)
    h.report("s1", "t_1", "ALTER TABLE t_1 CHANGE name title VARCHAR(20)")
    assert h.report("s2", "t_1", "ALTER TABLE t_1 CHANGE name title VARCHAR(20)").action == HOLD
    assert "s3 (not reported yet)" in h.op("s2").message
    if persist:   # s3 will never rename: the operator releases the held tables (skip)
        h.call(lambda lk: lk.unlock(action=SKIP))
        assert [h.finish(s).action for s in ("s1", "s2")] == [SKIP, SKIP] and h.lock.status == "idle"
        return
    assert h.report("s3", "t_1", "ALTER TABLE t_1 CHANGE name title VARCHAR(20)").action == EXEC


def test_two_shards_renaming_one_column_two_ways_is_a_conflict_naming_both(persist):
    """DM's shardddl2_1 050: the first rename stays held, the second pauses its source."""
    h = Harness(["s1", "s2"], persist)
    assert h.report("s1", "t_1", "ALTER TABLE t_1 CHANGE name title VARCHAR(20)").action == HOLD
    op = h.report("s2", "t_1", "ALTER TABLE t_1 CHANGE name label VARCHAR(20)")
    assert op.action == WAIT and isinstance(op.error(), ShardDDLConflict)
    assert "s2 `up`.`t_1`" in op.conflict and "s1 `up`.`t_1`" in op.conflict and "`title`" in op.conflict
    assert h.op("s1").action == HOLD
    assert h.lock.status == "conflict"


def test_normal_changes_of_other_shards_go_on_while_one_is_held(persist):
    h = Harness(["s1", "s2"], persist)
    h.report("s1", "t_1", "ALTER TABLE t_1 CHANGE name title VARCHAR(20)")
    op = h.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN z INT")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` ADD COLUMN `z` INT",)
    h.finish("s2")
    op = h.report("s2", "t_1", "ALTER TABLE t_1 CHANGE name title VARCHAR(20)")
    assert op.action == EXEC and op.ddls == ("ALTER TABLE `db`.`t` CHANGE COLUMN `name` `title` VARCHAR(20)",)
    assert "`title` VARCHAR(20)" in h.joined() and not any(c.startswith("`name`") for c in h.joined())


def test_strict_optimistic_mode_pauses_instead_of_holding(persist):
    """DM's strict-optimistic-shard-mode: no skip and redirect, the conflict pauses the source."""
    h = Harness(["s1", "s2"], persist)
    op = h.report("s1", "t_1", "ALTER TABLE t_1 CHANGE name title VARCHAR(20)", strict=True)
    assert op.action == WAIT and "renaming column `name` to `title`" in op.conflict
    assert h.lock.status == "conflict"


def test_a_held_rename_and_a_not_null_column_of_another_shard_do_not_agree(persist):
    """DM's UpdateBARule: a table renames a column (held), another adds a NOT NULL column the rest
    lack: a conflict among held changes, the second one pauses."""
    h = Harness(["s1", "s2"], persist)
    assert h.report("s2", "t_1", "ALTER TABLE t_1 CHANGE id new_id INT").action == HOLD
    op = h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN d INT NOT NULL")
    assert op.action == WAIT and "`d`" in op.conflict and "held with" in op.conflict
    assert h.op("s2").action == HOLD


def test_a_table_back_in_the_task_rejoins_with_the_schema_it_left_with(persist):
    """DM's UPDATE_BA_ROUTE: a table the block-allow list left out leaves the lock (the join
    forgets its columns); back in the task, its DDLs apply to the schema it had, not the lock's
    first one."""
    h = Harness(["s1", "s2"], persist)
    assert h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT NULL").action == EXEC
    h.finish("s1")
    assert h.report("s2", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT NULL").action == SKIP
    h.finish("s2")
    assert h.call(lambda lk: lk.remove_member(("s2", "up", "t_1"), remember=True))
    assert h.report("s1", "t_1", "ALTER TABLE t_1 DROP COLUMN c").action == EXEC   # nobody else has it now
    h.finish("s1")
    op = h.report("s2", "t_1", "ALTER TABLE t_1 DROP COLUMN c")
    assert op.action == SKIP and not op.conflict, op


def test_a_set_schema_lets_the_last_drop_run_and_forgets_a_waiting_ddl(persist):
    """`binlog-schema update --sync` (DM's operate-schema set): an incremental start knows only the
    target's schema for every shard; told a shard never had `name`, the lock drops it downstream
    when the last shard that had it drops it. A DDL waiting on a conflict is forgotten: it is read
    again after resume-task and judged against the new schema."""
    h = Harness(["s1", "s2"], persist)
    without = schema_from_create("CREATE TABLE x (id INT NOT NULL, qty INT NOT NULL DEFAULT 0, PRIMARY KEY (id))")
    assert "joins" in h.call(lambda lk: lk.set_schema(("s2", "up", "t_1"), without))
    assert h.report("s1", "t_1", "ALTER TABLE t_1 DROP COLUMN name").action == EXEC
    h.finish("s1")
    assert all("`name`" not in c for c in h.joined())

    h = Harness(["s1", "s2"], persist)
    assert h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN name INT").action == WAIT   # it has name already
    assert h.lock.conflict
    said = h.call(lambda lk: lk.set_schema(("s1", "up", "t_1"), without))
    assert "read again after resume" in said and not h.lock.conflict
    assert h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN name INT").action == WAIT   # now a type conflict
    assert "`name`" in h.lock.conflict


def test_a_set_schema_is_refused_while_the_members_ddl_runs_downstream(persist):
    h = Harness(["s1", "s2"], persist)
    h.report("s1", "t_1", "ALTER TABLE t_1 ADD COLUMN c INT")
    op = h.op("s1")
    assert op.action == EXEC
    h.call(lambda lk: lk.mark_executing("s1", op.step, 0))
    with pytest.raises(ShardDDLLockError, match="being carried out downstream"):
        h.call(lambda lk: lk.set_schema(("s1", "up", "t_1"), BASE))
