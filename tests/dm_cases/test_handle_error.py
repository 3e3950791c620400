"""DM's `handle_error` case (pingcap/tiflow dm/tests/handle_error/run.sh): `dmctl binlog
skip|replace|inject|revert|list`, with DM's own task and source files (conf/, vendored unchanged)
and our own statements for the same situations.

DM's statements fail on TiDB (MODIFY of a primary key column's type, ADD COLUMN ... UNIQUE,
utf32); the local downstream is MariaDB, which takes them. Here the same refusals come from what
users do to real targets: the user made the downstream table partitioned (`PARTITION BY
HASH(id)`), so MODIFY of the partitioning column to VARCHAR fails (1659) and a UNIQUE key that
leaves it out fails (1503); or rows the user wrote downstream break a new UNIQUE key (1062); or a
user-made downstream index rejects a row (1062 on a DML). Each scenario of DM's is one test:

* skip: a DDL both sources stop at, skipped on all paused sources at once; the row that then
  fails (an 'aaa' into the INT column the skipped DDL would have changed) -- DM refuses `binlog
  skip` on a row error ("only support to handle ddl error currently"), shardflow skips the
  rejected row transaction (documented extension);
* replace: a multi-clause ALTER replaced by two statements written with the upstream names (the
  replacement is routed like the statement it replaces);
* inject (DDL): a statement that fails downstream runs after the injected one that makes it
  valid; inject (DML): a DDL injected before a rejected row transaction, which then applies;
* list / revert / `-b`: operations set ahead at the positions SHOW BINLOG EVENTS gives (DM's
  get_next_query_pos) while the source is paused at an earlier DDL, listed, one reverted and
  set again, then the paused DDL skipped: each takes effect at its own event, none is left;
  `-b` with the position as query-status prints it (DM's 4202);
* sharding, both shard modes: a merged-table DDL refused downstream (rows a user wrote make a
  UNIQUE key fail, DM's EXEC_ERROR_SKIP) skipped; DM's REPLACE_ERROR_MULTIPLE: a two-column
  UNIQUE ALTER replaced by four statements on every source; DM's CROSS_DDL_SHARDING: two tables
  per source, each running two DDLs, interleaved across tables and sources, with nothing to
  handle (passed as first written).
"""

import pytest

from .handle_error_lib import query_events
from .harness import Sync, dm_case, dmctl, register_sources, run_sql, start, table_rows

pytestmark = pytest.mark.integration

DB = "handle_error"
S1, S2 = "mysql-replica-01", "mysql-replica-02"
PARTITIONED = "PARTITION BY HASH({}) PARTITIONS 2"


def _scene(stack, tmp_path, task_file):
    return dm_case("handle_error", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                   {"up1": [DB], "up2": [DB], "down": [DB, "dm_meta"]}, task_file=task_file)


@pytest.fixture
def no_sharding(stack, tmp_path):
    with _scene(stack, tmp_path, "double-source-no-sharding.yaml") as got:
        yield got


@pytest.fixture
def single(stack, tmp_path):
    with _scene(stack, tmp_path, "single-source-no-sharding.yaml") as got:
        yield got


def _status(store, task) -> dict:
    return {s["source_id"]: s for s in store.all_source_states(task.name)}


def _until_paused(sync: Sync, store, task, sources, rounds: int = 30) -> dict:
    for _ in range(rounds):
        sync.step()
        st = _status(store, task)
        if all(st.get(s, {}).get("stage") == "paused" for s in sources):
            return st
    pytest.fail(f"never paused: { {s: (v['stage'], v['error']) for s, v in _status(store, task).items()} }")


def _ok(*args) -> str:
    rc, out, err = dmctl(*args)
    assert rc == 0, out + err
    return out


def _pos_of(ep, fragment: str) -> str:
    hits = [f"{f}:{p}" for f, p, sql in query_events(ep) if fragment in sql]
    assert hits, f"no DDL with {fragment!r} in the binlog"
    return hits[-1]


def test_skip_a_ddl_on_every_paused_source_then_a_rejected_row(no_sharding, stack):
    files, store = no_sharding
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    for ep, t in ((up1, "tb1"), (up2, "tb2")):
        run_sql(ep, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.{t} (id int primary key) CHARSET=latin1 COLLATE=latin1_bin")
    run_sql(down, f"CREATE DATABASE {DB}", *[f"CREATE TABLE {DB}.{t} (id int primary key) CHARSET=latin1 "
                                             f"COLLATE=latin1_bin {PARTITIONED.format('id')}" for t in ("tb1", "tb2")])
    register_sources(files)
    task, sync = start(files, store)
    run_sql(up1, f"INSERT INTO {DB}.tb1 VALUES (1)", f"ALTER TABLE {DB}.tb1 ADD COLUMN new_col1 int",
            f"INSERT INTO {DB}.tb1 VALUES (3, 3)")
    run_sql(up2, f"INSERT INTO {DB}.tb2 VALUES (2)", f"ALTER TABLE {DB}.tb2 ADD COLUMN new_col1 int",
            f"INSERT INTO {DB}.tb2 VALUES (4, 4)")
    sync.settle()
    # the partitioned downstream cannot take a VARCHAR partitioning column (as TiDB cannot change a key's type)
    run_sql(up1, f"ALTER TABLE {DB}.tb1 MODIFY id varchar(10)", f"INSERT INTO {DB}.tb1 VALUES ('aaa', 5)")
    run_sql(up2, f"ALTER TABLE {DB}.tb2 MODIFY id varchar(10)", f"INSERT INTO {DB}.tb2 VALUES ('bbb', 6)")
    st = _until_paused(sync, store, task, [S1, S2])
    for sid, t in ((S1, "tb1"), (S2, "tb2")):
        assert "1659" in st[sid]["error"] and "MODIFY id varchar(10)" in st[sid]["error_stmt"], st[sid]
    rc, out, err = dmctl("query-status", task.name)
    assert out.count("MODIFY id varchar(10)") >= 2, out

    out = _ok("binlog", "skip", task.name)           # every paused source
    assert S1 in out and S2 in out, out
    st = _until_paused(sync, store, task, [S1, S2])   # the next row is refused: 'aaa' into an INT
    for sid in (S1, S2):
        assert "1366" in st[sid]["error"] and "Incorrect integer value" in st[sid]["error"], st[sid]["error"]
    _ok("binlog", "skip", task.name, "-s", S1)       # shardflow drops the rejected row transaction
    for _ in range(5):
        sync.step()
    st = _status(store, task)
    assert st[S1]["stage"] == "sync" and st[S2]["stage"] == "paused", st
    assert table_rows(down, DB, "tb1", ["id", "new_col1"]) == [(1, None), (3, 3)]
    _ok("binlog", "skip", task.name, "-s", S2)
    sync.settle()
    assert table_rows(down, DB, "tb2", ["id", "new_col1"]) == [(2, None), (4, 4)]
    assert "no operation waits" in _ok("binlog", "list", task.name)


def test_replace_reads_the_statements_as_the_upstreams(single, stack):
    files, store = single
    up1, down = stack["up1"], stack["down"]
    run_sql(up1, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.tb1 (a int unique, b int)")
    # the task routes handle_error.tb* into handle_error.tb: the user made it partitioned
    run_sql(down, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.tb (a int unique, b int) {PARTITIONED.format('a')}")
    register_sources(files)
    task, sync = start(files, store)
    run_sql(up1, f"INSERT INTO {DB}.tb1 VALUES (1, 1)",
            f"ALTER TABLE {DB}.tb1 ADD COLUMN new_col text, ADD COLUMN c int unique",
            f"INSERT INTO {DB}.tb1 VALUES (2, 2, 'haha', 2)")
    st = _until_paused(sync, store, task, [S1])
    assert "1503" in st[S1]["error"] and "ADD COLUMN c int unique" in st[S1]["error_stmt"], st[S1]
    # written with the upstream's names, as DM's user does: routed to `tb` like the statement they replace
    _ok("binlog", "replace", task.name, f"alter table {DB}.tb1 add column new_col text, add column c int;",
        f"alter table {DB}.tb1 add unique(a, c);")
    run_sql(up1, f"INSERT INTO {DB}.tb1 VALUES (3, 3, 'hihi', 3)")
    sync.settle()
    assert table_rows(down, DB, "tb", ["a", "b", "new_col", "c"]) == [(1, 1, None, None), (2, 2, "haha", 2),
                                                                      (3, 3, "hihi", 3)]
    keys = run_sql(down, "SELECT index_name, GROUP_CONCAT(column_name ORDER BY seq_in_index) FROM "
                         "information_schema.statistics WHERE table_schema = %s AND table_name = 'tb' "
                         "GROUP BY index_name ORDER BY 1", args=(DB,))
    assert ("a_2", "a,c") in [tuple(k) for k in keys] or ("a", "a,c") in [tuple(k) for k in keys], keys
    assert _status(store, task)[S1]["error"] is None


def test_inject_before_a_ddl_and_before_a_rejected_row_transaction(no_sharding, stack):
    files, store = no_sharding
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    run_sql(up1, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.tb1 (a int primary key, b int)")
    run_sql(up2, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.tb2 (a int primary key, b int)")
    run_sql(down, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.tb1 (a int primary key, b int) {PARTITIONED.format('a')}",
            f"CREATE TABLE {DB}.tb2 (a int primary key, b int, UNIQUE KEY b (b))")  # a user-made index
    register_sources(files)
    task, sync = start(files, store)
    run_sql(up1, f"INSERT INTO {DB}.tb1 VALUES (1, 1)", f"ALTER TABLE {DB}.tb1 ADD UNIQUE (b)",
            f"INSERT INTO {DB}.tb1 VALUES (2, 2)")
    run_sql(up2, f"INSERT INTO {DB}.tb2 VALUES (1, 1), (2, 2)",
            "START TRANSACTION", f"INSERT INTO {DB}.tb2 VALUES (3, 3)", f"INSERT INTO {DB}.tb2 VALUES (4, 2)",
            f"INSERT INTO {DB}.tb2 VALUES (5, 2)", "COMMIT")
    st = _until_paused(sync, store, task, [S1, S2])
    assert "1503" in st[S1]["error"], st[S1]["error"]
    assert "1062" in st[S2]["error"] and "Duplicate entry '2'" in st[S2]["error"], st[S2]["error"]
    # inject on a DDL: the injected statement first, then the DDL itself (which it makes valid)
    _ok("binlog", "inject", task.name, "-s", S1, f"alter table {DB}.tb1 remove partitioning")
    # inject on a rejected row transaction: DDL first, then the rows
    _ok("binlog", "inject", task.name, "-s", S2, f"alter table {DB}.tb2 drop index b")
    sync.settle()
    assert table_rows(down, DB, "tb1", ["a", "b"]) == [(1, 1), (2, 2)]
    assert run_sql(down, f"SELECT COUNT(*) FROM {DB}.tb2 WHERE b = 2") == [(3,)]
    defs = run_sql(down, f"SHOW CREATE TABLE {DB}.tb1")[0][1]
    assert "PARTITION" not in defs and "UNIQUE KEY `b`" in defs, defs


def test_operations_set_ahead_listed_reverted_and_taken_in_binlog_order(single, stack):
    files, store = single
    up1, down = stack["up1"], stack["down"]
    run_sql(up1, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.tb1 (id int primary key, c int)")
    run_sql(down, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.tb (id int primary key, c int) {PARTITIONED.format('id')}")
    register_sources(files)
    task, sync = start(files, store)
    run_sql(up1, f"INSERT INTO {DB}.tb1 VALUES (1, 1)",
            f"ALTER TABLE {DB}.tb1 MODIFY id varchar(10)",
            f"ALTER TABLE {DB}.tb1 MODIFY id varchar(20)",
            f"ALTER TABLE {DB}.tb1 MODIFY id varchar(30)")
    st = _until_paused(sync, store, task, [S1])
    assert "varchar(10)" in st[S1]["error_stmt"], st[S1]
    assert "no operation waits" in _ok("binlog", "list", task.name)
    second, third = _pos_of(up1, "varchar(20)"), _pos_of(up1, "varchar(30)")

    _ok("binlog", "skip", task.name, "-b", second)          # ahead of where it is paused
    for _ in range(3):
        sync.step()
    st = _status(store, task)[S1]
    assert st["stage"] == "paused" and "varchar(10)" in st["error_stmt"], "an operation ahead resumes nothing"
    assert f"skip at ({second.replace(':', ', ')})" in _ok("binlog", "list", task.name)

    _ok("binlog", "inject", task.name, "-b", third, f"alter table {DB}.tb1 remove partitioning")
    _ok("binlog", "revert", task.name, "-b", second)
    listed = _ok("binlog", "list", task.name)
    assert "skip at" not in listed and "inject at" in listed and "remove partitioning" in listed, listed
    _ok("binlog", "skip", task.name, "-b", second)
    rc, out, err = dmctl("binlog", "revert", task.name, "-b", "mysql-bin.000001:4")
    assert rc != 0 and "before its checkpoint" in err, out + err
    rc, out, err = dmctl("binlog", "skip", task.name, "-b", "4")
    assert rc != 0 and "FILE:POS" in err, out + err

    # the paused DDL, by the position query-status prints (DM's 4202: `-b` of the error location)
    _ok("binlog", "skip", task.name, "-b", st["error_pos"])
    run_sql(up1, f"INSERT INTO {DB}.tb1 VALUES ('abc', 5)")
    sync.settle()
    assert table_rows(down, DB, "tb", ["id", "c"]) == [("1", 1), ("abc", 5)]
    defs = run_sql(down, f"SHOW CREATE TABLE {DB}.tb")[0][1]
    assert "varchar(30)" in defs and "PARTITION" not in defs, defs
    assert "no operation waits" in _ok("binlog", "list", task.name)


@pytest.fixture(params=["pessimistic", "optimistic"])
def sharding(request, stack, tmp_path):
    with _scene(stack, tmp_path, f"double-source-{request.param}.yaml") as got:
        yield got


def _sharded_tables(stack, files, store, ddl: str):
    up1, up2 = stack["up1"], stack["up2"]
    for ep in (up1, up2):
        run_sql(ep, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.tb1 {ddl}")
    register_sources(files)
    return start(files, store)


def test_sharded_ddl_refused_downstream_is_skipped(sharding, stack):
    """DM's EXEC_ERROR_SKIP: rows the user wrote downstream break the merged table's new UNIQUE key;
    the source that runs the lock's statement pauses; `binlog skip` settles the lock with nothing
    run and every source goes on."""
    files, store = sharding
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    task, sync = _sharded_tables(stack, files, store, "(id int primary key, a int, b int)")
    run_sql(up1, f"INSERT INTO {DB}.tb1 VALUES (1, 1, 1)")
    run_sql(up2, f"INSERT INTO {DB}.tb1 VALUES (2, 2, 2)")
    sync.settle()
    run_sql(down, f"INSERT INTO {DB}.tb VALUES (3, 1, 1), (4, 2, 2)")    # rows only the downstream has
    for ep in (up1, up2):
        run_sql(ep, f"ALTER TABLE {DB}.tb1 ADD UNIQUE INDEX ua (a)")
    for _ in range(12):
        sync.step()
    st = _status(store, task)
    paused = [s for s, v in st.items() if v["stage"] == "paused"]
    assert len(paused) == 1 and "1062" in st[paused[0]]["error"] and "ADD UNIQUE" in st[paused[0]]["error"], st
    run_sql(down, f"INSERT INTO {DB}.tb VALUES (5, 3, 3), (6, 4, 4)")
    out = _ok("binlog", "skip", task.name)
    assert paused[0] in out, out
    run_sql(up1, f"INSERT INTO {DB}.tb1 VALUES (7, 7, 7)")
    run_sql(up2, f"INSERT INTO {DB}.tb1 VALUES (8, 8, 8)")
    sync.settle()
    assert run_sql(down, f"SELECT COUNT(*) FROM {DB}.tb") == [(8,)]
    assert "ua" not in run_sql(down, f"SHOW CREATE TABLE {DB}.tb")[0][1]
    assert "no shard DDL lock is active" in _ok("shard-ddl-lock", task.name) or '"locks": []' in _ok(
        "shard-ddl-lock", task.name)


def test_sharded_ddl_replaced_by_several_statements(sharding, stack):
    """DM's REPLACE_ERROR_MULTIPLE: an ALTER adding two UNIQUE columns the (partitioned) merged table
    refuses is replaced, on every paused source, by four statements; rows land after it."""
    files, store = sharding
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    run_sql(down, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.tb (id int primary key) {PARTITIONED.format('id')}")
    task, sync = _sharded_tables(stack, files, store, "(id int primary key)")
    for ep in (up1, up2):
        run_sql(ep, f"ALTER TABLE {DB}.tb1 ADD COLUMN a varchar(20) unique, ADD COLUMN b varchar(20) unique")
    run_sql(up1, f"INSERT INTO {DB}.tb1 VALUES (1, '1', '1')")
    run_sql(up2, f"INSERT INTO {DB}.tb1 VALUES (2, '2', '2')")
    for _ in range(12):
        sync.step()
    st = _status(store, task)
    paused = [s for s, v in st.items() if v["stage"] == "paused"]
    # every source refuses it as it reads it, as DM does: ADD COLUMN ... UNIQUE on a sharded table
    # (pessimistic: TiDB's refusal, 50006; optimistic: the lock's "there will be conflicts", 50008);
    # a downstream refusal of the lock's statement (1503) is handled the same way
    assert paused and all(any(c in st[s]["error"] for c in ("1503", "50006", "50008")) for s in paused), st
    out = _ok("binlog", "replace", task.name,
              f"alter table {DB}.tb1 add column a varchar(20); alter table {DB}.tb1 add unique idx(id, a); "
              f"alter table {DB}.tb1 add column b varchar(20); alter table {DB}.tb1 add unique idx2(id, b);")
    assert all(s in out for s in paused), out
    sync.settle()
    assert table_rows(down, DB, "tb", ["id", "a", "b"]) == [(1, "1", "1"), (2, "2", "2")]
    defs = run_sql(down, f"SHOW CREATE TABLE {DB}.tb")[0][1]
    assert "UNIQUE KEY `idx` (`id`,`a`)" in defs and "UNIQUE KEY `idx2` (`id`,`b`)" in defs, defs
    assert "no operation waits" in _ok("binlog", "list", task.name)


def test_sharded_ddls_skipped_ahead_per_source(sharding, stack):
    """DM's 4206: two refused DDLs on both sources; each source's second DDL skipped ahead with -b
    (the position SHOW BINLOG EVENTS gives), its first by the position query-status gives."""
    files, store = sharding
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    run_sql(down, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.tb (id int primary key) {PARTITIONED.format('id')}")
    task, sync = _sharded_tables(stack, files, store, "(id int primary key)")
    run_sql(up1, f"INSERT INTO {DB}.tb1 VALUES (1)")
    run_sql(up2, f"INSERT INTO {DB}.tb1 VALUES (2)")
    for ep in (up1, up2):
        run_sql(ep, f"ALTER TABLE {DB}.tb1 MODIFY id varchar(10)", f"ALTER TABLE {DB}.tb1 MODIFY id varchar(20)")
    for _ in range(12):
        sync.step()
    firsts = {S1: _pos_of(up1, "varchar(10)"), S2: _pos_of(up2, "varchar(10)")}
    seconds = {S1: _pos_of(up1, "varchar(20)"), S2: _pos_of(up2, "varchar(20)")}
    for sid in (S1, S2):
        _ok("binlog", "skip", task.name, "-b", seconds[sid], "-s", sid)
    st = _status(store, task)
    paused = [s for s, v in st.items() if v["stage"] == "paused"]
    # pessimistic: the owner's run is refused (1659); optimistic: the merged schema cannot take a
    # key column turned from INT into VARCHAR (a conflict, 50008) before anything runs
    assert paused and all(("1659" in st[s]["error"]) or ("50008" in st[s]["error"]) for s in paused), st
    for sid in (S1, S2):
        if sid in paused:
            _ok("binlog", "skip", task.name, "-b", st[sid]["error_pos"], "-s", sid)
        else:
            _ok("binlog", "skip", task.name, "-b", firsts[sid], "-s", sid)
    run_sql(up1, f"INSERT INTO {DB}.tb1 VALUES (3)")
    run_sql(up2, f"INSERT INTO {DB}.tb1 VALUES (4)")
    sync.settle()
    assert table_rows(down, DB, "tb", ["id"]) == [(1,), (2,), (3,), (4,)]
    assert "no operation waits" in _ok("binlog", "list", task.name)


def test_two_tables_per_source_each_run_two_ddls_interleaved(sharding, stack):
    """DM's CROSS_DDL_SHARDING: tb1 and tb2 of both sources merge into tb; tb1s run ADD COLUMN c
    and then ADD COLUMN d (rows between, source 2's d after source 1's row), and only then do the
    tb2s run c and d. Nothing errs: every source syncs, the merged table has c and d and the ten
    rows (DM: every source Running, count 10)."""
    files, store = sharding
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    for ep in (up1, up2):
        run_sql(ep, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.tb1 (a int primary key, b int)",
                f"CREATE TABLE {DB}.tb2 (a int primary key, b int)")
    register_sources(files)
    task, sync = start(files, store)
    t1, t2 = f"{DB}.tb1", f"{DB}.tb2"
    run_sql(up1, f"alter table {t1} add column c int")
    run_sql(up2, f"alter table {t1} add column c int")
    run_sql(up1, f"insert into {t1} values(1,1,1)", f"insert into {t1} values(11,11,11)")
    run_sql(up2, f"insert into {t1} values(2,2,2)", f"insert into {t1} values(22,22,22)")
    run_sql(up1, f"alter table {t1} add column d int", f"insert into {t1} values(3,3,3,3)")
    run_sql(up2, f"alter table {t1} add column d int", f"insert into {t1} values(6,6,6,6)")
    run_sql(up1, f"alter table {t2} add column c int")
    run_sql(up2, f"alter table {t2} add column c int")
    run_sql(up1, f"insert into {t2} values(4,4,4)")
    run_sql(up2, f"insert into {t2} values(5,5,5)")
    run_sql(up1, f"alter table {t2} add column d int")
    run_sql(up2, f"alter table {t2} add column d int")
    run_sql(up1, f"insert into {t2} values(7,7,7,7)")
    run_sql(up2, f"insert into {t2} values(8,8,8,8)")
    sync.settle()
    st = _status(store, task)
    assert {v["stage"] for v in st.values()} == {"sync"} and not any(v["error"] for v in st.values()), st
    assert run_sql(down, f"SELECT COUNT(*) FROM {DB}.tb") == [(10,)]
    want = sorted((tuple(r) for ep in (up1, up2) for t in (t1, t2) for r in run_sql(ep, f"SELECT a, b, c, d FROM {t}")),
                  key=repr)
    assert table_rows(down, DB, "tb", ["a", "b", "c", "d"]) == want
