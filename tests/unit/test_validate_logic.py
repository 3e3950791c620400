"""Validation logic without servers: records, key-level diff and what filters explain, the
inverse of the column mapping used to re-read an extra row upstream, result shapes, the
validator keys of the task file, and the page's overview model."""

import pytest

from dm_core.config.task import parse_task
from dm_core.config.units import size_bytes
from dm_core.overview import actions, phase, synced
from dm_core.rules.column_mapping import ColumnMapper, ColumnMappingRule
from dm_core.validate.diff import Diff, Tally, differing_buckets, key_diff, split_explained
from dm_core.validate.filters import event_flags, expr_flags
from dm_core.validate.plan import bucket_count
from dm_core.validate.recheck import source_key
from dm_core.validate.result import RowDiff, TableResult, ValidationResult, dm_status, from_dict, render
from dm_core.validate.rows import MAY_BE_EXTRA, MAY_BE_MISSING, MAY_BE_STALE, RecordMaker, Shaper, norm
from dm_core.rules.binlog_filter import BinlogFilter, FilterRule
from dm_core.rules.expression_filter import ExprFilterRule


def maker(origin="s1:db.t", flags=0, buckets=16, mapping=None, extract=None):
    cols = ["id", "name"] + list(extract or {})
    return RecordMaker(Shaper(["id", "name"], cols, dict(extract or {}), {}, mapping), [0], list(range(len(cols))),
                       buckets, origin, [0], None, flags)


def test_norm_makes_equal_values_equal():
    import datetime
    import decimal

    assert norm(decimal.Decimal("1.50")) == norm(decimal.Decimal("1.5")) == "1.5"
    assert norm(decimal.Decimal("2.00")) == norm(2) == "2"
    assert norm(b"\x01\xff") == "01ff" and norm(None) is None and norm(True) == "1"
    assert norm(datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)) == "2024-01-02 03:04:05"


# (upstream rows, downstream rows, expected [(kind, id)])
KEY_DIFF = [
    ("equal", [(1, "a"), (2, "b")], [(2, "b"), (1, "a")], []),
    ("missing", [(1, "a"), (2, "b")], [(1, "a")], [("missing", "2")]),
    ("extra", [(1, "a")], [(1, "a"), (3, "c")], [("extra", "3")]),
    ("changed", [(1, "a")], [(1, "x")], [("changed", "1")]),
    ("duplicate downstream", [(1, "a")], [(1, "a"), (1, "a")], [("extra", "1")]),
    ("all at once", [(1, "a"), (2, "b"), (4, "d")], [(1, "z"), (3, "c"), (4, "d")],
     [("changed", "1"), ("missing", "2"), ("extra", "3")]),
]


@pytest.mark.parametrize("ups, downs, expected", [c[1:] for c in KEY_DIFF], ids=[c[0] for c in KEY_DIFF])
def test_key_diff(ups, downs, expected):
    up, dn = maker(), maker(origin="")
    got = key_diff([up.record(r) for r in ups], [dn.record(r) for r in downs])
    assert [(d.kind, d.key[0]) for d in got] == expected


def test_bucket_tallies_find_only_the_differing_buckets():
    up, dn = maker(buckets=64), maker(origin="", buckets=64)
    rows = [(i, f"n{i}") for i in range(500)]
    a, b = Tally(), Tally()
    for r in rows:
        a.add(up.record(r))
    for r in rows[:-1] + [(499, "changed")]:
        b.add(dn.record(r))
    assert a.rows == b.rows == 500 and a.checksum != b.checksum
    assert differing_buckets(a, b) == {up.record(rows[-1]).bucket}
    merged = Tally()  # partial sums from several partitions add up to the same tally
    for bucket, (n, s) in a.buckets.items():
        merged.merge(bucket, n, s)
    assert merged.buckets == a.buckets and merged.checksum == a.checksum


# (kind, upstream flags, downstream flags, explained?)
EXPLAINED = [
    ("missing", MAY_BE_MISSING, 0, True), ("missing", MAY_BE_STALE, 0, False),
    ("extra", 0, MAY_BE_EXTRA, True), ("extra", 0, MAY_BE_MISSING, False),
    ("changed", MAY_BE_STALE, 0, True), ("changed", 0, MAY_BE_STALE, True), ("changed", MAY_BE_MISSING, MAY_BE_EXTRA, False),
]


@pytest.mark.parametrize("kind, upf, downf, explained", EXPLAINED)
def test_which_differences_a_filter_explains(kind, upf, downf, explained):
    up = maker(flags=upf).record((1, "a"))
    dn = maker(origin="", flags=downf).record((1, "b"))
    d = Diff(kind, ("1",), up if kind != "extra" else None, dn if kind != "missing" else None)
    assert d.explained is explained
    assert split_explained([d]) == (([], 1) if explained else ([d], 0))


EVENTS = [
    (["insert"], MAY_BE_MISSING, 0), (["update"], MAY_BE_STALE, MAY_BE_STALE), (["delete"], 0, MAY_BE_EXTRA),
    (["truncate table"], 0, MAY_BE_EXTRA), (["all dml"], MAY_BE_MISSING | MAY_BE_STALE, MAY_BE_EXTRA | MAY_BE_STALE),
    (["drop table"], 0, 0),
]


@pytest.mark.parametrize("events, up, down", EVENTS, ids=[",".join(e) for e, _, _ in EVENTS])
def test_binlog_event_filters_flag_whole_tables(events, up, down):
    f = BinlogFilter([FilterRule("db", "t", events, action="Ignore")])
    assert event_flags(f, "db", "t") == (up, down)
    assert event_flags(f, "db", "other") == (0, 0)


def test_expression_filters_flag_rows():
    rules = [ExprFilterRule("big", "db", "t", insert_value_expr="amount > 10"),
             ExprFilterRule("gone", "db", "t", delete_value_expr="name = 'x'"),
             ExprFilterRule("frozen", "db", "t", update_old_value_expr="amount = 0")]
    up = expr_flags(rules, False, "db", "t", ["id", "name", "amount"], "up")
    down = expr_flags(rules, False, "db", "t", ["id", "name", "amount"], "down")
    assert up((1, "a", 11)) & MAY_BE_MISSING and not up((1, "a", 3)) & MAY_BE_MISSING
    assert up((1, "a", 3)) & MAY_BE_STALE     # an update rule with only an old-value expr: any new value
    assert down((1, "x", 1)) == MAY_BE_EXTRA and down((1, "y", 0)) == MAY_BE_STALE and down((1, "y", 1)) == 0
    assert expr_flags(rules, False, "db", "other", ["id"], "up") is None
    import pickle

    assert pickle.loads(pickle.dumps(up))((1, "a", 11)) & MAY_BE_MISSING   # ships to Spark executors


def _pid(args):
    return ColumnMapper([ColumnMappingRule("db*", "t*", "id", "id", "partition id", args)]).plan("db_2", "t_3", ["id", "name"])


# (mapping, extract, downstream key value, expected (columns, values) or None)
SOURCE_KEY = [
    ("identity", None, {}, 7, (["id"], (7,))),
    ("partition id of this shard", _pid(["1", "db_", "t_"]), {}, None, (["id"], (42,))),
    ("partition id of another shard", _pid(["1", "db_", "t_"]), {}, "other", None),
    ("extract column matches", None, {"src": "s1"}, 7, (["id"], (7,))),
    ("extract column of another shard", None, {"src": "s2"}, 7, None),
]


@pytest.mark.parametrize("mapping, extract, value, expected", [c[1:] for c in SOURCE_KEY], ids=[c[0] for c in SOURCE_KEY])
def test_source_key_maps_a_downstream_key_back_to_the_shard(mapping, extract, value, expected):
    from types import SimpleNamespace

    key = ["id"] + (["src"] if extract else [])
    shard_mk = maker(mapping=mapping, extract={"src": "s1"} if extract else None)
    st = SimpleNamespace(columns=["id", "name"], extract={"src": "s1"} if extract else {})
    shard = SimpleNamespace(table=st, maker=shard_mk)
    plan = SimpleNamespace(key=key)
    if value is None:                       # the mapped id of upstream id 42
        value = mapping.map_row([42, "n"])[0]
    elif value == "other":
        value = _pid(["2", "db_", "t_"]).map_row([42, "n"])[0]
    raw = (value, *extract.values()) if extract else (value,)
    d = Diff("extra", tuple(map(norm, raw)), None, maker(origin="").record((*raw, "n")[:2]) ._replace(raw_key=raw))
    assert source_key(plan, shard, d) == expected


def test_result_round_trips_and_renders_keys():
    t = TableResult("db.t", ["s1:db.t_1"], 10, 9, 3, 16, 1,
                    differences=[RowDiff("missing", {"id": "5"}, {"id": "5", "name": "a"}, None, "s1:db.t_1")],
                    filtered=2, seconds=1.5)
    r = ValidationResult("task", "run-1", "full", "spark", "2024-01-01T00:00:00+00:00", "2024-01-01T00:01:00+00:00",
                         {"s1": "(mysql-bin.000001, 4)"}, [t])
    assert r.status == "different" and from_dict(r.to_dict()).to_dict() == r.to_dict()
    text = render(r)
    assert "missing downstream: id=5" in text and "DIFFERENT" in text
    st = dm_status(r, "task", ["s1"])
    assert st["validators"][0]["errorRowsStatus"] == "differing rows: 1"
    assert st["validators"][0]["validatorBinlog"] == "(mysql-bin.000001, 4)"
    assert st["tableStatuses"] == [{"source": "s1", "srcTable": "db.t_1", "dstTable": "db.t", "stage": "Stopped",
                                    "message": "different"}]
    assert dm_status(None, "task", ["s1"])["validators"] == []


def test_bucket_count_and_sizes():
    assert bucket_count(0) == 16 and bucket_count(1_000_000) == 1024 and bucket_count(10**12) == 65536
    assert size_bytes("500m") == 500 << 20 and size_bytes("2GiB") == 2 << 30
    with pytest.raises(ValueError):
        size_bytes("lots")


TASK = """
name: v
task-mode: all
target-database: {host: 127.0.0.1, port: 4000, user: root, password: ""}
mysql-instances:
  - source-id: s1
    continuous-validator-config-name: A
  - source-id: s2
    continuous-validator-config-name: B
validators:
  A: {mode: full, schedule: "%s"}
  B: {mode: full, schedule: "%s"%s}
"""

VALIDATOR_CASES = [
    ("agree", ("@hourly", "@hourly", ""), None),
    ("cron", ("*/5 * * * *", "*/5 * * * *", ""), None),
    ("disagree", ("@hourly", "@daily", ""), "must share `schedule`"),
    ("bad cron", ("every day", "every day", ""), "validators.A.schedule: not a cron expression"),
    ("bad size", ("@daily", "@daily", ", max-pending-row-size: lots"), "validators.B.max-pending-row-size"),
    ("bad start", ("@daily", "@daily", ", start-time: tomorrow"), "validators.B.start-time"),
    ("bad delay", ("@daily", "@daily", ", row-error-delay: 5"), "validators.B.row-error-delay"),
]


@pytest.mark.parametrize("args, problem", [c[1:] for c in VALIDATOR_CASES], ids=[c[0] for c in VALIDATOR_CASES])
def test_validator_keys_are_checked(args, problem):
    from dm_core.config.problems import TaskConfigError

    if problem is None:
        t = parse_task(TASK % args)
        from dm_core.validate.settings import settings_for

        s = settings_for(t)
        assert s.enabled and s.schedule == args[0] and s.mode == "full"
        return
    with pytest.raises(TaskConfigError) as e:
        parse_task(TASK % args)
    assert problem in str(e.value)


def test_settings_carry_every_working_key():
    from dm_core.validate.settings import settings_for

    one = TASK.replace("continuous-validator-config-name: B", "continuous-validator-config-name: A") \
        .replace('  B: {mode: full, schedule: "%s"%s}\n', "")
    t = parse_task(one.replace('A: {mode: full, schedule: "%s"}', 'A: {mode: fast, schedule: "%s", worker-count: 2, '
                               'row-error-delay: 90s, check-interval: 3s, batch-query-size: 7, meta-flush-interval: 1m, '
                               'max-pending-row-count: 5, max-pending-row-size: 1m, start-time: "2030-01-02 03:04:05"}')
                   % "@daily")
    s = settings_for(t)
    assert (s.mode, s.schedule, s.worker_count, s.recheck.row_error_delay, s.recheck.check_interval,
            s.recheck.batch_query_size, s.meta_flush_interval, s.max_pending_row_count, s.max_pending_row_size) == \
        ("fast", "@daily", 2, 90, 3, 7, 60, 5, 1 << 20)
    assert s.start.year == 2030 and s.start.tzinfo is not None
    t2 = parse_task(TASK.replace("mode: full", "mode: none") % ("", "", ""))
    assert not settings_for(t2).enabled and settings_for(t2).schedule is None and settings_for(t2).mode == "full"


# (status, newest run state per DAG, source stages, expected phase)
PHASES = [
    ("running", {}, [], "not started"),
    ("running", {"precheck": "running"}, [], "precheck"),
    ("running", {"precheck": "success", "full": "running"}, [], "full load"),
    ("running", {"full": "failed"}, [], "full load failed"),
    ("running", {"full": "success", "incremental": "running"}, ["sync", "sync"], "sync"),
    ("running", {"incremental": "running"}, ["sync", "paused"], "sync (a source is paused)"),
    ("paused", {"incremental": "running"}, ["sync"], "paused"),
    ("stopped", {"incremental": "running"}, ["sync"], "stopped"),
]


@pytest.mark.parametrize("status, runs, stages, expected", PHASES)
def test_phase(status, runs, stages, expected):
    assert phase(status, runs, [{"stage": s} for s in stages]) == expected


def test_synced_and_actions():
    assert synced([{"stage": "sync", "lag_seconds": 0.0}, {"stage": "sync", "lag_seconds": 3}])
    assert not synced([{"stage": "sync", "lag_seconds": 60}]) and not synced([])
    assert not synced([{"stage": "sync", "lag_seconds": None}])
    acts = actions("t", "pessimistic", [{"lock_id": "L1", "owner": "s1", "waiting_for": ["s2"]}])
    assert [(a.dag_id, a.conf.get("lock_id")) for a in acts] == [("dm_t_validate", None), ("dm_t_shard_ddl_unlock", "L1")]
    assert [a.dag_id for a in actions("t", None, [])] == ["dm_t_validate"]


LIFECYCLE = [  # task status, source stages/errors -> the operations offered besides validate
    ("running", [("s1", "sync", None)], [("operate", "pause"), ("operate", "stop")]),
    ("paused", [("s1", "paused", None)], [("operate", "resume"), ("operate", "stop")]),
    ("stopped", [], [("operate", "start")]),
    ("running", [("s1", "sync", None), ("s2", "paused", "1054 Unknown column")],
     [("operate", "pause"), ("operate", "stop"), ("handle_error", "s2")]),
    ("unknown", [], []),
]


@pytest.mark.parametrize("status, sources, expected", LIFECYCLE)
def test_lifecycle_actions_follow_the_task_status(status, sources, expected):
    srcs = [{"source": s, "stage": st, "error": e} for s, st, e in sources]
    got = []
    for a in actions("t", None, [], status, srcs)[1:]:
        kind = a.dag_id.removeprefix("shardflow_").removesuffix("_task")
        got.append((kind, a.conf["action"] if kind == "operate" else a.conf["source"]))
        assert a.conf["task"] == "t"
    assert got == expected


RESYNC_OFFERED = [  # last validation's status, task status -> is "Re-sync what validation found" offered
    ("different", "running", True),
    ("pending", "paused", True),
    ("equal", "running", False),
    ("", "running", False),
    ("different", "stopped", False),    # a stopped task's drift is the stop itself
]


@pytest.mark.parametrize("validation, status, offered", RESYNC_OFFERED)
def test_resync_button_follows_the_last_validation(validation, status, offered):
    acts = [a for a in actions("t", None, [], status, [], validation) if a.dag_id == "dm_t_resync"]
    assert bool(acts) == offered
    if acts:
        assert acts[0].conf == {"what": "last_validation", "tables": [], "validation_run": ""}
