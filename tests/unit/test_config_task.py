"""DM task files: DM's reference example loads unchanged; broken files name every wrong key."""

import textwrap
from pathlib import Path

import pytest

from dm_core.config.task import (ConfigProblem, TaskConfigError, load_task_file, parse_task)
from dm_core.errors import ErrorCode, ShardflowError, Terminal

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "config" / "tasks" / "examples" / "dm_full_reference.yaml"

MINIMAL = """\
name: shard-merge
task-mode: all
target-database: {host: 127.0.0.1, port: 4000, user: root, password: "pw"}
mysql-instances:
  - source-id: mysql-01
"""


def task(extra: str = "", base: str = MINIMAL):
    return parse_task(base + textwrap.dedent(extra), "task.yaml")


def problems_of(text: str) -> list[tuple[str, str]]:
    with pytest.raises(TaskConfigError) as e:
        parse_task(textwrap.dedent(text), "task.yaml")
    return [(p.key, p.message) for p in e.value.problems]


# ---- DM's full reference ------------------------------------------------------------------
def test_dm_full_reference_example_loads(tmp_path):
    from ..tls_certs import make_certs

    c = make_certs(tmp_path)    # the reference's placeholder certificate paths, made real
    text = REFERENCE.read_text().replace("/path/to/ca.pem", c["ca"]).replace("/path/to/cert.pem", c["client_cert"]) \
        .replace("/path/to/key.pem", c["client_key"])
    (tmp_path / REFERENCE.name).write_text(text)
    t = load_task_file(tmp_path / REFERENCE.name)
    assert (t.name, t.task_mode, t.shard_mode, t.meta_schema, t.case_sensitive) == ("test", "all", "pessimistic", "dm_meta", False)
    assert t.timezone == "Asia/Shanghai"
    assert t.online_ddl is True and t.collation_compatible == "loose" and t.clean_dump_file is True
    assert t.source_file == str(tmp_path / REFERENCE.name)
    db = t.target_database
    assert (db.host, db.port, db.user, db.password) == ("192.168.0.1", 4000, "root", "secret")
    assert db.session == {"sql_mode": "ANSI_QUOTES,NO_ZERO_IN_DATE,NO_ZERO_DATE", "tidb_skip_utf8_check": "1",
                          "tidb_constraint_check_in_place": "0"}
    assert db.security.ssl_ca == c["ca"] and db.tls.ca.startswith("-----BEGIN CERTIFICATE-----")
    assert sorted(t.routes) == ["route-rule-1", "route-rule-2"]
    assert t.routes["route-rule-1"].extract_table == {"table-regexp": "t_(.*)", "target-column": "c_table"}
    assert t.filters["filter-rule-1"].events == ["truncate table", "drop table"]
    assert t.expression_filter["even_c"].name == "even_c"
    assert t.block_allow_list["bw-rule-1"].do_tables[0].tbl_name == "t_*"

    one, two = t.mysql_instances
    assert one.source_id == "mysql-replica-01"
    assert (one.meta.binlog_name, one.meta.binlog_pos) == ("binlog.000001", 4)
    assert one.route_rules == ["route-rule-1", "route-rule-2"] and one.block_allow_list == "bw-rule-1"
    assert one.syncer.enable_ansi_quotes is True and one.syncer.safe_mode_duration == 60.0
    assert one.loader.import_mode == "logical" and one.loader.on_duplicate_logical == "replace"
    assert one.mydumper.extra_args == "--consistency none"
    assert (one.validator.mode, one.validator.row_error_delay) == ("full", 1800.0)
    assert (two.mydumper.threads, two.loader.pool_size, two.syncer.worker_count) == (4, 16, 16)
    assert two.route_rules == [] and two.block_allow_list is None

    # DM's own warnings, then every key the reference sets that shardflow does not act on
    assert [w.key for w in t.warnings] == [
        "online-ddl-scheme", "validators.global.schedule", "mysql-instances[0].meta",
        "expression-filter.even_c.insert-value-expr",   # binlog rows only, as in DM: the full phase copies them
        "target-database.max-allowed-packet", "mydumpers.global.extra-args", "loaders.global.sorting-dir-physical",
        "syncers.global.enable-ansi-quotes", "mysql-instances[1].mydumper-thread"]
    rules = t.rules_for("mysql-replica-01")
    assert rules.router.route("test_1", "t_2") == ("test", "t")
    assert rules.router.extract_values("test_1", "t_2", "mysql-replica-01") == {
        "c_table": "2", "c_schema": "1", "c_source": "mysql-replica-01"}
    assert rules.binlog_filter.action("test_1", "t_2", "truncate table") == "ignore"
    assert rules.expr_filter.compile("expr_filter", "tbl", ["id", "c"]).skip_insert({"id": 1, "c": 2}) is True
    assert rules is t.rules_for("mysql-replica-01")


# ---- semantics ------------------------------------------------------------------------------
def test_defaults():
    t = task()
    inst = t.instance("mysql-01")
    assert t.shard_mode is None and t.meta_schema == "dm_meta" and t.timezone is None
    assert (inst.mydumper.threads, inst.mydumper.chunk_filesize, inst.loader.pool_size, inst.loader.dir) == (4, 64, 16, "./dumped_data")
    # DM's, but batch, compact and multiple-rows (docs/compatibility.md)
    assert (inst.syncer.worker_count, inst.syncer.batch, inst.syncer.queue_size) == (16, 1000, 1024)
    assert inst.syncer.compact is True and inst.syncer.multiple_rows is True
    assert (inst.syncer.checkpoint_flush_interval, inst.syncer.safe_mode_duration) == (30, 60.0)
    assert inst.meta is None and t.warnings == []
    assert t.source_file is None and t.raw["name"] == "shard-merge"


def test_legacy_is_sharding_means_pessimistic():
    assert task("is-sharding: true\n").shard_mode == "pessimistic"
    assert task("is-sharding: true\nshard-mode: optimistic\n").shard_mode == "optimistic"


def test_thread_shortcuts_override_named_configs():
    t = task("""\
        syncers:
          global: {worker-count: 8, batch: 500, checkpoint-flush-interval: 10}
        loaders:
          global: {pool-size: 8, import-mode: SQL, on-duplicate: ignore}
    """, base=MINIMAL + "    syncer-config-name: global\n    loader-config-name: global\n"
                        "    syncer-thread: 32\n    loader-thread: 2\n    mydumper: {threads: 2}\n    mydumper-thread: 6\n")
    inst = t.instance("mysql-01")
    assert (inst.syncer.worker_count, inst.syncer.batch, inst.syncer.safe_mode_duration) == (32, 500, 20.0)
    assert (inst.loader.pool_size, inst.loader.import_mode, inst.loader.on_duplicate_logical) == (2, "logical", "ignore")
    assert inst.mydumper.threads == 6
    assert t.syncers["global"].worker_count == 8              # the shared config is not modified


@pytest.mark.parametrize("value,seconds", [('"90s"', 90.0), ('"1m30s"', 90.0), ('"0s"', 0.0), ('""', 60.0), ('"1.5h"', 5400.0)])
def test_safe_mode_duration(value, seconds):
    t = task(base=MINIMAL + f"    syncer: {{safe-mode-duration: {value}}}\n")
    assert t.instance("mysql-01").syncer.safe_mode_duration == seconds


def test_legacy_black_white_list():
    t = task("""\
        black-white-list:
          bw: {do-dbs: [app]}
    """, base=MINIMAL + "    black-white-list: bw\n")
    rules = t.rules_for("mysql-01")
    assert t.instance("mysql-01").block_allow_list == "bw"
    assert rules.block_allow.allow_table("app", "t") is True
    assert rules.block_allow.allow_table("other", "t") is False


def test_password_from_environment(monkeypatch):
    monkeypatch.setenv("SF_TEST_PW", "s3cr3t-value")
    t = parse_task(MINIMAL.replace('"pw"', '"${SF_TEST_PW}"'), "task.yaml")
    assert t.target_database.password == "s3cr3t-value"
    assert "s3cr3t-value" not in repr(t) and "s3cr3t-value" not in repr(t.target_database)


def test_password_never_in_errors(monkeypatch):
    text = MINIMAL.replace('"pw"', '"hunter2-secret"') + "bogus-key: 1\n"
    with pytest.raises(TaskConfigError) as e:
        parse_task(text, "task.yaml")
    assert "hunter2-secret" not in str(e.value)
    monkeypatch.delenv("SF_MISSING_PW", raising=False)
    assert problems_of(MINIMAL.replace('"pw"', '"${SF_MISSING_PW}"')) == [
        ("target-database.password", "environment variable SF_MISSING_PW is not set")]


def test_case_sensitive_flows_into_rules():
    t = task("""\
        case-sensitive: true
        routes:
          r: {schema-pattern: "App_*", target-schema: app}
    """, base=MINIMAL + "    route-rules: [r]\n")
    r = t.rules_for("mysql-01").router
    assert r.route("App_1", "t") == ("app", "t") and r.route("app_1", "t") == ("app_1", "t")


def test_instance_lookup_errors():
    t = task()
    with pytest.raises(ShardflowError) as e:
        t.instance("nope")
    assert isinstance(e.value, KeyError) and isinstance(e.value, Terminal)
    assert "'nope'" in str(e.value) and "mysql-01" in str(e.value)
    with pytest.raises(KeyError):
        t.rules_for("nope")


def test_incremental_without_meta_is_allowed():
    t = task(base=MINIMAL.replace("task-mode: all", "task-mode: incremental"))
    assert [w.key for w in t.warnings] == ["mysql-instances[0].meta"]


@pytest.mark.parametrize("mode", ["full", "incremental", "all", "dump", "load"])
def test_task_modes(mode):
    assert task(base=MINIMAL.replace("task-mode: all", f"task-mode: {mode}")).task_mode == mode


# ---- broken files ---------------------------------------------------------------------------
BROKEN = [
    # (file text, [(key, message)])
    ("""\
        name: t
        task-mode: all
        target-databse: {host: h}
     """, [("target-databse", "unknown key"), ("target-database", "missing"),
           ("mysql-instances", "missing: a task needs at least one instance")]),
    ("""\
        name: t
        task-mode: incremantal
        shard-mode: pesimistic
        target-database: {host: h, port: "4000", user: u}
        mysql-instances:
          - source-id: s1
            route-rules: [r1, r9]
          - source-id: s1
            meta: {binlog-pos: 4}
        routes:
          r1: {schema-pattern: "a_*"}
     """, [("target-database.port", "expected an integer, got a string ('4000')"),
           ("task-mode", "invalid value 'incremantal'"),
           ("shard-mode", "invalid value 'pesimistic'"),
           ("routes.r1.target-schema", "must not be empty"),
           ("mysql-instances[0].route-rules[1]", "no route named 'r9' in `routes`"),
           ("mysql-instances[1].source-id", "source-id 's1' is already used by mysql-instances[0]"),
           ("mysql-instances[1].meta", "meta needs binlog-name (binlog-pos) or binlog-gtid (DM: must specify "
                                       "`binlog-name` without GTID enabled for the source or specify `binlog-gtid` "
                                       "with GTID enabled for the source)")]),
    ("""\
        name: t
        task-mode: all
        target-database: {host: h, port: 4000, user: u}
        mysql-instances:
          - source-id: s1
            filter-rules: [f1]
            loader-config-name: global
            loader: {pool-size: 2}
            syncer-thread: -3
            mydumper: {threads: 0, chunk-filesize: big}
          - source-id: s2
            block-allow-list: nope
            syncer-config-name: globl
        filters:
          f1: {schema-pattern: "a_*", events: ["insert", "drop tabel"], action: Ignore}
          f2: {schema-pattern: "b_*", events: ["all"], action: Do}
        loaders:
          global: {on-duplicate-logical: overwrite}
        syncers:
          global: {safe-mode-duration: 60, worker-count: 8}
     """, [("loaders.global.on-duplicate-logical", "invalid value 'overwrite'"),
           ("syncers.global.safe-mode-duration", "expected a duration string such as \"60s\" or \"1m30s\", got a number (60)"),
           ("mysql-instances[0].mydumper.chunk-filesize", "expected a size in MB such as 64, got 'big'"),
           ("mysql-instances[0].mydumper.threads", "must be positive, got 0"),
           ("mysql-instances[0].loader-config-name", "set together with an inline `loader` section"),
           ("mysql-instances[0].syncer-thread", "must not be negative, got -3"),
           ("mysql-instances[1].block-allow-list", "no block & allow list named 'nope' in `block-allow-list`"),
           ("mysql-instances[1].syncer-config-name", "no syncer config named 'globl' in `syncers`"),
           ("filters.f2", "defined but no mysql-instance uses it (DM rejects unused global configs)"),
           ("syncers.global", "defined but no mysql-instance uses it (DM rejects unused global configs)")]),
    ("""\
        name: t
        task-mode: all
        online-ddl-scheme: osc
        collation_compatible: exact
        ignore-checking-items: [version, auto_increment_id]
        heartbeat-update-interval: 0
        target-database: {host: h, port: 70000, user: u, pasword: x}
        mysql-instances:
          - source-id: s1
            route-rules: [a, b]
            column-mapping-rules: [cm]
            expression-filters: [ef]
        routes:
          a: {schema-pattern: "s_*", table-pattern: "t", target-schema: x}
          b: {schema-pattern: "S_*", table-pattern: "T", target-schema: y}
        column-mappings:
          cm: {schema-pattern: "s_*", source-column: id, target-column: id, expression: "partition id", arguments: ["16", "", ""]}
        expression-filter:
          ef: {schema: s, table: t, insert-value-expr: "c >", delete-value-expr: "c = 1"}
     """, [("target-database.pasword", "unknown key"),
           ("online-ddl-scheme", "invalid value 'osc'"),
           ("collation_compatible", "invalid value 'exact'"),
           ("ignore-checking-items[1]", "unknown checking item 'auto_increment_id'"),
           ("heartbeat-update-interval", "must be positive"),
           ("target-database.port", "not a TCP port: 70000"),
           ("column-mappings.cm.arguments[0]", "instance id must be an integer in [0, 16), not '16'"),
           ("expression-filter.ef", "needs exactly one of insert-value-expr, update-*-value-expr, delete-value-expr "
                                    "(DM: one kind of statement per rule), has ['insert', 'delete']")]),
]


@pytest.mark.parametrize("text,expected", BROKEN)
def test_broken_files_list_every_problem(text, expected):
    assert problems_of(text) == expected


@pytest.mark.parametrize("tz,ok", [("+08:00", True), ("-12:59", True), ("+14:30", False), ("SYSTEM", True),
                                   ("UTC", True), ("Asia/Shanghai", True), ("Mars/Olympus", False)])
def test_timezone(tz, ok):
    import zoneinfo

    if "/" in tz and not zoneinfo.available_timezones():
        pytest.skip("no time zone database on this machine")
    text = MINIMAL + f"timezone: {tz!r}\n"
    if ok:
        assert parse_task(text, "task.yaml").timezone == tz
    else:
        assert problems_of(text) == [("timezone", f"unknown time zone {tz!r}")]


def test_a_filter_rule_with_an_event_type_dm_does_not_know_is_left_out_whole_as_in_dm():
    """DM loads the file, logs "invalid binlog event rule" and does not use the rule at all
    (DM's all_mode task file writes "truncate" for "truncate table"): the same, with a warning."""
    t = task("""\
    filter-rules: [f1, f2]
filters:
  f1: {schema-pattern: "a_*", events: ["drop table", "truncate"], action: Ignore}
  f2: {schema-pattern: "b_*", events: ["drop table"], action: Ignore}
""")
    (w,) = [w for w in t.warnings if "events" in w.key]
    assert (w.key, w.fix) == ("filters.f1.events[1]", "did you mean `truncate table`?")
    assert "unknown event type 'truncate'" in w.message and "filters nothing" in w.message
    f = t.rules_for("mysql-01").binlog_filter
    assert f.action("a_1", "t", "drop table") == "do"        # f1 is not used
    assert f.action("b_1", "t", "drop table") == "ignore"    # f2 is


def test_instance_rules_that_clash_together():
    text = MINIMAL + """\
    route-rules: [a, b]
routes:
  a: {schema-pattern: "s_*", table-pattern: "t", target-schema: x}
  b: {schema-pattern: "S_*", table-pattern: "T", target-schema: y}
"""
    with pytest.raises(TaskConfigError) as e:
        parse_task(text, "task.yaml")
    (p,) = e.value.problems
    assert p.key == "mysql-instances[0].route-rules"
    assert "same schema-pattern 'S_*' and table-pattern 'T'" in p.message


def test_error_text_lists_all_problems_with_fixes():
    with pytest.raises(TaskConfigError) as e:
        parse_task("name: t\ntask-mode: al\nmysql-instance: []\n", "x/task.yaml")
    err = e.value
    assert err.code is ErrorCode.CONFIG_INVALID and isinstance(err, Terminal)
    lines = str(err).splitlines()
    assert lines[0] == "[code=10001:config] task file x/task.yaml has 4 problems:"
    assert lines[1] == "x/task.yaml: mysql-instance: unknown key (fix: did you mean `mysql-instances`?)"
    assert lines[2] == "x/task.yaml: task-mode: invalid value 'al' (fix: use one of: full, incremental, all, dump, load)"
    assert all(isinstance(p, ConfigProblem) and p.file == "x/task.yaml" for p in err.problems)
    assert [p.key for p in err.problems] == ["mysql-instance", "task-mode", "target-database", "mysql-instances"]


@pytest.mark.parametrize("text,key,message", [
    ("name: t\ntask-mode: all\n  bad: indent\n", "line 3", "mapping values are not allowed here"),
    ("name: t\nname: u\n", "line 2", "duplicate key 'name'"),
    ("name: [oops\n", "line 2", "expected ',' or ']', but got '<stream end>'"),
    ("- a\n- b\n", "(top level)", "the task file must be a mapping of keys"),
])
def test_yaml_errors_name_the_line(text, key, message):
    assert problems_of(text) == [(key, message)]


def test_load_task_file_missing(tmp_path):
    with pytest.raises(TaskConfigError) as e:
        load_task_file(tmp_path / "nope.yaml")
    assert e.value.problems[0].key == "(file)"
