"""GTID positions (MariaDB, `enable-gtid: true`): checkpoints carry the GTID state the
server itself reports for that file/position, and a checkpoint whose binlog file the
server does not have resumes after its GTID with nothing lost or doubled."""

import pytest

from dm_core.binlog.gtid import position_of_gtid
from dm_core.config.task import parse_task
from dm_core.db import connect, master_position, qi, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.syncer import Syncer
from dm_core.validate.compare import compare_task, render

from .helpers import drop_schemas, make_shards, register, shard_task_yaml

pytestmark = pytest.mark.integration


def _gtid_at(ep, file, pos):
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
        got = cur.fetchone()[0]
    conn.close()
    return got


def _write(ep, schema, n, tag):
    conn = connect(ep)
    with conn.cursor() as cur:
        for i in range(n):
            cur.execute(f"INSERT INTO {qt(schema, 't_1')} (name, amount) VALUES (%s, %s)", (f"{tag}-{i}", i))
        cur.execute(f"UPDATE {qt(schema, 't_1')} SET amount = amount + 1 WHERE name LIKE %s", (f"{tag}-%",))
        cur.execute(f"DELETE FROM {qt(schema, 't_1')} WHERE name = %s", (f"{tag}-0",))
    conn.close()


@pytest.fixture
def gtid_task(stack, uniq):
    prefix, tdb, name = f"gt{uniq}", f"tgt{uniq}", f"gtid{uniq}"
    schemas = [f"{prefix}_1"]
    # The oracle, BINLOG_GTID_POS, reads the binlog file from its start and returns NULL past
    # an event larger than max_allowed_packet (test_binlog_fast_window writes one): a fresh
    # file keeps it working whatever ran before.
    conn = connect(stack["up1"])
    with conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
    conn.close()
    make_shards(stack["up1"], schemas, ["t_1"])
    sid = f"g-{uniq}"
    text = shard_task_yaml(name, stack["down"], [(sid, 1)], prefix, tdb, shard_mode="")
    task = parse_task(text.replace("shard-mode: \n", ""), "test.yaml")
    store = StateStore()
    register(store, {sid: stack["up1"]}, name, text)
    ep = stack["up1"]
    store.put_source(sid, {"source-id": sid, "host": ep.host, "port": ep.port, "user": ep.user,
                           "enable-gtid": True}, ep.password)
    prepare(task, store)
    finish(task, store)
    yield task, store, sid, schemas[0]
    reset_task(store, name)
    store.close()
    drop_schemas(stack["up1"], schemas)
    drop_schemas(stack["down"], [tdb])


def _sync(task, store, sid):
    r = Syncer(task, sid, store, budget_events=300).run_until(float("inf"), max_windows=100)
    assert not r.paused, r.paused
    assert r.caught_up, "did not catch up"
    return r


def test_checkpoint_gtid_is_the_servers_gtid_state_there(gtid_task, stack):
    task, store, sid, schema = gtid_task
    _write(stack["up1"], schema, 20, "a")
    _sync(task, store, sid)
    st = store.source_state(task.name, sid)
    assert st["binlog_gtid"], "a checkpoint of a MariaDB source carries its GTID state"
    # one GTID per replication domain, in any order (another test may have written domain 7)
    assert set(st["binlog_gtid"].split(",")) == set(_gtid_at(stack["up1"], st["binlog_file"], st["binlog_pos"]).split(","))


def test_missing_binlog_file_resumes_after_the_gtid(gtid_task, stack):
    task, store, sid, schema = gtid_task
    _write(stack["up1"], schema, 10, "b")
    _sync(task, store, sid)
    st = store.source_state(task.name, sid)
    file, pos, gtid = st["binlog_file"], st["binlog_pos"], st["binlog_gtid"]
    _write(stack["up1"], schema, 15, "c")
    conn = connect(stack["up1"])
    f_now, p_now = master_position(conn)[:2]
    conn.close()
    # the server finds the next transaction exactly where the checkpoint is
    found = position_of_gtid(stack["up1"], gtid, server_id=0x7FFF0001)
    assert (found.file, found.pos) == (file, pos)
    # a checkpoint naming a file this server never had (failover) resumes by GTID
    store.update_source_state(task.name, sid, binlog_file="mysql-bin.999999", binlog_pos=4)
    r = _sync(task, store, sid)
    assert r.rows >= 15
    st = store.source_state(task.name, sid)
    assert (st["binlog_file"], st["binlog_pos"]) >= (file, pos)
    diffs = compare_task(task, store)
    assert all(d.equal for d in diffs), render(diffs)


def test_the_gtid_state_at_a_position_past_an_event_larger_than_max_allowed_packet(stack, uniq):
    """BINLOG_GTID_POS reads the binlog in the asking session and says NULL past an event larger
    than its max_allowed_packet (a 17 MB row under the 16 MB default); a start by file and position
    without a GTID state (DM's adjustGlobalPointGTID) then reads the state through a dump, which
    takes events of any size: the server's own answer, asked in a session that admits the event."""
    from dm_core.binlog.gtid import mariadb_gtid_at

    up, schema = stack["up1"], f"big{uniq}"

    def one(sql, args=()):
        conn = connect(up)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return cur.fetchone() if cur.description else None
        finally:
            conn.close()

    (was,) = one("SELECT @@GLOBAL.max_allowed_packet")
    one("FLUSH BINARY LOGS")
    one(f"CREATE DATABASE {qi(schema)}")
    try:
        one(f"CREATE TABLE {qt(schema, 't')} (id int PRIMARY KEY, b longblob)")
        one("SET GLOBAL max_allowed_packet = 67108864")
        one(f"INSERT INTO {qt(schema, 't')} VALUES (1, REPEAT('x', 17 * 1048576))")
        one(f"INSERT INTO {qt(schema, 't')} VALUES (2, 'small')")
        f, p = one("SHOW MASTER STATUS")[:2]
        want = one("SELECT BINLOG_GTID_POS(%s, %s)", (f, p))[0]     # a session opened at 64 MB
        one("SET GLOBAL max_allowed_packet = 16777216")
        assert one("SELECT BINLOG_GTID_POS(%s, %s)", (f, p))[0] is None
        got = mariadb_gtid_at(up, f, int(p), server_id=4242 + int(uniq[:4], 16))
        assert want and set(got.split(",")) == set(want.split(",")), (got, want)
    finally:
        one(f"SET GLOBAL max_allowed_packet = {int(was)}")
        one(f"DROP DATABASE {qi(schema)}")
