"""The fleet workload: shard tables spread over N upstream servers (scripts/fleet.sh), writes at
a steady rate with a shard DDL in the middle, probes that time the lag as a user sees it, and the
check that the downstream holds exactly the union of the shards.

Layout, for a prefix P over servers 1..N with K shard tables each:

    server i   schema P_i: tables t_1..t_K (the shards) and probe
    route      P_*.t_* → TARGET.t   and   P_*.probe → TARGET.probe   (one sharded task)
    ids        i * 10**12 + j * 10**9 + n: unique over the fleet, so the merged tables need no
               column mapping (DM's partition id has 4 bits of instance: 15 sources at most)

Each server has one ``Writer``: ``rate`` single-statement transactions per second (60% insert,
30% update, 10% delete on a random shard table), a probe row every ``probe_every`` seconds, and,
``ddl_after`` seconds into the run, ``ALTER TABLE ... ADD COLUMN note`` on each of its shard
tables (the shard DDL every source meets), after which its writes set the new column. One
``ProbeWatcher`` polls the downstream for the probes: lag = seen downstream - written upstream.

Run by tests/fleet/test_fleet.py; by hand against a running fleet:

    python -m tests.fleet.workload prepare --prefix fl --target flt
    python -m tests.fleet.workload write --prefix fl --target flt --rate 100 --seconds 60
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from dm_core.db import Endpoint, connect, qi, qt
from tests.integration.helpers import run_sql

log = logging.getLogger("fleet.workload")

ID_SOURCE, ID_TABLE = 10**12, 10**9


def stack_credentials() -> tuple[str, str]:
    """The local stack's user and password (scripts/stack.sh and scripts/fleet.sh create it)."""
    return (os.environ.get("SHARDFLOW_STACK_USER", "shardflow"),
            os.environ.get("SHARDFLOW_STACK_PASSWORD", "shardflow-local"))


@dataclass
class Fleet:
    """The upstream servers (server i is ``endpoints[i - 1]``) and the names the workload uses."""

    endpoints: list[Endpoint]
    prefix: str
    target: str
    tables: int = 2

    @classmethod
    def from_env(cls, prefix: str, target: str, tables: int = 2, count: int | None = None) -> "Fleet":
        """The fleet scripts/fleet.sh runs (SHARDFLOW_FLEET_PORTS, as `scripts/fleet.sh env` prints)."""
        ports = [int(p) for p in os.environ.get("SHARDFLOW_FLEET_PORTS", "").split(",") if p]
        if not ports:
            raise SystemExit("SHARDFLOW_FLEET_PORTS is not set: eval \"$(scripts/fleet.sh env)\" after make fleet-up")
        user, password = stack_credentials()
        eps = [Endpoint("127.0.0.1", p, user, password, name=f"fleet up{i + 1}") for i, p in enumerate(ports)]
        return cls(eps[:count] if count else eps, prefix, target, tables)

    @property
    def servers(self) -> range:
        return range(1, len(self.endpoints) + 1)

    def ep(self, i: int) -> Endpoint:
        return self.endpoints[i - 1]

    def schema(self, i: int) -> str:
        return f"{self.prefix}_{i}"

    def source_id(self, i: int) -> str:
        return f"{self.prefix}-up{i}"

    def shard_tables(self) -> list[str]:
        return [f"t_{j}" for j in range(1, self.tables + 1)]


def prepare(fleet: Fleet, rows: int = 50) -> None:
    """Fresh schemas on every server (all servers at once): the shard tables with ``rows`` rows
    each, an empty probe table."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(fleet.endpoints)) as pool:
        list(pool.map(lambda i: _prepare_server(fleet, i, rows), fleet.servers))


def _prepare_server(fleet: Fleet, i: int, rows: int) -> None:
    s = fleet.schema(i)
    stmts = [f"DROP DATABASE IF EXISTS {qi(s)}", f"CREATE DATABASE {qi(s)}",
             f"CREATE TABLE {qt(s, 'probe')} (id bigint PRIMARY KEY, sent double NOT NULL)"]
    for j, t in enumerate(fleet.shard_tables(), 1):
        stmts.append(f"CREATE TABLE {qt(s, t)} (id bigint PRIMARY KEY, name varchar(32) NOT NULL, "
                     "amount int NOT NULL, updated double NOT NULL)")
        if rows:
            base = i * ID_SOURCE + j * ID_TABLE
            values = ", ".join(f"({base + n}, 'seed', {n}, 0)" for n in range(1, rows + 1))
            stmts.append(f"INSERT INTO {qt(s, t)} VALUES {values}")
    run_sql(fleet.ep(i), *stmts)


def drop(fleet: Fleet, down: Endpoint | None = None) -> None:
    for i in fleet.servers:
        try:
            run_sql(fleet.ep(i), f"DROP DATABASE IF EXISTS {qi(fleet.schema(i))}")
        except Exception as e:  # noqa: BLE001 - a server already gone leaves nothing to drop
            log.warning("drop %s: %s", fleet.schema(i), e)
    if down is not None:
        run_sql(down, f"DROP DATABASE IF EXISTS {qi(fleet.target)}")


def source_files(fleet: Fleet, directory: Path) -> list[str]:
    """One DM source file per server (readable by this user only: it holds the password)."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for i in fleet.servers:
        ep = fleet.ep(i)
        p = directory / f"{fleet.source_id(i)}.yaml"
        p.touch(mode=0o600)
        p.write_text(yaml.safe_dump({"source-id": fleet.source_id(i), "enable-gtid": False,
                                     "from": {"host": ep.host, "port": ep.port, "user": ep.user,
                                              "password": ep.password}}, sort_keys=False))
        out.append(str(p))
    return out


def task_yaml(fleet: Fleet, name: str, down: Endpoint, shard_mode: str = "pessimistic") -> str:
    """The one sharded task over every server: P_*.t_* → TARGET.t, P_*.probe → TARGET.probe.
    The target password is ${SHARDFLOW_STACK_PASSWORD}, as in the demo."""
    task = {
        "name": name, "task-mode": "all", "shard-mode": shard_mode,
        "target-database": {"host": down.host, "port": down.port, "user": down.user,
                            "password": "${SHARDFLOW_STACK_PASSWORD}"},
        "mysql-instances": [{"source-id": fleet.source_id(i), "block-allow-list": "ba",
                             "route-rules": ["r-schema", "r-shards", "r-probe"]} for i in fleet.servers],
        "block-allow-list": {"ba": {"do-dbs": [f"~^{fleet.prefix}_[0-9]+$"]}},
        "routes": {
            "r-schema": {"schema-pattern": f"{fleet.prefix}_*", "target-schema": fleet.target},
            "r-shards": {"schema-pattern": f"{fleet.prefix}_*", "table-pattern": "t_*",
                         "target-schema": fleet.target, "target-table": "t"},
            "r-probe": {"schema-pattern": f"{fleet.prefix}_*", "table-pattern": "probe",
                        "target-schema": fleet.target, "target-table": "probe"},
        },
    }
    return yaml.safe_dump(task, sort_keys=False)


@dataclass
class WriterStats:
    txns: int = 0
    probes: int = 0
    ddl_done_at: float | None = None
    errors: list[str] = field(default_factory=list)


class Writer(threading.Thread):
    """One server's writes: ``rate`` transactions a second until ``stop`` is set."""

    def __init__(self, fleet: Fleet, i: int, rate: float, *, ddl_after: float | None = None,
                 probe_every: float = 1.0, watcher: "ProbeWatcher | None" = None, seed: int = 0):
        super().__init__(name=f"writer-{i}", daemon=True)
        self.fleet, self.i, self.rate, self.ddl_after = fleet, i, rate, ddl_after
        self.probe_every, self.watcher = probe_every, watcher
        self.stop = threading.Event()
        self.stats = WriterStats()
        self._rnd = random.Random(seed * 1000 + i)
        self._live: dict[str, list[int]] = {}
        self._next_id: dict[str, int] = {}
        self._probe_n = 0
        self._noted = False

    def _load_ids(self, cur) -> None:
        s = self.fleet.schema(self.i)
        for t in self.fleet.shard_tables():
            cur.execute(f"SELECT id FROM {qt(s, t)}")
            ids = [r[0] for r in cur.fetchall()]
            self._live[t] = ids
            j = int(t.split("_")[1])
            self._next_id[t] = max(ids, default=self.i * ID_SOURCE + j * ID_TABLE) + 1
        cur.execute(f"SELECT MAX(id) FROM {qt(s, 'probe')}")
        top = cur.fetchone()[0]
        self._probe_n = (top - self.i * ID_SOURCE) if top else 0
        cur.execute("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 't_1' "
                    "AND COLUMN_NAME = 'note'", (s,))
        self._noted = bool(cur.fetchone()[0])

    def run(self) -> None:
        conn = connect(self.fleet.ep(self.i))
        try:
            with conn.cursor() as cur:
                self._load_ids(cur)
                start = time.monotonic()
                next_txn = next_probe = start
                if self.rate <= 0:    # probes only (an idle fleet)
                    next_txn = float("inf")
                while not self.stop.is_set():
                    now = time.monotonic()
                    if self.ddl_after is not None and self.stats.ddl_done_at is None and now - start >= self.ddl_after:
                        self._ddl(cur)
                    if now >= next_probe and self.watcher is not None:
                        self._probe(cur)
                        next_probe = now + self.probe_every
                    if now >= next_txn:
                        self._txn(cur)
                        self.stats.txns += 1
                        # a writer that fell behind does not burst to catch up by more than a second
                        next_txn = max(next_txn + 1.0 / self.rate, now - 1.0)
                    wake = min(next_txn, next_probe if self.watcher is not None else next_txn, start + 3600)
                    if self.ddl_after is not None and self.stats.ddl_done_at is None:
                        wake = min(wake, start + self.ddl_after)
                    if wake > time.monotonic():
                        self.stop.wait(wake - time.monotonic())
        except Exception as e:  # noqa: BLE001 - reported in the stats; the test checks there are none
            self.stats.errors.append(f"{type(e).__name__}: {e}")
            log.exception("writer %s failed", self.i)
        finally:
            conn.close()

    def _ddl(self, cur) -> None:
        s = self.fleet.schema(self.i)
        if not self._noted:
            for t in self.fleet.shard_tables():
                cur.execute(f"ALTER TABLE {qt(s, t)} ADD COLUMN note varchar(32) NOT NULL DEFAULT ''")
            self._noted = True
        self.stats.ddl_done_at = time.time()

    def _probe(self, cur) -> None:
        self._probe_n += 1
        pid, sent = self.i * ID_SOURCE + self._probe_n, time.time()
        cur.execute(f"INSERT INTO {qt(self.fleet.schema(self.i), 'probe')} VALUES (%s, %s)", (pid, sent))
        self.stats.probes += 1
        self.watcher.expect(pid, self.i, sent)

    def _txn(self, cur) -> None:
        s, rnd = self.fleet.schema(self.i), self._rnd
        t = rnd.choice(self.fleet.shard_tables())
        live = self._live[t]
        dice = rnd.random()
        if dice < 0.6 or len(live) < 10:
            nid = self._next_id[t]
            self._next_id[t] += 1
            if self._noted:
                cur.execute(f"INSERT INTO {qt(s, t)} (id, name, amount, updated, note) VALUES (%s, 'w', %s, %s, %s)",
                            (nid, rnd.randrange(1000), time.time(), f"n{nid % 97}"))
            else:
                cur.execute(f"INSERT INTO {qt(s, t)} (id, name, amount, updated) VALUES (%s, 'w', %s, %s)",
                            (nid, rnd.randrange(1000), time.time()))
            live.append(nid)
            return
        k = rnd.randrange(len(live))
        victim = live[k]
        if dice < 0.9:
            extra = ", note = CONCAT(note, 'u')" if self._noted else ""
            cur.execute(f"UPDATE {qt(s, t)} SET amount = amount + 1, updated = %s{extra} WHERE id = %s",
                        (time.time(), victim))
        else:
            cur.execute(f"DELETE FROM {qt(s, t)} WHERE id = %s", (victim,))
            live[k] = live[-1]
            live.pop()


class ProbeWatcher(threading.Thread):
    """Polls the downstream's merged probe table for the probes written upstream: each probe's
    lag is when it was first seen downstream minus when it was written."""

    def __init__(self, down: Endpoint, target: str, every: float = 0.05):
        super().__init__(name="probe-watcher", daemon=True)
        self.down, self.target, self.every = down, target, every
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[int, float]] = {}    # probe id → (server, sent)
        self.seen: list[tuple[int, float, float]] = []      # (server, sent, lag)

    def expect(self, pid: int, server: int, sent: float) -> None:
        with self._lock:
            self._pending[pid] = (server, sent)

    def pending(self) -> dict[int, tuple[int, float]]:
        with self._lock:
            return dict(self._pending)

    def run(self) -> None:
        conn = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = connect(self.down, downstream=True)
                self._poll(conn)
            except Exception as e:  # noqa: BLE001 - the target table appears after the full phase
                log.debug("probe watcher: %s", e)
                if conn is not None:
                    conn.close()
                conn = None
                self.stop.wait(0.5)
            self.stop.wait(self.every)
        if conn is not None:
            conn.close()

    def _poll(self, conn) -> None:
        waiting = self.pending()
        if not waiting:
            return
        ids = sorted(waiting)[:2000]
        with conn.cursor() as cur:
            cur.execute(f"SELECT id FROM {qt(self.target, 'probe')} WHERE id IN ({', '.join(map(str, ids))})")
            got = [r[0] for r in cur.fetchall()]
        now = time.time()
        with self._lock:
            for pid in got:
                server, sent = self._pending.pop(pid)
                self.seen.append((server, sent, now - sent))

    def lags(self, since: float = 0.0, until: float = float("inf"), servers: set[int] | None = None) -> list[float]:
        return [lag for s, sent, lag in self.seen if since <= sent < until and (servers is None or s in servers)]


def percentile(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def _rows(ep: Endpoint, sql: str) -> list[tuple]:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def union_difference(fleet: Fleet, down: Endpoint) -> dict:
    """The merged tables downstream against the union of the shards, row by row: rows missing
    downstream, rows only downstream, rows that differ (counts and a few ids of each)."""
    out = {}
    for target, tables in (("t", fleet.shard_tables()), ("probe", ["probe"])):
        cols = [r[0] for r in _rows(down, f"SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                                          f"'{fleet.target}' AND TABLE_NAME = '{target}' ORDER BY ORDINAL_POSITION")]
        sel = ", ".join(qi(c) for c in cols)
        upstream = {}
        for i in fleet.servers:
            for t in tables:
                for r in _rows(fleet.ep(i), f"SELECT {sel} FROM {qt(fleet.schema(i), t)}"):
                    upstream[r[0]] = r
        downstream = {r[0]: r for r in _rows(down, f"SELECT {sel} FROM {qt(fleet.target, target)}")}
        missing = sorted(set(upstream) - set(downstream))
        extra = sorted(set(downstream) - set(upstream))
        differ = sorted(k for k in set(upstream) & set(downstream) if upstream[k] != downstream[k])
        out[target] = {"rows": len(upstream), "missing": len(missing), "extra": len(extra), "differ": len(differ),
                       "examples": {"missing": missing[:5], "extra": extra[:5], "differ": differ[:5]}}
    return out


def _main() -> None:
    ap = argparse.ArgumentParser(prog="python -m tests.fleet.workload", description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["prepare", "write", "task", "drop"])
    ap.add_argument("--prefix", default="fl")
    ap.add_argument("--target", default="flt")
    ap.add_argument("--tables", type=int, default=2)
    ap.add_argument("--servers", type=int, default=None, help="the first N of the fleet (default: all)")
    ap.add_argument("--rate", type=float, default=100.0, help="transactions per second per server")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--ddl-after", type=float, default=None, help="seconds into the writes: the shard DDL")
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    fleet = Fleet.from_env(a.prefix, a.target, a.tables, a.servers)
    if a.action == "prepare":
        prepare(fleet)
    elif a.action == "drop":
        drop(fleet)
    elif a.action == "task":
        port = int(os.environ.get("SHARDFLOW_DOWN_PORT", "4000"))
        print(task_yaml(fleet, a.prefix, Endpoint("127.0.0.1", port, *stack_credentials())))
    else:
        writers = [Writer(fleet, i, a.rate, ddl_after=a.ddl_after) for i in fleet.servers]
        for w in writers:
            w.start()
        time.sleep(a.seconds)
        for w in writers:
            w.stop.set()
        for w in writers:
            w.join()
        total = sum(w.stats.txns for w in writers)
        print(f"{total} transactions in {a.seconds:.0f} s over {len(writers)} servers "
              f"({total / a.seconds:.0f} txn/s); errors: {sum(len(w.stats.errors) for w in writers)}")


if __name__ == "__main__":
    _main()
