"""A task file changed between stop-task and start-task while shard DDL state holds rows back
(dm_core/shardddl/state_fit.py), and a source stopped under a running task.

Taken as they are, these changes would lose rows: a shard-mode switch or a table taken out of
the block-allow list during an open pessimistic round would drop the rows the round holds back,
or leave the round waiting forever with the source "caught up"; a source taken out while a lock
waits on it would leave the lock active for good; `operate-source stop` of one source must not
pause the task's other sources.

What a user sees instead: `dmctl start-task` refuses such a file (nothing stored, nothing
started) naming what the state holds; a file changed where Airflow reads it makes the source
pause at its window's start (50024) with nothing skipped; going back to the old file and
finishing the round brings every held row. A table taken out while its group is idle leaves
the group, so the next round does not wait for it. The sync runs in process as the sensors'
pokes run it (shard_helpers.drive).
"""

from __future__ import annotations

import pytest
import yaml

from dm_core.cli.dmctl import main as dmctl
from dm_core.config.task import parse_task
from dm_core.db import qt
from dm_core.errors import ErrorCode

from .shard_helpers import SourceSpec, active_locks, columns, drive, drive_some, query, run, setup_shards, \
    source_states, teardown

pytestmark = pytest.mark.integration


@pytest.fixture
def one_source_two_shards(stack, uniq, tmp_path):
    """Source a (up1): schema p_1 with t_1, t_2, both routed to tdb.t (pessimistic)."""
    p = f"wp{uniq}"
    specs = [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1"], ["t_1", "t_2"], 1)]
    setup = setup_shards(uniq, specs, stack["down"], tmp_path, prefix=p, shard_mode="pessimistic")
    drive(setup.task, setup.store, setup.sources)
    yield setup, p
    teardown(setup)


def _restart_with(setup, new_text: str) -> None:
    """stop-task, then a start with an edited file as Airflow's runs would read it (the file
    changed where the DAG factory reads it: no dmctl check on the way)."""
    setup.store.stop_task(setup.name)
    setup.store.start_task(setup.name, new_text)
    setup.text = new_text
    setup.task_file.write_text(new_text)
    setup.reload()


def _dmctl_start(setup, tmp_path, text: str, capsys) -> tuple[int, str]:
    f = tmp_path / "edited.yaml"
    f.write_text(text)
    rc = dmctl(["start-task", str(f)])
    return rc, capsys.readouterr().err


def _open_round_on_t1(setup, p):
    """t_1 runs a DDL t_2 has not run, then writes rows: held back while the checkpoint moves on."""
    sid = setup.sources[0]
    up = setup.specs[0].ep
    run(up, f"ALTER TABLE {qt(p + '_1', 't_1')} ADD COLUMN c1 int NULL",
        f"INSERT INTO {qt(p + '_1', 't_1')} (name, amount, c1) VALUES ('held-1', 1, 7), ('held-2', 2, 7)",
        f"INSERT INTO {qt(p + '_1', 't_2')} (name, amount) VALUES ('t2-before', 3)")
    drive_some(setup.task, setup.store, [sid])
    assert _down_names(setup, "held-%") == 0          # held back, as pessimistic mode does
    assert _down_names(setup, "t2-before") == 1       # the checkpoint went past them
    return sid, up


def _down_names(setup, like: str) -> int:
    return query(setup.down, f"SELECT COUNT(*) FROM {qt(setup.tdb, 't')} WHERE name LIKE %s", (like,))[0][0]


def _without_t2(text: str, p: str) -> str:
    doc = yaml.safe_load(text)
    for rule in doc["block-allow-list"].values():
        rule["ignore-tables"] = [{"db-name": f"{p}_1", "tbl-name": "t_2"}]
    return yaml.safe_dump(doc, sort_keys=False)


EDITS = [  # (what changes in the file, what the refusal names)
    ("optimistic", lambda text, p: text.replace("shard-mode: pessimistic", "shard-mode: optimistic"),
     "sets shard-mode optimistic"),
    ("no shard-mode", lambda text, p: text.replace("shard-mode: pessimistic\n", ""), "sets shard-mode (none)"),
    ("t_2 ignored", _without_t2, "no longer replicates into that table"),
]


@pytest.mark.parametrize("edit, words", [(e, w) for _, e, w in EDITS], ids=[i for i, _, _ in EDITS])
def test_a_file_the_open_round_does_not_fit_is_refused_and_loses_nothing(one_source_two_shards, tmp_path, capsys,
                                                                         edit, words):
    setup, p = one_source_two_shards
    old_text = setup.text
    sid, up = _open_round_on_t1(setup, p)
    new_text = edit(old_text, p)
    setup.store.stop_task(setup.name)

    rc, err = _dmctl_start(setup, tmp_path, new_text, capsys)
    assert rc == 1 and "50024" in err and sid in err and words in err, err
    assert setup.store.task_info(setup.name)["config_text"] == old_text    # nothing stored

    # the same file reaching the sensors another way: the source pauses before reading anything
    _restart_with(setup, new_text)
    drive(setup.task, setup.store, [sid], fail=False)
    st = source_states(setup.task, setup.store)[sid]
    assert st["stage"] == "paused" and st["error_code"] == ErrorCode.SHARD_DDL_STATE_CHANGED.number, st
    assert words in st["error"] and "Nothing was skipped" in st["error"], st["error"]
    assert _down_names(setup, "held-%") == 0

    # back to the file the state was made under, and the round finishes: every held row arrives
    _restart_with(setup, old_text)
    run(up, f"ALTER TABLE {qt(p + '_1', 't_2')} ADD COLUMN c1 int NULL",
        f"INSERT INTO {qt(p + '_1', 't_1')} (name, amount, c1) VALUES ('after-1', 4, 8)")
    last = drive(setup.task, setup.store, [sid])
    assert not last[sid].paused, last[sid].paused
    assert _down_names(setup, "held-%") == 2 and _down_names(setup, "after-1") == 1
    assert "c1" in [c for c, _ in columns(setup.down, setup.tdb, "t")]


def test_a_table_taken_out_while_its_group_is_idle_leaves_the_group(stack, uniq, tmp_path, capsys):
    """No round open: the file may drop t_3 of t_1..t_3; the next round of t_1 and t_2 then
    completes (it used to wait for t_3 forever, every later row of t_1 and t_2 skipped)."""
    p = f"wi{uniq}"
    setup = setup_shards(uniq, [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1"], ["t_1", "t_2", "t_3"], 1)],
                         stack["down"], tmp_path, prefix=p, shard_mode="pessimistic")
    try:
        sid, up = setup.sources[0], setup.specs[0].ep
        run(up, *[f"ALTER TABLE {qt(p + '_1', t)} ADD COLUMN c0 int NULL" for t in ("t_1", "t_2", "t_3")])
        drive(setup.task, setup.store, [sid])      # a round resolved: the group's state is kept
        assert source_states(setup.task, setup.store)[sid]["shard_groups"]
        setup.store.stop_task(setup.name)
        doc = yaml.safe_load(setup.text)
        for rule in doc["block-allow-list"].values():
            rule["ignore-tables"] = [{"db-name": f"{p}_1", "tbl-name": "t_3"}]
        new_text = yaml.safe_dump(doc, sort_keys=False)
        rc, err = _dmctl_start(setup, tmp_path, new_text, capsys)
        assert "50024" not in err, err           # not refused (Airflow is not up here: the start stops later)
        _restart_with(setup, new_text)
        run(up, *[f"ALTER TABLE {qt(p + '_1', t)} ADD COLUMN c1 int NULL" for t in ("t_1", "t_2")],
            f"INSERT INTO {qt(p + '_1', 't_1')} (name, amount, c1) VALUES ('after-1', 4, 8)")
        last = drive(setup.task, setup.store, [sid], fail=False)
        assert not last[sid].paused and not last[sid].waiting, (last[sid].paused, last[sid].waiting)
        assert _down_names(setup, "after-1") == 1
        assert "c1" in [c for c, _ in columns(setup.down, setup.tdb, "t")]
    finally:
        teardown(setup)


# ---- a source taken away while a pessimistic lock waits on it --------------------------------------
@pytest.fixture
def two_sources(stack, uniq, tmp_path):
    """a (up1) and b (up2): p_1.t_1 each, both routed to tdb.t (pessimistic)."""
    p = f"wq{uniq}"
    specs = [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1"], ["t_1"], 1),
             SourceSpec(f"b-{uniq}", stack["up2"], [f"{p}_1"], ["t_1"], 2)]
    setup = setup_shards(uniq, specs, stack["down"], tmp_path, prefix=p, shard_mode="pessimistic")
    drive(setup.task, setup.store, setup.sources)
    yield setup, p
    teardown(setup)


def _a_waits_on_b(setup, p):
    a, b = setup.sources
    run(setup.specs[0].ep, f"ALTER TABLE {qt(p + '_1', 't_1')} ADD COLUMN c1 int NULL",
        f"INSERT INTO {qt(p + '_1', 't_1')} (name, amount, c1) VALUES ('held-a', 1, 7)")
    r = drive(setup.task, setup.store, [a], max_rounds=3, fail=False)[a]
    assert r.waiting, (r.paused, r.waiting)
    locks = active_locks(setup.task, setup.store)
    assert len(locks) == 1 and locks[0]["unsynced"] == [b], locks
    return a, b, locks[0]["lock_id"]


def _without_source(text: str, sid: str) -> str:
    doc = yaml.safe_load(text)
    doc["mysql-instances"] = [i for i in doc["mysql-instances"] if i["source-id"] != sid]
    used_ba = {i["block-allow-list"] for i in doc["mysql-instances"]}
    used_cm = {c for i in doc["mysql-instances"] for c in i["column-mapping-rules"]}
    doc["block-allow-list"] = {k: v for k, v in doc["block-allow-list"].items() if k in used_ba}
    doc["column-mappings"] = {k: v for k, v in doc["column-mappings"].items() if k in used_cm}
    return yaml.safe_dump(doc, sort_keys=False)


def test_a_source_taken_out_while_a_lock_waits_on_it_is_refused(two_sources, tmp_path, capsys):
    setup, p = two_sources
    a, b, lock_id = _a_waits_on_b(setup, p)
    old_text = setup.text
    setup.store.stop_task(setup.name)
    new_text = _without_source(old_text, b)
    rc, err = _dmctl_start(setup, tmp_path, new_text, capsys)
    assert rc == 1 and "50024" in err and lock_id in err and b in err, err
    assert parse_task(setup.store.task_info(setup.name)["config_text"], "x").mysql_instances[1].source_id == b

    _restart_with(setup, new_text)   # the same file reaching the sensors: a pauses, nothing lost
    drive(setup.task, setup.store, [a], max_rounds=3, fail=False)
    st = source_states(setup.task, setup.store)[a]
    assert st["stage"] == "paused" and st["error_code"] == ErrorCode.SHARD_DDL_STATE_CHANGED.number, st
    assert lock_id in st["error"]

    _restart_with(setup, old_text)   # with b back, b's DDL completes the lock: a's held row lands once
    run(setup.specs[1].ep, f"ALTER TABLE {qt(p + '_1', 't_1')} ADD COLUMN c1 int NULL")
    last = drive(setup.task, setup.store, setup.sources)
    assert not any(r.paused for r in last.values()), {k: r.paused for k, r in last.items()}
    assert _down_names(setup, "held-a") == 1 and not active_locks(setup.task, setup.store)


def test_operate_source_stop_is_refused_while_a_task_uses_the_source(two_sources, capsys):
    """DM's 46010: stopping one source of a running task used to pause its other sources with
    "source ... is not registered" (membership asks every source for its tables)."""
    setup, p = two_sources
    a, b, _ = _a_waits_on_b(setup, p)
    assert dmctl(["operate-source", "stop", b]) == 1
    err = capsys.readouterr().err
    assert b in err and setup.name in err and "stop-task" in err, err
    assert b in [s.get("source-id") or s.get("source_id") for s in setup.store.list_sources()]
    r = drive(setup.task, setup.store, [a], max_rounds=2, fail=False)[a]
    assert not r.paused and r.waiting, (r.paused, r.waiting)   # still waits on the lock, as it should


def test_start_task_s_with_another_file_is_refused(two_sources, tmp_path, capsys):
    """`start-task -s` on a running task used to ignore the file it was given."""
    setup, p = two_sources
    edited = setup.text.replace("shard-mode: pessimistic", "shard-mode: optimistic")
    f = tmp_path / "edited.yaml"
    f.write_text(edited)
    assert dmctl(["start-task", "-s", setup.sources[0], str(f)]) == 1
    err = capsys.readouterr().err
    assert "differs from the file it runs with" in err and "nothing started" in err, err
    assert setup.store.task_info(setup.name)["config_text"] == setup.text


def test_a_reset_killed_part_way_forgets_nothing(two_sources, monkeypatch):
    """`start-task --remove-meta` forgets positions and shard DDL locks in one transaction: a
    reset killed between the two used to leave the locks, which the next start (seeing no
    positions: fresh) carried into a new full phase."""
    import dm_core.reset as reset

    setup, p = two_sources
    a, b, lock_id = _a_waits_on_b(setup, p)

    def killed(cur, task):
        raise RuntimeError("killed before the schema overlays went")

    monkeypatch.setattr(reset.schema_overlay, "delete_task", killed)
    with pytest.raises(RuntimeError):
        reset.reset_task(setup.store, setup.name)
    assert source_states(setup.task, setup.store)[a]["binlog_file"]        # positions kept
    assert [lk["lock_id"] for lk in active_locks(setup.task, setup.store)] == [lock_id]
    monkeypatch.undo()
    reset.reset_task(setup.store, setup.name)
    assert not source_states(setup.task, setup.store) and not active_locks(setup.task, setup.store)


def test_pause_and_resume_of_the_task_act_on_the_sources_not_stopped(two_sources, capsys):
    """After `stop-task -s b`, `pause-task T` / `resume-task T` used to refuse (exit 1) until
    given `-s a`; DM acts on the sources the task runs."""
    setup, p = two_sources
    a, b = setup.sources
    setup.store.request_sources(setup.name, [b], "stopped", all_sources=[a, b])
    assert dmctl(["pause-task", setup.name]) == 0
    out = capsys.readouterr().out
    assert f"{b} stay stopped" in out and f"source(s) {a} paused" in out, out
    req = {s["source_id"]: s["requested"] for s in setup.store.all_source_states(setup.name)}
    assert req == {a: "paused", b: "stopped"} and setup.store.task_info(setup.name)["status"] == "paused", req
    assert dmctl(["resume-task", setup.name]) == 0
    req = {s["source_id"]: s["requested"] for s in setup.store.all_source_states(setup.name)}
    assert req == {a: "running", b: "stopped"}, req
    assert dmctl(["pause-task", setup.name, "-s", b]) == 1     # naming the stopped one still says how to start it
    assert "start-task -s" in capsys.readouterr().err


def test_the_precheck_task_fails_on_a_file_edited_where_airflow_reads_it(one_source_two_shards):
    """A file changed in config/tasks/ and the DAG triggered from the UI (no dmctl on the way):
    the precheck task fails naming the conflict, so the chain never reaches the sync."""
    from airflow.sdk.exceptions import AirflowFailException
    from shardflow_airflow.operators import PrecheckOperator

    setup, p = one_source_two_shards
    sid, _ = _open_round_on_t1(setup, p)
    _restart_with(setup, setup.text.replace("shard-mode: pessimistic", "shard-mode: optimistic"))
    with pytest.raises(AirflowFailException) as e:
        PrecheckOperator(task_id="precheck", task_file=str(setup.task_file)).execute({})
    assert "50024" in str(e.value) and sid in str(e.value) and "shard-mode optimistic" in str(e.value)
