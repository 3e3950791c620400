"""What DM's shardddl cases (pingcap/tiflow dm/tests/shardddl1, shardddl1_1, ...) share:
DM's `_utils/shardddl_lib.sh` and `run_case` as one scene per (scenario, task file).

DM's run_case: the scenario's tables are created (``init_table 111 112``: source 1,
database ``shardddl1``, table ``tb1`` ...; or the scenario's own CREATE TABLEs), the task
file starts with ``--remove-meta`` (full phase, then sync), the scenario runs, the task
stops and the tables are dropped (``clean_table``). Here each (scenario, task file) is one
pytest parameter with a fresh scene: ``shardddl1`` and ``shardddl2`` created on both
upstreams (``init_database``), the downstream ``shardddl`` dropped, the task's rows in the
state store forgotten, before and after.

DM's checks become:

* ``check_sync_diff`` (conf/diff_config.toml: ``shardddl[1-2].tb*`` of both upstreams routed
  into ``shardddl.tb``): ``Scene.assert_synced()``: the shards' columns are the merged
  table's, and the downstream rows are the union of the shards' rows;
* ``run_sql_tidb_with_retry "select count(1) ..."``: ``Scene.count()`` after settling;
* ``run_dm_ctl_with_retry ... "query-status test" PATTERN N`` and ``"shard-ddl-lock"``:
  ``Scene.status()`` and ``Scene.locks()``, dmctl's JSON output as text (``count``);
* DM-master restarts: the coordinator keeps nothing in memory (every round reads the locks
  from the state store), so a restart is a new ``StateStore`` connection and the round
  run again; DM-worker restarts: a source's new ``SyncSession``.
"""

from __future__ import annotations

import json
import re

import pytest

from dm_core.db import qi, qt

from .harness import Sync, dm_case, dmctl, register_sources, run_sql, start

DBS = ["shardddl1", "shardddl2"]
TARGET = ("shardddl", "tb")


def init_table(scene, *codes: str) -> None:
    """DM's ``init_table 111 212``: source, database and table digits; ``(id int primary key)``."""
    for c in codes:
        src, db, tb = c
        scene.sql(int(src), f"CREATE TABLE shardddl{db}.tb{tb} (id int primary key)")


class Scene:
    """One run_case: the upstreams, the task file, the state store, the syncing sources."""

    def __init__(self, stack, case: str, tmp_path, conf: str):
        self.stack, self.case, self.tmp_path, self.conf = stack, case, tmp_path, conf
        self.up = {1: stack["up1"], 2: stack["up2"]}
        self.down = stack["down"]
        self.files = self.store = self.task = self.sync = None
        self.extra_stores = []

    # ---- statements -----------------------------------------------------------------------
    def sql(self, source: int, *stmts: str) -> list:
        """A client of the upstream in the server's own sql_mode (DM's run_sql: the mysql client)."""
        return run_sql(self.up[source], "SET SESSION sql_mode = @@GLOBAL.sql_mode", *stmts)

    def s1(self, *stmts: str) -> list:
        return self.sql(1, *stmts)

    def s2(self, *stmts: str) -> list:
        return self.sql(2, *stmts)

    def tidb(self, *stmts: str) -> list:
        return run_sql(self.down, *stmts)

    # ---- the task -----------------------------------------------------------------------------
    def start(self):
        """DM's ``start-task CONF --remove-meta`` and the wait for the Sync unit."""
        register_sources(self.files)
        self.task, self.sync = start(self.files, self.store)
        return self.task

    def settle(self, **kw):
        return self.sync.settle(**kw)

    def steps(self, n: int = 6) -> dict[str, str]:
        """A few rounds without waiting for anything to settle (DM's checks with retry that
        expect something to stay unsynced)."""
        states = {}
        for _ in range(n):
            states = self.sync.step()
        return states

    def sources_only(self, n: int = 4) -> dict[str, str]:
        """Rounds of the sources' windows with no coordinator round between (DM-master busy)."""
        states = {}
        for _ in range(n):
            states = {sid: s.step().state for sid, s in self.sync.sessions.items()}
        return states

    def restart_master(self) -> None:
        """The coordinator's state lives in Postgres only: a new store connection, a new round.
        The sources' sessions go on as DM's workers do (a new session could not take the fence
        the old one's connection holds: it would stay ``fenced``)."""
        from dm_core.shardddl.coordinator import coordinate
        from dm_core.state import StateStore

        self.store = StateStore()   # the old connection is dm_case's, closed at the end
        self.extra_stores.append(self.store)
        self.sync.store = self.store
        coordinate(self.task, self.store)

    # ---- what DM checks -----------------------------------------------------------------------
    def shards(self) -> list[tuple[int, str, str]]:
        """Every upstream table ``shardddl[1-2].tb*`` (diff_config.toml's route rule1)."""
        out = []
        for n, ep in self.up.items():
            for db, tb in run_sql(ep, "SELECT table_schema, table_name FROM information_schema.tables WHERE "
                                      "table_schema IN ('shardddl1', 'shardddl2') AND table_name LIKE 'tb%%' "
                                      "ORDER BY 1, 2"):
                out.append((n, db, tb))
        return out

    def columns(self, source: int | None, schema: str, table: str) -> list[str]:
        ep = self.down if source is None else self.up[source]
        return [r[0] for r in run_sql(ep, "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                                          "AND table_name = %s ORDER BY ordinal_position", args=(schema, table))]

    def indexes(self) -> list[str]:
        """The merged table's index names."""
        return sorted({r[0] for r in run_sql(self.down, "SELECT index_name FROM information_schema.statistics WHERE "
                                                        "table_schema = %s AND table_name = %s", args=TARGET)})

    def down_rows(self, cols: list[str] | None = None) -> list[tuple]:
        cols = cols or self.columns(None, *TARGET)
        return sorted((tuple(r) for r in run_sql(self.down, f"SELECT {', '.join(map(qi, cols))} FROM {qt(*TARGET)}")),
                      key=repr)

    def union(self, cols: list[str]) -> list[tuple]:
        out = []
        for n, db, tb in self.shards():
            out += [tuple(r) for r in self.sql(n, f"SELECT {', '.join(map(qi, cols))} FROM {qt(db, tb)}")]
        return sorted(out, key=repr)

    def diff(self) -> str:
        """'' when DM's sync-diff would pass (structure and data), else what differs."""
        shape = {(n, db, tb): self.columns(n, db, tb) for n, db, tb in self.shards()}
        down = self.columns(None, *TARGET)
        for k, cols in shape.items():
            if [c.lower() for c in cols] != [c.lower() for c in down]:
                return f"columns of {k}: {cols}, downstream: {down}"
        got, want = self.down_rows(down), self.union(down)
        if got != want:
            return f"downstream rows {got}\n  != union of the shards {want}"
        return ""

    def assert_synced(self, settle: bool = True) -> None:
        if settle:
            self.settle()
        d = self.diff()
        assert not d, d

    def count(self) -> int:
        return run_sql(self.down, f"SELECT COUNT(*) FROM {qt(*TARGET)}")[0][0]

    def status(self) -> str:
        rc, out, err = dmctl("query-status", self.files.name)
        assert rc == 0, err
        return out

    def locks(self) -> str:
        rc, out, err = dmctl("shard-ddl-lock", self.files.name)
        assert rc == 0, err
        return out

    def status_json(self) -> dict:
        return json.loads(self.status())["tasks"][0]

    def errors(self) -> dict[str, str]:
        return {s["source_id"]: s["error"] for s in self.store.all_source_states(self.task.name) if s["error"]}

    def stop_task(self) -> None:
        """stop-task in the state store (what dmctl does there; Airflow is not run here)."""
        self.store.stop_task(self.task.name)
        assert set(self.sync.step().values()) == {"stopped"}

    def start_again(self, text: str) -> None:
        """start-task of ``text`` without --remove-meta: the checkpoints are kept."""
        from dm_core.config.task import load_task_file

        self.files.task_file.write_text(text)
        rc, out, err = dmctl("check-task", str(self.files.task_file))
        assert rc == 0, out + err
        self.store.start_task(self.files.name, text)
        self.task = load_task_file(str(self.files.task_file))
        self.sync = Sync(self.task, self.store)


def count(text: str, pattern: str) -> int:
    """How many times ``pattern`` (a regular expression, as DM's check_contains) occurs."""
    return len(re.findall(pattern, text))


@pytest.fixture
def scene_factory(stack, tmp_path):
    """``make(case, conf)`` → a Scene whose databases and task rows are cleaned before and after."""
    stacks = []

    def make(case: str, conf: str) -> Scene:
        sc = Scene(stack, case, tmp_path, conf)
        cm = dm_case(case, tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                     {"up1": DBS, "up2": DBS, "down": ["shardddl"] + DBS}, task_file=conf)
        sc.files, sc.store = cm.__enter__()
        stacks.append((cm, sc))
        for n in (1, 2):
            sc.sql(n, *[f"CREATE DATABASE {db}" for db in DBS])
        return sc

    yield make
    for cm, sc in reversed(stacks):
        for st in sc.extra_stores:
            st.close()
        cm.__exit__(None, None, None)
