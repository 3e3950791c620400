"""Precheck (check-task) against real, private MariaDB servers started for this module.

Servers (ports 3320-3329, never the project stack's):
  good  3320  binlog ROW/FULL/FULL, schemas shop (keyed), nopk, shard_a, ai_1; test users
  nolog 3321  the same settings but no binary log
  mut   3322  global variables changed per case; schemas shop, shard_b, ai_2
  tgt   3323  the target; a read-only user
"""

from __future__ import annotations

import json

import pytest
import yaml

from dm_core.check import CHECKS, CheckReport, run_prechecks
from dm_core.config.task import parse_task

from .mariadb_fixture import private_port, start_mariadb

pytestmark = pytest.mark.integration

ALL_ITEMS = [fn.item for fn in CHECKS]
NOT_ALL_MODE = {"meta_position"}            # task-mode incremental only
ONLINE_DDL_ONLY = {"online_ddl"}             # tasks with online-ddl: true only (test_online_ddl's cases)
TIDB_ONLY = {"target_table_creation"}        # says nothing of a MariaDB downstream (test_check_table_creation)
REPLICATION_ITEMS = {"server_id", "binlog_enable", "binlog_format", "binlog_row_image", "binlog_row_metadata",
                     "binlog_compression", "replication_privilege", "meta_position"}
SECRET = "Sup3r-s3cret!pw"
UNUSED_PORT = 3329

SHOP = [
    "CREATE DATABASE shop",
    "CREATE TABLE shop.orders (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, amount decimal(10,2) NOT NULL, "
    "note varchar(64) NULL) DEFAULT CHARSET=utf8mb4",
    "CREATE TABLE shop.customers (email varchar(128) NOT NULL, name varchar(64), UNIQUE KEY uk_email (email)) "
    "DEFAULT CHARSET=latin1",
]


def _shard(schema: str, note_type: str) -> list[str]:
    return [f"CREATE DATABASE {schema}",
            f"CREATE TABLE {schema}.orders (id bigint NOT NULL PRIMARY KEY, amount decimal(10,2) NOT NULL, "
            f"note {note_type} NULL)"]


def _ai(schema: str) -> list[str]:
    return [f"CREATE DATABASE {schema}",
            f"CREATE TABLE {schema}.items (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, sku varchar(32) NOT NULL)"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    base = tmp_path_factory.mktemp("precheck")
    started = []
    try:
        good = start_mariadb(base, private_port(0), 20)
        started.append(good)
        nolog = start_mariadb(base, private_port(1), 21, ("--binlog-format=ROW", "--binlog-row-image=FULL",
                                               "--binlog-row-metadata=FULL"), log_bin=False)
        started.append(nolog)
        mut = start_mariadb(base, private_port(2), 22)
        started.append(mut)
        tgt = start_mariadb(base, private_port(3), 23)
        started.append(tgt)
        good.sql(*SHOP, *_shard("shard_a", "varchar(20)"), *_ai("ai_1"),
                 "CREATE DATABASE nopk",
                 "CREATE TABLE nopk.logs (ts datetime, msg text, code int NULL, UNIQUE KEY (code))",
                 "CREATE TABLE nopk.keyed (id int PRIMARY KEY)",
                 # no REPLICATION SLAVE
                 "CREATE USER norepl@'%' IDENTIFIED BY 'norepl-pw'",
                 "GRANT SELECT, RELOAD, LOCK TABLES, REPLICATION CLIENT ON *.* TO norepl@'%'",
                 # sees shop (INSERT) but may not read it
                 "CREATE USER nosel@'%' IDENTIFIED BY 'nosel-pw'",
                 "GRANT RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO nosel@'%'",
                 "GRANT INSERT, LOCK TABLES ON shop.* TO nosel@'%'")
        nolog.sql(*SHOP)
        mut.sql(*SHOP, *_shard("shard_b", "varchar(40)"), *_ai("ai_2"))
        tgt.sql("CREATE USER reader@'%' IDENTIFIED BY 'reader-pw'", "GRANT SELECT ON *.* TO reader@'%'")
        yield {"good": good, "nolog": nolog, "mut": mut, "tgt": tgt}
    finally:
        for s in started:
            s.stop()


# ---- helpers --------------------------------------------------------------------------------
def task_yaml(target, instances: list[dict], *, mode: str = "all", shard_mode: str | None = None,
              dbs: list[str] = ("shop",), ignore: list[str] = (), routes: dict | None = None,
              mappings: dict | None = None) -> str:
    doc = {"name": "chk", "task-mode": mode}
    if shard_mode:
        doc["shard-mode"] = shard_mode
    if ignore:
        doc["ignore-checking-items"] = list(ignore)
    doc["target-database"] = {"host": target.host, "port": target.port, "user": target.user,
                              "password": target.password}
    doc["mysql-instances"] = [{"block-allow-list": "bal", **i} for i in instances]
    if routes:
        doc["routes"] = routes
    if mappings:
        doc["column-mappings"] = mappings
    doc["block-allow-list"] = {"bal": {"do-dbs": list(dbs)}}
    return yaml.safe_dump(doc, sort_keys=False)


def check(servers, instances: dict, *, target=None, **kw) -> CheckReport:
    """instances: source-id -> Endpoint (or (Endpoint, extra instance keys))."""
    target = target or servers["tgt"].endpoint()
    insts, eps = [], {}
    for sid, v in instances.items():
        ep, extra = v if isinstance(v, tuple) else (v, {})
        insts.append({"source-id": sid, **extra})
        eps[sid] = ep
    task = parse_task(task_yaml(target, insts, **kw), "precheck-test.yaml")
    return run_prechecks(task, eps, target)


def states(report: CheckReport) -> dict[tuple[str, str | None], str]:
    """(item, source) -> the worst state of its results."""
    rank = {"pass": 0, "warn": 1, "fail": 2}
    out: dict = {}
    for r in report.results:
        k = (r.item, r.source)
        if k not in out or rank[r.state] > rank[out[k]]:
            out[k] = r.state
    return out


def expect(report: CheckReport, source: str, *, mode: str = "all", sharding: bool = False, **odd: str) -> None:
    """Every item that applies is present, ``odd`` items have the given state, the rest pass."""
    want = {}
    for it in ALL_ITEMS:
        if (it in NOT_ALL_MODE and mode != "incremental") or it in ONLINE_DDL_ONLY or it in TIDB_ONLY:
            continue
        if mode == "full" and it in REPLICATION_ITEMS:
            continue
        if mode == "incremental" and it == "dump_privilege":
            continue
        where = (None if it in ("schema_of_shard_tables", "auto_increment_ID")
                 else "target" if it == "target_privilege" else source)
        want[(it, where)] = odd.get(it, "pass")
        if it in ("connection", "conn_number"):
            want[(it, "target")] = odd.get(f"{it}_target", "pass")
    assert states(report) == want, report.render()


# ---- a good server ---------------------------------------------------------------------------
def test_good_server_passes_every_item(servers):
    report = check(servers, {"mysql-01": servers["good"].endpoint()})
    expect(report, "mysql-01")
    assert report.ok and not report.errors and not report.warnings
    assert report.render() == "precheck of task chk: 0 failed, 0 warnings, 17 passed"
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True


@pytest.mark.parametrize("mode", ["full", "incremental"])
def test_task_mode_selects_items(servers, mode):
    pos = servers["good"].sql("SHOW MASTER STATUS")[0]
    extra = {"meta": {"binlog-name": pos[0], "binlog-pos": int(pos[1])}} if mode == "incremental" else {}
    report = check(servers, {"mysql-01": (servers["good"].endpoint(), extra)}, mode=mode)
    expect(report, "mysql-01", mode=mode)


# ---- one bad setting each: exactly that item fails, all else passes -------------------------
SERVER_CASES = [
    # id, server, SQL to break it, SQL to restore it, item, state
    ("binlog-off", "nolog", [], [], "binlog_enable", "fail"),
    ("statement-format", "mut", ["SET GLOBAL binlog_format='STATEMENT'"], ["SET GLOBAL binlog_format='ROW'"],
     "binlog_format", "fail"),
    ("minimal-image", "mut", ["SET GLOBAL binlog_row_image='MINIMAL'"], ["SET GLOBAL binlog_row_image='FULL'"],
     "binlog_row_image", "fail"),
    ("minimal-metadata", "mut", ["SET GLOBAL binlog_row_metadata='MINIMAL'"],
     ["SET GLOBAL binlog_row_metadata='FULL'"], "binlog_row_metadata", "pass"),
    ("compressed-binlog", "mut", ["SET GLOBAL log_bin_compress=ON"], ["SET GLOBAL log_bin_compress=OFF"],
     "binlog_compression", "fail"),
]


@pytest.mark.parametrize("server,breaks,restores,item,state", [c[1:] for c in SERVER_CASES],
                         ids=[c[0] for c in SERVER_CASES])
def test_server_setting(servers, server, breaks, restores, item, state):
    db = servers[server]
    if breaks:
        db.sql(*breaks)
    try:
        report = check(servers, {"mysql-01": db.endpoint()})
    finally:
        if restores:
            db.sql(*restores)
    expect(report, "mysql-01", **{item: state})
    bad = report.find(item, "mysql-01")
    assert len(bad) == 1 and (bad[0].fix or state == "pass"), report.render()
    assert report.ok is (state != "fail")
    if state != "pass":   # the report lists what is not passed
        assert f"[{state.upper()}] {item} @ source mysql-01: " in report.render()


def test_conn_number_on_target(servers):
    # one source: the target needs 1 + loader pool-size 16 + syncer worker-count 16 connections
    servers["tgt"].sql("SET GLOBAL max_connections=10")
    try:
        report = check(servers, {"mysql-01": servers["good"].endpoint()})
    finally:
        servers["tgt"].sql("SET GLOBAL max_connections=151")
    expect(report, "mysql-01", conn_number_target="warn")
    (r,) = report.find("conn_number", "target")
    assert "33" in r.message and "max_connections 10" in r.message


def test_binlog_row_metadata_message_names_value(servers):
    servers["mut"].sql("SET GLOBAL binlog_row_metadata='MINIMAL'")
    try:
        report = check(servers, {"mysql-01": servers["mut"].endpoint()})
    finally:
        servers["mut"].sql("SET GLOBAL binlog_row_metadata='FULL'")
    (r,) = report.find("binlog_row_metadata")
    # no names logged is no failure any more: the schema tracker names the columns
    assert r.state == "pass" and "MINIMAL" in r.message and "schema tracker" in r.message


# ---- privileges -------------------------------------------------------------------------------
PRIVILEGE_CASES = [
    ("no-replication-slave", "norepl", "norepl-pw", {"replication_privilege": "fail"}, "REPLICATION SLAVE"),
    ("no-select", "nosel", "nosel-pw", {"dump_privilege": "fail"}, "SELECT"),
]


@pytest.mark.parametrize("user,password,odd,needle", [c[1:] for c in PRIVILEGE_CASES],
                         ids=[c[0] for c in PRIVILEGE_CASES])
def test_source_privileges(servers, user, password, odd, needle):
    report = check(servers, {"mysql-01": servers["good"].endpoint(user, password)})
    expect(report, "mysql-01", **odd)
    (item,) = odd
    (r,) = [r for r in report.find(item) if r.state == "fail"]
    assert needle in r.message and needle in r.fix and user in r.message
    assert "REPLICATION CLIENT" not in r.message  # BINLOG MONITOR counts as REPLICATION CLIENT
    dump = json.dumps(report.to_dict())
    assert password not in dump and "PASSWORD" not in dump  # SHOW GRANTS lines carry a hash


def test_target_privilege(servers):
    report = check(servers, {"mysql-01": servers["good"].endpoint()},
                   target=servers["tgt"].endpoint("reader", "reader-pw"))
    expect(report, "mysql-01", target_privilege="warn")   # DM warns: which tables get written is not known
    (r,) = report.find("target_privilege", "target")
    assert "`shop`" in r.message and "CREATE" in r.message and "GRANT" in r.fix


# ---- tables -------------------------------------------------------------------------------
def test_table_without_key_warns_naming_it(servers):
    report = check(servers, {"mysql-01": servers["good"].endpoint()}, dbs=["nopk"])
    expect(report, "mysql-01", table_schema="warn")
    (r,) = report.find("table_schema")
    assert (r.state, r.table) == ("warn", "`nopk`.`logs`")
    assert "`nopk`.`logs`" in r.message and "primary key" in r.message
    assert report.ok


SHARD_CASES = [("pessimistic", "fail"), ("optimistic", "warn")]


@pytest.mark.parametrize("shard_mode,state", SHARD_CASES)
def test_shards_with_different_columns(servers, shard_mode, state):
    routes = {"orders": {"schema-pattern": "shard_*", "table-pattern": "orders",
                         "target-schema": "merged", "target-table": "orders"}}
    report = check(servers, {"src-a": (servers["good"].endpoint(), {"route-rules": ["orders"]}),
                             "src-b": (servers["mut"].endpoint(), {"route-rules": ["orders"]})},
                   shard_mode=shard_mode, dbs=["~^shard_"], routes=routes)
    (r,) = report.find("schema_of_shard_tables")
    assert (r.state, r.source) == (state, None), report.render()
    assert "src-a:`shard_a`.`orders`" in r.message and "src-b:`shard_b`.`orders`" in r.message
    assert "`note`" in r.message and "varchar(20)" in r.message and "varchar(40)" in r.message
    assert report.find("auto_increment_ID")[0].state == "pass"
    assert report.ok is (state != "fail")


AI_CASES = [
    # id, route extras, column mappings per source, state
    ("no-mapping", {}, False, "warn"),
    ("partition-id", {}, True, "pass"),
    ("extract-table", {"extract-table": {"table-regexp": "(.*)", "target-column": "c_table"},
                       "extract-schema": {"schema-regexp": "(.*)", "target-column": "c_schema"}}, False, "pass"),
]


@pytest.mark.parametrize("route_extra,mapped,state", [c[1:] for c in AI_CASES], ids=[c[0] for c in AI_CASES])
def test_auto_increment_id(servers, route_extra, mapped, state):
    routes = {"items": {"schema-pattern": "ai_*", "table-pattern": "items", "target-schema": "merged",
                        "target-table": "items", **route_extra}}
    mappings = {f"pid-{i}": {"schema-pattern": "ai_*", "table-pattern": "items", "expression": "partition id",
                             "source-column": "id", "target-column": "id", "arguments": [str(i), "ai_", ""]}
                for i in (1, 2)}
    inst = {i: {"route-rules": ["items"], **({"column-mapping-rules": [f"pid-{i}"]} if mapped else {})}
            for i in (1, 2)}
    report = check(servers, {"src-1": (servers["good"].endpoint(), inst[1]),
                             "src-2": (servers["mut"].endpoint(), inst[2])},
                   shard_mode="pessimistic", dbs=["~^ai_"], routes=routes, mappings=mappings if mapped else None)
    got = report.find("auto_increment_ID")
    assert {r.state for r in got} == {state}, report.render()
    if state == "warn":
        assert {r.table for r in got} == {"src-1:`ai_1`.`items`", "src-2:`ai_2`.`items`"}
        assert got[0].fix == "add a partition id column mapping or an extract-table column in the PK"
    assert report.find("schema_of_shard_tables")[0].state == "pass"


# ---- incremental start position ------------------------------------------------------------
def _meta_cases(servers):
    name, pos = servers["good"].sql("SHOW MASTER STATUS")[0][:2]
    domain, server_id, gtid = servers["good"].sql("SELECT @@gtid_domain_id, @@server_id, @@gtid_binlog_pos")[0]
    return [
        ({"binlog-name": name, "binlog-pos": 4}, "pass"),
        ({"binlog-name": name, "binlog-pos": int(pos)}, "pass"),
        ({"binlog-name": "mysql-bin.999999", "binlog-pos": 4}, "fail"),
        ({"binlog-name": name, "binlog-pos": int(pos) + 1_000_000}, "fail"),
        ({"binlog-gtid": f"{domain}-{server_id}-0"}, "pass"),     # from the start: nothing purged yet
        ({"binlog-gtid": gtid}, "pass"),                           # what the server has written
        ({"binlog-gtid": f"{domain}-4242-1"}, "fail"),             # a transaction this binlog never had
    ]


def test_meta_position(servers):
    for meta, state in _meta_cases(servers):
        report = check(servers, {"mysql-01": (servers["good"].endpoint(), {"meta": meta})}, mode="incremental")
        expect(report, "mysql-01", mode="incremental", meta_position=state)
        if state == "fail":
            assert (meta.get("binlog-name") or meta["binlog-gtid"]) in report.find("meta_position")[0].message


# ---- ignore-checking-items ---------------------------------------------------------------------
@pytest.mark.parametrize("ignore", [["binlog_format"], ["all"]])
def test_ignore_checking_items_turns_fail_into_warning(servers, ignore):
    servers["mut"].sql("SET GLOBAL binlog_format='STATEMENT'")
    try:
        report = check(servers, {"mysql-01": servers["mut"].endpoint()}, ignore=ignore)
    finally:
        servers["mut"].sql("SET GLOBAL binlog_format='ROW'")
    expect(report, "mysql-01", binlog_format="warn")
    (r,) = report.find("binlog_format")
    assert r.ignored and r.message.endswith("(ignored)") and "STATEMENT" in r.message
    assert report.ok
    assert "[WARN] binlog_format @ source mysql-01:" in report.render()


# ---- unreachable servers -----------------------------------------------------------------------
def test_unreachable_source(servers):
    from dm_core.db import Endpoint

    ep = Endpoint("127.0.0.1", UNUSED_PORT, "root", SECRET)
    report = check(servers, {"down-01": ep, "mysql-01": servers["good"].endpoint()}, ignore=["all"])
    (r,) = report.find("connection", "down-01")
    assert r.state == "fail" and f"127.0.0.1:{UNUSED_PORT}" in r.message
    assert [x.item for x in report.results if x.source == "down-01"] == ["connection"]
    assert not report.ok  # a connection failure is never ignored
    for text in (report.render(), json.dumps(report.to_dict()), repr(report)):
        assert SECRET not in text
    assert all(x.state == "pass" for x in report.results if x.source in ("mysql-01", "target"))


def test_unreachable_target(servers):
    from dm_core.db import Endpoint

    target = Endpoint("127.0.0.1", UNUSED_PORT, "root", SECRET)
    report = check(servers, {"mysql-01": servers["good"].endpoint()}, target=target)
    (r,) = report.find("connection", "target")
    assert r.state == "fail" and f"127.0.0.1:{UNUSED_PORT}" in r.message and SECRET not in r.message
    assert not report.find("target_privilege")
    assert SECRET not in json.dumps(report.to_dict())


# ---- what MariaDB 10.11 cannot show: items over hand-made facts --------------------------------
FACT_CASES = [
    # id, item function, variables, state, words in the message
    ("server-id-0", "server_id", {"server_id": "0"}, "fail", "server_id is 0"),
    ("no-row-metadata-var", "binlog_row_metadata", {"version": "5.7.44-log"}, "pass", "schema tracker"),
    ("old-mysql", "version", {"version": "5.5.62-log"}, "warn", "outside the known range"),
    ("tidb-upstream", "version", {"version": "8.0.11-TiDB-v7.5.0"}, "warn", "not a known upstream"),
]


@pytest.mark.parametrize("item,variables,state,words", [c[1:] for c in FACT_CASES], ids=[c[0] for c in FACT_CASES])
def test_items_on_facts(item, variables, state, words):
    from dm_core.check.probe import ServerFacts

    fn = next(f for f in CHECKS if f.item == item)
    facts = ServerFacts("mysql-01", "db:3306", user="u", reachable=True, variables=variables)
    (r,) = fn(None, facts)
    assert (r.state, words in r.message) == (state, True), r


def test_ignoring_binlog_row_metadata():
    from dm_core.check.checker import apply_ignores
    from dm_core.check.result import CheckResult

    got = apply_ignores([CheckResult("binlog_row_metadata", "fail", "s", None, "too old", "upgrade"),
                         CheckResult("connection", "fail", "s", None, "refused", "")], ["binlog_row_metadata"])
    assert [(r.state, r.ignored) for r in got] == [("warn", True), ("fail", False)]
    assert got[0].message == "too old (ignored)"
