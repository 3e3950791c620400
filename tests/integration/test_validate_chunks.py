"""Server-side chunk checksums on real servers, one test per chunk shape (dm_core/validate/chunks.py):
integer ranges through partition-id slices, sampled ranges of a string key shared by the shards,
and a table whose rows cannot be hashed in SQL (read instead, and the result says so). Small
chunks and leaves make every stage run: first pass, drill-down by key-hash buckets, key diff."""

import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, qi, qt
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.validate import compare
from dm_core.validate.compare import validate_task
from dm_core.validate.result import render
from dm_core.validate.settings import settings_for

from .helpers import drop_schemas, register, target_database
from .shard_helpers import SourceSpec, query, run, setup_shards, teardown

pytestmark = pytest.mark.integration


def _settings(task):
    s = settings_for(task)
    s.recheck.row_error_delay, s.recheck.check_interval = 20, 0.2
    return s


def _kinds(t) -> list:
    return sorted((d.kind, next(iter(d.key.values()))) for d in t.differences)


@pytest.fixture
def merged(stack, uniq, tmp_path):
    p = f"vq{uniq}"
    specs = [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1", f"{p}_2"], ["t_1"], 1),
             SourceSpec(f"b-{uniq}", stack["up2"], [f"{p}_1"], ["t_1", "t_2"], 2)]
    setup = setup_shards(uniq, specs, stack["down"], tmp_path, prefix=p, rows=40)
    setup.store.set_task_status(setup.name, "stopped")   # nothing replicates: differences are final
    for sh in setup.shards:
        run(sh.ep, f"ANALYZE TABLE {sh.q}")            # row estimates size the chunks
    yield setup
    teardown(setup)


def test_a_cancelled_validation_sends_no_further_query_and_says_so(merged):
    """The job host cancels a validation whose task was stopped (``stop``): it raises, its
    result names why, and the queries after the stop are never sent."""
    from dm_core.errors import Cancelled
    from dm_core.validate.result import ValidationResult

    asked = []

    def stop() -> bool:   # true from the 4th query on
        asked.append(1)
        return len(asked) > 3

    res = ValidationResult(merged.name)
    with pytest.raises(Cancelled):
        validate_task(merged.task, merged.store, settings=_settings(merged.task), chunk_rows=15, result=res, stop=stop)
    assert res.error and "cancelled" in res.error and res.tables == [], render(res)
    whole = validate_task(merged.task, merged.store, settings=_settings(merged.task), chunk_rows=15)
    assert whole.status == "equal" and whole.tables[0].buckets >= 12, render(whole)   # far more than 3 queries


def test_integer_ranges_through_partition_id_slices_name_every_kind_of_damage(merged, monkeypatch):
    monkeypatch.setattr(compare, "LEAF_ROWS", 4)        # chunks of ~15 rows are split by key hash first
    r = validate_task(merged.task, merged.store, settings=_settings(merged.task), chunk_rows=15)
    t = r.tables[0]
    assert r.status == "equal" and t.upstream_rows == t.downstream_rows == 4 * 40, render(r)
    assert t.buckets >= 4 * 3 and t.fallback is None, render(r)     # each slice in ranges (and gaps between)
    assert t.upstream_checksum == t.downstream_checksum

    rows = [i for i, in query(merged.down, f"SELECT id FROM `{merged.tdb}`.`t` ORDER BY id")]
    first_slice = rows[0] - rows[0] % (1 << 44)
    run(merged.down, f"UPDATE `{merged.tdb}`.`t` SET name = 'bad' WHERE id = {rows[5]}",
        f"DELETE FROM `{merged.tdb}`.`t` WHERE id = {rows[77]}",
        f"INSERT INTO `{merged.tdb}`.`t` (id, name, amount) VALUES (3, 'below every slice', 1), "
        f"({first_slice + 5000}, 'in a slice, no such source row', 1)")
    r = validate_task(merged.task, merged.store, settings=_settings(merged.task), chunk_rows=15)
    t = r.tables[0]
    assert _kinds(t) == sorted([("changed", str(rows[5])), ("missing", str(rows[77])), ("extra", "3"),
                                ("extra", str(first_slice + 5000))]), render(r)
    assert 1 <= t.differing_buckets <= 4 and t.pending == [], render(r)


@pytest.fixture
def keyed(stack, uniq):
    """Two sources, one shard each, a string primary key (case-insensitive) shared as is by the
    merged target; FLOAT, JSON, nullable text; 30 rows a shard, copied downstream."""
    ups = {f"a-{uniq}": stack["up1"], f"b-{uniq}": stack["up2"]}
    p, tdb, name = f"vk{uniq}", f"tvk{uniq}", f"vk{uniq}"
    ddl = ("(k varchar(20) COLLATE utf8mb4_general_ci PRIMARY KEY, f float NOT NULL, j json NULL, "
           "note varchar(20) COLLATE utf8mb4_general_ci NULL, d decimal(10,2) NOT NULL)")
    rows = {}
    for n, (sid, ep) in enumerate(ups.items(), 1):
        rows[sid] = [(f"{'ab'[n - 1]}-{i:03d}", 1.25 + i, '{"a": 1, "b": [1, 2]}', f"n{i}" if i % 4 else None,
                      f"{i}.50") for i in range(30)]
        run(ep, f"CREATE DATABASE {qi(f'{p}_{n}')}", f"CREATE TABLE {qt(f'{p}_{n}', 't')} {ddl}")
        conn = connect(ep)
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {qt(f'{p}_{n}', 't')} VALUES (%s, %s, %s, %s, %s)", rows[sid])
            cur.execute(f"ANALYZE TABLE {qt(f'{p}_{n}', 't')}")
        conn.close()
    run(stack["down"], f"CREATE DATABASE {qi(tdb)}", f"CREATE TABLE {qt(tdb, 't')} {ddl}")
    conn = connect(stack["down"])
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {qt(tdb, 't')} VALUES (%s, %s, %s, %s, %s)", [r for rs in rows.values() for r in rs])
    conn.close()
    text = (f"name: {name}\ntask-mode: all\ntarget-database: {target_database(stack['down'])}\nmysql-instances:\n"
            + "".join(f"  - {{source-id: {sid}, block-allow-list: ba, route-rules: [rs, rt]}}\n" for sid in ups)
            + f"routes:\n  rs: {{schema-pattern: '{p}_*', target-schema: {tdb}}}\n"
            f"  rt: {{schema-pattern: '{p}_*', table-pattern: t, target-schema: {tdb}, target-table: t}}\n"
            f"block-allow-list:\n  ba: {{do-dbs: ['~^{p}_[0-9]+$']}}\n")
    task = parse_task(text, "keyed.yaml")
    store = StateStore()
    register(store, ups, name, text)
    store.set_task_status(name, "stopped")
    yield task, store, stack["down"], tdb, [(ep, f"{p}_{n}") for n, ep in enumerate(ups.values(), 1)]
    reset_task(store, name)
    store.close()
    for n, ep in enumerate(ups.values(), 1):
        drop_schemas(ep, [f"{p}_{n}"])
    drop_schemas(stack["down"], [tdb])


def test_sampled_ranges_of_a_string_key_see_bytes_not_the_collation(keyed):
    task, store, down, tdb, shards = keyed
    r = validate_task(task, store, settings=_settings(task), chunk_rows=10)
    t = r.tables[0]
    assert r.status == "equal" and t.upstream_rows == 60 and t.buckets >= 5, render(r)
    q = qt(tdb, "t")
    run(down, f"UPDATE {q} SET note = 'N5' WHERE k = 'a-005'",            # equal in the column's collation
        f"UPDATE {q} SET f = 15.25001 WHERE k = 'a-014'",                # was 15.25: the same 6 digits
        f"UPDATE {q} SET note = '' WHERE k = 'b-004'",                    # was NULL
        f"UPDATE {q} SET j = '{{\"b\":[1,2],\"a\":1}}' WHERE k = 'b-025'",  # the same document
        f"INSERT INTO {q} VALUES ('c-000', 1, NULL, NULL, 1)")
    r = validate_task(task, store, settings=_settings(task), chunk_rows=10)
    t = r.tables[0]
    assert _kinds(t) == [("changed", "a-005"), ("changed", "a-014"), ("changed", "b-004"), ("extra", "c-000")], \
        render(r)
    assert 3 <= t.differing_buckets <= 4 and t.fallback is None, render(r)


def test_a_table_sql_cannot_hash_is_read_and_says_so(stack, uniq, plain):
    task, store, sid, db, tdb, sess = plain
    for ep, schema in ((stack["up1"], db), (stack["down"], tdb)):
        run(ep, f"ALTER TABLE {qt(schema, 't')} ADD COLUMN g point NULL",
            f"INSERT INTO {qt(schema, 't')} VALUES (1, 'x', POINT(1, 2)), (2, 'y', NULL)")
    run(stack["down"], f"UPDATE {qt(tdb, 't')} SET g = POINT(1, 3) WHERE id = 1")
    store.set_task_status(task.name, "stopped")
    r = validate_task(task, store, settings=_settings(task))
    t = r.tables[0]
    assert "POINT" in (t.fallback or "") and _kinds(t) == [("changed", "1")], render(r)
    assert "rows read and compared in Python" in render(r)


def test_a_cancelled_validation_stops_reading_a_table_row_by_row(stack, uniq, plain, monkeypatch):
    """A table read row by row (no SQL checksum: a POINT column) stops at its next fetch once the
    job is cancelled, rather than being read to its end."""
    import sys

    from dm_core.validate import readrows
    from dm_core.errors import Cancelled

    task, store, sid, db, tdb, sess = plain
    for ep, schema in ((stack["up1"], db), (stack["down"], tdb)):
        run(ep, f"ALTER TABLE {qt(schema, 't')} ADD COLUMN g point NULL",
            f"INSERT INTO {qt(schema, 't')} VALUES (1, 'x', POINT(1, 2)), (2, 'y', NULL), (3, 'z', POINT(0, 0))")
    store.set_task_status(task.name, "stopped")
    monkeypatch.setattr(readrows, "FETCH", 1)
    fetches = []

    def stop() -> bool:   # the cancel comes after the row read's first fetch
        if sys._getframe(1).f_code.co_name == "_stream":
            fetches.append(1)
        return len(fetches) > 1

    with pytest.raises(Cancelled, match="while it read"):
        validate_task(task, store, settings=_settings(task), stop=stop)
    assert len(fetches) == 2, "the read went on after the cancel"
    assert validate_task(task, store, settings=_settings(task)).status == "equal"
