"""Chunk plans for every key shape, their persistence, and a Spark load that uses them.

Planning (no Spark): for each table the chunks must select every row exactly once (the sum
of per-chunk counts and the count of their OR both equal the table's rows), sampled chunks
must hold the requested rows, and tricky key values (quotes, backslashes, NUL bytes, invalid
UTF-8, unicode) must be quoted safely. Then the whole schema is loaded by Spark with tiny
chunks and compared with upstream; a second run must load nothing (keyless rows stay single).
"""


import pytest

from dm_core.db import connect, qt
from dm_core.full.chunking import plan_chunks, plan_chunks_many
from dm_core.full.discover import discover
from dm_core.full.phase import prepare
from dm_core.full.plan_store import PlanConflict, PlanStore
from dm_core.state import StateStore
from dm_core.validate.compare import compare_task, render

from .test_full_support import cleanup, drop, execute, read_report, register, run_load, task_yaml

pytestmark = pytest.mark.integration

N = 1000
TRICKY = ["'); DROP TABLE x; --", "back\\slash", "quote'd", 'dq"x', "ünï 笑", "tab\tnl\n", "%_like", "\\'", ""]

TABLES = {
    "intk": ("(id bigint NOT NULL PRIMARY KEY, v int)", [(i * 7 + (i % 3) * 1000, i) for i in range(N)]),
    "comp": ("(a int NOT NULL, b varchar(20) NOT NULL, v int, PRIMARY KEY (a, b))", [(i % 10, f"k{i}", i) for i in range(N)]),
    "strk": ("(code varchar(64) NOT NULL PRIMARY KEY, v int) COLLATE utf8mb4_general_ci",
             [(f"{TRICKY[i % len(TRICKY)]}#{i:04d}" if i % 2 else f"Code-{i:04d}", i) for i in range(N)]),
    "bink": ("(k varbinary(16) NOT NULL PRIMARY KEY, v int)",
             [(bytes([i % 256, (i * 37) % 256, 0, 0x27, 0x5C, 0xFF]) + i.to_bytes(2, "big"), i) for i in range(N)]),
    "tsk": ("(ts timestamp(6) NOT NULL, seq int NOT NULL, PRIMARY KEY (ts, seq))",
            [(f"2024-03-31 0{i % 4}:{i % 60:02d}:00.{i:06d}", i % 3) for i in range(N)]),
    "deck": ("(d decimal(12,4) NOT NULL PRIMARY KEY, v int)", [(f"{i * 1.5 - 300:.4f}", i) for i in range(N)]),
    "uk": ("(id int NULL, email varchar(40) NOT NULL, UNIQUE KEY (email))", [(None if i % 4 else i, f"u{i}@x") for i in range(N)]),
    "nokey": ("(a int NULL, b text NULL)", [(i % 7, None if i % 3 else "dup") for i in range(N)]),
    "enumk": ("(e enum('x','y','z') NOT NULL PRIMARY KEY, v int)", [(e, i) for i, e in enumerate("xyz")]),
    "types": ("""(id int NOT NULL PRIMARY KEY, ti time(3) NULL, tneg time NULL, y year NULL, b1 bit(1) NULL, b8 bit(8) NULL,
                 st set('a','b','c') NULL, en enum('p','q') NULL, ch char(5) NULL, dz date NULL, ub bigint unsigned NULL)""",
              [(i, "100:00:00.5" if i % 2 else "23:59:59.123", "-838:59:59" if i % 2 else "-00:00:01", 1999 + i % 30,
                i % 2, i % 256, "a,c" if i % 2 else "", "q" if i % 2 else None, "ab " if i % 2 else "", "1000-01-01",
                18446744073709551615 - i) for i in range(50)]),
}
EXPECT_SHAPE = {"intk": "range", "comp": "sampled", "strk": "sampled", "bink": "sampled", "tsk": "sampled",
                "deck": "sampled", "uk": "sampled", "nokey": "one", "enumk": "one", "types": "one"}


@pytest.fixture
def keyed_schema(stack, uniq):
    schema = f"ck{uniq}"
    up = stack["up1"]
    conn = connect(up)
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"CREATE DATABASE {schema}")
        for t, (ddl, rows) in TABLES.items():
            cur.execute(f"CREATE TABLE {qt(schema, t)} {ddl}")
            cur.executemany(f"INSERT INTO {qt(schema, t)} VALUES ({', '.join(['%s'] * len(rows[0]))})", rows)
    conn.close()
    yield schema
    drop(up, schema)


def _tables(up, schema, sid="ck"):
    class _Rules:  # discover needs only the allow list and the router
        class block_allow:
            allow_table = staticmethod(lambda s, t: s == schema)
            may_allow_tables_of = staticmethod(lambda s: s == schema)

        class router:
            route = staticmethod(lambda s, t: (s, t))
            extract_values = staticmethod(lambda s, t, src: {})

    conn = connect(up)
    try:
        return {st.table: st for st in discover(conn, sid, _Rules)}
    finally:
        conn.close()


def test_every_key_shape_is_split_into_disjoint_covering_chunks(stack, keyed_schema):
    up = stack["up1"]
    conn = connect(up)
    try:
        for name, st in _tables(up, keyed_schema).items():
            chunks = plan_chunks(conn, st, 100)
            total = len(TABLES[name][1])
            with conn.cursor() as cur:
                cur.execute("SET SESSION time_zone = '+00:00'")
                counts = []
                for c in chunks:
                    cur.execute(f"SELECT COUNT(*) FROM {qt(keyed_schema, name)} WHERE {c.where}")
                    counts.append(cur.fetchone()[0])
                cur.execute(f"SELECT COUNT(*) FROM {qt(keyed_schema, name)} WHERE " + " OR ".join(f"({c.where})" for c in chunks))
                covered = cur.fetchone()[0]
            assert sum(counts) == total == covered, (name, counts, covered, chunks[:3])
            assert [c.chunk_id for c in chunks] == list(range(len(chunks)))
            shape = EXPECT_SHAPE[name]
            if shape == "one":
                assert [c.where for c in chunks] == ["1=1"], name
            elif shape == "sampled":  # the walk puts exactly target rows in every chunk but the last
                assert counts[:-1] == [100] * (len(counts) - 1) and 0 < counts[-1] <= 100, (name, counts)
            else:
                assert len(chunks) == 10 and max(counts) < 200, (name, counts)
            assert plan_chunks(conn, st, 100) == chunks, f"{name}: planning is not deterministic"
        # many at once (the small tables' pass), two integer keys a query: the same plans, in order
        one = list(_tables(up, keyed_schema).values())
        tables, sizes = one * 2, [100] * len(one) + [2000] * len(one)
        many = plan_chunks_many(conn, list(zip(tables, sizes)), per_query=2)
        assert many == [plan_chunks(conn, st, n) for st, n in zip(tables, sizes)]
        assert [len(c) for c, st in zip(many, tables) if st.table == "intk"] == [10, 1]
    finally:
        conn.close()


def test_plan_is_persisted_per_snapshot(stack, keyed_schema, uniq):
    up = stack["up1"]
    st = _tables(up, keyed_schema)["strk"]
    conn = connect(up)
    calls = []

    def compute():
        calls.append(1)
        return plan_chunks(conn, st, 100)

    task = f"plan{uniq}"
    try:
        with PlanStore(stack["state_dsn"]) as plans:
            pid, chunks = plans.get_or_create(task, st, "f:1", compute, lambda: False)
            execute(up, f"INSERT INTO {qt(keyed_schema, 'strk')} VALUES ('AAA-new', 1), ('zzz-new', 2)")
            assert plans.get_or_create(task, st, "f:1", compute, lambda: True) == (pid, chunks)
            assert len(calls) == 1, "a rerun must reuse the stored plan, not sample again"
            with pytest.raises(PlanConflict, match="strk"):
                plans.get_or_create(task, st, "f:2", compute, lambda: True)
            pid2, _ = plans.get_or_create(task, st, "f:2", compute, lambda: False)
            assert pid2 != pid and len(calls) == 2
            assert plans.forget(task) == [pid2]
    finally:
        conn.close()


def test_spark_load_of_every_key_shape_then_rerun_loads_nothing(stack, keyed_schema, uniq, tmp_path):
    tdb, name, sid = f"ckt{uniq}", f"ck{uniq}", f"ck-{uniq}"
    up, down = stack["up1"], stack["down"]
    text = task_yaml(name, down, [(sid, keyed_schema)], tdb)
    store = StateStore()
    try:
        task = register(store, name, text, {sid: up})
        prepare(task, store)
        reports = []
        for run in range(2):
            rep = tmp_path / f"run{run}.json"
            r = run_load(name, "--chunk-rows", "100", "--report", str(rep))
            assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
            reports.append(read_report(rep))
            diffs = compare_task(task, store)
            assert len(diffs) == len(TABLES) and all(d.equal for d in diffs), render(diffs)
        first, second = reports
        assert first["rows"] == sum(len(rows) for _, rows in TABLES.values())
        for tname, t in first["tables"].items():
            assert sorted(t["loaded"]) == list(range(t["chunks"])), tname
            again = second["tables"][tname]
            assert again["loaded"] == [] and again["skipped"] == t["loaded"] and again["plan_id"] == t["plan_id"], tname
        assert second["rows"] == 0
    finally:
        cleanup(store, name, text)
        store.close()
        drop(down, tdb)
