"""DM's `online_ddl` case (pingcap/tiflow dm/tests/online_ddl/run.sh), with DM's own task and
source files (conf/, vendored unchanged) and our own statements: `online-ddl: true`, two
upstreams, `online_ddl`.`gho_t1..3` and `pt_t1..3` merged (pessimistic sharding) into
`gho_t_target` and `pt_t_target`, every ALTER made by an online schema change tool:

1. check-task while a tool runs on a selected table (its shadow `_check_gho_t_gho` or
   `_check_pt_t_new` exists) fails with DM's "your ddl is in pt/ghost online-ddl"; a shadow
   table of a table the task does not select, or none, passes;
2. tables and rows on both upstreams; a tool started on `gho_ignore` / `pt_ignore` (not
   selected) before the task starts; the task starts: full phase, merged rows equal;
3. ``ADD COLUMN c ... COMMENT`` (spaces, a newline, an emoji) on every shard through gh-ost and
   pt-osc (pt-osc run twice, the second changing the table's comment and charset, as DM's
   helper does); source 2's sync process dies right after it recorded a shadow table's ALTER
   (DM's ExitAfterSaveOnlineDDL on worker 2, `online_ddl.after_record` here) and starts again;
   rows and columns equal;
4. the tools finish on the unselected tables (their RENAME swaps): nothing happens downstream;
5. rows, updates, deletes and online ALTERs (ADD COLUMN, ADD KEY `name` -- left out by the
   task's binlog filter, so the user adds it downstream --, a JSON generated column) shard by
   shard; the merged tables hold `info_json` and not KEY `name`; equal once the key is added;
6. source 2 restarts (DM moves it to another worker) and every source runs;
7. plain ALTERs (no tool): ADD COLUMN address + key, DROP COLUMN age, with rows; equal.

gh-ost is not packaged for these machines: its statements are played as SQL (the sequence of
tests/integration/test_online_ddl.py). pt-osc is the real tool (Debian's percona-toolkit).
Not ported: DM's metrics.
"""

import os
import shutil
import subprocess

import pytest

from dm_core.db import qt

from .harness import FAULT_EXIT, dm_case, dmctl, register_sources, run_killed, run_sql, start

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("pt-online-schema-change") is None,
                                 reason="pt-online-schema-change (Debian package percona-toolkit) is not installed")]

DB = "online_ddl"
S1, S2 = "mysql-replica-01", "mysql-replica-02"
SHAPE = ("(id bigint auto_increment, uid int, name varchar(80), info varchar(100), primary key (`id`), "
         "unique key(`uid`)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin auto_increment={}")
# (upstream, table, first id) of each tool's shards, as DM's prepare files lay them out
SHARDS = [("up1", "t1", 100000), ("up1", "t2", 200000), ("up2", "t2", 300000), ("up2", "t3", 400000)]


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("online_ddl", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB], "up2": [DB], "down": [DB, "dm_meta"]}) as got:
        yield got


def _plain_columns(ep, table: str) -> list[str]:
    """The columns a tool copies (generated ones compute themselves)."""
    return [r[0] for r in run_sql(ep, "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND "
                                      "table_name = %s AND extra NOT LIKE '%%GENERATED%%' ORDER BY ordinal_position",
                                  args=(DB, table))]


def gh_ost(ep, table: str, alter: str) -> None:
    from tests.integration.test_online_ddl import gh_ost as statements

    run_sql(ep, *statements(DB, table, alter, cols=", ".join(f"`{c}`" for c in _plain_columns(ep, table))))


def pt_osc(ep, table: str, alter: str, tmp_path) -> None:
    """The real pt-online-schema-change, twice as DM's helper runs it (the password in a
    defaults file, not on the command line)."""
    cnf = tmp_path / f"pt-{ep.port}.cnf"
    cnf.write_text(f"[client]\npassword={ep.password}\n")
    os.chmod(cnf, 0o600)
    for change in (alter, "COMMENT='string' CHARACTER SET='utf8mb4'"):
        p = subprocess.run(["pt-online-schema-change", "--alter", change,
                            f"F={cnf},h={ep.host},P={ep.port},u={ep.user},D={DB},t={table}",
                            "--recursion-method=none", "--print", "--execute"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]


def online(stack, tmp_path, tool: str, up: str, table: str, alter: str) -> None:
    """DM's run_sql_online_ddl: ``ALTER TABLE <tool>_<table> <alter>`` through the tool."""
    if tool == "gho":
        gh_ost(stack[up], f"gho_{table}", alter)
    else:
        pt_osc(stack[up], f"pt_{table}", alter, tmp_path)


def script(stack, tmp_path, tool: str, up: str, lines: list[str]) -> None:
    """DM's run_sql_file_online_ddl: each ``alter table T ...`` through the tool, the rest as is
    (``{t}`` stands for the tool's prefix)."""
    for line in lines:
        line = line.format(t=tool)
        if line.lower().startswith("alter table "):
            _, _, table, alter = line.split(" ", 3)
            online(stack, tmp_path, tool, up, table[len(tool) + 1:], alter)
        else:
            run_sql(stack[up], f"USE {DB}", line)


def shards_of(stack, tool: str):
    return [(stack[up], f"{tool}_{t}") for up, t, _ in SHARDS]


def columns(ep, table: str) -> list[tuple]:
    return [tuple(r) for r in run_sql(ep, "SELECT column_name, column_type, column_comment FROM "
                                          "information_schema.columns WHERE table_schema = %s AND table_name = %s "
                                          "ORDER BY ordinal_position", args=(DB, table))]


def assert_synced(stack, tool: str) -> None:
    """DM's sync diff for one merged table: each shard's columns are the target's, and the target's
    rows are the union of the shards'."""
    down, target = stack["down"], f"{tool}_t_target"
    want_cols = columns(down, target)
    for ep, t in shards_of(stack, tool):
        assert columns(ep, t) == want_cols, (t, columns(ep, t), want_cols)
    names = ", ".join(f"`{c}`" for c in _plain_columns(down, target))
    got = sorted(tuple(r) for r in run_sql(down, f"SELECT {names} FROM {qt(DB, target)}"))
    want = sorted(tuple(r) for ep, t in shards_of(stack, tool) for r in run_sql(ep, f"SELECT {names} FROM {qt(DB, t)}"))
    assert got == want, (tool, got, want)


def test_check_task_refuses_a_run_of_an_online_ddl_tool(case, stack):
    files, _ = case
    up1 = stack["up1"]
    register_sources(files)
    check = str(files.task("check-task.yaml"))
    shape = SHAPE.format(1)
    for real, shadow in (("check_gho_t", "_check_gho_t_gho"), ("check_pt_t", "_check_pt_t_new")):
        run_sql(up1, f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}", f"CREATE TABLE {qt(DB, real)} {shape}",
                f"INSERT INTO {qt(DB, real)} (uid, name) VALUES (1, 'Ana'), (2, 'Bruno')",
                f"CREATE TABLE {qt(DB, shadow)} LIKE {qt(DB, real)}")
        rc, out, err = dmctl("check-task", check)
        assert rc != 0 and "your ddl is in pt/ghost online-ddl" in out and shadow in out, out + err
    # the shadow table of a table the task does not select is not its business; nor is a finished run
    run_sql(up1, f"RENAME TABLE {qt(DB, '_check_pt_t_new')} TO {qt(DB, '_other_new')}")
    rc, out, err = dmctl("check-task", check)
    assert rc == 0 and "your ddl is in" not in out, out + err


def test_dm_online_ddl_case_up2_logs_no_column_names(case, stack, tmp_path):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    run_sql(up1, f"CREATE DATABASE {DB}")
    run_sql(up2, f"CREATE DATABASE {DB}")
    for tool in ("gho", "pt"):
        for up, t, first in SHARDS:
            n = first // 100000
            run_sql(stack[up], f"CREATE TABLE {qt(DB, f'{tool}_{t}')} {SHAPE.format(first)}")
            run_sql(stack[up], f"INSERT INTO {qt(DB, f'{tool}_{t}')} (uid, name, info) VALUES (%s, %s, %s), (%s, %s, NULL)",
                    args=(n * 10 + 1, f"Amaranta {n}", "{}", n * 10 + 2, f"Úrsula {n}"))
    # a tool run on tables the task does not select, under way when the task starts
    run_sql(up1, f"CREATE TABLE {DB}.gho_ignore (c int)", f"CREATE TABLE {DB}._gho_ignore_gho (c int)",
            f"CREATE TABLE {DB}.pt_ignore (c int)", f"CREATE TABLE {DB}._pt_ignore_new (c int)")

    # 2. the task starts
    register_sources(files)
    task, sync = start(files, store)
    assert task.online_ddl and task.shard_mode == "pessimistic"
    for tool in ("gho", "pt"):
        assert_synced(stack, tool)
    assert sorted(r[0] for r in run_sql(down, "SHOW TABLES FROM online_ddl")) == ["gho_t_target", "pt_t_target"]

    # 3. ADD COLUMN c on every shard through the tools; source 2 dies right after recording a shadow ALTER
    alter = "add column c int comment '1  2\n3😊4'"
    for tool in ("gho", "pt"):
        for up, t, _ in SHARDS:
            online(stack, tmp_path, tool, up, t, alter)
    got = run_killed(files, {S2: "online_ddl.after_record=1"}, tmp_path)
    assert got == {S2: FAULT_EXIT}, got
    sync.restart()
    sync.settle()
    for tool in ("gho", "pt"):
        assert_synced(stack, tool)
        # spaces and line break kept (the emoji is as the upstream holds it: '?' in MariaDB's utf8mb3
        # comments, or what pt-osc's latin1 connection made of it)
        (col,) = [c for c in columns(down, f"{tool}_t_target") if c[0] == "c"]
        assert col[1] == "int(11)" and col[2].startswith("1  2\n3"), col

    # 4. the runs on the unselected tables finish: their swaps are nobody's business
    run_sql(up1, f"RENAME /* gh-ost */ TABLE {DB}.gho_ignore TO {DB}._gho_ignore_del, {DB}._gho_ignore_gho TO "
                 f"{DB}.gho_ignore",
            f"RENAME TABLE {DB}.pt_ignore TO {DB}._pt_ignore_old, {DB}._pt_ignore_new TO {DB}.pt_ignore")

    # 5. rows and online ALTERs shard by shard (`{t}`: the tool's prefix)
    for tool in ("gho", "pt"):
        script(stack, tmp_path, tool, "up1", [
            "insert into {t}_t1 (uid, name) values (13, 'Remedios')",
            "update {t}_t1 set name = 'Aureliano Segundo' where uid = 11",
            "update {t}_t1 set name = 'José Arcadio Segundo' where name = 'Úrsula 1'",
            "alter table {t}_t1 add column age int", "alter table {t}_t2 add column age int",
            "alter table {t}_t2 add key name (name)", "alter table {t}_t1 add key name (name)",
            "insert into {t}_t2 (uid, name, age, info) values (23, 'Pilar Ternera', 145, '{{}}')",
            "alter table {t}_t2 add column info_json json GENERATED ALWAYS AS (`info`) VIRTUAL",
            "insert into {t}_t1 (uid, name, info) values (14, 'Macondo', '{{\"age\": 10}}')",
            "insert into {t}_t2 (uid, name, info) values (24, 'Macondo', '{{\"age\": 100}}')",
            "alter table {t}_t1 add column info_json json GENERATED ALWAYS AS (`info`) VIRTUAL",
            "insert into {t}_t1 (uid, name, info) values (15, 'Riohacha', '{{\"age\": 20}}')",
        ])
        script(stack, tmp_path, tool, "up2", [
            "delete from {t}_t3 where uid = 42",
            "alter table {t}_t2 add column age int",
            "update {t}_t2 set uid = uid + 1000",
            "alter table {t}_t3 add column age int",
            "update {t}_t3 set age = 1",
            "alter table {t}_t2 add key name (name)", "alter table {t}_t3 add key name (name)",
            "alter table {t}_t2 add column info_json json GENERATED ALWAYS AS (`info`) VIRTUAL",
            "update {t}_t3 set age = age + 10",
            "alter table {t}_t3 add column info_json json GENERATED ALWAYS AS (`info`) VIRTUAL",
            "update {t}_t2 set age = age + 10",
        ])
    sync.settle()
    for tool in ("gho", "pt"):
        shown = run_sql(down, f"SHOW CREATE TABLE {qt(DB, f'{tool}_t_target')}")[0][1]
        assert "info_json" in shown and "KEY `name`" not in shown, shown   # the filter left the key out
        run_sql(down, f"ALTER TABLE {qt(DB, f'{tool}_t_target')} ADD KEY name (name)")
        assert_synced(stack, tool)
    assert not {s["source_id"]: s["error"] for s in store.all_source_states(task.name) if s["error"]}

    # 6. source 2 starts again (DM: its worker is killed and another takes the source)
    sync.restart(S2)
    rc, out, err = dmctl("query-status", task.name)
    assert rc == 0 and out.count('"error": null') == 2, out + err

    # 7. plain ALTERs with rows
    for up, tables, base in (("up1", ("t1", "t2"), 60), ("up2", ("t3", "t2"), 70)):
        for tool in ("gho", "pt"):
            a, b = (f"{tool}_{t}" for t in tables)
            run_sql(stack[up], f"USE {DB}",
                    f"INSERT INTO {a} (uid, name, info) VALUES ({base}, 'name {base}', '{{}}')",
                    f"INSERT INTO {b} (uid, name, info) VALUES ({base + 1}, 'name {base + 1}', '{{}}')",
                    f"ALTER TABLE {a} ADD COLUMN address varchar(255)", f"ALTER TABLE {b} ADD COLUMN address varchar(255)",
                    f"ALTER TABLE {a} ADD KEY address (address)", f"ALTER TABLE {b} ADD KEY address (address)",
                    f"INSERT INTO {b} (uid, name, info, address) VALUES ({base + 2}, 'n', '{{}}', 'addr {base + 2}')",
                    f"INSERT INTO {a} (uid, name, info, address) VALUES ({base + 3}, 'n', '{{}}', 'addr {base + 3}')",
                    f"ALTER TABLE {b} DROP COLUMN age", f"ALTER TABLE {a} DROP COLUMN age",
                    f"INSERT INTO {a} (uid, name, info, address) VALUES ({base + 4}, 'n', '{{}}', 'addr {base + 4}')",
                    f"INSERT INTO {b} (uid, name, info, address) VALUES ({base + 5}, 'n', '{{}}', 'addr {base + 5}')")
    sync.settle()
    for tool in ("gho", "pt"):
        assert_synced(stack, tool)
        assert [c[0] for c in columns(down, f"{tool}_t_target")] == ["id", "uid", "name", "info", "c", "info_json",
                                                                     "address"]
