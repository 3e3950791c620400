"""Shard DDL scenarios modelled on DM's sharding cases (issue 6), on the real servers:

* three sources (the third reads the first's server, its own block-allow-list selects
  other schemas), several tables each, ADD / MODIFY / ADD INDEX / DROP COLUMN with DML
  between on every shard, in interleaved bursts (one source runs two DDLs before another
  runs any); inconsistent sequences (inside one source, across sources) are reported;
* DM's restrictions: DROP TABLE / TRUNCATE / DROP DATABASE of shards are ignored
  downstream and a dropped shard leaves its group (later DDLs do not wait for it); a
  shard created mid-stream joins the group; RENAME TABLE and DDLs naming two sharded
  tables are refused naming them;
* optimistic mode: compatible changes with differing timing, an incompatible one stops
  with a conflict (50008) naming the lock and the statement, and `unlock --action skip`
  lets the source go on.

Each test syncs with ``drive`` (every source's windows round-robin, as their sensors'
pokes would) and checks what a user checks: the downstream schema, the union of the
shards, the source's error.
"""

from __future__ import annotations

import pytest

from dm_core.db import qi, qt
from dm_core.shardddl.lock_ops import ops_for
from dm_core.validate.compare import compare_task, render

from .helpers import purge_binlogs_to
from .shard_helpers import (SourceSpec, active_locks, assert_settled, assert_union, columns, dml, drive, drive_some,
                            indexes, query, run, setup_shards, source_states, teardown)

pytestmark = pytest.mark.integration


def _two(stack, uniq, p):
    return [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1", f"{p}_2"], ["t_1", "t_2"], 1),
            SourceSpec(f"b-{uniq}", stack["up2"], [f"{p}_1", f"{p}_2"], ["t_1"], 2)]


@pytest.fixture
def two(stack, uniq, tmp_path, request):
    """a (up1): 2 schemas × t_1, t_2; b (up2): 2 schemas × t_1 → 6 shards into one target."""
    mode = getattr(request, "param", "pessimistic")
    p = f"sc{uniq}"
    setup = setup_shards(uniq, _two(stack, uniq, p), stack["down"], tmp_path, prefix=p, shard_mode=mode)
    yield setup
    teardown(setup)


@pytest.fixture
def three(stack, uniq, tmp_path, request):
    """a (up1): {p}_1, {p}_2 × t_1, t_2; b (up2): {p}_1, {p}_2 × t_1, t_2; c (up1 again, its own
    block-allow-list): {p}_3, {p}_4 × t_1 → 12 shards of 3 sources into one target."""
    mode = getattr(request, "param", "pessimistic")
    p = f"s3{uniq}"
    specs = [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1", f"{p}_2"], ["t_1", "t_2"], 1),
             SourceSpec(f"b-{uniq}", stack["up2"], [f"{p}_1", f"{p}_2"], ["t_1", "t_2"], 2),
             SourceSpec(f"c-{uniq}", stack["up1"], [f"{p}_3", f"{p}_4"], ["t_1"], 3)]
    setup = setup_shards(uniq, specs, stack["down"], tmp_path, prefix=p, shard_mode=mode)
    yield setup
    teardown(setup)


def _names(setup):
    return [c for c, _ in columns(setup.down, setup.tdb, "t")]


def _paused(setup) -> dict[str, dict]:
    return {k: s for k, s in source_states(setup.task, setup.store).items() if s["stage"] == "paused"}


# ---- three sources --------------------------------------------------------------------------------
SEQ = ["ALTER TABLE {t} ADD COLUMN c1 int NULL",
       "ALTER TABLE {t} MODIFY COLUMN name varchar(128) NULL",
       "ALTER TABLE {t} ADD INDEX idx_amount (amount)",
       "ALTER TABLE {t} DROP COLUMN c1"]


def _ddl_with_dml(sh, k, ddl, tag):
    dml(sh.ep, sh.schema, sh.table, f"{tag}b{k}", n=3)
    run(sh.ep, ddl.format(t=sh.q))
    dml(sh.ep, sh.schema, sh.table, f"{tag}a{k}", n=3)
    if 1 <= k < 4:  # c1 exists on this shard between DDL 1 and DDL 4: write it (and, past the
        # MODIFY of DDL 2, a name longer than the old varchar(64))
        name = f"{tag}c{k}-" + ("x" * 70 if k >= 2 else "")
        run(sh.ep, f"INSERT INTO {sh.q} (name, amount, c1) VALUES ('{name}', 3, {k})")


def test_three_sources_sequence_in_interleaved_bursts(three):
    """Source a runs DDL 1 and 2 on all its shards before b or c run any (with syncs in
    between); then b, then c catch up; DDL 3 and 4 go shard by shard across sources."""
    setup = three
    a, b, c = setup.sources
    by = {sid: setup.of(sid) for sid in setup.sources}
    for sid in (a, b, c):
        for k in (1, 2):
            for i, sh in enumerate(by[sid]):
                _ddl_with_dml(sh, k, SEQ[k - 1], f"{i}")
        drive_some(setup.task, setup.store, setup.sources)
        if sid == a:  # a waits for b and c at DDL 1: its rows past the DDL are held back
            locks = active_locks(setup.task, setup.store)
            assert len(locks) == 1 and locks[0]["synced"] == [a], locks
            assert _names(setup) == ["id", "name", "amount"]
    for k in (3, 4):
        for i, sh in enumerate(setup.shards):
            _ddl_with_dml(sh, k, SEQ[k - 1], f"{i}")
            if i == 5:
                drive_some(setup.task, setup.store, setup.sources, windows=2)
    last = drive(setup.task, setup.store, setup.sources)
    assert_settled(last)
    got = columns(setup.down, setup.tdb, "t")
    assert [c for c, _ in got] == ["id", "name", "amount"]
    assert dict(got)["name"] == "varchar(128)"
    assert "idx_amount" in indexes(setup.down, setup.tdb, "t")
    assert_union(setup.task, setup.store)


def test_three_sources_inconsistent_order_across_sources_is_reported(three):
    """a runs ADD c1 then ADD c2; c runs them the other way round: c's first DDL differs
    from the lock's, and the error names both statements."""
    setup = three
    a, b, c = setup.sources
    first, second = "ALTER TABLE {t} ADD COLUMN c1 int NULL", "ALTER TABLE {t} ADD COLUMN c2 int NULL"
    for sh in setup.shards:
        order = (second, first) if sh.sid == c else (first, second)
        for ddl in order:
            run(sh.ep, ddl.format(t=sh.q))
            dml(sh.ep, sh.schema, sh.table, "x", n=2)
    drive(setup.task, setup.store, setup.sources, fail=False, max_rounds=10)
    paused = _paused(setup)
    assert list(paused) == [c], {k: s["error"] for k, s in paused.items()}
    err = paused[c]["error"]
    assert paused[c]["error_code"] == 50007
    assert "`c1`" in err and "`c2`" in err and "inconsistent" in err
    assert "c2" not in _names(setup), "the inconsistent DDL must not reach the downstream"


def test_inconsistent_sequence_inside_one_source_is_reported(two):
    """Two shards of one source diverge: the first-level group reports both tables and DDLs."""
    setup = two
    a, _ = setup.sources
    for i, sh in enumerate(setup.shards):
        col = "odd" if (sh.sid == a and i == 1) else "even"
        run(sh.ep, f"ALTER TABLE {sh.q} ADD COLUMN {col} int NULL")
    drive(setup.task, setup.store, setup.sources, fail=False, max_rounds=10)
    paused = _paused(setup)
    assert a in paused, paused
    err = paused[a]["error"]
    assert paused[a]["error_code"] == 50007
    assert "`odd`" in err and "`even`" in err
    t1, t2 = setup.of(a)[0], setup.of(a)[1]
    assert f"`{t1.table}`" in err and f"`{t2.table}`" in err
    assert "odd" not in _names(setup) and "even" not in _names(setup)


# ---- DM restrictions --------------------------------------------------------------------------------
def _down_rows(setup) -> int:
    return query(setup.down, f"SELECT COUNT(*) FROM {qt(setup.tdb, 't')}")[0][0]


def test_drop_and_truncate_of_a_shard_are_ignored_and_the_dropped_shard_leaves_its_group(two):
    setup = two
    a, b = setup.sources
    for sh in setup.shards:
        dml(sh.ep, sh.schema, sh.table, "pre", n=4)
    dropped, truncated = setup.of(a)[3], setup.of(b)[0]
    n_dropped = query(dropped.ep, f"SELECT COUNT(*) FROM {dropped.q}")[0][0]
    n_truncated = query(truncated.ep, f"SELECT COUNT(*) FROM {truncated.q}")[0][0]
    # one shard of a has run the DDL before its sibling is dropped: the drop completes the round
    first = setup.of(a)[0]
    run(first.ep, f"ALTER TABLE {first.q} ADD COLUMN c1 int NULL")
    run(dropped.ep, f"DROP TABLE {dropped.q}")
    run(truncated.ep, f"TRUNCATE TABLE {truncated.q}")
    run(truncated.ep, f"INSERT INTO {truncated.q} (id, name, amount) VALUES (1000, 'after-truncate', 1)")
    for sh in setup.shards:
        if sh not in (dropped, first):
            run(sh.ep, f"ALTER TABLE {sh.q} ADD COLUMN c1 int NULL")
        if sh != dropped:
            dml(sh.ep, sh.schema, sh.table, "post", n=3)
    last = drive(setup.task, setup.store, setup.sources)
    assert_settled(last)
    assert _names(setup) == ["id", "name", "amount", "c1"], "the DDL must not wait for the dropped shard"
    # downstream = union of the remaining shards + what the dropped / truncated shards had
    d = compare_task(setup.task, setup.store)[0]
    assert d.missing == [], render([d])
    assert d.downstream_rows - d.upstream_rows == n_dropped + n_truncated, render([d])
    # and a later DDL too
    for sh in setup.shards:
        if sh != dropped:
            run(sh.ep, f"ALTER TABLE {sh.q} ADD COLUMN c2 int NULL")
    assert_settled(drive(setup.task, setup.store, setup.sources))
    assert _names(setup) == ["id", "name", "amount", "c1", "c2"]


def test_drop_database_of_a_shard_schema_is_ignored_and_its_tables_leave_the_group(two):
    setup = two
    a, b = setup.sources
    gone = [sh for sh in setup.of(b) if sh.schema.endswith("_2")]
    n_gone = sum(query(sh.ep, f"SELECT COUNT(*) FROM {sh.q}")[0][0] for sh in gone)
    run(gone[0].ep, f"DROP DATABASE {qi(gone[0].schema)}")
    for sh in setup.shards:
        if sh not in gone:
            dml(sh.ep, sh.schema, sh.table, "x", n=3)
            run(sh.ep, f"ALTER TABLE {sh.q} ADD COLUMN c1 int NULL")
            dml(sh.ep, sh.schema, sh.table, "y", n=3)
    assert_settled(drive(setup.task, setup.store, setup.sources))
    assert query(setup.down, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
                 (setup.tdb,))[0][0] == 1
    assert _names(setup) == ["id", "name", "amount", "c1"]
    d = compare_task(setup.task, setup.store)[0]
    assert d.missing == [] and d.downstream_rows - d.upstream_rows == n_gone, render([d])


def test_drop_database_before_the_first_window_does_not_block_a_ddl(two):
    """The shards of b's second schema are dropped together with a DDL on the others while
    b's syncer has not run yet: b's group never waits for the vanished tables."""
    setup = two
    a, b = setup.sources
    gone = [sh for sh in setup.of(b) if sh.schema.endswith("_2")]
    for sh in setup.shards:
        if sh not in gone:
            run(sh.ep, f"ALTER TABLE {sh.q} ADD COLUMN c1 int NULL")
            dml(sh.ep, sh.schema, sh.table, "y", n=3)
    for sh in gone:
        dml(sh.ep, sh.schema, sh.table, "z", n=3)
    run(gone[0].ep, f"DROP DATABASE {qi(gone[0].schema)}")
    assert_settled(drive(setup.task, setup.store, setup.sources))
    assert _names(setup) == ["id", "name", "amount", "c1"]
    d = compare_task(setup.task, setup.store)[0]
    assert d.missing == [], render([d])


@pytest.mark.parametrize("when", ["after_sync", "mid_round"])
def test_create_table_of_a_new_shard_mid_stream_joins_the_group(two, when):
    """A new shard is created (with the current schema, DM's rule) while the sources run;
    its rows are merged and its later DDLs are coordinated with the others'."""
    setup = two
    a, b = setup.sources
    drive(setup.task, setup.store, setup.sources)  # the groups exist (persisted) before the new shard
    schema = setup.of(a)[0].schema
    new = qt(schema, "t_3")
    ddl1 = "ALTER TABLE {t} ADD COLUMN c1 int NULL"
    if when == "mid_round":  # half of the shards ran DDL 1, then the new shard appears, then the rest
        half = setup.shards[:3]
        for sh in half:
            run(sh.ep, ddl1.format(t=sh.q))
        run(setup.of(a)[0].ep, f"CREATE TABLE {new} (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, "
                               "name varchar(64) NULL, amount decimal(10,2) NOT NULL DEFAULT 0, c1 int NULL)")
        run(setup.of(a)[0].ep, f"INSERT INTO {new} (name, amount, c1) VALUES ('new-1', 1, 1), ('new-2', 2, 2)")
        for sh in setup.shards[3:]:
            run(sh.ep, ddl1.format(t=sh.q))
    else:
        for sh in setup.shards:
            run(sh.ep, ddl1.format(t=sh.q))
        drive(setup.task, setup.store, setup.sources)
        run(setup.of(a)[0].ep, f"CREATE TABLE {new} (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, "
                               "name varchar(64) NULL, amount decimal(10,2) NOT NULL DEFAULT 0, c1 int NULL)")
        run(setup.of(a)[0].ep, f"INSERT INTO {new} (name, amount, c1) VALUES ('new-1', 1, 1), ('new-2', 2, 2)")
    assert_settled(drive(setup.task, setup.store, setup.sources))
    assert _names(setup) == ["id", "name", "amount", "c1"]
    assert_union(setup.task, setup.store)
    # DDL 2 everywhere but the new shard: the lock must wait for it
    for sh in setup.shards:
        run(sh.ep, f"ALTER TABLE {sh.q} ADD COLUMN c2 int NULL")
        dml(sh.ep, sh.schema, sh.table, "d2", n=2)
    last = drive(setup.task, setup.store, setup.sources, fail=False, max_rounds=6)
    assert last[b].waiting, "b's report waits for a, whose new shard has not run DDL 2"
    assert "c2" not in _names(setup), "the new shard has not run DDL 2 yet"
    run(setup.of(a)[0].ep, f"ALTER TABLE {new} ADD COLUMN c2 int NULL",
        f"INSERT INTO {new} (name, amount, c1, c2) VALUES ('new-3', 3, 3, 3)")
    assert_settled(drive(setup.task, setup.store, setup.sources))
    assert _names(setup) == ["id", "name", "amount", "c1", "c2"]
    assert_union(setup.task, setup.store)


def test_rename_table_of_a_shard_is_refused_naming_it(two):
    setup = two
    a, _ = setup.sources
    t1, t2 = setup.of(a)[0], setup.of(a)[1]
    run(t1.ep, f"RENAME TABLE {t1.q} TO {qt(t1.schema, 'old_1')}, {t2.q} TO {qt(t2.schema, 'old_2')}")
    drive(setup.task, setup.store, setup.sources, fail=False, max_rounds=5)
    paused = _paused(setup)
    assert a in paused and paused[a]["error_code"] == 50006, paused
    err = paused[a]["error"]
    assert "RENAME TABLE" in err and f"`{t1.table}`" in err and f"`{t2.table}`" in err, err


def test_ddl_naming_two_sharded_tables_is_refused_naming_both(two):
    setup = two
    a, _ = setup.sources
    t1, t2 = setup.of(a)[0], setup.of(a)[1]
    run(t1.ep, f"ALTER TABLE {t1.q} ADD COLUMN ref int NULL, ADD CONSTRAINT fk_ref FOREIGN KEY (ref) "
               f"REFERENCES {t2.q} (id)")
    drive(setup.task, setup.store, setup.sources, fail=False, max_rounds=5)
    paused = _paused(setup)
    assert a in paused and paused[a]["error_code"] == 50006, paused
    err = paused[a]["error"]
    assert f"`{t1.schema}`.`{t1.table}`" in err and f"`{t2.schema}`.`{t2.table}`" in err, err
    assert "only one table" in err
    assert "ref" not in _names(setup)


# ---- optimistic ------------------------------------------------------------------------------------
@pytest.mark.parametrize("three", ["optimistic"], indirect=True)
def test_optimistic_three_sources_differing_timing(three):
    """Compatible changes arrive at different times on different shards: a widened column
    and a new index reach the downstream with the first shard, a nullable column too; a
    column dropped by some shards stays until the last one drops it."""
    setup = three
    a, b, c = setup.sources
    for sh in setup.of(a):
        run(sh.ep, f"ALTER TABLE {sh.q} MODIFY COLUMN name varchar(200) NULL",
            f"INSERT INTO {sh.q} (name, amount) VALUES ('{'w' * 150}', 1)")
        dml(sh.ep, sh.schema, sh.table, "a1")
    for sh in setup.of(b):
        run(sh.ep, f"ALTER TABLE {sh.q} ADD INDEX idx_amount (amount)", f"ALTER TABLE {sh.q} ADD COLUMN o1 int NULL",
            f"INSERT INTO {sh.q} (name, amount, o1) VALUES ('o1', 1, 1)")
    for sh in setup.of(c):
        dml(sh.ep, sh.schema, sh.table, "c1")
    assert_settled(drive(setup.task, setup.store, setup.sources))
    got = dict(columns(setup.down, setup.tdb, "t"))
    assert got["name"] == "varchar(200)" and "o1" in got and "idx_amount" in indexes(setup.down, setup.tdb, "t")
    assert_union(setup.task, setup.store)
    # the others catch up (skips), b then drops o1 again: it stays while a and c have it
    for sh in setup.shards:
        if sh.sid != a:
            run(sh.ep, f"ALTER TABLE {sh.q} MODIFY COLUMN name varchar(200) NULL")
        if sh.sid != b:
            run(sh.ep, f"ALTER TABLE {sh.q} ADD COLUMN o1 int NULL", f"ALTER TABLE {sh.q} ADD INDEX idx_amount (amount)")
        dml(sh.ep, sh.schema, sh.table, "all")
    for sh in setup.of(b):
        run(sh.ep, f"ALTER TABLE {sh.q} DROP COLUMN o1")
    assert_settled(drive(setup.task, setup.store, setup.sources))
    assert "o1" in _names(setup)
    for sh in setup.shards:
        if sh.sid != b:
            run(sh.ep, f"ALTER TABLE {sh.q} DROP COLUMN o1")
        dml(sh.ep, sh.schema, sh.table, "end")
    assert_settled(drive(setup.task, setup.store, setup.sources))
    assert _names(setup) == ["id", "name", "amount"]
    assert not active_locks(setup.task, setup.store)
    assert_union(setup.task, setup.store)


def _one_shard_runs(setup, stmt, col):
    """Rows on every shard, then ``stmt`` on source b's first shard only and a row ('after', in
    ``col``) past it; every source syncs and none pauses. Returns (a, b, that shard, last windows)."""
    a, b = setup.sources
    bad = setup.of(b)[0]
    for sh in setup.shards:
        dml(sh.ep, sh.schema, sh.table, "pre", n=3)
    run(bad.ep, stmt.format(t=bad.q))
    run(bad.ep, f"INSERT INTO {bad.q} ({col}, amount) VALUES ('after', 9)")
    last = drive(setup.task, setup.store, setup.sources, max_rounds=3, fail=False)
    assert not _paused(setup)
    return a, b, bad, last


def _assert_long_hold_is_warned(setup, sid, shard, lock_id):
    """The sensor's task log warns about a table held back longer than ``held_warn_seconds``
    (here: the clock an hour on), once per that long, naming the table, the lock and the way
    out of the task's shard mode."""
    import logging
    import time

    from dm_core.state import StateStore
    from dm_core.sync.session import Clocks, Pacing, SyncSession

    now = [time.time() + 3600]
    ticks = [0.0]
    store = StateStore()   # its own connection: the session's fence goes with it
    session = SyncSession(setup.task, sid, store, pacing=Pacing(held_warn_seconds=1800, rest_seconds=0, step_seconds=1),
                          clocks=Clocks(wall=lambda: now[0], clock=lambda: ticks[0], sleep=lambda s: None))
    try:
        def warned():
            return [t for lvl, t in session.step().messages if lvl == logging.WARNING and "has been held back" in t]
        first = warned()
        assert len(first) == 1, first
        assert f"`{shard.schema}`.`{shard.table}`" in first[0] and lock_id in first[0] and "for 1h" in first[0], first
        way_out = "--action skip" if setup.task.shard_mode == "optimistic" else "unresolved_groups"
        assert "Keep the upstream's binlogs" in first[0] and way_out in first[0], first
        ticks[0] += 60
        assert warned() == [], "said once per held_warn_seconds, not every step"
        ticks[0] += 1800
        assert len(warned()) == 1, "said again while it stays held"
    finally:
        store.close()


@pytest.mark.parametrize("two", ["optimistic"], indirect=True)
@pytest.mark.parametrize("stmt,what,others_follow", [
    ("ALTER TABLE {t} MODIFY COLUMN name text NULL", "converts", True),  # another type family (DM: not comparable)
    ("ALTER TABLE {t} CHANGE COLUMN name label varchar(64) NULL", "renaming column `name`", True),
    ("ALTER TABLE {t} CHANGE COLUMN name label varchar(64) NULL", "renaming column `name`", False),
])
def test_optimistic_change_of_one_shard_is_held_until_every_shard_runs_it(two, stmt, what, others_follow):
    """DM's ConflictSkipWaitRedirect: the shard's rows after its DDL are held back, nobody pauses;
    once every shard ran it, the DDL runs downstream once and the held rows are replayed. A shard
    that never will: the operator's `unlock --action skip` releases the held table."""
    setup = two
    renamed = "label" in stmt
    col = "label" if renamed else "name"
    a, b, bad, last = _one_shard_runs(setup, stmt, col)
    lock_id = f"{setup.name}-`{setup.tdb}`.`t`"
    assert [n for n in last[b].held if f"`{bad.schema}`.`{bad.table}` held back from" in n and " since " in n
            and lock_id in n], last[b].held
    _assert_long_hold_is_warned(setup, b, bad, lock_id)
    from dm_core.cli.dmctl import _status
    shown = {s["source"]: s["held_tables"] for s in _status(setup.store, setup.name)["sources"]}
    assert shown[a] == [] and len(shown[b]) == 1 and f"`{bad.schema}`.`{bad.table}` held back from" in shown[b][0] \
        and " since " in shown[b][0], shown   # query-status names it too
    locks = ops_for("optimistic").list_locks(setup.store, setup.name)
    held = [m for m in locks[0]["members"] if m["held"]]
    assert [(m["source"], m["table"]) for m in held] == [(b, [bad.schema, bad.table])], locks
    assert what in held[0]["held"] and locks[0]["status"] == "waiting", held
    assert dict(columns(setup.down, setup.tdb, "t"))["name"] == "varchar(64)", "nothing ran downstream"
    assert query(setup.down, f"SELECT COUNT(*) FROM {qt(setup.tdb, 't')} WHERE name = 'after'")[0][0] == 0
    for sh in setup.shards:   # the other shards' rows go on meanwhile
        if sh != bad:
            dml(sh.ep, sh.schema, sh.table, "mid", n=2)
    drive(setup.task, setup.store, setup.sources, max_rounds=3, fail=False)
    assert not _paused(setup)

    if others_follow:
        for sh in setup.shards:
            if sh != bad:
                run(sh.ep, stmt.format(t=sh.q))
    else:   # the operator accepts the change without running it and adds the column by hand
        ops_for("optimistic").unlock(setup.store, lock_id, action="skip")
        run(setup.down, f"ALTER TABLE {qt(setup.tdb, 't')} ADD COLUMN label varchar(64) NULL")
    theirs = col if others_follow else "name"
    for sh in setup.shards:
        if sh != bad:
            for i in range(3):
                run(sh.ep, f"INSERT INTO {sh.q} ({qi(theirs)}, amount) VALUES ('post{i}', {i})")
    assert_settled(drive(setup.task, setup.store, setup.sources))
    assert not _paused(setup) and not active_locks(setup.task, setup.store)
    got = query(setup.down, f"SELECT COUNT(*) FROM {qt(setup.tdb, 't')} WHERE {qi(col)} = 'after'")[0][0]
    assert got == 1, "the held shard's rows after its DDL are replayed once"
    if others_follow:
        want = "text" if not renamed else "varchar(64)"
        assert dict(columns(setup.down, setup.tdb, "t"))[col] == want
        assert (col == "name") == ("name" in dict(columns(setup.down, setup.tdb, "t")))
        assert_union(setup.task, setup.store)


@pytest.mark.parametrize("two,stmt,col", [
    ("optimistic", "ALTER TABLE {t} CHANGE COLUMN name label varchar(64) NULL", "label"),   # held back
    ("pessimistic", "ALTER TABLE {t} ADD COLUMN c1 int NULL", "name"),                    # skipped, to rewind
], indirect=["two"])
def test_held_rows_purged_from_the_binlog_pause_naming_the_table_and_the_way_out(two, stmt, col):
    """A shard runs a DDL the others have not (optimistic: a rename, its table held back;
    pessimistic: its rows past the DDL skipped until the lock resolves) and the upstream purges
    the binlog holding its rows before the others follow: the replay cannot read them. The
    source pauses with HELD_ROWS_PURGED naming the table and the way out (not "run the full
    phase again"); a resume pauses again; `binlog skip` gives the replay up and the source goes
    on; the validation names the missing rows and the re-sync writes them: equal again."""
    setup = two
    a, b, bad, _ = _one_shard_runs(setup, stmt, col)
    _assert_long_hold_is_warned(setup, b, bad, f"{setup.name}-`{setup.tdb}`.`t`")
    run(bad.ep, "FLUSH BINARY LOGS")
    newest = query(bad.ep, "SHOW MASTER STATUS")[0][0]
    for sh in setup.shards:   # the checkpoints move on into the newest file
        if sh != bad:
            dml(sh.ep, sh.schema, sh.table, "mid", n=2)
    drive(setup.task, setup.store, setup.sources, max_rounds=3, fail=False)
    assert source_states(setup.task, setup.store)[b]["binlog_file"] == newest
    purge_binlogs_to(bad.ep, newest)
    for sh in setup.shards:
        if sh != bad:
            run(sh.ep, stmt.format(t=sh.q))
    last = drive(setup.task, setup.store, setup.sources, max_rounds=5, fail=False)
    st = source_states(setup.task, setup.store)[b]
    assert st["stage"] == "paused" and st["error_code"] == 50019, st
    tdb_t = f"{setup.tdb}.t"
    for what in (f"`{bad.schema}`.`{bad.table}`", "dmctl binlog skip", f"dm_{setup.name}_resync", tdb_t):
        assert what in st["error"], (what, st["error"])
    assert st["error_pos"], "binlog skip acts on the paused position"
    assert not last[a].paused, "the other source goes on"

    from dm_core.cli.dmctl import main as dmctl
    from dm_core.resync.choose import keys_of
    from dm_core.resync.run import run_resync
    from dm_core.validate.compare import validate_task

    assert dmctl(["resume-task", setup.name, "-s", b]) == 0
    drive(setup.task, setup.store, setup.sources, max_rounds=2, fail=False)
    assert source_states(setup.task, setup.store)[b]["error_code"] == 50019, "a resume reads the same gone binlog"
    assert dmctl(["binlog", "skip", setup.name, "-s", b]) == 0
    run(bad.ep, f"INSERT INTO {bad.q} ({col}, amount) VALUES ('later', 10)")
    assert_settled(drive(setup.task, setup.store, setup.sources))
    st = source_states(setup.task, setup.store)[b]
    assert st["stage"] != "paused" and st["error"] is None, st
    t = qt(setup.tdb, "t")
    assert query(setup.down, f"SELECT COUNT(*) FROM {t} WHERE {qi(col)} IN ('after', 'later')")[0][0] == 1, \
        "the rows after the give-up arrive; the held ones are missing until the re-sync"
    found = validate_task(setup.task, setup.store)
    keys, again = keys_of(found.to_dict())
    assert again == [] and [k["id"] for k in keys[tdb_t]], found.to_dict()
    assert run_resync(setup.task, setup.store, "purged", keys).ok
    assert_union(setup.task, setup.store)
