"""Shard DDL ops against the real Postgres state store and the real downstream: full flows
in both modes, concurrent reporters on threads, processes killed between the steps of a
transition (in-process dropped connections and hard exits at named fault points), all
converging with every DDL executed downstream exactly once."""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from dm_core import faults
from dm_core.db import connect, qi
from dm_core.position import Position
from dm_core.shardddl import executor, pg
from dm_core.shardddl.common import DONE, EXEC, EXECUTING, HOLD, SKIP, WAIT
from dm_core.shardddl.ddl_norm import normalize
from dm_core.shardddl.downstream import read_table_schema
from dm_core.shardddl.errors import ShardDDLInconsistent, ShardDDLLockError
from dm_core.shardddl.lock_ops import OPTIMISTIC as oops
from dm_core.shardddl.lock_ops import PESSIMISTIC as ops
from dm_core.shardddl.optimism.info import Info as OInfo
from dm_core.shardddl.pessimism.info import Info
from dm_core.state import StateStore

from ..conftest import ROOT

pytestmark = pytest.mark.integration


class CountingConn:
    """A downstream connection that counts the DDL statements sent through it."""

    def __init__(self, conn):
        self.conn = conn
        self.ddls = []

    def cursor(self):
        outer = self
        cur = self.conn.cursor()

        class Cur:
            def execute(self, sql, args=None):
                if sql.lstrip().upper().startswith(("ALTER", "CREATE", "DROP")):
                    outer.ddls.append(sql)
                return cur.execute(sql, args)

            def __getattr__(self, name):
                return getattr(cur, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                cur.close()

        return Cur()


@pytest.fixture
def store():
    s = StateStore()
    yield s
    s.close()


@pytest.fixture
def task(uniq):
    name = f"sdl{uniq}"
    yield name
    with StateStore() as st:      # tests may have dropped the `store` fixture's connection
        pg.remove_task(st, name)


@pytest.fixture
def down(stack, uniq):
    """A downstream schema with the merged table `t`."""
    db = f"sdl_down_{uniq}"
    conn = connect(stack["down"], downstream=True)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {qi(db)}")
        cur.execute(f"CREATE TABLE {qi(db)}.`t` (id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NULL, "
                    "qty INT NOT NULL DEFAULT 0)")
    yield db, conn
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {qi(db)}")
    conn.close()


def columns(conn, db):
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 't' "
                    "ORDER BY ORDINAL_POSITION", (db,))
        return [r[0] for r in cur.fetchall()]


def column_types(conn, db):
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
                    "TABLE_NAME = 't'", (db,))
        return [(r[0], r[1]) for r in cur.fetchall()]


def ddl(db, sql):
    return normalize(sql, "up", lambda s, t: (db, "t")).sql


def info(task, db, source, sql, pos, tables=(("up", "t_1"),)):
    return Info(task, source, (db, "t"), tuple(tables), (ddl(db, sql),), Position("mysql-bin.000001", pos))


# ---- the store -----------------------------------------------------------------------------------
def test_tables_are_created_idempotently(store):
    pg._ensured.clear()
    pg.ensure_tables(store)
    pg._ensured.clear()
    pg.ensure_tables(store)           # CREATE ... IF NOT EXISTS again: no error
    with store.tx() as cur:
        cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                    "AND table_name LIKE 'shardddl%%' ORDER BY 1", (pg.schema(),))
        assert [r[0] for r in cur.fetchall()] == ["shardddl_lock", "shardddl_member", "shardddl_operation"]


# ---- pessimistic ------------------------------------------------------------------------------------
def test_pessimistic_flow_with_the_downstream(store, task, down):
    db, conn = down
    i1 = info(task, db, "s1", "ALTER TABLE t_1 ADD COLUMN c INT", 100, tables=[("up1", "t_1"), ("up1", "t_2")])
    i2 = info(task, db, "s2", "alter table t_9 add c int", 400, tables=[("up2", "t_9")])
    assert ops.put_info(store, i1).action == WAIT                 # the coordinator has not said who takes part
    [summary] = ops.resolve(store, task, ["s1", "s2"])
    assert summary["status"] == "waiting" and summary["unsynced"] == ["s2"] and summary["owner"] == "s1"
    assert ops.put_info(store, i2).action == WAIT                 # s2 waits for the owner
    op = ops.get_operation(store, task, "s1")
    assert (op.action, op.step, op.owner) == (EXEC, 1, "s1")
    counting = CountingConn(conn)
    done = executor.run_operation(store, counting, op, ops)
    assert done.state == DONE and counting.ddls == [f"ALTER TABLE `{db}`.`t` ADD COLUMN `c` INT"]
    assert columns(conn, db) == ["id", "name", "qty", "c"]
    op2 = ops.get_operation(store, task, "s2")
    assert op2.action == SKIP
    ops.ack_done(store, task, "s2", op2.lock_id, op2.step)
    [lk] = ops.list_locks(store, task)
    assert lk["status"] == "idle" and lk["members"] == {"s1": [["up1", "t_1"], ["up1", "t_2"]], "s2": [["up2", "t_9"]]}
    assert ops.list_locks(store, task, active_only=True) == []
    assert ops.get_operation(store, task, "s1") is None
    # s2 restarts before its checkpoint passed the DDL: recognised, nothing to do
    again = ops.put_info(store, i2)
    assert again.replayed and again.state == DONE


def test_inconsistent_report_is_recorded_and_raised(store, task, down):
    db, _ = down
    ops.put_info(store, info(task, db, "s1", "ALTER TABLE t_1 ADD COLUMN c INT", 100), ["s1", "s2"])
    with pytest.raises(ShardDDLInconsistent) as ei:
        ops.put_info(store, info(task, db, "s2", "ALTER TABLE t_1 ADD COLUMN d INT", 200))
    assert "`c`" in str(ei.value) and "`d`" in str(ei.value)
    [lk] = ops.list_locks(store, task)
    assert lk["status"] == "conflict" and "`d`" in lk["conflict"]
    assert ops.get_operation(store, task, "s2").conflict


def test_unlock_releases_a_missing_source(store, task, down):
    db, conn = down
    sources = ["s1", "s2", "s3"]
    ops.put_info(store, info(task, db, "s1", "ALTER TABLE t_1 ADD COLUMN c INT", 100), sources)
    ops.put_info(store, info(task, db, "s2", "ALTER TABLE t_1 ADD COLUMN c INT", 100), sources)
    lock_id = ops.get_operation(store, task, "s1").lock_id
    with pytest.raises(ShardDDLLockError):
        ops.unlock(store, lock_id, owner="s3")
    summary = ops.unlock(store, lock_id)
    assert summary["status"] == "ready"
    executor.run_operation(store, conn, ops.get_operation(store, task, "s1"), ops)
    op = ops.get_operation(store, task, "s2")
    ops.ack_done(store, task, "s2", op.lock_id, op.step)
    op3 = ops.put_info(store, info(task, db, "s3", "ALTER TABLE t_1 ADD COLUMN c INT", 900))
    assert op3.action == SKIP and op3.forced
    ops.ack_done(store, task, "s3", op3.lock_id, op3.step)
    assert ops.list_locks(store, task, active_only=True) == []
    assert columns(conn, db).count("c") == 1


def test_a_stopped_task_s_unlock_removes_a_lock_not_started_and_its_sources_report_again(store, task, down):
    """DM's sequence_sharding_removemeta: unlock after stop-task force-removes the lock (nobody
    could run its DDL); the sources read their DDLs again at the next start and report them to
    a new lock. A lock whose owner has begun running the DDL is not removed (the others would
    wait for an owner that never reports again)."""
    from dm_core.shardddl import coordinator

    db, conn = down
    store.start_task(task, "name: x")
    i1 = info(task, db, "s1", "ALTER TABLE t_1 ADD COLUMN c INT", 100)
    ops.put_info(store, i1, ["s1", "s2"])
    lock_id = ops.get_operation(store, task, "s1").lock_id
    store.stop_task(task)
    got = coordinator.unlock(store, lock_id)
    assert got["removed"] and "removed" in coordinator.unlock_note(got, EXEC, False)
    assert coordinator.list_locks(store, task) == [] and columns(conn, db) == ["id", "name", "qty"]
    assert ops.put_info(store, i1, ["s1", "s2"]).action == WAIT     # the next start: reported again, waits for s2
    i2 = info(task, db, "s2", "alter table t_9 add c int", 400, tables=[("up2", "t_9")])
    ops.put_info(store, i2, ["s1", "s2"])
    op = ops.get_operation(store, task, "s1")
    ops.mark_executing(store, task, "s1", op.lock_id, op.step, 0)    # the owner has begun: kept, unlocked as usual
    got = coordinator.unlock(store, lock_id, action=SKIP)
    assert "removed" not in got and [lk["lock_id"] for lk in coordinator.list_locks(store, task)] == [lock_id]
    store.forget_task(task)


def test_concurrent_reporters_execute_each_ddl_once(stack, task, down):
    """Eight sources on eight threads (own connections), two DDLs each, started together."""
    db, conn = down
    sources = [f"s{i}" for i in range(8)]
    stmts = ["ALTER TABLE t_1 ADD COLUMN c1 INT", "ALTER TABLE t_1 ADD COLUMN c2 VARCHAR(8)"]
    start = threading.Barrier(len(sources))
    executed, errors = [], []

    def source(sid, k):
        st = StateStore()
        dconn = CountingConn(connect(stack["down"], downstream=True))
        try:
            start.wait()
            for n, sql in enumerate(stmts):
                op = ops.put_info(st, info(task, db, sid, sql, 1000 * (n + 1) + k), sources)
                deadline = time.monotonic() + 60
                while op is None or op.action == WAIT:
                    assert time.monotonic() < deadline, f"{sid} stuck at DDL {n + 1}: {op}"
                    time.sleep(0.01)
                    op = ops.get_operation(st, task, sid)
                if op.action == EXEC:
                    executor.run_operation(st, dconn, op, ops)
                else:
                    ops.ack_done(st, task, sid, op.lock_id, op.step)
            executed.extend(dconn.ddls)
        except Exception as e:  # reported below
            errors.append((sid, e))
        finally:
            st.close()
            dconn.conn.close()

    threads = [threading.Thread(target=source, args=(s, i)) for i, s in enumerate(sources)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sorted(executed) == sorted(ddl(db, s) for s in stmts)
    assert columns(conn, db) == ["id", "name", "qty", "c1", "c2"]
    with StateStore() as st:
        [lk] = ops.list_locks(st, task)
    assert lk["status"] == "idle" and lk["step"] == 2


def test_concurrent_creation_of_one_lock(task, down):
    db, _ = down
    start = threading.Barrier(6)
    results, errors = [], []

    def go(i):
        with StateStore() as st:
            start.wait()
            try:
                results.append(ops.put_info(st, info(task, db, f"s{i}", "ALTER TABLE t_1 ADD COLUMN c INT", 10),
                                            [f"s{j}" for j in range(6)]))
            except Exception as e:
                errors.append(e)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(6)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert not errors
    with StateStore() as st:
        [lk] = ops.list_locks(st, task)
        ops_ = [ops.get_operation(st, task, f"s{i}") for i in range(6)]
    assert lk["status"] == "ready" and sorted(lk["synced"]) == [f"s{i}" for i in range(6)]
    assert [o.action for o in ops_].count(EXEC) == 1 and ops_[[o.action for o in ops_].index(EXEC)].source == lk["owner"]


# ---- killed between the steps of a transition -------------------------------------------------------------
def _owner_op(store, task, db, sql="ALTER TABLE t_1 ADD COLUMN c INT"):
    op = ops.put_info(store, info(task, db, "s1", sql, 100), ["s1"])
    assert op.action == EXEC
    return op


def test_killed_after_mark_executing_before_the_downstream(store, task, down):
    db, conn = down
    op = _owner_op(store, task, db)
    ops.mark_executing(store, task, "s1", op.lock_id, op.step, 0)
    store._conn.close()                                    # the process dies: its connection drops
    with StateStore() as again:
        op = ops.get_operation(again, task, "s1")
        assert op.state == EXECUTING and op.exec_index == 0
        counting = CountingConn(conn)
        assert executor.run_operation(again, counting, op, ops).state == DONE
    assert len(counting.ddls) == 1 and columns(conn, db).count("c") == 1


def test_killed_after_the_downstream_before_mark_executed(store, task, down):
    db, conn = down
    op = _owner_op(store, task, db)
    ops.mark_executing(store, task, "s1", op.lock_id, op.step, 0)
    with conn.cursor() as cur:
        cur.execute(op.ddls[0])                            # the DDL took effect ...
    store._conn.close()                                    # ... and the process died
    with StateStore() as again:
        op = ops.get_operation(again, task, "s1")
        counting = CountingConn(conn)
        assert executor.run_operation(again, counting, op, ops).state == DONE
    assert counting.ddls == []                             # not run a second time
    assert columns(conn, db).count("c") == 1


def test_two_statements_killed_between_them(store, task, down):
    db, conn = down
    stmts = (ddl(db, "ALTER TABLE t_1 ADD COLUMN a INT"), ddl(db, "ALTER TABLE t_1 DROP COLUMN name"))
    op = ops.put_info(store, Info(task, "s1", (db, "t"), (("up", "t_1"),), stmts, Position("mysql-bin.000001", 5)),
                      ["s1"])
    ops.mark_executing(store, task, "s1", op.lock_id, op.step, 0)
    with conn.cursor() as cur:
        cur.execute(stmts[0])
    ops.mark_executed(store, task, "s1", op.lock_id, op.step, 0)
    ops.mark_executing(store, task, "s1", op.lock_id, op.step, 1)
    with conn.cursor() as cur:
        cur.execute(stmts[1])
    store._conn.close()
    with StateStore() as again:
        op = ops.get_operation(again, task, "s1")
        assert (op.state, op.exec_index) == (EXECUTING, 1)
        counting = CountingConn(conn)
        executor.run_operation(again, counting, op, ops)
    assert counting.ddls == [] and columns(conn, db) == ["id", "qty", "a"]


def _run_child(code: str, fault: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, SHARDFLOW_FAULTS=fault, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_process_killed_inside_a_transaction_leaves_nothing(store, task, down):
    db, _ = down
    i1 = info(task, db, "s1", "ALTER TABLE t_1 ADD COLUMN c INT", 100)
    r = _run_child(f"""
        from dm_core.shardddl.lock_ops import PESSIMISTIC as ops
        from dm_core.shardddl.pessimism.info import Info
        from dm_core.state import StateStore
        ops.put_info(StateStore(), Info.from_dict({json.dumps(i1.to_dict())}), ["s1", "s2"])
        """, "shardddl.ops.before_commit=2")   # hit 1: the lock is created (committed); hit 2 would be a second call
    assert r.returncode == 0, r.stderr
    r = _run_child(f"""
        from dm_core.shardddl.lock_ops import PESSIMISTIC as ops
        from dm_core.shardddl.pessimism.info import Info
        from dm_core.state import StateStore
        ops.put_info(StateStore(), Info.from_dict({json.dumps(info(task, db, "s2", "ALTER TABLE t_1 ADD COLUMN c INT",
                                                                    300).to_dict())}))
        """, "shardddl.ops.before_commit=1")
    assert r.returncode == faults.EXIT_CODE, r.stderr
    [lk] = ops.list_locks(store, task)
    assert lk["unsynced"] == ["s2"] and lk["status"] == "waiting"       # s2's report died with its transaction
    assert ops.put_info(store, info(task, db, "s2", "ALTER TABLE t_1 ADD COLUMN c INT", 300)).action == WAIT
    assert ops.get_operation(store, task, "s1").action == EXEC


@pytest.mark.parametrize("fault,runs_again", [("shardddl.exec.before_downstream=1", 1),
                                              ("shardddl.exec.after_downstream=1", 0)])
def test_owner_process_killed_around_the_downstream(stack, store, task, down, fault, runs_again):
    db, conn = down
    op = _owner_op(store, task, db)
    ep = stack["down"]
    r = _run_child(f"""
        from dm_core.db import Endpoint, connect
        from dm_core.shardddl import executor
        from dm_core.shardddl.lock_ops import PESSIMISTIC as ops
        from dm_core.state import StateStore
        st = StateStore()
        op = ops.get_operation(st, {task!r}, "s1")
        conn = connect(Endpoint({ep.host!r}, {ep.port}, {ep.user!r}, __import__("os").environ["SHARDFLOW_STACK_PASSWORD"]),
                       downstream=True)
        executor.run_operation(st, conn, op, ops)
        """, fault)
    assert r.returncode == faults.EXIT_CODE, r.stderr
    assert columns(conn, db).count("c") == 1 - runs_again
    op = ops.get_operation(store, task, "s1")
    assert op.state == EXECUTING
    counting = CountingConn(conn)
    assert executor.run_operation(store, counting, op, ops).state == DONE
    assert len(counting.ddls) == runs_again
    assert columns(conn, db).count("c") == 1
    assert ops.get_operation(store, task, "s1") is None


# ---- optimistic -------------------------------------------------------------------------------------------
def oinfo(task, db, conn, source, sql, pos):
    return OInfo(task, source, (db, "t"), ("up", "t_1"), (ddl(db, sql),), Position("mysql-bin.000001", pos),
                 schema_before=read_table_schema(conn, db, "t"))


def test_optimistic_flow_with_the_downstream(store, task, down):
    db, conn = down
    sources = ["s1", "s2"]

    def step(source, sql, pos):
        op = oops.put_info(store, oinfo(task, db, conn, source, sql, pos), sources)
        if op.action == EXEC:
            executor.run_operation(store, conn, op, oops)
        elif op.action == SKIP:
            oops.ack_done(store, task, source, op.lock_id, op.step)
        return op

    assert step("s1", "ALTER TABLE t_1 ADD COLUMN c INT NULL", 10).action == EXEC
    assert step("s2", "ALTER TABLE t_1 ADD COLUMN c INT NULL", 10).action == SKIP
    assert step("s1", "ALTER TABLE t_1 DROP COLUMN name", 20).action == SKIP
    assert columns(conn, db) == ["id", "name", "qty", "c"]
    assert step("s2", "ALTER TABLE t_1 DROP COLUMN name", 20).action == EXEC
    assert columns(conn, db) == ["id", "qty", "c"]
    # another type family (SMALLINT: skipped): held until s2 converts too, then s2 runs it
    op = step("s1", "ALTER TABLE t_1 MODIFY COLUMN c VARCHAR(10)", 30)
    assert op.action == HOLD and "converts" in op.message and not op.conflict
    [lk] = oops.list_locks(store, task)
    assert lk["status"] == "waiting" and "converts" in lk["members"][0]["held"]
    assert columns(conn, db) == ["id", "qty", "c"] and dict(column_types(conn, db))["c"].startswith("int")
    assert step("s2", "ALTER TABLE t_1 MODIFY COLUMN c VARCHAR(10)", 30).action == EXEC
    assert dict(column_types(conn, db))["c"] == "varchar(10)"
    assert step("s1", "ALTER TABLE t_1 MODIFY COLUMN c VARCHAR(10)", 30).action == SKIP   # s1's replay
    assert oops.list_locks(store, task, active_only=True) == []
    # a second conversion nobody follows: the operator releases it
    op = step("s1", "ALTER TABLE t_1 MODIFY COLUMN c DATETIME", 40)
    assert op.action == HOLD
    oops.unlock(store, op.lock_id, owner="s1", action=SKIP)
    op = oops.get_operation(store, task, "s1")
    oops.ack_done(store, task, "s1", op.lock_id, op.step)
    assert oops.list_locks(store, task, active_only=True) == []


def test_optimistic_concurrent_reporters(stack, task, down):
    db, conn = down
    sources = [f"s{i}" for i in range(6)]
    start = threading.Barrier(len(sources))
    executed, errors = [], []

    def go(sid):
        st = StateStore()
        dconn = CountingConn(connect(stack["down"], downstream=True))
        try:
            start.wait()
            op = oops.put_info(st, oinfo(task, db, dconn.conn, sid, "ALTER TABLE t_1 ADD COLUMN c BIGINT NULL", 50),
                               sources)
            deadline = time.monotonic() + 60
            while op.action == WAIT:
                assert time.monotonic() < deadline and not op.conflict, op
                time.sleep(0.01)
                op = oops.get_operation(st, task, sid)
            if op.action == EXEC:
                executor.run_operation(st, dconn, op, oops)
            else:
                oops.ack_done(st, task, sid, op.lock_id, op.step)
            executed.extend(dconn.ddls)
        except Exception as e:
            errors.append((sid, e))
        finally:
            st.close()
            dconn.conn.close()

    threads = [threading.Thread(target=go, args=(s,)) for s in sources]
    [t.start() for t in threads]
    [t.join(120) for t in threads]
    assert not errors, errors
    assert executed == [ddl(db, "ALTER TABLE t_1 ADD COLUMN c BIGINT NULL")]
    assert columns(conn, db).count("c") == 1


def test_a_lock_keeps_its_mode(store, task, down):
    db, conn = down
    ops.put_info(store, info(task, db, "s1", "ALTER TABLE t_1 ADD COLUMN c INT", 100), ["s1", "s2"])
    with pytest.raises(ShardDDLLockError, match="pessimistic lock"):
        oops.put_info(store, oinfo(task, db, conn, "s1", "ALTER TABLE t_1 ADD COLUMN c INT", 100))
    assert pg.lock_mode(store, f"{task}-`{db}`.`t`") == "pessimistic"
