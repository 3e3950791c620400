"""DM's `handle_error_2` case (pingcap/tiflow dm/tests/handle_error_2/run.sh): `dmctl binlog`
on sharded tables of two sources, in both shard modes, with DM's own task and source files
(conf/, vendored unchanged) and our own statements (tests/dm_cases/handle_error_lib.py says how
DM's TiDB-only refusals are made here). One test per DM scenario and task file:

* 4215: ``ADD COLUMN c int UNIQUE`` then ``d int UNIQUE`` on both shards, refused; the user adds
  the column and its key downstream by hand and skips the statement; rows after it land;
* 4216 / 4219: a refused ADD COLUMN replaced, with ``-b`` at the position query-status gives (also
  when the sources' positions differ: a row before it on one upstream), or per source with ``-s``;
* 4220: three MODIFYs refused downstream; skips set ahead at the next DDL positions with ``-b -s``,
  reverted, set again; `binlog revert` of nothing names no operation; the paused DDL skipped; after
  the checkpoints moved on, a revert of a consumed operation and a revert of a source with no
  error both fail;
* 4185: two MODIFYs, the second skipped ahead (``-b`` on each source), the first skipped where paused;
* 4201: the same on one source without sharding.

Where shardflow differs from DM (each checked below):

* DM's tracker refuses ``ADD COLUMN ... UNIQUE`` on no source: TiDB refuses it downstream, so in
  pessimistic mode only the lock's owner pauses and the other waits in the lock (DM's run.sh
  then runs `unlock-ddl-lock --force-remove` for it). shardflow refuses it as each source reads it
  (TiDB's message, code 50006; ddl_norm), so both pause, no lock forms, and `binlog skip` of the
  task settles both;
* pessimistic MODIFY: shardflow has no tracker that refuses it; the owner's run is refused
  downstream (1659) and only the owner pauses (DM: both, at the tracker); the other source waits
  in the lock, so its ``-b`` positions come from SHOW BINLOG EVENTS, not query-status;
* a ``-b`` before the checkpoint is refused ("before its checkpoint"), where DM stores an
  operation that never takes effect and later says "operator not exist".
"""

import pytest

from .handle_error_lib import DB, S1, S2, next_query_pos, ok, pos_of, refused

pytestmark = pytest.mark.integration

MODES = ["pessimistic", "optimistic"]


@pytest.fixture(params=MODES)
def sharded(request, error_scene_factory):
    sc = error_scene_factory("handle_error_2", f"double-source-{request.param}.yaml")
    sc.mode = request.param
    return sc


def test_4215_add_unique_column_refused_then_made_by_hand(sharded):
    sc = sharded
    sc.init_table(S1, S2, partitioned=False)
    sc.start()
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (1)")
    sc.s2(f"INSERT INTO {DB}.tb1 VALUES (2)")
    sc.s1(f"ALTER TABLE {DB}.tb1 ADD COLUMN c int unique")
    sc.s2(f"ALTER TABLE {DB}.tb1 ADD COLUMN c int unique")
    sc.s1(f"ALTER TABLE {DB}.tb1 ADD COLUMN d int unique")
    sc.s2(f"ALTER TABLE {DB}.tb1 ADD COLUMN d int unique")
    for col, next_row in (("c", lambda: sc.s1(f"INSERT INTO {DB}.tb1 VALUES (3, 3, 3)")), ("d", None)):
        st = sc.until_paused(S1, S2, where=f"ADD COLUMN {col} int unique")
        for sid in (S1, S2):
            assert f"unsupported add column '{col}' constraint UNIQUE KEY" in st[sid]["error"], st[sid]["error"]
        if sc.mode == "pessimistic":   # refused before any lock formed (DM: the owner's lock, unlocked by hand)
            assert '"locks": []' in ok("shard-ddl-lock", sc.task.name)
        sc.tidb(f"ALTER TABLE {DB}.tb ADD COLUMN {col} int", f"ALTER TABLE {DB}.tb ADD UNIQUE ({col})")
        out = ok("binlog", "skip", sc.task.name)
        assert S1 in out and S2 in out, out
        if next_row:
            next_row()
    sc.sync.settle()
    sc.no_errors()
    sc.s2(f"INSERT INTO {DB}.tb1 VALUES (4, 4, 4)")
    sc.sync.settle()
    assert sc.count() == 4
    assert sorted(sc.tidb(f"SELECT id, c, d FROM {DB}.tb")) == [(1, None, None), (2, None, None), (3, 3, 3),
                                                              (4, 4, 4)]


@pytest.fixture(params=[(m, extra) for m in MODES for extra in (False, True)],
                ids=[f"{m}{'-row-before' if extra else ''}" for m in MODES for extra in (False, True)])
def sharded_at(request, error_scene_factory):
    """DM's "test different error locations": with ``extra``, upstream 1 holds one more row
    (written before the task starts), so the sources' positions differ."""
    mode, extra = request.param
    sc = error_scene_factory("handle_error_2", f"double-source-{mode}.yaml")
    sc.mode, sc.extra = mode, extra
    return sc


def _init(sc, *, partitioned: bool) -> None:
    sc.init_table(S1, S2, partitioned=partitioned)
    if getattr(sc, "extra", False):
        sc.s1(f"INSERT INTO {DB}.tb1 VALUES (100)")
    sc.start()
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (1)")
    sc.s2(f"INSERT INTO {DB}.tb1 VALUES (2)")


def test_4216_refused_add_column_replaced_at_the_position_query_status_gives(sharded_at):
    sc = sharded_at
    _init(sc, partitioned=False)
    sc.s1(f"ALTER TABLE {DB}.tb1 ADD COLUMN c int unique")
    sc.s2(f"ALTER TABLE {DB}.tb1 ADD COLUMN c int unique")
    sc.until_paused(S1, S2, where="ADD COLUMN c int unique")
    where = {sid: sc.error_pos(sid) for sid in (S1, S2)}
    for sid in (S1, S2):     # the paused DDL is at (or, its event group's start, just before) that QUERY event
        q = pos_of(sc.up[sid], "ADD COLUMN c int unique")
        assert 0 <= int(q.split(":")[1]) - int(where[sid].strip("()").split(", ")[1]) < 100, (where[sid], q)
    replacement = f"alter table {DB}.tb1 add column c int"
    # DM puts `-b` on every source of the task; shardflow wants the source whose binlog it names
    msg = refused("binlog", "replace", sc.task.name, "-b", where[S1], replacement)
    assert "-s SOURCE" in msg, msg
    for sid in (S1, S2):
        assert sid in ok("binlog", "replace", sc.task.name, "-b", where[sid], "-s", sid, replacement)
    sc.sync.settle()
    sc.no_errors()
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (3, 3)")
    sc.s2(f"INSERT INTO {DB}.tb1 VALUES (4, 4)")
    sc.sync.settle()
    assert sc.count("WHERE id < 100") == 4
    assert sc.count() == 4 + sc.extra
    assert "UNIQUE" not in sc.tidb(f"SHOW CREATE TABLE {DB}.tb")[0][1]


def test_4219_refused_add_column_replaced_source_by_source(sharded):
    sc = sharded
    _init(sc, partitioned=False)
    sc.s1(f"ALTER TABLE {DB}.tb1 ADD COLUMN c int unique")
    sc.s2(f"ALTER TABLE {DB}.tb1 ADD COLUMN c int unique")
    sc.until_paused(S1, S2, where="ADD COLUMN c int unique")
    replacement = f"alter table {DB}.tb1 add column c int"
    out = ok("binlog", "replace", sc.task.name, "-s", S1, replacement)
    assert S1 in out and S2 not in out, out
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (3, 3)")
    st = sc.steps(6)
    assert list(sc.paused()) == [S2], st          # DM: "Unknown character set" 1
    ok("binlog", "replace", sc.task.name, "-s", S2, replacement)
    sc.s2(f"INSERT INTO {DB}.tb1 VALUES (4, 4)")
    sc.sync.settle()
    sc.no_errors()
    assert sorted(sc.tidb(f"SELECT id, c FROM {DB}.tb")) == [(1, None), (2, None), (3, 3), (4, 4)]


def _modify_positions(sc, sid: str, n: int = 3) -> list[str]:
    """DM's first/second/third positions of a source: the varchar(10) DDL (where query-status
    says the source is paused, or where a source waiting in the lock will meet it), then
    get_next_query_pos twice."""
    ep = sc.up[sid]
    out = [pos_of(ep, "varchar(10)")]
    while len(out) < n:
        out.append(next_query_pos(ep, out[-1]))
    return out


def _paused_at_modify(sc, width: int) -> dict:
    """The sources paused at ``MODIFY id varchar(width)``: pessimistic, the lock's owner, whose run
    the partitioned target refuses (1659; DM's tracker refuses it on both); optimistic, both, the
    lock refusing an INT key column turned VARCHAR (50008)."""
    want = [S1, S2] if sc.mode == "optimistic" else []
    for _ in range(30):
        sc.sync.step()
        paused = {s: v for s, v in sc.states().items() if v["stage"] == "paused" and v["error"]}
        if paused and all(f"varchar({width})" in (v["error_stmt"] or "") for v in paused.values()) \
                and set(want) <= set(paused):
            break
    else:
        pytest.fail(f"never paused at varchar({width}): {sc.states()}")
    for sid, v in paused.items():
        assert ("1659" in v["error"]) if sc.mode == "pessimistic" else ("50008" in v["error"]), v["error"]
    if sc.mode == "pessimistic":
        assert len(paused) == 1, paused
    return paused


def test_4220_skips_set_ahead_reverted_and_set_again(sharded):
    sc = sharded
    _init(sc, partitioned=True)
    for up in (sc.s1, sc.s2):
        up(*[f"ALTER TABLE {DB}.tb1 MODIFY id varchar({n})" for n in (10, 20, 30)])
    paused = _paused_at_modify(sc, 10)
    for sid in paused:     # DM: "operator not exist" on each paused source
        assert "no operation waits" in refused("binlog", "revert", sc.task.name, "-s", sid)
    pos = {sid: _modify_positions(sc, sid) for sid in (S1, S2)}
    for sid in paused:
        assert sc.states()[sid]["error_stmt"].endswith("varchar(10)")
    for sid in (S1, S2):
        ok("binlog", "skip", sc.task.name, "-s", sid, "-b", pos[sid][1])
    assert set(_paused_at_modify(sc, 10)) == set(paused)        # an operation ahead resumes nothing
    assert "no operation waits" in refused("binlog", "revert", sc.task.name)
    for sid in (S1, S2):
        ok("binlog", "skip", sc.task.name, "-s", sid, "-b", pos[sid][2])
    _paused_at_modify(sc, 10)
    for sid in (S1, S2):
        assert "reverted" in ok("binlog", "revert", sc.task.name, "-s", sid, "-b", pos[sid][2])
        listed = ok("binlog", "list", sc.task.name, "-s", sid)
        assert f"skip at {pos[sid][1].replace(':', ', ').join('()')}" in listed and "varchar" not in listed, listed
    _paused_at_modify(sc, 10)
    out = ok("binlog", "skip", sc.task.name)                   # the paused sources; varchar(20) skipped ahead
    assert all(s in out for s in paused), out
    _paused_at_modify(sc, 30)                                  # its skip was reverted: refused again
    ok("binlog", "skip", sc.task.name)
    # a DDL that runs: the checkpoints move past the operations (DM: "flush checkpoint")
    sc.s1(f"ALTER TABLE {DB}.tb1 ADD COLUMN new_col int")
    sc.s2(f"ALTER TABLE {DB}.tb1 ADD COLUMN new_col int")
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (3, 3)")
    sc.s2(f"INSERT INTO {DB}.tb1 VALUES (4, 4)")
    sc.sync.settle()
    assert sc.count() == 4
    for sid in (S1, S2):   # DM: "operator not exist" (shardflow: the event is already behind the checkpoint)
        assert "before its checkpoint" in refused("binlog", "revert", sc.task.name, "-s", sid, "-b", pos[sid][2])
    refused("binlog", "revert", sc.task.name, "-b", pos[S2][2])
    msg = refused("binlog", "revert", sc.task.name)
    assert f"source '{S1}' has no error" in msg and f"source '{S2}' has no error" in msg, msg
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (5, 5)")
    sc.s2(f"INSERT INTO {DB}.tb1 VALUES (6, 6)")
    sc.sync.settle()
    assert sc.count() == 6
    assert "varchar" not in sc.tidb(f"SHOW CREATE TABLE {DB}.tb")[0][1]


def test_4185_second_modify_skipped_ahead_first_where_paused(sharded_at):
    sc = sharded_at
    _init(sc, partitioned=True)
    for n in (10, 20):
        sc.s1(f"ALTER TABLE {DB}.tb1 MODIFY id varchar({n})")
        sc.s2(f"ALTER TABLE {DB}.tb1 MODIFY id varchar({n})")
    paused = _paused_at_modify(sc, 10)
    pos = {sid: _modify_positions(sc, sid, 2) for sid in (S1, S2)}
    for sid in (S1, S2):
        ok("binlog", "skip", sc.task.name, "-b", pos[sid][1], "-s", sid)
    assert set(_paused_at_modify(sc, 10)) == set(paused)
    out = ok("binlog", "skip", sc.task.name)
    assert all(s in out for s in paused), out
    sc.sync.settle()
    sc.no_errors()
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (3)")
    sc.s2(f"INSERT INTO {DB}.tb1 VALUES (4)")
    sc.sync.settle()
    assert sc.count("WHERE id < 100") == 4


def test_4201_one_source_second_modify_skipped_ahead(error_scene_factory):
    sc = error_scene_factory("handle_error_2", "single-source-no-sharding.yaml")
    sc.init_table(S1)
    sc.start()
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (1)", f"ALTER TABLE {DB}.tb1 MODIFY id varchar(10)",
          f"ALTER TABLE {DB}.tb1 MODIFY id varchar(20)")
    st = sc.until_paused(S1, where="varchar(10)")
    assert "1659" in st[S1]["error"], st[S1]["error"]
    second = next_query_pos(sc.up[S1], pos_of(sc.up[S1], "varchar(10)"))
    ok("binlog", "skip", sc.task.name, "-b", second)       # one source: no -s needed
    st = sc.steps(4)
    assert st[S1]["stage"] == "paused" and st[S1]["error_stmt"].endswith("varchar(10)"), st[S1]
    ok("binlog", "skip", sc.task.name)
    sc.sync.settle()
    sc.no_errors()
    sc.s1(f"INSERT INTO {DB}.tb1 VALUES (2)")
    sc.sync.settle()
    assert sc.count("WHERE id < 100") == 2
