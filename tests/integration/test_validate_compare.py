"""`dmctl validate`'s in-process engine on real servers: shards merged by route and
partition-id mapping vs the downstream table. Equal tables compare equal; each kind of
damage downstream is named by its downstream key; differences the task's filters explain
are counted as filtered, not reported."""

import json

import pytest
import yaml

from dm_core.config.task import parse_task
from dm_core.validate.compare import validate_task as compare_task
from dm_core.validate.result import render
from dm_core.validate.settings import settings_for

from .shard_helpers import SourceSpec, query, run, setup_shards, teardown

pytestmark = pytest.mark.integration


@pytest.fixture
def merged(stack, uniq, tmp_path):
    p = f"vc{uniq}"
    specs = [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1", f"{p}_2"], ["t_1", "t_2"], 1),
             SourceSpec(f"b-{uniq}", stack["up2"], [f"{p}_1"], ["t_1"], 2)]
    setup = setup_shards(uniq, specs, stack["down"], tmp_path, prefix=p, rows=30)
    setup.store.set_task_status(setup.name, "stopped")   # nothing replicates: differences are final
    yield setup
    teardown(setup)


def _down_rows(setup):
    return query(setup.down, f"SELECT id, name, amount FROM `{setup.tdb}`.`t` ORDER BY id")


def _fast(task):
    s = settings_for(task)
    s.recheck.row_error_delay, s.recheck.check_interval = 20, 0.2
    return s


def test_equal_tables_compare_equal_with_counts_and_checksums(merged):
    r = compare_task(merged.task, merged.store, settings=_fast(merged.task))
    assert len(r.tables) == 1 and r.status == "equal", render(r)
    t = r.tables[0]
    assert t.upstream_rows == t.downstream_rows == 5 * 30 and t.upstream_checksum == t.downstream_checksum
    assert t.differing_buckets == 0 and len(t.shards) == 5 and t.chunks == 6


# (damage downstream given the sorted downstream rows, expected [(kind, id)])
DAMAGE = [
    ("deleted", lambda rows: [f"DELETE FROM {{t}} WHERE id = {rows[0][0]}"], lambda rows: [("missing", rows[0][0])]),
    ("changed", lambda rows: [f"UPDATE {{t}} SET amount = amount + 1 WHERE id = {rows[1][0]}"],
     lambda rows: [("changed", rows[1][0])]),
    ("inserted", lambda rows: [f"INSERT INTO {{t}} (id, name, amount) VALUES ({rows[-1][0] + 1000}, 'x', 1)"],
     lambda rows: [("extra", rows[-1][0] + 1000)]),
    ("deleted and changed", lambda rows: [f"DELETE FROM {{t}} WHERE id = {rows[3][0]}",
                                          f"UPDATE {{t}} SET name = 'bad' WHERE id = {rows[7][0]}"],
     lambda rows: [("missing", rows[3][0]), ("changed", rows[7][0])]),
]


@pytest.mark.parametrize("kind, damage, expected", DAMAGE, ids=[k for k, _, _ in DAMAGE])
def test_damage_downstream_is_named_by_key(merged, kind, damage, expected, capsys):
    rows = _down_rows(merged)
    run(merged.down, *[s.format(t=f"`{merged.tdb}`.`t`") for s in damage(rows)])
    r = compare_task(merged.task, merged.store, settings=_fast(merged.task))
    t = r.tables[0]
    assert r.status == "different", render(r)
    got = sorted((d.kind, int(d.key["id"])) for d in t.differences)
    assert got == sorted(expected(rows)), render(r)
    assert t.pending == [] and t.filtered == 0
    for d in t.differences:
        assert d.kind != "missing" or d.origin.startswith(("a-", "b-")), d

    # DM's `validation show-error`: each differing row as an unprocessed error of DM's types
    from dm_core.cli.dmctl import main as dmctl

    merged.store.put_validation(merged.name, f"show-{kind}", r.status, r.to_dict(), finished=True)
    capsys.readouterr()
    assert dmctl(["validation", "show-error", merged.name]) == 0
    errors = json.loads(capsys.readouterr().out)["error"]
    types = {"missing": "Expected rows not exist", "changed": "Column data not matched", "extra": "Deleted rows exist"}
    assert sorted((e["errorType"], e["message"]) for e in errors) == \
        sorted((types[k], f"{k}: id={i}") for k, i in expected(rows)), errors
    assert {(e["dstTable"], e["status"]) for e in errors} == {(f"{merged.tdb}.t", "NewErr")}, errors
    for e in errors:
        assert (e["srcData"] == "") == (e["errorType"] == types["extra"]), e     # extra rows have no upstream row
        assert (e["dstData"] == "") == (e["errorType"] == types["missing"]), e
        assert e["errorType"] == types["extra"] or (e["source"].startswith(("a-", "b-")) and e["srcTable"]), e
    assert dmctl(["validation", "show-error", "--error", "ignored", merged.name]) == 0
    assert json.loads(capsys.readouterr().out)["error"] == []
    assert dmctl(["validation", "resolve-error", merged.name]) == 1     # DM's error states: none kept here
    assert f"dm_{merged.name}_resync" in capsys.readouterr().err


def test_keyless_downstream_duplicates_are_extra_rows(merged):
    rows = _down_rows(merged)
    t = f"`{merged.tdb}`.`t`"
    run(merged.down, f"ALTER TABLE {t} MODIFY id bigint NOT NULL, DROP PRIMARY KEY",
        f"INSERT INTO {t} SELECT * FROM {t} WHERE id = {rows[2][0]}")
    r = compare_task(merged.task, merged.store, settings=_fast(merged.task))
    diffs = r.tables[0].differences
    assert [(d.kind, d.key["id"]) for d in diffs] == [("extra", str(rows[2][0]))], render(r)


def test_a_row_missing_with_sync_behind_is_pending_not_different(merged):
    """The task runs but nothing replicates (no sensor): a difference cannot be confirmed, so
    after row-error-delay it is reported as pending with the reason, never as a difference."""
    merged.store.set_task_status(merged.name, "running")
    rows = _down_rows(merged)
    run(merged.down, f"DELETE FROM `{merged.tdb}`.`t` WHERE id = {rows[4][0]}")
    s = _fast(merged.task)
    s.recheck.row_error_delay = 3
    r = compare_task(merged.task, merged.store, settings=s)
    t = r.tables[0]
    assert r.status == "pending" and t.differences == [], render(r)
    assert [(p.kind, int(p.key["id"])) for p in t.pending] == [("missing", rows[4][0])]
    assert "did not catch up" in t.pending[0].reason or "no checkpoint" in t.pending[0].reason, t.pending[0].reason


def test_rows_the_filters_dropped_are_counted_as_filtered_not_reported(merged):
    """An expression filter skipping inserts of amount >= 25 and a binlog filter ignoring
    deletes: downstream lacks such rows, keeps rows deleted upstream. Neither is a difference;
    a change nobody filtered still is."""
    p = merged.tdb.replace("tsx", "vc")
    data = yaml.safe_load(merged.text)
    data["expression-filter"] = {"big": {"schema": f"{p}_1", "table": "t_1", "insert-value-expr": "amount >= 25"}}
    data["filters"] = {"nodel": {"schema-pattern": f"{p}_2", "table-pattern": "t_2", "events": ["delete"],
                                 "action": "Ignore"}}
    for inst in data["mysql-instances"]:
        inst["filter-rules"] = ["nodel"]
        if inst["source-id"].startswith("a-"):
            inst["expression-filters"] = ["big"]
    task = parse_task(yaml.safe_dump(data), "<filters>")
    # what the filters did: rows of a-/vc_1.t_1 with amount >= 25 never arrived; a delete on
    # vc_2.t_2 did not reach the downstream
    a1 = task.rules_for(data["mysql-instances"][0]["source-id"]).column_mapper.plan(f"{p}_1", "t_1", ["id", "name", "amount"])
    dropped = [a1.map_row([i, None, 0])[0] for i, in query(merged.specs[0].ep,
                                                           f"SELECT id FROM `{p}_1`.`t_1` WHERE amount >= 25")]
    assert len(dropped) == 5
    run(merged.down, f"DELETE FROM `{merged.tdb}`.`t` WHERE id IN ({', '.join(map(str, dropped))})")
    run(merged.specs[0].ep, f"DELETE FROM `{p}_2`.`t_2` WHERE id = 3")
    r = compare_task(task, merged.store, settings=_fast(task))
    t = r.tables[0]
    assert r.status == "equal" and t.filtered == 6, render(r)
    # the same damage without the filters in the task file is reported row by row
    plain = compare_task(merged.task, merged.store, settings=_fast(merged.task)).tables[0]
    assert sorted(d.kind for d in plain.differences) == ["extra"] + ["missing"] * 5, plain
    # and a change no filter explains is still found
    run(merged.down, f"UPDATE `{merged.tdb}`.`t` SET name = 'bad' WHERE id = {_down_rows(merged)[0][0]}")
    t = compare_task(task, merged.store, settings=_fast(task)).tables[0]
    assert [d.kind for d in t.differences] == ["changed"] and t.filtered == 6
