"""DM's `adjust_gtid` case (pingcap/tiflow dm/tests/adjust_gtid/run.sh), with DM's own task and source
files (conf/, vendored unchanged: `enable-gtid: true`, `task-mode-placeholder` and the meta placeholders
replaced as run.sh's sed does; the sources say `flavor: ''`, the test sets mariadb) and our own
statements:

1. both upstreams at global sql_mode ANSI_QUOTES,NO_AUTO_VALUE_ON_ZERO and zones +01:00 / +02:00;
   task-mode all: full phase; each source's checkpoint has a binlog file, position and GTID state;
2. stop-task; source 1's checkpoint loses its GTID state, source 2's checkpoint is gone and the task
   file (task-mode incremental) gives it a meta of that file and position with an empty binlog-gtid
   (DM's clean_gtid); start-task: with nothing new upstream, each checkpoint is back at the same file
   and position with the GTID state it had (DM's adjustGlobalPointGTID: the state at the position, as
   the server knows it; MariaDB's BINLOG_GTID_POS);
3. stop-task, clean_gtid again, rows written upstream while stopped, start-task: every row arrives and
   each checkpoint's GTID state is the server's at its position.

Not ported: DM's AdjustGTIDExit failpoint (its worker exits right after adjusting: here part 2's
start is checked before anything else runs), relay, dump metadata files (the checkpoints are compared
with themselves before the clean).
"""

import pytest

from .harness import DMFiles, binlog_gtid_pos, dm_case, register_sources, run_sql, start_task, stop_task, table_rows

pytestmark = pytest.mark.integration

DB = "adjust_gtid"
S1, S2 = "mysql-replica-01", "mysql-replica-02"
MODE = "ANSI_QUOTES,NO_AUTO_VALUE_ON_ZERO"


@pytest.fixture
def case(stack, tmp_path):
    olds = {k: run_sql(stack[k], "SELECT @@GLOBAL.sql_mode, @@GLOBAL.time_zone")[0] for k in ("up1", "up2")}
    for k, zone in (("up1", "+01:00"), ("up2", "+02:00")):
        run_sql(stack[k], f"SET GLOBAL sql_mode = '{MODE}'")
        run_sql(stack[k], "SET GLOBAL time_zone = %s", args=(zone,))
    try:
        with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                     {"up1": [DB], "up2": [DB], "down": [DB, "dm_meta"]}, flavor="mariadb",
                     placeholders={"task-mode-placeholder": "all", "binlog-pos-placeholder-1": "4",
                                   "binlog-pos-placeholder-2": "4"}) as got:
            yield got
    finally:
        for k, (mode, zone) in olds.items():
            run_sql(stack[k], "SET GLOBAL sql_mode = %s", args=(mode,))
            run_sql(stack[k], "SET GLOBAL time_zone = %s", args=(zone,))


def _checkpoints(store, name: str) -> dict:
    return {s["source_id"]: (s["binlog_file"], int(s["binlog_pos"]), _gtids(s["binlog_gtid"]))
            for s in store.all_source_states(name)}


def _server_gtid(ep, file: str, pos: int) -> frozenset:
    return _gtids(binlog_gtid_pos(ep, file, pos))


def _gtids(state: str | None) -> frozenset:
    """A GTID state as a set: the server lists domains in its own order (another test may have
    written a second domain), the checkpoint in the order it met them."""
    return frozenset(filter(None, (state or "").split(",")))


def _clean_gtid(files: DMFiles, store, name: str, cps: dict, tmp_path):
    """DM's clean_gtid: source 1 loses its GTID state, source 2 its checkpoint; the incremental
    task file's meta gives source 2 the file and position with an empty binlog-gtid."""
    store.update_source_state(name, S1, binlog_gtid=None)
    store.update_source_state(name, S2, **dict.fromkeys(("binlog_file", "binlog_pos", "binlog_gtid", "low_file",
                                                        "low_pos", "low_gtid", "high_file", "high_pos", "high_gtid",
                                                        "safe_exit_file", "safe_exit_pos")))
    f1, p1, _ = cps[S1]
    f2, p2, _ = cps[S2]
    return files.task("dm-task.yaml", {"task-mode-placeholder": "incremental", "binlog-name-placeholder-1": f1,
                                       "binlog-pos-placeholder-1": "4", "binlog-gtid-placeholder-1": '""',
                                       "binlog-name-placeholder-2": f2, "binlog-pos-placeholder-2": str(p2),
                                       "binlog-gtid-placeholder-2": '""'}, out="dm-task-incremental.yaml")


def _equal(stack) -> None:
    for ep, t in ((stack["up1"], "t1"), (stack["up2"], "t2")):
        assert table_rows(stack["down"], DB, t, ["id", "b"]) == table_rows(ep, DB, t, ["id", "b"]), t


def test_dm_adjust_gtid_case(case, stack, tmp_path):
    files, store = case
    up = {S1: stack["up1"], S2: stack["up2"]}
    for ep, t, n in ((stack["up1"], "t1", 2), (stack["up2"], "t2", 3)):
        run_sql(ep, f"CREATE DATABASE {DB}", f"USE {DB}", f'CREATE TABLE "{t}" (id int PRIMARY KEY, b varchar(10))',
                *[f"INSERT INTO \"{t}\" VALUES ({i}, 'x{i}')" for i in range(n)], sql_mode=MODE)
    register_sources(files)
    task, sync = start_task(files.task_file, store, remove_meta=True)
    _equal(stack)
    cps = _checkpoints(store, task.name)
    for sid, (f, p, g) in cps.items():
        assert f and p and g and g == _server_gtid(up[sid], f, p), (sid, cps)

    # 2. GTID states cleaned, a start adjusts them from the positions
    stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    inc = _clean_gtid(files, store, task.name, cps, tmp_path)
    task, sync = start_task(inc, store)
    assert _checkpoints(store, task.name) == cps

    # 3. again, with rows written while stopped
    stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    inc = _clean_gtid(files, store, task.name, cps, tmp_path)
    for ep, t in ((stack["up1"], "t1"), (stack["up2"], "t2")):
        run_sql(ep, f"USE {DB}", *[f"INSERT INTO \"{t}\" VALUES ({i}, 'y{i}')" for i in range(10, 13)],
                f'UPDATE "{t}" SET b = \'z\' WHERE id = 0', sql_mode=MODE)
    task, sync = start_task(inc, store)
    _equal(stack)
    for sid, (f, p, g) in _checkpoints(store, task.name).items():
        assert g and g == _server_gtid(up[sid], f, p), (sid, f, p, g)
