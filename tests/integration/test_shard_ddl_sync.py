"""Shard DDL through the real syncer: upstream shards on two MariaDB sources run DDLs with
DML between them; each source's syncer runs windows in turn (as its sensor's pokes would);
afterwards the downstream table has the expected schema and equals the union of the shards.

Modelled on DM's sharding cases: the same DDL sequence on every shard in the same order,
interleaved across sources; an inconsistent sequence is reported naming both statements;
optimistic add/drop with differing timing.
"""

import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore

from .helpers import drop_schemas, make_shards, register, shard_task_yaml
from .shard_helpers import assert_union, columns, dml, drive, drive_some, indexes, query, run

pytestmark = pytest.mark.integration


@pytest.fixture
def shards(stack, uniq, request):
    """up1: {p}_1, {p}_2 × t_1, t_2; up2: {p}_1, {p}_2 × t_1 → 6 shards merged into {tdb}.t."""
    mode = getattr(request, "param", "pessimistic")
    prefix, tdb, name = f"sd{uniq}", f"tsd{uniq}", f"shd{uniq}"
    schemas = [f"{prefix}_1", f"{prefix}_2"]
    make_shards(stack["up1"], schemas, ["t_1", "t_2"], rows=3)
    make_shards(stack["up2"], schemas, ["t_1"], rows=3)
    sources = {f"a-{uniq}": stack["up1"], f"b-{uniq}": stack["up2"]}
    text = shard_task_yaml(name, stack["down"], [(sid, i + 1) for i, sid in enumerate(sources)], prefix, tdb,
                           mode="all", shard_mode=mode)
    task = parse_task(text, "test.yaml")
    store = StateStore()
    register(store, sources, name, text)
    prepare(task, store)
    # the full phase's rows (Spark's part is tested in e2e): copy the shards' starting rows
    finish(task, store)
    tables = [(ep, s, t) for ep, tl in ((stack["up1"], ["t_1", "t_2"]), (stack["up2"], ["t_1"]))
              for s in schemas for t in tl]
    yield task, store, list(sources), tables, tdb
    reset_task(store, name)
    store.close()
    drop_schemas(stack["up1"], schemas)
    drop_schemas(stack["up2"], schemas)
    drop_schemas(stack["down"], [tdb])


def test_pessimistic_ddl_sequence_same_order_on_every_shard(shards, stack):
    task, store, sources, tables, tdb = shards
    # The starting rows were written before the low watermark: copy them as the full phase would.
    _copy_initial(task, store, stack, tables, tdb)
    ddls = ["ALTER TABLE {t} ADD COLUMN c1 int NULL",
            "ALTER TABLE {t} ADD COLUMN c2 varchar(20) NOT NULL DEFAULT 'x'",
            "ALTER TABLE {t} MODIFY COLUMN name varchar(128) NULL",
            "ALTER TABLE {t} ADD INDEX idx_amount (amount)",
            "ALTER TABLE {t} DROP COLUMN c1"]
    for k, ddl in enumerate(ddls):
        for i, (ep, s, t) in enumerate(tables):
            dml(ep, s, t, f"r{k}-before-{i}")
            run(ep, ddl.format(t=qt(s, t)))
            dml(ep, s, t, f"r{k}-after-{i}")
        if k == 1:  # a sync in the middle: some shards have run DDL 3 of the sequence, others not yet
            drive(task, store, sources)
    last = drive(task, store, sources)
    assert not any(r.paused for r in last.values()), {k: r.paused for k, r in last.items()}
    got = columns(stack["down"], tdb, "t")
    assert [c for c, _ in got] == ["id", "name", "amount", "c2"]
    assert dict(got)["name"] == "varchar(128)"
    assert "idx_amount" in indexes(stack["down"], tdb, "t")
    assert_union(task, store)


def test_pessimistic_interleaved_ddls_across_sources_do_not_deadlock(shards, stack):
    """s1 ddl1, s2 ddl1, s1 ddl2, s2 ddl2, with each source synced between the steps."""
    task, store, sources, tables, tdb = shards
    _copy_initial(task, store, stack, tables, tdb)
    up1 = [x for x in tables if x[0] is stack["up1"]]
    up2 = [x for x in tables if x[0] is stack["up2"]]
    for k, ddl in enumerate(["ALTER TABLE {t} ADD COLUMN d1 int NULL", "ALTER TABLE {t} ADD COLUMN d2 int NULL"]):
        for group in (up1, up2):
            for ep, s, t in group:
                run(ep, ddl.format(t=qt(s, t)))
                dml(ep, s, t, f"i{k}-{s}-{t}")
            drive_some(task, store, sources)
    last = drive(task, store, sources)
    assert not any(r.paused for r in last.values())
    assert [c for c, _ in columns(stack["down"], tdb, "t")] == ["id", "name", "amount", "d1", "d2"]
    assert_union(task, store)


def test_pessimistic_ddl_written_under_ansi_quotes_and_no_backslash_escapes(shards, stack):
    """Every shard adds a column in a session with ANSI_QUOTES and NO_BACKSLASH_ESCAPES: double
    quotes name the table and the column, the default's backslash is itself. The merged table
    gets the column with the upstream's default, one backslash (the normaliser reads default-mode
    MySQL: the text is rewritten to read so first, dm_core/ddl/text.default_reading)."""
    task, store, sources, tables, tdb = shards
    _copy_initial(task, store, stack, tables, tdb)
    for i, (ep, s, t) in enumerate(tables):
        conn = connect(ep)
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_mode = 'ANSI_QUOTES,NO_BACKSLASH_ESCAPES'")
                cur.execute(f'ALTER TABLE "{s}"."{t}" ADD COLUMN "q" varchar(10) NOT NULL DEFAULT ' + "'a\\b'")
        finally:
            conn.close()
        dml(ep, s, t, f"q-{i}")
    last = drive(task, store, sources)
    assert not any(r.paused for r in last.values()), {k: r.paused for k, r in last.items()}
    ep, s, t = tables[0]
    want = query(ep, "SELECT column_default FROM information_schema.columns WHERE table_schema = %s AND "
                     "table_name = %s AND column_name = 'q'", (s, t))
    assert want == [("'a\\\\b'",)]   # information_schema writes the one backslash escaped
    assert query(stack["down"], "SELECT column_default FROM information_schema.columns WHERE table_schema = %s "
                                "AND table_name = 't' AND column_name = 'q'", (tdb, )) == want
    assert_union(task, store)


def test_pessimistic_inconsistent_ddl_is_reported_with_both_statements(shards, stack):
    task, store, sources, tables, tdb = shards
    _copy_initial(task, store, stack, tables, tdb)
    for i, (ep, s, t) in enumerate(tables):
        col = "good" if i < len(tables) - 1 else "bad"
        run(ep, f"ALTER TABLE {qt(s, t)} ADD COLUMN {col} int NULL")
    last = drive(task, store, sources)
    paused = [r.paused for r in last.values() if r.paused]
    assert paused, "an inconsistent DDL sequence must pause a source"
    assert "`good`" in paused[0] and "`bad`" in paused[0] and "inconsistent" in paused[0]
    st = {s["source_id"]: s for s in store.all_source_states(task.name)}
    assert any(s["stage"] == "paused" and s["error_code"] == 50007 for s in st.values())


@pytest.mark.parametrize("shards", ["optimistic"], indirect=True)
def test_optimistic_add_and_drop_with_differing_timing(shards, stack):
    task, store, sources, tables, tdb = shards
    _copy_initial(task, store, stack, tables, tdb)
    # half of the shards add a nullable column and write it; DML keeps flowing everywhere
    for i, (ep, s, t) in enumerate(tables):
        if i % 2 == 0:
            run(ep, f"ALTER TABLE {qt(s, t)} ADD COLUMN o1 int NULL")
            run(ep, f"INSERT INTO {qt(s, t)} (name, amount, o1) VALUES ('o1-{i}', 1, {i})")
        dml(ep, s, t, f"opt-a-{i}")
    drive(task, store, sources)
    assert "o1" in [c for c, _ in columns(stack["down"], tdb, "t")], "ADD COLUMN reaches the downstream at once"
    for i, (ep, s, t) in enumerate(tables):
        if i % 2 == 1:
            run(ep, f"ALTER TABLE {qt(s, t)} ADD COLUMN o1 int NULL")
        dml(ep, s, t, f"opt-b-{i}")
    # now every shard drops it, one source first: the downstream keeps it until the last one
    for ep, s, t in [x for x in tables if x[0] is stack["up1"]]:
        run(ep, f"ALTER TABLE {qt(s, t)} DROP COLUMN o1")
    drive(task, store, sources)
    assert "o1" in [c for c, _ in columns(stack["down"], tdb, "t")], "dropped only when the last shard drops it"
    for ep, s, t in [x for x in tables if x[0] is stack["up2"]]:
        run(ep, f"ALTER TABLE {qt(s, t)} DROP COLUMN o1")
        dml(ep, s, t, f"opt-c-{s}")
    last = drive(task, store, sources)
    assert not any(r.paused for r in last.values()), {k: r.paused for k, r in last.items()}
    assert [c for c, _ in columns(stack["down"], tdb, "t")] == ["id", "name", "amount"]
    assert_union(task, store)


def _copy_initial(task, store, stack, tables, tdb):
    """What the Spark full load does, for the shards' starting rows (partition ids applied)."""
    rules_by_ep = {id(stack["up1"]): task.rules_for(task.mysql_instances[0].source_id),
                   id(stack["up2"]): task.rules_for(task.mysql_instances[1].source_id)}
    down = connect(stack["down"])
    with down.cursor() as dc:
        for ep, s, t in tables:
            rules = rules_by_ep[id(ep)]
            conn = connect(ep)
            with conn.cursor() as cur:
                cur.execute(f"SELECT id, name, amount FROM {qt(s, t)}")
                rows = cur.fetchall()
            conn.close()
            plan = rules.column_mapper.plan(s, t, ["id", "name", "amount"])
            for r in rows:
                dc.execute(f"INSERT INTO {qt(tdb, 't')} (id, name, amount) VALUES (%s, %s, %s)", plan.map_row(list(r)))
    down.commit()
    down.close()


@pytest.mark.parametrize("shards", ["optimistic"], indirect=True)
def test_optimistic_rows_after_a_skipped_ddl_see_the_other_members_change(shards, stack, monkeypatch):
    """Source b's window has planned rows of the merged table when source a (another sensor,
    running at the same time) adds column c downstream; then b's own ADD COLUMN c is a skip.
    b's rows after it carry c: they must be planned against the downstream as it is now (its
    cached shape lacked c: the value was dropped, or the source paused on 'unknown column')."""
    import dm_core.sync.shard_sync as shard_sync
    from dm_core.sync.syncer import Syncer

    task, store, sources, tables, tdb = shards
    _copy_initial(task, store, stack, tables, tdb)
    a, b = sources
    (ep_b, s_b, t_b) = next(x for x in tables if x[0] is stack["up2"])
    run(ep_b, f"INSERT INTO {qt(s_b, t_b)} (name, amount) VALUES ('before-c', 1)",   # b plans the target here
        f"ALTER TABLE {qt(s_b, t_b)} ADD COLUMN c int NULL",
        f"INSERT INTO {qt(s_b, t_b)} (name, amount, c) VALUES ('with-c', 2, 7)")
    for ep, s, t in [x for x in tables if x[0] is stack["up1"]]:
        run(ep, f"ALTER TABLE {qt(s, t)} ADD COLUMN c int NULL")
    real, ran = shard_sync.read_table_schema, []

    def a_runs_first(conn, schema, table):  # a's sensor executes its ADD COLUMN c during b's window
        if not ran:
            ran.append(True)
            Syncer(task, a, store, budget_events=400).run_until(float("inf"), max_windows=5)
        return real(conn, schema, table)

    monkeypatch.setattr(shard_sync, "read_table_schema", a_runs_first)
    r = Syncer(task, b, store, budget_events=400).run_until(float("inf"), max_windows=5)
    assert ran and not r.paused, r.paused
    monkeypatch.setattr(shard_sync, "read_table_schema", real)
    assert query(stack["down"], f"SELECT c FROM {qt(tdb, 't')} WHERE name = 'with-c'") == [(7,)]
    last = drive(task, store, sources)
    assert not any(x.paused for x in last.values())
    assert_union(task, store)
