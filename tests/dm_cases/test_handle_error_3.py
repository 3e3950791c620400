"""DM's `handle_error_3` case (pingcap/tiflow dm/tests/handle_error_3/run.sh): more `dmctl binlog`
with DM's own task and source files (conf/, vendored unchanged) and our own statements
(tests/dm_cases/handle_error_lib.py says how DM's TiDB-only refusals are made here). One test
per DM scenario and task file:

* 4189: two refused ADD COLUMNs on both sharded sources with rows between; the second replaced
  ahead (``-b`` at the next DDL, per source), the first replaced where paused (both shard modes,
  both error locations);
* 4210: on one source, the second refused ADD COLUMN replaced ahead by two statements, the first
  replaced by a statement that is refused in turn, then by two that pass;
* 4193: three refused DDLs on both sources: skips at the paused position and ahead, reverts of
  consumed and of absent operations, a skip set again, the sources paused on different DDLs, and
  `binlog skip` of the task going to whichever are paused;
* 4230: a replacement refused downstream, reverted: the source retries the original statement
  (DM resumes a paused task after every `binlog` operation), then a replacement that passes;
* 4177: dmctl's answers to wrong arguments (unknown task, no task, unknown source, a malformed
  position, an unknown subcommand), `skip`/`replace` on a source with no error, and on a task
  that no longer exists;
* 4231: a replacement of two statements, the second refused: the source pauses on it; skipped.

DM's utf32 columns (refused by TiDB's tracker on every source) are ``ADD COLUMN ... int UNIQUE``
here: shardflow refuses those on a sharded table as each source reads it, in both shard modes,
with TiDB's message. On the one-source task (not sharded) the same statement is refused by the
partitioned downstream table (1503), so the replacements add the unique key over ``(id, col)``.

Deviations (each checked): `-b` names one source's binlog, so a task of two sources needs `-s`
with it (DM puts the position on every source); a `-b` behind the checkpoint is refused
("before its checkpoint", DM stores it and does nothing); a skip at a DDL a source already passed
is "before its checkpoint" where DM says "operator not exist".
"""

import pytest

from .handle_error_lib import DB, S1, S2, next_query_pos, ok, pos_of, refused

pytestmark = pytest.mark.integration

MODES = ["pessimistic", "optimistic"]


@pytest.fixture(params=[(m, extra) for m in MODES for extra in (False, True)],
                ids=[f"{m}{'-row-before' if extra else ''}" for m in MODES for extra in (False, True)])
def sharded_at(request, error_scene_factory):
    mode, extra = request.param
    sc = error_scene_factory("handle_error_3", f"double-source-{mode}.yaml")
    sc.mode, sc.extra = mode, extra
    return sc


@pytest.fixture(params=MODES)
def sharded(request, error_scene_factory):
    sc = error_scene_factory("handle_error_3", f"double-source-{request.param}.yaml")
    sc.mode, sc.extra = request.param, False
    return sc


@pytest.fixture
def single(error_scene_factory):
    sc = error_scene_factory("handle_error_3", "single-source-no-sharding.yaml")
    sc.init_table(S1)       # the target `tb` partitioned by id: a UNIQUE key without id is refused (1503)
    sc.start()
    return sc


def _init(sc) -> None:
    sc.init_table(S1, S2, partitioned=False)
    if sc.extra:
        sc.s1(f"INSERT INTO {DB}.tb1 VALUES (100)")
    sc.start()
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (1)")
    sc.s2(f"INSERT INTO {DB}.tb1 VALUES (2)")


def _refused_on_both(sc, col: str) -> dict:
    st = sc.until_paused(S1, S2, where=f"ADD COLUMN {col} int unique")
    for sid in (S1, S2):
        assert f"unsupported add column '{col}' constraint UNIQUE KEY" in st[sid]["error"], st[sid]["error"]
    return st


def test_4189_second_add_column_replaced_ahead_first_where_paused(sharded_at):
    sc = sharded_at
    _init(sc)
    for up in (sc.s1, sc.s2):
        up(f"ALTER TABLE {DB}.tb1 ADD COLUMN c int unique")
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (3, 3)")
    sc.s2(f"INSERT INTO {DB}.tb1 VALUES (4, 4)")
    for up in (sc.s1, sc.s2):
        up(f"ALTER TABLE {DB}.tb1 ADD COLUMN d int unique")
    _refused_on_both(sc, "c")
    second = {sid: next_query_pos(sc.up[sid], pos_of(sc.up[sid], "ADD COLUMN c int unique")) for sid in (S1, S2)}
    for sid in (S1, S2):
        ok("binlog", "replace", sc.task.name, "-b", second[sid], "-s", sid, f"alter table {DB}.tb1 add column d int;")
    _refused_on_both(sc, "c")
    out = ok("binlog", "replace", sc.task.name, f"alter table {DB}.tb1 add column c int;")
    assert S1 in out and S2 in out, out
    sc.sync.settle()
    sc.no_errors()
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (5, 5, 5)")
    sc.s2(f"INSERT INTO {DB}.tb1 VALUES (6, 6, 6)")
    sc.sync.settle()
    assert sc.count("WHERE id < 100") == 6
    assert sorted(sc.tidb(f"SELECT id, c, d FROM {DB}.tb WHERE id < 100")) == [
        (1, None, None), (2, None, None), (3, 3, None), (4, 4, None), (5, 5, 5), (6, 6, 6)]


def test_4210_replaced_ahead_then_replaced_twice_where_paused(single):
    sc = single
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (1)", f"ALTER TABLE {DB}.tb1 ADD COLUMN c int unique",
          f"INSERT INTO {DB}.tb1 VALUES (2, 2)", f"ALTER TABLE {DB}.tb1 ADD COLUMN d int unique")
    st = sc.until_paused(S1, where="ADD COLUMN c int unique")
    assert "1503" in st[S1]["error"], st[S1]["error"]
    second = next_query_pos(sc.up[S1], pos_of(sc.up[S1], "ADD COLUMN c int unique"))
    ok("binlog", "replace", sc.task.name, "-b", second,
       f"alter table {DB}.tb1 add column d int;alter table {DB}.tb1 add unique(id, d);")
    st = sc.steps(4)
    assert "ADD COLUMN c int unique" in st[S1]["error_stmt"], st[S1]
    ok("binlog", "replace", sc.task.name, f"alter table {DB}.tb1 add column e int unique;")
    st = sc.until_paused(S1, where="add column e int unique")     # the replacement is refused in turn
    assert "1503" in st[S1]["error"], st[S1]["error"]
    ok("binlog", "replace", sc.task.name,
       f"alter table {DB}.tb1 add column c int;alter table {DB}.tb1 add unique(id, c);")
    sc.sync.settle()
    sc.no_errors()
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (3, 3, 3)")
    sc.sync.settle()
    assert sc.count("WHERE id < 100") == 3
    assert sorted(sc.tidb(f"SELECT id, c, d FROM {DB}.tb")) == [(1, None, None), (2, 2, None), (3, 3, 3)]
    assert "`e`" not in sc.tidb(f"SHOW CREATE TABLE {DB}.tb")[0][1]


def test_4193_skips_and_reverts_at_and_ahead_of_the_paused_ddl(sharded):
    sc = sharded
    _init(sc)
    for up in (sc.s1, sc.s2):
        up(*[f"ALTER TABLE {DB}.tb1 ADD COLUMN c{n} int unique" for n in (1, 2, 3)])
    _refused_on_both(sc, "c1")
    # the user adds them downstream by hand: the rows after the skipped DDLs carry them
    sc.tidb(*[f"ALTER TABLE {DB}.tb ADD COLUMN c{n} int" for n in (1, 2, 3)])
    first = {sid: sc.error_pos(sid) for sid in (S1, S2)}
    second = {sid: next_query_pos(sc.up[sid], next_query_pos(sc.up[sid], pos_of(sc.up[sid], "c1 int unique")))
              for sid in (S1, S2)}
    for sid in (S1, S2):        # at the paused DDL: taken at once
        ok("binlog", "skip", sc.task.name, "-s", sid, "-b", first[sid])
    _refused_on_both(sc, "c2")
    for sid in (S1, S2):        # DM: "operator not exist" (the skip took effect)
        refused("binlog", "revert", sc.task.name, "-s", sid, "-b", first[sid])
    ok("binlog", "skip", sc.task.name, "-s", S1, "-b", second[S1])
    assert "reverted" in ok("binlog", "revert", sc.task.name, "-s", S1, "-b", second[S1])
    ok("binlog", "skip", sc.task.name, "-s", S1, "-b", second[S1])
    assert "no operation waits" in refused("binlog", "revert", sc.task.name, "-s", S2, "-b", second[S2])
    listed = ok("binlog", "list", sc.task.name)
    assert listed.count("skip at") == 1 and S1 in listed, listed
    assert set(sc.paused()) == {S1, S2}
    out = ok("binlog", "skip", sc.task.name)           # both paused at c2; source 1 skips c3 ahead too
    assert S1 in out and S2 in out, out
    sc.steps(8)
    assert list(sc.paused()) == [S2], sc.states()
    assert "c3 int unique" in sc.states()[S2]["error_stmt"]
    out = ok("binlog", "skip", sc.task.name)           # source 2 alone now
    assert f"source {S2}: skip at" in out and f"source '{S1}' has no error" in out, out
    assert f"source {S1}: skip" not in out, out
    sc.sync.settle()
    sc.no_errors()
    sc.s1(f"INSERT INTO {DB}.tb1 (id) VALUES (3)")
    sc.s2(f"INSERT INTO {DB}.tb1 (id) VALUES (4)")
    sc.sync.settle()
    assert sc.count() == 4


def test_4230_a_refused_replacement_reverted_retries_the_original(single):
    sc = single
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (1)", f"ALTER TABLE {DB}.tb1 ADD COLUMN c int unique")
    sc.until_paused(S1, where="ADD COLUMN c int unique")
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (2, 2)")
    ok("binlog", "replace", sc.task.name, f"alter table {DB}.tb1 add column d int unique;")
    st = sc.until_paused(S1, where="add column d int unique")
    assert "1503" in st[S1]["error"], st[S1]["error"]
    ok("binlog", "revert", sc.task.name)              # DM resumes after it: the original is refused again
    st = sc.until_paused(S1, where="ADD COLUMN c int unique", unless="add column d int unique")
    assert "1503" in st[S1]["error"], st[S1]["error"]
    ok("binlog", "replace", sc.task.name, f"alter table {DB}.tb1 add column c int;")
    sc.sync.settle()
    sc.no_errors()
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (3, 3)")
    sc.sync.settle()
    assert sc.count() == 3
    assert "`d`" not in sc.tidb(f"SHOW CREATE TABLE {DB}.tb")[0][1]


def test_4177_wrong_arguments_and_sources_with_no_error(single):
    sc = single
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (1)", f"ALTER TABLE {DB}.tb1 MODIFY id varchar(10)")
    st = sc.until_paused(S1, where="varchar(10)")
    assert "1659" in st[S1]["error"], st[S1]["error"]
    at = sc.error_pos(S1)
    assert "task 'wrong-task' does not exist" in refused("binlog", "skip", "wrong-task")
    assert "usage" in refused("binlog", "skip").lower()
    msg = refused("binlog", "skip", sc.task.name, "-b", at, "-s", "wrong-source")
    assert "source 'wrong-source' is not a source of task" in msg, msg
    msg = refused("binlog", "skip", sc.task.name, "-b", "mysql-bin|1111", "-s", "wrong-source")
    assert "binlog position 'mysql-bin|1111' is not FILE:POS" in msg, msg
    assert sc.states()[S1]["stage"] == "paused"
    assert S1 in ok("binlog", "skip", sc.task.name)
    sc.sync.settle()
    assert f"source '{S1}' has no error" in refused("binlog", "skip", sc.task.name)
    msg = refused("binlog", "replace", sc.task.name, f"alter table {DB}.tb1 add column c int;")
    assert f"source '{S1}' has no error" in msg, msg
    # DM stores an operation at a position long past and says nothing; shardflow refuses it
    assert "before its checkpoint" in refused("binlog", "skip", sc.task.name, "-b", "mysql-bin.000000:00000")
    assert "invalid choice: 'aaa'" in refused("binlog", "aaa", sc.task.name)
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (2)")
    sc.sync.settle()
    assert sc.count() == 2
    # DM's 4184, 4223, 4197: after stop-task DM's task does not exist; shardflow keeps a stopped task
    # (start-task resumes it from its checkpoints) and says it is stopped
    from .harness import stop_task

    stop_task(sc.task.name)
    for args in (("skip",), ("replace", f"alter table {DB}.tb1 add column c int"), ("revert",)):
        op, *sql = args
        assert f"task {sc.task.name} is stopped" in refused("binlog", op, sc.task.name, *sql)


def test_4231_a_replacement_whose_second_statement_is_refused(single):
    sc = single
    sc.s1(f"ALTER TABLE {DB}.tb1 ADD KEY (id)")        # a DDL that moves the checkpoint first
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (1)", f"ALTER TABLE {DB}.tb1 ADD COLUMN c int unique")
    sc.until_paused(S1, where="ADD COLUMN c int unique")
    ok("binlog", "replace", sc.task.name,
       f"alter table {DB}.tb1 add column c int; alter table {DB}.tb1 add column d int unique;")
    st = sc.until_paused(S1, where="add column d int unique")
    assert "1503" in st[S1]["error"], st[S1]["error"]
    ok("binlog", "skip", sc.task.name)
    sc.sync.settle()
    sc.no_errors()
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (2, 2)")
    sc.sync.settle()
    assert sc.count() == 2
    assert sorted(sc.tidb(f"SELECT id, c FROM {DB}.tb")) == [(1, None), (2, 2)]
