"""DM's `dmctl_basic` case (pingcap/tiflow dm/tests/dmctl_basic/run.sh and check_list/): what a user
sees through dmctl, with DM's own task and source files (conf/, vendored unchanged) and our own
statements and rows.

* wrong usage: each command without its arguments or with too many, a missing file, an unknown
  operation or subcommand, sources never registered (`haven't been added`), `operate-source stop`
  of a source not registered (`source config with ID ... not exists`), show-ddl-locks with two
  tasks; DM's batch form `pause-task|resume-task|stop-task -s SOURCE` (no task) and its usage
  error with two sources;
* secrets: DM's key file (conf/key.txt) decrypts DM's encrypted password of source2.yaml,
  `encrypt abc` gives 28 characters, a source file with an encrypted password registers; without
  a key `encrypt` fails; `operate-source stop` of a file without a password (no connection made);
* check-task on DM's task files: dm-task.yaml passes; dm-task2.yaml (no name) fails; dm-task3.yaml
  fails two items (a gh-ost shadow table of a selected table, shards of different columns);
  dm-task4.yaml (the same shards, optimistic) passes; dm-task5/6.yaml (is-sharding and shard-mode
  disagree) fail with "please use `shard-mode` only." in check-task and start-task; dm-task7.yaml
  (incremental, an empty meta) fails with DM's meta message in both; only_warning.yaml passes (DM
  warns there that TiDB ignores foreign keys: TiDB's); empty-unit-task.yaml without threads / pool-size / worker-count passes; a wrong
  target password says "Access denied for user" and to check the database config;
* tasks bound to a source (foo-task, bar-task: two sources; baz-task: one): batch pause, resume
  and stop of one source across the tasks, query-status -s per source;
* the task's life: dm-task.yaml (pessimistic sharding of dmctl.t_1/t_2 on two sources, compact,
  multiple-rows, a source file's own binlog filters; upstream max_binlog_size 12288 as DM sets
  it, so binlog files rotate under the sync) starts; query-status -s a,b shows both sources syncing
  with DM's fields; show-ddl-locks says "no DDL lock exists"; pause-task, rows while paused,
  resume-task; pause/resume by the task file's path; FLUSH LOGS and rows; equal after each stage;
  then `add column aaa` on t_1 and t_2 of both upstreams (source 1's t_2 one left out by the
  source file's filter; its t_1 one kept by the task's `Do` rule, which wins) and `add column
  bbb` on t_2: both sources pause with "detect inconsistent DDL sequence".

Not ported (DM internals with no shardflow counterpart): DM-master / DM-worker processes
(list-member, --master-addr forms, offline workers, transfer-source, config export, worker
config backups), relay (start/stop/pause/resume/purge-relay), check-task's `--error/--warn`
counts and `--start-time` (shardflow's start-task has no start time: an incremental task
starts at its `meta`), `config task`.
"""

import json

import pytest
import yaml

from .harness import HERE, dm_case, register_sources, run_sql, start_task, table_rows

pytestmark = pytest.mark.integration

DB = "dmctl"
S1, S2 = "mysql-replica-01", "mysql-replica-02"
CONF = HERE / "dmctl_basic" / "conf"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("dmctl_basic", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB], "up2": [DB], "down": [DB, "dmctl_command_dummy"]}) as got:
        yield got


def run(*args: str) -> tuple[int, str]:
    """dmctl's exit code and everything it printed (argparse's usage exits included)."""
    import contextlib
    import io

    from dm_core.cli.dmctl import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            rc = main(list(args))
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue()


def _shards(stack) -> None:
    """DM's db1/db2.prepare.sql, with rows of our own: dmctl.t_1/t_2 on both upstreams (ids apart),
    and on upstream 1 the tables of the other task files."""
    for n, up in ((1, stack["up1"]), (2, stack["up2"])):
        stmts = [f"CREATE DATABASE {DB}"]
        for t in (1, 2):
            stmts.append(f"CREATE TABLE {DB}.t_{t} (id bigint auto_increment, b int, c varchar(20), d varchar(10), "
                         "primary key id(id), unique key b(b))")
            stmts += [f"INSERT INTO {DB}.t_{t} (b, c, d, id) VALUES ({n}{t}{i:02d}, 'c{n}{t}{i}', 'd{i}', "
                      f"{n}{t}{i:02d})" for i in range(1, 10)]
        run_sql(up, *stmts)
    run_sql(stack["up1"], f"CREATE TABLE {DB}.tb_1 (a INT, b INT)", f"CREATE TABLE {DB}.tb_2 (a INT, c INT)",
            f"CREATE TABLE {DB}._tb_1_gho (a INT, b INT)",
            f"CREATE TABLE {DB}.precheck_optimistic_tb_1 (a INT, b INT, primary key a(a))",
            f"CREATE TABLE {DB}.precheck_optimistic_tb_2 (a INT, c INT, primary key a(a))",
            f"CREATE TABLE {DB}.only_warning (id bigint, b int, primary key id(id), FOREIGN KEY (b) REFERENCES t_1(b))")


# ---- wrong usage -------------------------------------------------------------------------------
WRONG = [
    (("check-task",), "usage: dmctl check-task"),
    (("check-task", "not_exists_config_file"), "cannot read the file"),
    (("start-task",), "usage: dmctl start-task"),
    (("start-task", "not_exists_config_file"), "cannot read the file"),
    (("stop-task",), "usage: dmctl stop-task"),
    (("stop-task", "-s", "a", "-s", "b"), "usage: dmctl stop-task"),
    (("pause-task",), "usage: dmctl pause-task"),
    (("pause-task", "-s", "a", "-s", "b"), "usage: dmctl pause-task"),
    (("resume-task",), "usage: dmctl resume-task"),
    (("resume-task", "-s", "a,b"), "usage: dmctl resume-task"),
    (("pause-task", "-s", "xxx"), "sources [xxx] haven't been added"),
    (("resume-task", "-s", "xxx"), "sources [xxx] haven't been added"),
    (("stop-task", "-s", "xxx"), "sources [xxx] haven't been added"),
    (("query-status", "wrong_args_count", "more_than_one"), "unrecognized arguments: more_than_one"),
    (("query-status", "-s", "source-x", "task-y"), "sources [source-x] haven't been added"),
    (("operate-source",), "usage: dmctl operate-source"),
    (("operate-source", "create", "not_exists_config_file"), "cannot read the file"),
    (("operate-source", "invalid", str(CONF / "source1.yaml")), "invalid choice: 'invalid'"),
    (("shard-ddl-lock", "a", "b"), "dmctl shard-ddl-lock [TASK]: at most one task"),
    (("show-ddl-locks", "a", "b"), "dmctl shard-ddl-lock [TASK]: at most one task"),
    (("any", "command"), "invalid choice: 'any'"),
]


@pytest.mark.parametrize("args,said", WRONG, ids=[" ".join(a) for a, _ in WRONG])
def test_wrong_usage(args, said):
    rc, out = run(*args)
    assert rc != 0 and said in out, out


def test_sources_and_secrets(case, stack, tmp_path, monkeypatch):
    files, _ = case
    monkeypatch.delenv("SHARDFLOW_SECRET_KEY_PATH", raising=False)
    rc, out = run("encrypt", "abc")
    assert rc != 0 and "no secret key is configured" in out, out   # DM: "secret key not initialized"
    monkeypatch.setenv("SHARDFLOW_SECRET_KEY_PATH", str(CONF / "key.txt"))
    dm_cipher = yaml.safe_load((CONF / "source2.yaml").read_text())["from"]["password"]
    assert run("decrypt", dm_cipher) == (0, "123456\n")          # DM's own ciphertext, DM's key
    rc, out = run("encrypt", "abc")
    assert rc == 0 and len(out.strip()) == 28 and run("decrypt", out.strip()) == (0, "abc\n"), out

    # source 2 registered with its password encrypted by dmctl, as DM's file has it
    src2 = yaml.safe_load(open(files.sources[1]).read())
    rc, cipher = run("encrypt", src2["from"]["password"])
    src2["from"]["password"] = cipher.strip()
    enc = tmp_path / "source2-encrypted.yaml"
    enc.write_text(yaml.safe_dump(src2, sort_keys=False))
    rc, out = run("operate-source", "create", files.sources[0], str(enc))
    assert rc == 0 and out.count("created") == 2, out
    rc, out = run("operate-source", "show")
    shown = json.loads(out)
    assert shown["result"] and {S1, S2} <= {s.get("source-id") or s.get("source_id") for s in shown["sources"]}, out
    assert stack["up1"].password not in out and cipher.strip() not in out

    # stop reads only the source id of the file: one without a password works, no connection made
    nopw = tmp_path / "source1-wrong.yaml"
    nopw.write_text("\n".join(ln for ln in open(files.sources[0]).read().splitlines() if "password" not in ln))
    rc, out = run("operate-source", "stop", str(nopw), S2)
    assert rc == 0 and f"source {S1}: stopped" in out and f"source {S2}: stopped" in out, out
    rc, out = run("operate-source", "stop", str(CONF / "source1.yaml"))
    assert rc != 0 and f"source config with ID {S1} not exists" in out, out
    rc, out = run("query-status", "-s", S1)
    assert rc != 0 and f"sources [{S1}] haven't been added" in out, out
    register_sources(files)


# ---- check-task on DM's task files ------------------------------------------------------------
def _task_file(files, name: str, tmp_path, *, drop: tuple[str, ...] = (), password: str | None = None):
    path = files.task(name)
    if drop or password is not None:
        text = "\n".join(ln for ln in path.read_text().splitlines() if not any(d in ln for d in drop))
        doc = yaml.safe_load(text)
        if password is not None:
            doc["target-database"]["password"] = password
        path = tmp_path / f"edited-{name}"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_check_task_on_dm_task_files(case, stack, tmp_path):
    files, _ = case
    _shards(stack)
    register_sources(files)
    rc, out = run("check-task", str(files.task_file))
    assert rc == 0 and "0 failed" in out, out
    rc, out = run("check-task", str(CONF / "dm-task2.yaml"))
    assert rc != 0 and "name: missing" in out, out
    rc, out = run("check-task", str(files.task("dm-task3.yaml")))
    assert rc != 0 and "2 failed" in out, out
    fails = [ln for ln in out.splitlines() if ln.startswith("[FAIL]")]
    assert any("online_ddl" in f and "your ddl is in pt/ghost online-ddl" in f for f in fails), out
    assert any("schema_of_shard_tables" in f for f in fails), out
    rc, out = run("check-task", str(files.task("dm-task4.yaml")))
    assert rc == 0 and "0 failed" in out, out
    for name in ("dm-task5.yaml", "dm-task6.yaml"):
        for cmd in ("check-task", "start-task"):
            rc, out = run(cmd, str(files.task(name)))
            assert rc != 0 and "please use `shard-mode` only." in out, (cmd, name, out)
    for cmd in ("check-task", "start-task"):
        rc, out = run(cmd, str(files.task("dm-task7.yaml")))
        assert rc != 0 and ("must specify `binlog-name` without GTID enabled for the source or specify "
                            "`binlog-gtid` with GTID enabled for the source") in out, (cmd, out)
    # DM's only warning here is TiDB's ("Foreign Key ... is parsed but ignored by TiDB"); a MySQL or
    # MariaDB downstream keeps foreign keys (tests/dm_cases/test_foreign_key.py), so it passes
    rc, out = run("check-task", str(files.task("only_warning.yaml")))
    assert rc == 0 and "0 failed" in out, out
    rc, out = run("check-task", str(_task_file(files, "empty-unit-task.yaml", tmp_path,
                                                drop=("threads", "pool-size", "worker-count"))))
    assert rc == 0 and "0 failed" in out, out
    rc, out = run("check-task", str(_task_file(files, "dm-task.yaml", tmp_path, password="wrong password")))
    assert rc != 0 and "Access denied for user" in out and "target-database" in out, out
    assert "wrong password" not in out


# ---- tasks bound to a source ------------------------------------------------------------------
def _stages(store, source: str) -> dict[str, str]:
    """task → what query-status -s SOURCE says of that source (its `status`)."""
    rc, out = run("query-status", "-s", source)
    assert rc == 0, out
    return {t["task"]: s["status"] for t in json.loads(out)["tasks"] for s in t["sources"] if t["sources"]}


def _stop(*args: str) -> str:
    rc, out = run("stop-task", *args)
    assert rc == 0 or "Airflow could not be told" in out, out   # no Airflow in this process
    return out


def test_tasks_bound_to_a_source(case, stack, tmp_path):
    files, store = case
    register_sources(files)
    names = {}
    for f in ("foo-task.yaml", "bar-task.yaml", "baz-task.yaml"):
        path = files.task(f)
        text = path.read_text()
        names[f] = yaml.safe_load(text)["name"]
        store.start_task(names[f], text)   # what start-task records (Airflow then runs it)
    foo, bar, baz = names["foo-task.yaml"], names["bar-task.yaml"], names["baz-task.yaml"]
    try:
        store.stop_task(foo)             # DM's second half: bar-task (two sources) and baz-task (one)
        for op, want in (("pause-task", "paused"), ("resume-task", None)):
            for sid in (S1, S2):
                rc, out = run(op, "-s", sid)
                mine = [t for t in (foo, bar, baz) if f"task {t}: source(s) {sid}" in out]
                assert rc == 0 and mine == ([bar, baz] if sid == S1 else [bar]), out   # not the stopped foo
                got = _stages(store, sid)
                assert (got[bar] == "paused") == (want == "paused"), got
                if sid == S1:
                    assert (got[baz] == "paused") == (want == "paused"), got
                assert got[foo] == "stopped", got
        _stop("-s", S1)
        got1, got2 = _stages(store, S1), _stages(store, S2)
        assert got1[bar] == got1[baz] == "stopped" and got2[bar] != "stopped", (got1, got2)
        _stop("-s", S2)
        assert _stages(store, S2)[bar] == "stopped"
        rc, out = run("pause-task", "-s", S1)
        assert rc != 0 and "no task that is not stopped has it" in out, out
    finally:
        from dm_core.reset import reset_task

        for n in names.values():
            reset_task(store, n)


# ---- the task's life ------------------------------------------------------------------------------
@pytest.fixture
def small_binlogs(stack):
    """DM's max_binlog_size 12288 on both upstreams for the run, restored after."""
    old = {k: run_sql(stack[k], "SELECT @@GLOBAL.max_binlog_size")[0][0] for k in ("up1", "up2")}
    for k in old:
        run_sql(stack[k], "SET GLOBAL max_binlog_size = 12288")
    yield
    for k, v in old.items():
        run_sql(stack[k], "SET GLOBAL max_binlog_size = %s", args=(v,))


def _assert_synced(stack) -> None:
    cols = ["id", "b", "c", "d"]
    want = sorted(tuple(r) for k in ("up1", "up2") for t in ("t_1", "t_2")
                  for r in run_sql(stack[k], f"SELECT {', '.join(cols)} FROM {DB}.{t}"))
    assert table_rows(stack["down"], DB, "t_target", cols) == want


def _rows(stack, n: int, start: int) -> None:
    """DM's increment files: inserts, updates and deletes on both shards of both upstreams."""
    for k, base in (("up1", 1), ("up2", 2)):
        for t in (1, 2):
            run_sql(stack[k], f"INSERT INTO {DB}.t_{t} (b, c, d, id) VALUES "
                    + ", ".join(f"({base}{t}{i:02d}, 'n{i}', 'x', {base}{t}{i:02d})" for i in range(start, start + n)),
                    f"UPDATE {DB}.t_{t} SET c = CONCAT(c, '!') WHERE id = {base}{t}{start:02d}",
                    f"UPDATE {DB}.t_{t} SET d = 'upd' WHERE id % 3 = 0",
                    f"DELETE FROM {DB}.t_{t} WHERE id = {base}{t}{start - 1:02d}")


def test_dm_task_life_through_dmctl(case, stack, small_binlogs):
    files, store = case
    _shards(stack)
    register_sources(files)
    task, sync = start_task(files.task_file, store, remove_meta=True)
    _assert_synced(stack)
    rc, out = run("query-status", "-s", f"{S1},{S2}")
    assert rc == 0, out
    (st,) = [t for t in json.loads(out)["tasks"] if t["task"] == task.name]
    assert st["status"] == "running" and st["ddl_locks"] == []
    assert [(s["source"], s["stage"], s["error"]) for s in st["sources"]] == [(S1, "sync", None), (S2, "sync", None)]
    for s in st["sources"]:
        assert {"checkpoint", "applied_rows", "lag_seconds", "status", "message", "unresolved_groups"} <= set(s), s
    for cmd in ("shard-ddl-lock", "show-ddl-locks"):
        rc, out = run(cmd, task.name)
        assert rc == 0 and json.loads(out)["msg"] == "no DDL lock exists", out

    rc, out = run("pause-task", task.name)
    assert rc == 0 and "every source paused" in out, out
    assert set(sync.step().values()) == {"paused"}
    rc, out = run("query-status", task.name, "-s", f"{S1},{S2}")
    assert [s["status"] for s in json.loads(out)["tasks"][0]["sources"]] == ["paused", "paused"], out
    _rows(stack, 5, 10)
    assert set(sync.step().values()) == {"paused"}
    rc, out = run("resume-task", task.name)
    assert rc == 0 and "every source resumed" in out, out
    sync.settle()
    _assert_synced(stack)
    for op in ("pause-task", "resume-task"):           # by the task file's path
        rc, out = run(op, str(files.task_file))
        assert rc == 0 and task.name in out, out
    run_sql(stack["up1"], "FLUSH LOGS", f"CREATE TABLE {DB}.flush_trigger (c int primary key)",
            f"UPDATE {DB}.t_1 SET d = '' WHERE id = 1113", f"UPDATE {DB}.t_2 SET d = '' WHERE id = 1212")
    _rows(stack, 5, 20)
    sync.settle()
    _assert_synced(stack)
    files_seen = run_sql(stack["up1"], "SHOW BINARY LOGS")
    assert len(files_seen) > 2, "the 12 KB binlog files rotated under the sync"

    # a source file's filter and the task's: source 1 keeps t_1's aaa (the task's Do rule wins) and
    # leaves t_2's out (the source file's rule); source 2 leaves t_2's out (the task's rule)
    run_sql(stack["up1"], f"ALTER TABLE {DB}.t_1 ADD COLUMN aaa int", f"ALTER TABLE {DB}.t_2 ADD COLUMN aaa int")
    run_sql(stack["up2"], f"ALTER TABLE {DB}.t_1 ADD COLUMN aaa int", f"ALTER TABLE {DB}.t_2 ADD COLUMN aaa int")
    run_sql(stack["up1"], f"ALTER TABLE {DB}.t_2 ADD COLUMN bbb int")
    run_sql(stack["up2"], f"ALTER TABLE {DB}.t_2 ADD COLUMN bbb int")
    states = sync.settle(paused_ok=True)
    for _ in range(10):
        if set(states.values()) == {"paused"}:
            break
        states = sync.step()
    errs = {s["source_id"]: s["error"] for s in store.all_source_states(task.name) if s["error"]}
    assert set(errs) == {S1, S2} and all("inconsistent DDL sequence" in e for e in errs.values()), errs
    rc, out = run("query-status", task.name)
    assert out.count("inconsistent DDL sequence") >= 2, out
