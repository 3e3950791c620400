"""What DM's handle_error_2 and handle_error_3 share (DM's `_utils/handle_error_lib.sh`): one
scene per (scenario, task file), the positions DM's run.sh reads, and the checks it repeats.

DM's run_case: ``init_table 11 21`` creates `handle_error`.`tb1` on each upstream as
``(id int primary key) CHARSET=latin1 COLLATE=latin1_bin``, the task starts (`--remove-meta`),
the scenario runs, the tables are dropped. Here each scene starts from nothing: the database
dropped on every server, the task's rows forgotten.

DM's statements fail on TiDB only (its schema tracker or TiDB itself refuses MODIFY of a primary
key column's type, ADD COLUMN ... UNIQUE, utf32). The local downstream is MariaDB, which takes
them, so the refusals come from what users do to real targets (as tests/dm_cases/
test_handle_error.py does): the downstream table the user made is partitioned by `id`, so
MODIFY id VARCHAR is refused (1659) and a UNIQUE key without `id` is refused (1503). DM's
utf32 column (refused by TiDB's tracker on every source) becomes ``c int unique``, which
shardflow refuses on a sharded table as it reads it, on every source, with TiDB's message
(dm_core/shardddl/ddl_norm.py).

Positions: DM's ``get_start_location`` is the paused source's error position in query-status
(`error_position` here), and ``get_next_query_pos`` the next QUERY event after a position in
SHOW BINLOG EVENTS (``next_query_pos``).
"""

from __future__ import annotations

import json

import pytest

from .harness import Sync, dm_case, dmctl, register_sources, run_sql, start

DB = "handle_error"
S1, S2 = "mysql-replica-01", "mysql-replica-02"
LATIN1 = "CHARSET=latin1 COLLATE=latin1_bin"
PARTITIONED = "PARTITION BY HASH(id) PARTITIONS 2"


class Scene:
    """One of DM's run_case: the upstreams, DM's task file, the state store, the syncing sources."""

    def __init__(self, stack, files, store):
        self.up = {S1: stack["up1"], S2: stack["up2"]}
        self.down = stack["down"]
        self.files, self.store = files, store
        self.task = self.sync = None

    def s1(self, *stmts: str, args=None) -> list:
        return run_sql(self.up[S1], *stmts, args=args)

    def s2(self, *stmts: str, args=None) -> list:
        return run_sql(self.up[S2], *stmts, args=args)

    def tidb(self, *stmts: str, args=None) -> list:
        return run_sql(self.down, *stmts, args=args)

    def init_table(self, *sources: str, partitioned: bool = True) -> None:
        """DM's ``init_table 11 21``; ``partitioned``: the user made the merged target
        `handle_error`.`tb` partitioned by id beforehand (the device that refuses DM's statements)."""
        for sid in sources:
            run_sql(self.up[sid], f"CREATE DATABASE IF NOT EXISTS {DB}",
                    f"CREATE TABLE {DB}.tb1 (id int primary key) {LATIN1}")
        if partitioned:
            self.tidb(f"CREATE DATABASE IF NOT EXISTS {DB}",
                      f"CREATE TABLE {DB}.tb (id int primary key) {LATIN1} {PARTITIONED}")

    def start(self):
        register_sources(self.files)
        self.task, self.sync = start(self.files, self.store)
        return self.task

    # ---- what DM's run.sh reads and checks ---------------------------------------------------
    def states(self) -> dict:
        return {s["source_id"]: s for s in self.store.all_source_states(self.task.name)}

    def steps(self, n: int = 6) -> dict:
        for _ in range(n):
            self.sync.step()
        return self.states()

    def until_paused(self, *sources: str, rounds: int = 30, where: str = "", unless: str | None = None) -> dict:
        """Steps until each of ``sources`` is paused on an error whose statement or message holds
        ``where`` (and whose message does not hold ``unless``: an earlier error still shown)."""
        def at(v: dict) -> bool:
            text = f"{v['error_stmt'] or ''}\n{v['error'] or ''}"
            return v["stage"] == "paused" and bool(v["error"]) and where in text and not (
                unless and unless in v["error"])

        for _ in range(rounds):
            self.sync.step()
            st = self.states()
            if all(s in st and at(st[s]) for s in sources):
                return st
        pytest.fail(f"never paused{' at ' + where if where else ''}: "
                    f"{ {s: (v['stage'], v['error']) for s, v in self.states().items()} }")

    def paused(self) -> dict:
        """source → error of every source paused on an error now (DM's query-status errors)."""
        return {s: v["error"] for s, v in self.states().items() if v["stage"] == "paused" and v["error"]}

    def status(self) -> dict:
        rc, out, err = dmctl("query-status", self.task.name)
        assert rc == 0, out + err
        return json.loads(out)["tasks"][0]

    def no_errors(self) -> None:
        """DM's `query-status` "result": true on every source: nothing paused, nothing in error."""
        st = self.status()
        assert [(s["source"], s["error"]) for s in st["sources"]] == [(s, None) for s in sorted(self.up)
                                                                      if s in {i.source_id for i in
                                                                               self.task.mysql_instances}], st

    def count(self, where: str = "") -> int:
        return self.tidb(f"SELECT COUNT(*) FROM {DB}.tb {where}")[0][0]

    def error_pos(self, sid: str) -> str:
        pos = self.states()[sid]["error_pos"]
        assert pos, f"{sid} names no error position: {self.states()[sid]}"
        return pos


def ok(*args: str) -> str:
    rc, out, err = dmctl(*args)
    assert rc == 0, out + err
    return out


def refused(*args: str) -> str:
    """A dmctl command DM answers with "result": false (or its usage): the message, out and err."""
    import contextlib
    import io

    from dm_core.cli.dmctl import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as e:    # argparse's answer to a command it cannot read
            rc = e.code
    assert rc != 0, out.getvalue() + err.getvalue()
    return out.getvalue() + err.getvalue()


def query_events(ep) -> list[tuple[str, int, str]]:
    """(file, position, statement) of every QUERY event but BEGIN/COMMIT in the upstream's binlog,
    as DM's get_next_query_pos reads SHOW BINLOG EVENTS (read as bytes: other tests leave binary
    rows there)."""
    import pymysql

    conn = pymysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password, use_unicode=False)
    out = []
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            for log in [r[0] for r in cur.fetchall()]:
                try:
                    cur.execute("SHOW BINLOG EVENTS IN %s", (log,))
                except pymysql.err.OperationalError:
                    continue   # a file an earlier server crash cut short (1220): not this test's
                for row in cur.fetchall():
                    info = row[5].decode("utf-8", "replace")
                    if row[2] == b"Query" and not info.upper().startswith(("BEGIN", "COMMIT")):
                        out.append((row[0].decode(), int(row[1]), info))
    finally:
        conn.close()
    return out


def _key(pos: str) -> tuple[str, int]:
    from dm_core.sync.handle_error import parse_binlog_pos

    p = parse_binlog_pos(pos)
    return p.file, p.pos


def next_query_pos(ep, after: str) -> str:
    """DM's get_next_query_pos: ``FILE:POS`` of the first DDL event past ``after``."""
    f, p = _key(after)
    for file, pos, _sql in query_events(ep):
        if (file, pos) > (f, p):
            return f"{file}:{pos}"
    pytest.fail(f"no DDL after {after} in the binlog")


def pos_of(ep, fragment: str) -> str:
    """``FILE:POS`` of the last DDL holding ``fragment`` (where a source not paused would meet it)."""
    hits = [f"{f}:{p}" for f, p, sql in query_events(ep) if fragment in sql]
    assert hits, f"no DDL with {fragment!r} in the binlog"
    return hits[-1]


@pytest.fixture
def error_scene_factory(stack, tmp_path):
    """``make(case, task_file)`` → a Scene whose databases and task rows are cleaned before and after."""
    opened = []

    def make(case: str, task_file: str) -> Scene:
        cm = dm_case(case, tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                     {"up1": [DB], "up2": [DB], "down": [DB, "dm_meta"]}, task_file=task_file)
        files, store = cm.__enter__()
        opened.append(cm)
        return Scene(stack, files, store)

    yield make
    for cm in reversed(opened):
        cm.__exit__(None, None, None)


__all__ = ["DB", "S1", "S2", "Scene", "Sync", "next_query_pos", "ok", "pos_of", "query_events", "refused",
           "error_scene_factory"]
