"""The incremental part's workload: shard tables upstream, the statements written to them, and
the checksums every applier is held to.

Two families of ``SHARDS`` shard tables each in ``bench_inc`` (row ``id`` lives in shard
``id % SHARDS + 1``; a DM route merges each family into one table downstream):

- ``t_1..t_4`` → ``t``: narrow rows, id PK + 5 columns and a secondary index;
- ``w_1..w_4`` → ``w``: wide rows, 30 columns of the common types (integers signed and
  unsigned, DECIMAL, DOUBLE, FLOAT, strings, ENUM, SET, DATE, DATETIME(6), TIMESTAMP(3), TIME,
  YEAR, TEXT), a JSON document (MariaDB: LONGTEXT checked by ``JSON_VALID``) of about 150 bytes and
  a BLOB of 64-512 bytes.

Statements: single-row autocommit transactions, 60% INSERT / 30% UPDATE / 10% DELETE, one in
``WIDE_EVERY`` on the wide family; a quarter of the UPDATEs hit the family's 10 hot keys (never
deleted); plus one 1000-row transaction per 10,000 statements on the narrow family (alternately
a 1000-row INSERT and a 1000-row UPDATE, one statement per shard). Deterministic for a seed.
"""

from __future__ import annotations

import random
import time

import pymysql
from pymysql.converters import escape_string

from bench.common import bench_schema, execute, query
from dm_core.db import Endpoint, master_position, qt
from dm_core.position import Position

SCHEMA = "bench_inc"            # upstream, replica and shardflow's downstream copy
SHARDS = 4
HOT_KEYS = 10
BIG_ROWS = 1000
WIDE_EVERY = 5                  # one single-row statement in WIDE_EVERY is on the wide family

_NARROW_DDL = """CREATE TABLE {t} (
  id int NOT NULL,
  k int NOT NULL,
  c varchar(120) NOT NULL,
  pad char(60) NOT NULL,
  amount decimal(12,2) NOT NULL,
  updated_at datetime(6) NOT NULL,
  PRIMARY KEY (id),
  KEY k_k (k)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""

_WIDE_DDL = """CREATE TABLE {t} (
  id int NOT NULL,
  k int NOT NULL,
  big bigint NOT NULL,
  ubig bigint unsigned NOT NULL,
  small smallint NOT NULL,
  tiny tinyint NOT NULL,
  flag tinyint(1) NOT NULL,
  version int NOT NULL,
  price decimal(14,4) NOT NULL,
  ratio double NOT NULL,
  score float NOT NULL,
  name varchar(64) NOT NULL,
  email varchar(120) NOT NULL,
  city varchar(40) NULL,
  country char(2) NOT NULL,
  code char(12) NOT NULL,
  status enum('new','paid','shipped','done') NOT NULL,
  tags set('a','b','c','d') NOT NULL,
  born date NULL,
  created_at datetime(6) NOT NULL,
  seen_at timestamp(3) NOT NULL DEFAULT '2000-01-01 00:00:00.000',
  shift time NULL,
  yr year NOT NULL,
  note text NULL,
  descr varchar(255) NULL,
  qty int unsigned NOT NULL,
  weight decimal(8,3) NULL,
  ref bigint NULL,
  doc json NOT NULL,
  payload blob NOT NULL,
  PRIMARY KEY (id),
  KEY k_k (k)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""

_WIDE_COLS = ("id, k, big, ubig, small, tiny, flag, version, price, ratio, score, name, email, city, country, code, "
              "status, tags, born, created_at, seen_at, shift, yr, note, descr, qty, weight, ref, doc, payload")


class Family:
    """One family of shard tables: its DDL, column list, row values and the ids that exist upstream."""

    def __init__(self, prefix: str, merged: str, ddl: str, cols: str, rng: random.Random):
        self.prefix, self.merged, self.ddl, self.cols, self.rng = prefix, merged, ddl, cols, rng
        self.shards = [f"{prefix}_{i}" for i in range(1, SHARDS + 1)]
        self.t = {name: qt(SCHEMA, name) for name in self.shards}
        self.live: list[int] = []
        self.index: dict[int, int] = {}
        self.next_id = 1

    def shard_of(self, i: int) -> str:
        return self.shards[i % SHARDS]

    def add(self, i: int) -> None:
        self.index[i] = len(self.live)
        self.live.append(i)

    def remove(self, i: int) -> None:
        j = self.index.pop(i)
        last = self.live.pop()
        if last != i:
            self.live[j] = last
            self.index[last] = j

    def values(self, i: int) -> str:
        r = self.rng
        if self.prefix == "t":
            c = escape_string(f"c-{i}-" + "x" * r.randrange(10, 100))
            return (f"({i}, {r.randrange(1_000_000)}, '{c}', 'pad-{r.getrandbits(32):08x}', {r.randrange(10**7) / 100}, "
                    "NOW(6))")
        doc = escape_string('{"id": %d, "kind": "order", "tags": ["x%d", "y"], "attrs": {"n": %d, "ok": %s, '
                            '"ratio": %.3f, "label": "lbl-%08x"}, "items": [%d, %d, %d]}'
                            % (i, r.randrange(50), r.randrange(10**6), "true" if r.random() < 0.5 else "false",
                               r.random(), r.getrandbits(32), r.randrange(99), r.randrange(99), r.randrange(99)))
        blob = r.randbytes(r.randrange(64, 513))
        city = "NULL" if r.random() < 0.2 else f"'city-{r.randrange(500)}'"
        born = "NULL" if r.random() < 0.1 else f"'19{r.randrange(50, 99)}-0{r.randrange(1, 10)}-1{r.randrange(10)}'"
        shift = "NULL" if r.random() < 0.3 else f"'{r.randrange(-838, 838)}:{r.randrange(60):02d}:{r.randrange(60):02d}'"
        note = "NULL" if r.random() < 0.5 else f"'note {i} " + "n" * r.randrange(0, 200) + "'"
        weight = "NULL" if r.random() < 0.2 else f"{r.randrange(10**7) / 1000}"
        ref = "NULL" if r.random() < 0.3 else str(r.randrange(-2**62, 2**62))
        return (f"({i}, {r.randrange(1_000_000)}, {r.randrange(-2**62, 2**62)}, {r.randrange(2**64)}, "
                f"{r.randrange(-32768, 32768)}, {r.randrange(-128, 128)}, {r.randrange(2)}, 1, "
                f"{r.randrange(10**12) / 10**4}, {r.random() * 1e6!r}, {r.randrange(10**5) / 8}, 'name-{i}', "
                f"'user{i}@example.com', {city}, 'F{r.randrange(10)}', 'code{r.getrandbits(28):07x}', "
                f"'{('new', 'paid', 'shipped', 'done')[r.randrange(4)]}', '{','.join(r.sample('abcd', r.randrange(5)))}', "
                f"{born}, NOW(6), NOW(3), {shift}, {r.randrange(1901, 2156)}, {note}, 'descr-{r.getrandbits(64):x}', "
                f"{r.randrange(2**32)}, {weight}, {ref}, '{doc}', X'{blob.hex()}')")

    def set_clause(self) -> str:
        r = self.rng
        if self.prefix == "t":
            return (f"k = {r.randrange(1_000_000)}, c = 'u-{r.getrandbits(40):x}', amount = amount + 1, "
                    "updated_at = NOW(6)")
        return (f"k = {r.randrange(1_000_000)}, version = version + 1, price = price + 1, status = "
                f"'{('new', 'paid', 'shipped', 'done')[r.randrange(4)]}', seen_at = NOW(3), "
                f"doc = JSON_SET(doc, '$.attrs.n', {r.randrange(10**6)})")


class Workload:
    """Deterministic statements on the two families' shards, tracking which ids exist upstream."""

    def __init__(self, seed: int = 42):
        self.rng = random.Random(seed)
        self.narrow = Family("t", "t", _NARROW_DDL, "id, k, c, pad, amount, updated_at", self.rng)
        self.wide = Family("w", "w", _WIDE_DDL, _WIDE_COLS, self.rng)
        self.ops = {"insert": 0, "update": 0, "delete": 0}
        self.wide_rows = 0
        self._n = 0

    def single(self) -> str:
        self._n += 1
        f = self.wide if self._n % WIDE_EVERY == 0 else self.narrow
        if f is self.wide:
            self.wide_rows += 1
        r = self.rng.random()
        if len(f.live) < 2 * HOT_KEYS or r < 0.6:
            i = f.next_id
            f.next_id += 1
            f.add(i)
            self.ops["insert"] += 1
            return f"INSERT INTO {f.t[f.shard_of(i)]} ({f.cols}) VALUES {f.values(i)}"
        if r < 0.9:
            hot = self.rng.random() < 0.25
            i = self.rng.randrange(1, HOT_KEYS + 1) if hot else f.live[self.rng.randrange(len(f.live))]
            self.ops["update"] += 1
            return f"UPDATE {f.t[f.shard_of(i)]} SET {f.set_clause()} WHERE id = {i}"
        while True:
            i = f.live[self.rng.randrange(len(f.live))]
            if i > HOT_KEYS:
                break
        f.remove(i)
        self.ops["delete"] += 1
        return f"DELETE FROM {f.t[f.shard_of(i)]} WHERE id = {i}"

    def big(self, kind: str) -> str:
        """One transaction of BIG_ROWS rows of the narrow family: a statement per shard."""
        f = self.narrow
        if kind == "update" and len(f.live) >= BIG_ROWS:
            ids = sorted(self.rng.sample(f.live, BIG_ROWS))
            self.ops["update"] += BIG_ROWS
            stmts = [f"UPDATE {f.t[name]} SET {f.set_clause()} WHERE id IN ({', '.join(map(str, part))})"
                     for name, part in self._by_shard(ids)]
        else:
            ids = list(range(f.next_id, f.next_id + BIG_ROWS))
            f.next_id += BIG_ROWS
            for i in ids:
                f.add(i)
            self.ops["insert"] += BIG_ROWS
            stmts = [f"INSERT INTO {f.t[name]} ({f.cols}) VALUES {', '.join(f.values(i) for i in part)}"
                     for name, part in self._by_shard(ids)]
        return ";\n".join(["START TRANSACTION", *stmts, "COMMIT"])

    def _by_shard(self, ids: list[int]) -> list[tuple[str, list[int]]]:
        parts: dict[str, list[int]] = {}
        for i in ids:
            parts.setdefault(self.narrow.shard_of(i), []).append(i)
        return sorted(parts.items())


_SHAPES = Workload()
FAMILIES = _SHAPES.narrow, _SHAPES.wide     # their DDL, columns and table names (their row state is unused)
SHARD_TABLES = [name for f in FAMILIES for name in f.shards]
MERGED_TABLES = [f.merged for f in FAMILIES]


def _family(table: str) -> Family:
    return next(f for f in FAMILIES if table == f.merged or table in f.shards)


def raw_conn(ep: Endpoint, multi: bool = False):
    flags = pymysql.constants.CLIENT.MULTI_STATEMENTS if multi else 0
    return pymysql.connect(host=ep.host, port=int(ep.port), user=ep.user, password=ep.password, charset="utf8mb4",
                           autocommit=True, client_flag=flags)


def fresh_table(ep: Endpoint, schema: str, tables: list[str] | None = None) -> None:
    """``schema`` afresh with the merged tables (default) or the given shard tables."""
    execute(ep, f"DROP DATABASE IF EXISTS {bench_schema(schema)}", f"CREATE DATABASE {bench_schema(schema)}",
            *(_family(name).ddl.format(t=qt(schema, name)) for name in tables or MERGED_TABLES))


def checksum(ep: Endpoint, schema: str, tables: list[str] | None = None) -> tuple[int, int]:
    """(rows, summed CRC32 of every column) over the merged tables (default) or the union of the given shards."""
    n = s = 0
    for name in tables or MERGED_TABLES:
        cols = _family(name).cols
        a, b = query(ep, f"SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('#', {cols}))), 0) FROM {qt(schema, name)}")[0]
        n, s = n + int(a), s + int(b)
    return n, s


def write_workload(up: Endpoint, events: int, wl: Workload) -> dict:
    """Create the shard tables upstream, then write the workload; returns its binlog range."""
    execute(up, "SET SESSION sql_log_bin = 0", f"DROP DATABASE IF EXISTS {bench_schema(SCHEMA)}",
            f"CREATE DATABASE {bench_schema(SCHEMA)}",
            *(_family(name).ddl.format(t=qt(SCHEMA, name)) for name in SHARD_TABLES))
    n_big = max(1, round(events / 10_000))
    big_at = {(j + 1) * events // (n_big + 1): ("insert" if j % 2 == 0 else "update") for j in range(n_big)}
    conn = raw_conn(up, multi=True)
    t0 = time.monotonic()
    try:
        start = Position(*master_position(conn)[:2])
        batch: list[str] = []
        rows = 0

        def send():
            with conn.cursor() as cur:
                cur.execute(";\n".join(batch))
                while cur.nextset():
                    pass
            batch.clear()

        for k in range(events):
            if k in big_at:
                batch.append(wl.big(big_at[k]))
                rows += BIG_ROWS
            batch.append(wl.single())
            rows += 1
            if len(batch) >= 200:
                send()
        if batch:
            send()
        end = Position(*master_position(conn)[:2])
    finally:
        conn.close()
    return {"start": start, "end": end, "rows": rows, "wide_rows": wl.wide_rows, "transactions": events + n_big,
            "big_transactions": n_big, "ops": dict(wl.ops), "write_seconds": round(time.monotonic() - t0, 2)}


def binlog_bytes(up: Endpoint, start: Position, end: Position) -> int | None:
    if start.file == end.file:
        return end.pos - start.pos
    sizes = {r[0]: int(r[1]) for r in query(up, "SHOW BINARY LOGS")}
    files = sorted((f for f in sizes if Position(start.file, 0).key() <= Position(f, 0).key() <= end.key()),
                   key=lambda f: Position(f, 0).key())
    if not files or files[0] != start.file:
        return None
    return sum(sizes[f] for f in files[:-1]) - start.pos + end.pos
